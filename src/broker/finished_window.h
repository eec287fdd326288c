// FinishedWindow: which offsets at and above a consumer group's cursor are finished, one bit
// each (consumer_group.h).
//
// Why bits: consumers acknowledge out of order all the time (four consumers each settle a
// batch; the later batches finish first), and as a std::set every such ack was a node
// allocated, rebalanced in and erased again once the cursor passed it (docs/performance.md
// change 71). The finished offsets lie between the cursor and the log tail, so a run of words
// from the cursor's word on holds them all: 64 offsets per word, one word per 64 records of
// spread between the slowest consumer and the fastest, and the words below the cursor are
// dropped as it moves.
//
// An offset further than kMaxWords words above the window's start (a client may acknowledge,
// after a rebuild, a record far above the cursor that an earlier tracker handed out) goes to
// an ordered set instead, so no single ack makes the window allocate more than 128 KiB.
//
// Contracts: `Mark` only at or above `start()`; `AdvanceFrom(position)` with a position at or
// above `start()`. Not thread-safe (owned like its ConsumerGroup).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>

#include "common/strong_types.h"

namespace felix::broker {

class FinishedWindow {
 public:
  static constexpr uint64_t kMaxWords = 1 << 14;  // 1 Mi offsets, 128 KiB

  // Nothing finished; the window starts at `position` (the cursor).
  void Reset(Offset position);

  // The lowest offset the window can hold (the cursor's word start).
  Offset start() const { return Offset(first_word_ * 64); }
  size_t count() const { return bits_ + far_.size(); }
  bool empty() const { return count() == 0; }

  bool Contains(Offset offset) const;
  void Mark(Offset offset);
  // The first offset at or above `position` that is not finished; every finished offset below
  // it is forgotten (the cursor moves there).
  Offset AdvanceFrom(Offset position);
  // Forgets every finished offset below `offset`.
  void DropBelow(Offset offset);

 private:
  bool BitAt(uint64_t offset) const;

  std::deque<uint64_t> words_;  // words_[i]: offsets (first_word_ + i) * 64 … + 63
  uint64_t first_word_ = 0;
  size_t bits_ = 0;       // bits set in words_
  std::set<Offset> far_;  // finished offsets that were beyond kMaxWords when marked
};

}  // namespace felix::broker
