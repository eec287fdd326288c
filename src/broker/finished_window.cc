#include "broker/finished_window.h"

#include <algorithm>

namespace felix::broker {

void FinishedWindow::Reset(Offset position) {
  words_.clear();
  far_.clear();
  first_word_ = position.value() / 64;
  bits_ = 0;
}

bool FinishedWindow::BitAt(uint64_t offset) const {
  const uint64_t word = offset / 64;
  if (word < first_word_ || word - first_word_ >= words_.size()) return false;
  return (words_[word - first_word_] >> (offset % 64) & 1) != 0;
}

bool FinishedWindow::Contains(Offset offset) const {
  return BitAt(offset.value()) || (!far_.empty() && far_.count(offset) != 0);
}

void FinishedWindow::Mark(Offset offset) {
  if (Contains(offset)) return;
  const uint64_t index = offset.value() / 64 - first_word_;
  if (index >= kMaxWords) {
    far_.insert(offset);
    return;
  }
  if (index >= words_.size()) words_.resize(index + 1, 0);
  words_[index] |= uint64_t{1} << (offset.value() % 64);
  ++bits_;
}

Offset FinishedWindow::AdvanceFrom(Offset position) {
  uint64_t at = position.value();
  if (far_.empty()) {
    // Word by word: the first clear bit at or above `at`.
    while (true) {
      const uint64_t index = at / 64 - first_word_;
      if (index >= words_.size()) break;
      const uint64_t unfinished = ~words_[index] >> (at % 64);
      if (unfinished != 0) {
        at += static_cast<uint64_t>(std::countr_zero(unfinished));
        break;
      }
      at = (at / 64 + 1) * 64;
    }
  } else {
    while (Contains(Offset(at))) ++at;
  }
  DropBelow(Offset(at));
  return Offset(at);
}

void FinishedWindow::DropBelow(Offset offset) {
  while (!far_.empty() && *far_.begin() < offset) far_.erase(far_.begin());
  const uint64_t word = offset.value() / 64;
  while (first_word_ < word && !words_.empty()) {
    bits_ -= static_cast<size_t>(std::popcount(words_.front()));
    words_.pop_front();
    ++first_word_;
  }
  if (words_.empty()) {
    first_word_ = std::max(first_word_, word);
    return;
  }
  if (first_word_ == word) {
    uint64_t& front = words_.front();
    const uint64_t below = (uint64_t{1} << (offset.value() % 64)) - 1;
    bits_ -= static_cast<size_t>(std::popcount(front & below));
    front &= ~below;
  }
}

}  // namespace felix::broker
