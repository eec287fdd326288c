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
  // Drops the oldest record, keeping its payload buffer in spare_ when small. Needs mu_ held.
  void EvictOldest();

  // Evicted payload buffers kept for the next appends, so a full ring (the steady state of a
  // busy in-memory stream) stores a record without a malloc and evicts one without a free —
  // those were a quarter of the broker's CPU under 1.5 M records/s (docs/performance.md change
  // 20). At most kSpareBuffers of at most kSpareBufferBytes each are kept between appends; an
  // append first evicts the records it will push out, so a batch larger than that reuses their
  // buffers too (change 56).
  static constexpr size_t kSpareBuffers = 128;
  static constexpr size_t kSpareBufferBytes = 4096;

  const RingOptions opts_;
  mutable std::mutex mu_;
  RecordRing records_;              // guarded by mu_
  std::vector<std::string> spare_;  // guarded by mu_
  Offset base_;
  uint64_t bytes_ = 0;
  bool closed_ = false;
  TailNotifier notifier_;
};

}  // namespace felix::storage
