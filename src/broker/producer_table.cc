#include "broker/producer_table.h"

#include <algorithm>

namespace felix::broker {

namespace {

// FNV-1a 64 over each record's length (8 bytes, big-endian) and bytes: cheap, and the length
// prefix keeps ["ab","c"] apart from ["a","bc"].
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x00000100000001b3ull;

uint64_t Mix(uint64_t h, uint8_t b) {
  return (h ^ b) * kFnvPrime;
}

}  // namespace

uint64_t BatchDigest(std::span<const std::span<const uint8_t>> payloads) {
  uint64_t h = kFnvOffset;
  for (auto payload : payloads) {
    uint64_t len = payload.size();
    for (int shift = 56; shift >= 0; shift -= 8) h = Mix(h, static_cast<uint8_t>(len >> shift));
    for (uint8_t b : payload) h = Mix(h, b);
  }
  return h;
}

ProducerTable::Producer& ProducerTable::Touch(uint64_t producer) {
  auto it = producers_.find(producer);
  if (it == producers_.end()) {
    if (producers_.size() >= kMaxProducers) EvictColdest();
    it = producers_.emplace(producer, Producer{}).first;
  }
  it->second.last_used = ++clock_;
  return it->second;
}

void ProducerTable::EvictColdest() {
  auto coldest = std::min_element(producers_.begin(), producers_.end(), [](auto& a, auto& b) {
    return a.second.last_used < b.second.last_used;
  });
  if (coldest != producers_.end()) producers_.erase(coldest);
}

void ProducerTable::Remember(Producer& p, Batch batch) {
  p.recent.push_back(batch);
  while (p.recent.size() > kWindow) p.recent.pop_front();
}

ProducerTable::Verdict ProducerTable::Admit(uint64_t producer, uint64_t sequence, uint64_t digest,
                                            uint32_t count) {
  using Kind = Verdict::Kind;
  auto it = producers_.find(producer);
  if (it == producers_.end()) {
    if (sequence != 0) return Verdict{Kind::kUnknownProducer};
    Producer& p = Touch(producer);
    p.next_sequence = 1;
    Remember(p, Batch{sequence, digest, count, std::nullopt});
    return Verdict{Kind::kAppend};
  }
  Producer& p = it->second;
  p.last_used = ++clock_;
  if (sequence == p.next_sequence) {
    p.next_sequence = sequence + 1;
    Remember(p, Batch{sequence, digest, count, std::nullopt});
    return Verdict{Kind::kAppend};
  }
  if (sequence > p.next_sequence) return Verdict{Kind::kGap, p.next_sequence};
  for (const Batch& b : p.recent) {
    if (b.sequence != sequence) continue;
    if (b.digest != digest || b.count != count) return Verdict{Kind::kReused};
    return Verdict{Kind::kDuplicate, 0, b.first_offset};
  }
  return Verdict{Kind::kExpired};
}

void ProducerTable::Committed(uint64_t producer, uint64_t sequence, uint64_t first_offset) {
  auto it = producers_.find(producer);
  if (it == producers_.end()) return;
  for (Batch& b : it->second.recent) {
    if (b.sequence == sequence) b.first_offset = first_offset;
  }
}

void ProducerTable::Failed(uint64_t producer, uint64_t sequence) {
  auto it = producers_.find(producer);
  if (it == producers_.end()) return;
  Producer& p = it->second;
  std::erase_if(p.recent, [&](const Batch& b) { return b.sequence == sequence; });
  // Expect the failed sequence again; batches pipelined after it get a gap until it is resent.
  p.next_sequence = std::min(p.next_sequence, sequence);
  if (p.next_sequence == 0 && p.recent.empty()) producers_.erase(it);
}

void ProducerTable::Restore(uint64_t producer, uint64_t sequence, uint64_t digest, uint32_t count,
                            uint64_t first_offset) {
  Producer& p = Touch(producer);
  if (sequence + 1 > p.next_sequence) p.next_sequence = sequence + 1;
  std::erase_if(p.recent, [&](const Batch& b) { return b.sequence == sequence; });
  Remember(p, Batch{sequence, digest, count, first_offset});
}

}  // namespace felix::broker
