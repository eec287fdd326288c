// ProducerTable: the idempotent-producer bookkeeping of one stream shard (semantics.md §7).
//
// Per producer it keeps the next expected sequence and the last kWindow batches (sequence,
// digest of the payloads, record count, first offset once written), and decides what an
// incoming (producer, sequence, digest) gets: append it, answer it as the duplicate of a batch
// already taken, or refuse it (sequence gap, reused sequence, expired sequence, unknown
// producer). At most kMaxProducers producers are kept; past that the least recently used one
// is forgotten (a later batch of it is then `unknown_producer`).
//
// Pure bookkeeping: no I/O, no threads. Its owner (ShardProducers) calls it from the shard's
// executor only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>

namespace felix::broker {

// Digest of a batch's payloads (record boundaries included), to tell a resend from a
// different batch under a reused sequence number.
uint64_t BatchDigest(std::span<const std::span<const uint8_t>> payloads);

class ProducerTable {
 public:
  static constexpr size_t kWindow = 64;
  static constexpr size_t kMaxProducers = 4096;

  struct Verdict {
    enum class Kind {
      kAppend,          // new batch: append it, then Committed() / Failed()
      kDuplicate,       // a resend: answer with `first_offset` (nullopt: still being written)
      kReused,          // same sequence, different payloads: nothing is written
      kGap,             // ahead of the next expected sequence (`expected`)
      kExpired,         // older than the remembered window
      kUnknownProducer  // never seen (or forgotten) and sequence != 0
    };
    Kind kind = Kind::kAppend;
    uint64_t expected = 0;
    std::optional<uint64_t> first_offset;
  };

  // Decides; for kAppend it also takes the sequence (the next one is expected after it).
  Verdict Admit(uint64_t producer, uint64_t sequence, uint64_t digest, uint32_t count);
  // The batch taken by Admit was written at `first_offset`.
  void Committed(uint64_t producer, uint64_t sequence, uint64_t first_offset);
  // Its write failed: forget it, so that a resend under the same sequence is appended again.
  void Failed(uint64_t producer, uint64_t sequence);
  // Recovery: a batch known to be written (marks are replayed in log order).
  void Restore(uint64_t producer, uint64_t sequence, uint64_t digest, uint32_t count,
               uint64_t first_offset);

  size_t producers() const { return producers_.size(); }

 private:
  struct Batch {
    uint64_t sequence = 0;
    uint64_t digest = 0;
    uint32_t count = 0;
    std::optional<uint64_t> first_offset;
  };
  struct Producer {
    uint64_t next_sequence = 0;
    std::deque<Batch> recent;  // ascending sequences, at most kWindow
    uint64_t last_used = 0;
  };
  Producer& Touch(uint64_t producer);
  void Remember(Producer& p, Batch batch);
  void EvictColdest();

  std::unordered_map<uint64_t, Producer> producers_;
  uint64_t clock_ = 0;
};

}  // namespace felix::broker
