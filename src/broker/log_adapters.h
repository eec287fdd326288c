// Bindings of the broker's RecordLog port to the storage library.
//
// DurableRecordLog puts a storage::DurableLog behind the port. DurableLog::Append blocks until
// the log's durability mode is met (fsync for on_commit), which must never happen on a shard
// executor, so appends go to an appender thread owned by the adapter. That thread takes every
// batch queued while the previous write+fsync ran and appends them in one call: group commit
// across publishes of the shard, one write and one fsync for all of them, completions in
// offset order.
//
// RingRecordLog puts a storage::RingLog (in-memory streams) behind the port; its appends
// complete inline.
//
// A failing write (a full disk) must not go unseen (issue 12 item 8): the durable adapter logs
// a log's first failed append at error level (again at most every 10 s while it keeps failing,
// and once when writes succeed again), lists the log on the HealthRegistry (/health) while it
// fails, and counts refusals for lack of space in felix_storage_full_total.
//
// Threading: as RecordLog (the owning shard's executor calls in). Completions of the durable
// adapter run on its appender thread. The destructor stops the appender after completing
// everything queued.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "broker/record_log.h"
#include "common/health.h"
#include "common/metrics.h"
#include "storage/durable_log.h"
#include "storage/ring_log.h"

namespace felix::broker {

// Where the durable adapter reports failing writes; both optional, both must outlive it.
struct WriteFaultReporting {
  HealthRegistry* health = nullptr;  // the log is listed while its writes fail
  Counter* full = nullptr;           // appends refused with ENOSPC or EDQUOT
};

class DurableRecordLog final : public RecordLog {
 public:
  // `log` must outlive the adapter (the shard store owns it).
  explicit DurableRecordLog(storage::DurableLog& log, WriteFaultReporting reporting = {});
  ~DurableRecordLog() override;

  void Append(const PayloadBatch& batch, AppendDone done) override;
  uint64_t start_offset() const override { return log_.BaseOffset(); }
  uint64_t next_offset() const override { return log_.TailOffset(); }
  ReadOutcome Read(uint64_t from, size_t max_records, size_t max_bytes) override;
  bool durable() const override { return true; }
  void Close() override;
  Result<void> Seal() override;
  Result<void> DropBelow(uint64_t offset) override;
  uint64_t disk_bytes() const override { return log_.DiskBytes(); }

 private:
  struct Pending {
    const PayloadBatch* batch;  // kept alive by the shard until `done` runs
    AppendDone done;
  };
  void AppenderLoop();
  // Appender thread: tracks whether the log's writes fail, for the log and /health.
  void NoteAppend(const storage::StorageResult<storage::AppendResult>& appended);

  storage::DurableLog& log_;
  WriteFaultReporting reporting_;
  bool write_failing_ = false;  // appender thread
  uint64_t failed_appends_ = 0;
  std::chrono::steady_clock::time_point last_failure_log_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::thread appender_;
};

class RingRecordLog final : public RecordLog {
 public:
  explicit RingRecordLog(storage::RingOptions options) : ring_(options) {}

  void Append(const PayloadBatch& batch, AppendDone done) override;
  uint64_t start_offset() const override { return ring_.BaseOffset(); }
  uint64_t next_offset() const override { return ring_.TailOffset(); }
  ReadOutcome Read(uint64_t from, size_t max_records, size_t max_bytes) override;
  bool durable() const override { return false; }

 private:
  storage::RingLog ring_;
};

}  // namespace felix::broker
