// RingLog: the in-memory log for non-durable streams. Same reader interface as DurableLog
// (offsets, Read with limits, kTrimmed below the base, WaitFor / NotifyWhen tail following),
// bounded by a record count and a payload-byte budget: appending past either bound evicts the
// oldest records and advances the base offset. The newest record is always kept, even alone
// over the byte bound. Nothing survives the process.
//
// Thread-safe: appends and reads from any threads (one mutex; reads copy records out).
// NotifyWhen callbacks run on the appending thread outside the lock.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "storage/log_reader.h"
#include "storage/payload_arena.h"
#include "storage/record_ring.h"

namespace felix::storage {

struct RingOptions {
  uint64_t max_records = 100000;
  uint64_t max_bytes = 64ull << 20;
  Offset base_offset;
};

class RingLog final : public LogReader {
 public:
  explicit RingLog(RingOptions options);
  ~RingLog() override;

  StorageResult<AppendResult> Append(std::span<const AppendRecord> records);
  StorageResult<AppendResult> Append(const AppendRecord& record) { return Append({&record, 1}); }
  StorageResult<AppendResult> AppendAt(Offset expected_first,
                                       std::span<const AppendRecord> records);
  // Drops everything and restarts empty at `base`.
  void Reset(Offset base);
  // Wakes waiters with kClosed; later appends answer kClosed.
  void Close();

  Offset BaseOffset() const override;
  Offset TailOffset() const override;
  StorageResult<ReadBatch> Read(Offset from, ReadLimits limits) const override;
  WaitOutcome WaitFor(Offset offset, Deadline deadline) const override;
  uint64_t NotifyWhen(Offset offset, TailCallback cb) override;
  bool CancelNotify(uint64_t id) override;

  uint64_t bytes() const;

 private:
  StorageResult<AppendResult> AppendImpl(std::optional<Offset> expected,
                                         std::span<const AppendRecord> records);
  // A record as kept: its payload is in arena_.
  struct Slot {
    Generation generation;
    uint64_t timestamp_ms = 0;
    const uint8_t* payload = nullptr;
    uint64_t block = PayloadArena::kNoBlock;
    uint32_t size = 0;
  };

  // Drops the oldest record. Needs mu_ held.
  void EvictOldest();

  const RingOptions opts_;
  mutable std::mutex mu_;
  RecordRing<Slot> records_;  // guarded by mu_
  PayloadArena arena_;        // guarded by mu_
  Offset base_;
  uint64_t bytes_ = 0;
  bool closed_ = false;
  TailNotifier notifier_;
};

}  // namespace felix::storage
