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

StorageResult<AppendResult> RingLog::AppendAt(uint64_t expected_first,
                                              std::span<const AppendRecord> records) {
  return AppendImpl(expected_first, records);
}

StorageResult<AppendResult> RingLog::AppendImpl(std::optional<uint64_t> expected,
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
  uint64_t tail;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (closed_) return StorageFail(StorageErrc::kClosed, "ring log is closed");
    uint64_t next = base_ + records_.size();
    if (expected && *expected != next) {
      StorageError e;
      e.code = StorageErrc::kOffsetMismatch;
      e.tail = next;
      e.message = "append at offset " + std::to_string(*expected) + " refused: tail is " +
                  std::to_string(next);
      return StorageFail(std::move(e));
    }
    result.first_offset = next;
    for (const auto& r : records) {
      Record rec;
      rec.offset = next++;
      rec.generation = r.generation;
      rec.timestamp_ms = r.timestamp_ms != 0 ? r.timestamp_ms : now_ms;
      rec.payload.assign(reinterpret_cast<const char*>(r.payload.data()), r.payload.size());
      bytes_ += rec.payload.size();
      records_.push_back(std::move(rec));
    }
    result.last_offset = next - 1;
    while (records_.size() > 1 &&
           (records_.size() > opts_.max_records || bytes_ > opts_.max_bytes)) {
      bytes_ -= records_.front().payload.size();
      records_.pop_front();
      ++base_;
    }
    tail = next;
  }
  notifier_.Advance(tail);
  return result;
}

void RingLog::Reset(uint64_t base) {
  {
    std::lock_guard<std::mutex> l(mu_);
    records_.clear();
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

uint64_t RingLog::BaseOffset() const {
  std::lock_guard<std::mutex> l(mu_);
  return base_;
}

uint64_t RingLog::TailOffset() const {
  std::lock_guard<std::mutex> l(mu_);
  return base_ + records_.size();
}

uint64_t RingLog::bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return bytes_;
}

StorageResult<ReadBatch> RingLog::Read(uint64_t from, ReadLimits limits) const {
  std::lock_guard<std::mutex> l(mu_);
  if (from < base_) {
    StorageError e;
    e.code = StorageErrc::kTrimmed;
    e.requested = from;
    e.oldest = base_;
    e.message =
        "offset " + std::to_string(from) + " was evicted; oldest is " + std::to_string(base_);
    return StorageFail(std::move(e));
  }
  ReadBatch batch;
  uint64_t tail = base_ + records_.size();
  uint64_t cur = from;
  uint64_t used = 0;
  uint64_t max_records = std::max<uint64_t>(1, limits.max_records);
  while (cur < tail && batch.records.size() < max_records &&
         (batch.records.empty() || used < limits.max_bytes)) {
    const Record& r = records_[cur - base_];
    batch.records.push_back(r);
    used += r.payload.size();
    ++cur;
  }
  batch.next_offset = cur;
  return batch;
}

WaitOutcome RingLog::WaitFor(uint64_t offset, Deadline deadline) const {
  return notifier_.Wait(offset, deadline);
}

uint64_t RingLog::NotifyWhen(uint64_t offset, TailCallback cb) {
  return notifier_.Notify(offset, std::move(cb));
}

bool RingLog::CancelNotify(uint64_t id) {
  return notifier_.Cancel(id);
}

}  // namespace felix::storage
