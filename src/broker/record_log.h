// RecordLog: what a stream shard needs from its record log, whatever stores it.
//
// The broker's shard code is written against this port; adapters bind it to the storage
// library's durable segmented log and in-memory ring. Tests bind it to in-process fakes.
// Payload bytes are never copied on the way through: appends borrow spans kept alive by the
// batch's `owner`, and reads return spans kept alive by the result's `owner`.
//
// Threading: called only from the owning shard's executor. `AppendDone` may run on any
// thread (e.g. the storage flusher); the shard posts it back to its executor. Completions
// arrive in append order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/result.h"
#include "common/strong_types.h"

namespace felix::broker {

// Payloads of one publish, borrowed from a buffer that `owner` keeps alive.
struct PayloadBatch {
  std::shared_ptr<const void> owner;
  std::vector<std::span<const uint8_t>> payloads;
  uint64_t timestamp_micros = 0;  // append time, µs since the Unix epoch
  // storage::kRecordFlagCommit: the one payload is an encoded CommitRecord (durable logs only).
  uint32_t record_flags = 0;
  // The principal that published the batch (token `sub`, ≤ 255 bytes), stored with each record
  // when set (FELIX_RECORD_PUBLISHERS; durable logs only); null = none.
  std::shared_ptr<const std::string> publisher;
};

struct RecordView {
  Offset offset;
  uint64_t timestamp_micros = 0;
  std::span<const uint8_t> payload;      // a commit record's event bytes
  std::span<const uint8_t> commit_body;  // a commit record's whole body; empty otherwise
  std::span<const uint8_t> publisher;    // the stored publisher; empty = none
};

struct RecordRead {
  std::shared_ptr<const void> owner;  // keeps every `payload` span alive
  // Contiguous offsets from the first readable one at or above the requested offset.
  std::vector<RecordView> records;
  // Offsets from the requested one that hold generation-start records (replication.md §17:
  // no event, the offset stays taken) and were passed over before records[0] — or, when
  // `records` is empty, up to the log's tail. A read never spans one: it ends before it.
  uint64_t passed_over = 0;
};

// Reads below the retained range answer this (not an ErrorCode): the caller maps it to
// `subscribe_cursor_error too_old` with the oldest retained offset.
struct Trimmed {
  Offset oldest_offset;
};

class RecordLog {
 public:
  virtual ~RecordLog() = default;

  // Appends the batch; its records get consecutive offsets. `done` gets the first offset once
  // the log's durability mode is satisfied (fsync for on_commit), or the error.
  using AppendDone = std::function<void(Result<Offset>)>;
  virtual void Append(const PayloadBatch& batch, AppendDone done) = 0;

  // Oldest retained offset and the next offset to be assigned.
  virtual Offset start_offset() const = 0;
  virtual Offset next_offset() const = 0;

  // Up to `max_records` / about `max_bytes` (at least one record) from `from`, which must be
  // below next_offset(). Below start_offset() → a Trimmed outcome.
  using ReadOutcome = std::variant<RecordRead, Trimmed, Error>;
  virtual ReadOutcome Read(Offset from, size_t max_records, size_t max_bytes) = 0;

  virtual bool durable() const = 0;

  // Completes (or fails) every pending append, then refuses new ones. Idempotent.
  virtual void Close() {}

  // Compaction (cache and counter logs; storage.md §17.6). Seal: every record below
  // next_offset() moves into sealed segments (call with no append pending). DropBelow: makes
  // everything appended durable, then deletes sealed segments wholly below `offset`; the
  // start offset advances, nothing is renumbered. Both block on I/O. Logs that cannot compact
  // keep these defaults.
  virtual Result<void> Seal() { return Fail(ErrorCode::kUnavailable, "log cannot compact"); }
  virtual Result<void> DropBelow(Offset) {
    return Fail(ErrorCode::kUnavailable, "log cannot compact");
  }
  // Retention (stream record logs): deletes whole sealed segments beyond the log's size or age
  // bound, oldest first; the start offset advances, nothing is renumbered. Blocks on I/O.
  // Returns how many segments went; logs without retention keep this default.
  virtual Result<uint64_t> EnforceRetention() { return uint64_t{0}; }
  // Bytes the log occupies on disk (0 when not on disk).
  virtual uint64_t disk_bytes() const { return 0; }
};

}  // namespace felix::broker
