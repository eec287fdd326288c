#include "storage/ring_log.h"

#include <algorithm>
#include <chrono>

#include "storage/record_format.h"

namespace felix::storage {

RingLog::RingLog(RingOptions options)
    : opts_(options), base_(options.base_offset), notifier_(options.base_offset) {}

RingLog::~RingLog() {
  Close();
}

StorageResult<AppendResult> RingLog::Append(std::span<const AppendRecord> records) {
  return AppendImpl(std::nullopt, records);
}

StorageResult<AppendResult> RingLog::AppendAt(Offset expected_first,
                                              std::span<const AppendRecord> records) {
  return AppendImpl(expected_first, records);
}

StorageResult<AppendResult> RingLog::AppendImpl(std::optional<Offset> expected,
                                                std::span<const AppendRecord> records) {
  if (records.empty()) return StorageFail(StorageErrc::kInvalidArgument, "empty append");
  for (const auto& r : records) {
    if (r.flags != 0) {
      return StorageFail(StorageErrc::kInvalidArgument,
                         "an in-memory log holds plain records only");
    }
    if (r.payload.size() > kMaxPayloadBytes) {
      return StorageFail(StorageErrc::kInvalidArgument, "record exceeds the 64 MiB limit");
    }
  }
  uint64_t now_ms = uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
  AppendResult result;
  Offset tail;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return StorageFail(StorageErrc::kClosed, "ring log is closed");
    Offset next = base_ + records_.size();
    if (expected && *expected != next) {
      StorageError e;
      e.code = StorageErrc::kOffsetMismatch;
      e.tail = next;
      e.message =
          "append at offset " + to_string(*expected) + " refused: tail is " + to_string(next);
      return StorageFail(std::move(e));
    }
    // The records this append will push out go first, so the blocks they free take its payloads:
    // the bounds are checked against the ring as it will be, oldest first, exactly as evicting
    // after the append would — which still happens below for an append larger than the ring.
    uint64_t incoming = 0;
    for (const auto& r : records) incoming += r.payload.size();
    while (!records_.empty() && records_.size() + records.size() > 1 &&
           (records_.size() + records.size() > opts_.max_records ||
            bytes_ + incoming > opts_.max_bytes)) {
      EvictOldest();
    }
    result.first_offset = next;
    for (const auto& r : records) {
      const PayloadArena::Placed placed = arena_.Append(r.payload);
      Slot& slot = records_.PushBack();
      slot.generation = r.generation;
      slot.timestamp_ms = r.timestamp_ms != 0 ? r.timestamp_ms : now_ms;
      slot.payload = placed.data;
      slot.block = placed.block;
      slot.size = uint32_t(r.payload.size());  // at most kMaxPayloadBytes, checked above
      bytes_ += r.payload.size();
      next += 1;
    }
    result.last_offset = next - 1;
    while (records_.size() > 1 &&
           (records_.size() > opts_.max_records || bytes_ > opts_.max_bytes)) {
      EvictOldest();
    }
    tail = next;
  }
  notifier_.Advance(tail);
  return result;
}

void RingLog::EvictOldest() {
  const Slot& oldest = records_.front();
  bytes_ -= oldest.size;
  arena_.Drop(oldest.block, oldest.size);
  records_.PopFront();
  base_ += 1;
}

void RingLog::Reset(Offset base) {
  {
    std::lock_guard<std::mutex> l(mu_);
    records_.Clear();
    arena_.Clear();
    bytes_ = 0;
    base_ = base;
  }
  notifier_.Set(base);
}

void RingLog::Close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return;
    closed_ = true;
  }
  notifier_.Close();
}

Offset RingLog::BaseOffset() const {
  std::lock_guard<std::mutex> l(mu_);
  return base_;
}

Offset RingLog::TailOffset() const {
  std::lock_guard<std::mutex> l(mu_);
  return base_ + records_.size();
}

uint64_t RingLog::bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return bytes_;
}

StorageResult<ReadBatch> RingLog::Read(Offset from, ReadLimits limits) const {
  std::lock_guard<std::mutex> l(mu_);
  if (from < base_) {
    StorageError e;
    e.code = StorageErrc::kTrimmed;
    e.requested = from;
    e.oldest = base_;
    e.message = "offset " + to_string(from) + " was evicted; oldest is " + to_string(base_);
    return StorageFail(std::move(e));
  }
  ReadBatch batch;
  Offset tail = base_ + records_.size();
  Offset cur = from;
  uint64_t used = 0;
  uint64_t max_records = std::max<uint64_t>(1, limits.max_records);
  while (cur < tail && batch.records.size() < max_records &&
         (batch.records.empty() || used < limits.max_bytes)) {
    const Slot& slot = records_[cur - base_];
    Record& r = batch.records.emplace_back();
    r.offset = cur;
    r.generation = slot.generation;
    r.timestamp_ms = slot.timestamp_ms;
    r.payload.assign(reinterpret_cast<const char*>(slot.payload), slot.size);
    used += slot.size;
    cur += 1;
  }
  batch.next_offset = cur;
  return batch;
}

WaitOutcome RingLog::WaitFor(Offset offset, Deadline deadline) const {
  return notifier_.Wait(offset, deadline);
}

uint64_t RingLog::NotifyWhen(Offset offset, TailCallback cb) {
  return notifier_.Notify(offset, std::move(cb));
}

bool RingLog::CancelNotify(uint64_t id) {
  return notifier_.Cancel(id);
}

}  // namespace felix::storage
