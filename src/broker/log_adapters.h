// Bindings of the broker's RecordLog port to the storage library.
//
// DurableRecordLog puts a storage::DurableLog behind the port through the shard's one append
// path (LogAppender): the fence is checked and the generation stamped, the batch is written on
// the executor at once (no thread hop), and the completion comes inline under none/periodic,
// or from the log's flusher once a group-committed fsync covered it under on_commit (several
// publishes of the shard share one fsync). Completions arrive in offset order.
//
// RingRecordLog puts a storage::RingLog (in-memory streams) behind the port; its appends
// complete inline.
//
// A failing write (a full disk) is reported by the append path (WriteFaultReporting in
// log_appender.h).
//
// Threading: as RecordLog (the owning shard's executor calls in). Completions of the durable
// adapter run inline or on the log's flusher thread.
#pragma once

#include <memory>

#include "broker/log_appender.h"
#include "broker/record_log.h"
#include "storage/durable_log.h"
#include "storage/ring_log.h"

namespace felix::broker {

class DurableRecordLog final : public RecordLog {
 public:
  // `log` (the shard store owns it) and `fence` (the shard's) must outlive the adapter.
  DurableRecordLog(storage::DurableLog& log, const ShardFence& fence,
                   WriteFaultReporting reporting = {});

  void Append(const PayloadBatch& batch, AppendDone done) override;
  Offset start_offset() const override { return log_.BaseOffset(); }
  Offset next_offset() const override { return log_.TailOffset(); }
  ReadOutcome Read(Offset from, size_t max_records, size_t max_bytes) override;
  bool durable() const override { return true; }
  void Close() override;
  Result<void> Seal() override;
  Result<void> DropBelow(Offset offset) override;
  Result<uint64_t> EnforceRetention() override;
  uint64_t disk_bytes() const override { return log_.DiskBytes(); }

 private:
  storage::DurableLog& log_;
  LogAppender appender_;
  bool closed_ = false;
};

class RingRecordLog final : public RecordLog {
 public:
  explicit RingRecordLog(storage::RingOptions options) : ring_(options) {}

  void Append(const PayloadBatch& batch, AppendDone done) override;
  Offset start_offset() const override { return ring_.BaseOffset(); }
  Offset next_offset() const override { return ring_.TailOffset(); }
  ReadOutcome Read(Offset from, size_t max_records, size_t max_bytes) override;
  bool durable() const override { return false; }

 private:
  storage::RingLog ring_;
};

}  // namespace felix::broker
