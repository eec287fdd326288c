#include "broker/log_adapters.h"

#include <memory>
#include <type_traits>

#include "broker/commit_record.h"
#include "storage/record_format.h"

namespace felix::broker {
namespace {

// `bodies` keeps the payloads with a publisher trailer alive (a copy per record, made only
// when the batch names a publisher) until the append has taken them.
// A ring stores no publisher (`keep_publisher` false): it refuses record flags.
std::vector<storage::AppendRecord> ToRecords(const PayloadBatch& batch, bool keep_publisher,
                                             std::vector<std::vector<uint8_t>>& bodies) {
  std::vector<storage::AppendRecord> records;
  records.reserve(batch.payloads.size());
  uint32_t flags = batch.record_flags;
  const bool publisher = keep_publisher && batch.publisher != nullptr;
  if (publisher) {
    flags |= storage::kRecordFlagPublisher;
    bodies.reserve(batch.payloads.size());
  }
  for (auto payload : batch.payloads) {
    if (publisher) {
      bodies.push_back(storage::WithPublisher(payload, storage::AsBytes(*batch.publisher)));
      payload = bodies.back();
    }
    records.push_back(
        storage::AppendRecord{payload, Generation(), batch.timestamp_micros / 1000, flags});
  }
  return records;
}

// `Batch`: storage::ReadBatch (a ring's records, copied) or storage::RecordViews (a durable
// log's, in the buffers the read filled: no copy or allocation per record).
template <typename Batch>
RecordLog::ReadOutcome FromStorage(storage::StorageResult<Batch> read) {
  if (!read) {
    if (read.error().code == storage::StorageErrc::kTrimmed) return Trimmed{read.error().oldest};
    return read.error().ToError();
  }
  // The views point into one owner: the copied records, or the read's buffers.
  std::shared_ptr<const void> owner;
  const auto* records = &read->records;
  if constexpr (std::is_same_v<Batch, storage::ReadBatch>) {
    auto copied = std::make_shared<std::vector<storage::Record>>(std::move(read->records));
    records = copied.get();
    owner = std::move(copied);
  } else {
    owner = std::move(read->bytes);
  }
  RecordRead out;
  out.records.reserve(records->size());
  for (const auto& r : *records) {
    if (storage::IsGenerationStart(r.flags)) {
      // Every reader but replication passes over it; a read ends before one so that what it
      // returns stays contiguous.
      if (!out.records.empty()) break;
      ++out.passed_over;
      continue;
    }
    std::span<const uint8_t> bytes{reinterpret_cast<const uint8_t*>(r.payload.data()),
                                   r.payload.size()};
    std::span<const uint8_t> publisher;
    if ((r.flags & storage::kRecordFlagPublisher) != 0) {
      auto split = storage::SplitPublisher(bytes);
      if (!split) {
        if (!out.records.empty()) break;  // what came before is good; the next read fails
        return Error{ErrorCode::kCorruption, "record at offset " + to_string(r.offset) +
                                                 ": publisher length exceeds the record"};
      }
      bytes = split->payload;
      publisher = split->publisher;
    }
    if ((r.flags & storage::kRecordFlagCommit) == 0) {
      out.records.push_back(RecordView{r.offset, r.timestamp_ms * 1000, bytes, {}, publisher});
      continue;
    }
    // Every reader but replication sees a commit record as its event bytes.
    auto event = CommitEventBytes(bytes);
    if (!event) {
      if (!out.records.empty()) break;  // what came before is good; the next read fails
      return Error{ErrorCode::kCorruption, "commit record at offset " + to_string(r.offset) + ": " +
                                               CommitRecordErrorName(event.error())};
    }
    out.records.push_back(RecordView{r.offset, r.timestamp_ms * 1000, *event, bytes, publisher});
  }
  out.owner = std::move(owner);
  return out;
}

}  // namespace

DurableRecordLog::DurableRecordLog(storage::DurableLog& log, const ShardFence& fence,
                                   WriteFaultReporting reporting)
    : log_(log), appender_(log, fence, AckAfter::kPolicy, reporting) {}

void DurableRecordLog::Close() {
  closed_ = true;  // what is pending completes from the log's own Close (flush or kClosed)
}

void DurableRecordLog::Append(const PayloadBatch& batch, AppendDone done) {
  if (closed_) return done(Fail(ErrorCode::kUnavailable, "shard log is closed"));
  std::vector<std::vector<uint8_t>> bodies;  // taken by the append before it returns
  auto records = ToRecords(batch, true, bodies);
  if (records.empty()) return done(log_.TailOffset());
  appender_.Append(records, [done = std::move(done)](Result<storage::AppendResult> appended) {
    if (!appended) return done(tl::unexpected(appended.error()));
    done(appended->first_offset);
  });
}

Result<void> DurableRecordLog::Seal() {
  if (auto rolled = log_.Roll(); !rolled) return tl::unexpected(rolled.error().ToError());
  return {};
}

Result<void> DurableRecordLog::DropBelow(Offset offset) {
  if (auto synced = log_.Sync(); !synced) return tl::unexpected(synced.error().ToError());
  auto dropped = log_.DropSegmentsBelow(offset);
  if (!dropped) return tl::unexpected(dropped.error().ToError());
  return {};
}

Result<uint64_t> DurableRecordLog::EnforceRetention() {
  auto result = log_.EnforceRetention();
  if (!result) return tl::unexpected(result.error().ToError());
  return result->segments_deleted;
}

RecordLog::ReadOutcome DurableRecordLog::Read(Offset from, size_t max_records, size_t max_bytes) {
  uint64_t passed_over = 0;
  for (;;) {
    RecordLog::ReadOutcome read = FromStorage(
        log_.ReadViews(from + passed_over, storage::ReadLimits{max_records, max_bytes}));
    auto* records = std::get_if<RecordRead>(&read);
    if (records == nullptr) return read;
    const bool only_start_records = records->records.empty() && records->passed_over > 0;
    records->passed_over += passed_over;
    // A read of nothing but start records goes on past them (one per leadership change, so
    // this loops rarely), unless they reach the tail.
    if (!only_start_records || from + records->passed_over >= log_.TailOffset()) return read;
    passed_over = records->passed_over;
  }
}

void RingRecordLog::Append(const PayloadBatch& batch, AppendDone done) {
  std::vector<std::vector<uint8_t>> bodies;  // stays empty
  auto records = ToRecords(batch, false, bodies);
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

RecordLog::ReadOutcome RingRecordLog::Read(Offset from, size_t max_records, size_t max_bytes) {
  return FromStorage(ring_.Read(from, storage::ReadLimits{max_records, max_bytes}));
}

}  // namespace felix::broker
