#include "broker/log_adapters.h"

#include <cerrno>

#include <spdlog/spdlog.h>

namespace felix::broker {
namespace {

std::vector<storage::AppendRecord> ToRecords(const PayloadBatch& batch) {
  std::vector<storage::AppendRecord> records;
  records.reserve(batch.payloads.size());
  for (auto payload : batch.payloads) {
    records.push_back(storage::AppendRecord{payload, 0, batch.timestamp_micros / 1000});
  }
  return records;
}

RecordLog::ReadOutcome FromStorage(storage::StorageResult<storage::ReadBatch> read) {
  if (!read) {
    if (read.error().code == storage::StorageErrc::kTrimmed) return Trimmed{read.error().oldest};
    return read.error().ToError();
  }
  // Payload strings move into one owner; the views point into them.
  auto owner = std::make_shared<std::vector<storage::Record>>(std::move(read->records));
  RecordRead out;
  out.records.reserve(owner->size());
  for (const storage::Record& r : *owner) {
    out.records.push_back(
        RecordView{r.offset,
                   r.timestamp_ms * 1000,
                   {reinterpret_cast<const uint8_t*>(r.payload.data()), r.payload.size()}});
  }
  out.owner = std::move(owner);
  return out;
}

}  // namespace

DurableRecordLog::DurableRecordLog(storage::DurableLog& log, WriteFaultReporting reporting)
    : log_(log), reporting_(reporting) {
  appender_ = std::thread([this] { AppenderLoop(); });
}

DurableRecordLog::~DurableRecordLog() {
  Close();
}

void DurableRecordLog::Close() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (appender_.joinable()) appender_.join();
}

void DurableRecordLog::Append(const PayloadBatch& batch, AppendDone done) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      done(Fail(ErrorCode::kUnavailable, "shard log is closed"));
      return;
    }
    queue_.push_back(Pending{&batch, std::move(done)});
  }
  wake_.notify_one();
}

void DurableRecordLog::AppenderLoop() {
  std::vector<Pending> work;
  std::vector<storage::AppendRecord> records;
  while (true) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping with nothing left
      work.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
    }
    records.clear();
    for (const Pending& p : work) {
      for (auto payload : p.batch->payloads) {
        records.push_back(storage::AppendRecord{payload, 0, p.batch->timestamp_micros / 1000});
      }
    }
    if (records.empty()) {
      for (Pending& p : work) p.done(log_.TailOffset());
      work.clear();
      continue;
    }
    auto appended = log_.Append(records);
    NoteAppend(appended);
    uint64_t next = appended ? appended->first_offset : 0;
    for (Pending& p : work) {
      if (!appended) {
        p.done(tl::unexpected(appended.error().ToError()));
      } else {
        p.done(next);
        next += p.batch->payloads.size();
      }
    }
    work.clear();
  }
}

void DurableRecordLog::NoteAppend(const storage::StorageResult<storage::AppendResult>& appended) {
  constexpr auto kRelogInterval = std::chrono::seconds(10);
  if (appended) {
    if (!write_failing_) return;
    write_failing_ = false;
    spdlog::info("storage writes succeed again log={} after failed_appends={}", log_.dir(),
                 failed_appends_);
    if (reporting_.health) reporting_.health->Clear(HealthKind::kStorageWrite, log_.dir());
    return;
  }
  const storage::StorageError& error = appended.error();
  if (error.code != storage::StorageErrc::kIo) return;  // closed, poisoned: reported elsewhere
  if ((error.sys_errno == ENOSPC || error.sys_errno == EDQUOT) && reporting_.full) {
    reporting_.full->Increment();
  }
  auto now = std::chrono::steady_clock::now();
  std::string what = error.ToString();
  if (!write_failing_) {
    write_failing_ = true;
    failed_appends_ = 1;
    last_failure_log_ = now;
    spdlog::error(
        "storage write failed log={} error={}: publishes to it are refused until a write "
        "succeeds (counted in felix_storage_write_failures_total; logged again at most every "
        "10 s)",
        log_.dir(), what);
    if (reporting_.health) reporting_.health->Set(HealthKind::kStorageWrite, log_.dir(), what);
    return;
  }
  ++failed_appends_;
  if (now - last_failure_log_ >= kRelogInterval) {
    last_failure_log_ = now;
    spdlog::error("storage writes still failing log={} error={} failed_appends={}", log_.dir(),
                  what, failed_appends_);
  }
}

Result<void> DurableRecordLog::Seal() {
  if (auto rolled = log_.Roll(); !rolled) return tl::unexpected(rolled.error().ToError());
  return {};
}

Result<void> DurableRecordLog::DropBelow(uint64_t offset) {
  if (auto synced = log_.Sync(); !synced) return tl::unexpected(synced.error().ToError());
  auto dropped = log_.DropSegmentsBelow(offset);
  if (!dropped) return tl::unexpected(dropped.error().ToError());
  return {};
}

RecordLog::ReadOutcome DurableRecordLog::Read(uint64_t from, size_t max_records, size_t max_bytes) {
  return FromStorage(log_.Read(from, storage::ReadLimits{max_records, max_bytes}));
}

void RingRecordLog::Append(const PayloadBatch& batch, AppendDone done) {
  auto records = ToRecords(batch);
  if (records.empty()) {
    done(ring_.TailOffset());
    return;
  }
  auto appended = ring_.Append(records);
  if (!appended) {
    done(tl::unexpected(appended.error().ToError()));
    return;
  }
  done(appended->first_offset);
}

RecordLog::ReadOutcome RingRecordLog::Read(uint64_t from, size_t max_records, size_t max_bytes) {
  return FromStorage(ring_.Read(from, storage::ReadLimits{max_records, max_bytes}));
}

}  // namespace felix::broker
