// The reader interface shared by the durable log (DurableLog) and the in-memory ring log
// (RingLog), and TailNotifier, the tail-following machinery both use.
//
// Offsets: `BaseOffset()` is the oldest readable offset, `TailOffset()` the next offset to be
// assigned (one past the newest readable record). Reading below the base answers kTrimmed
// with the oldest offset; reading at or past the tail answers an empty batch.
//
// Tail following never polls: `WaitFor(offset, deadline)` blocks on a condition variable that
// the appending thread signals; `NotifyWhen(offset, cb)` registers a one-shot callback run on
// the thread whose append made `offset` readable (or inline if it already is, or with kClosed
// when the log closes). Callbacks must be short and must not call back into the log's write
// side (post to your executor instead). All methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/strong_types.h"
#include "storage/storage_error.h"

namespace felix::storage {

// One record to append. `timestamp_ms` 0 means "now" (wall clock, assigned by the log).
struct AppendRecord {
  std::span<const uint8_t> payload;
  Generation generation;
  uint64_t timestamp_ms = 0;
  uint32_t flags = 0;  // record_format.h kRecordFlag* (a durable log only; a ring refuses them)
};

inline std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Offsets the append was given, both inclusive.
struct AppendResult {
  Offset first_offset;
  Offset last_offset;
};

// A record as read: `Payload` is std::string (Record: the payload copied) or std::string_view
// (RecordView, read in place by DurableLog::ReadViews: it views a buffer of the read that
// returned it, RecordViews::bytes, and is valid while that is held).
template <typename Payload>
struct BasicRecord {
  Offset offset;
  Generation generation;
  uint64_t timestamp_ms = 0;
  Payload payload;
  uint32_t flags = 0;  // as appended
};
using Record = BasicRecord<std::string>;
using RecordView = BasicRecord<std::string_view>;

struct RecordViews {
  std::shared_ptr<const void> bytes;  // what the views point into (the read's buffers)
  std::vector<RecordView> records;
  Offset next_offset;  // where the next read should start
};

struct ReadLimits {
  uint64_t max_records = 1000;
  uint64_t max_bytes = 1 << 20;  // payload-byte budget; at least one record is always returned
};

struct ReadBatch {
  std::vector<Record> records;
  Offset next_offset;  // where the next read should start
};

enum class WaitOutcome {
  kReady,    // the record at the offset exists (is readable)
  kTimeout,  // the deadline passed first
  kClosed,   // the log was closed
};

using Deadline = std::chrono::steady_clock::time_point;
using TailCallback = std::function<void(WaitOutcome)>;

class LogReader {
 public:
  virtual ~LogReader() = default;
  virtual Offset BaseOffset() const = 0;
  virtual Offset TailOffset() const = 0;
  virtual StorageResult<ReadBatch> Read(Offset from, ReadLimits limits) const = 0;
  // The single record at `offset` (kTrimmed below the base, kInvalidArgument at/past the tail).
  StorageResult<Record> ReadOne(Offset offset) const;
  // Blocks until the record at `offset` is readable, the deadline passes, or the log closes.
  virtual WaitOutcome WaitFor(Offset offset, Deadline deadline) const = 0;
  // One-shot: `cb` runs once when `offset` is readable (inline if it already is). Returns an
  // id for CancelNotify (0 when it already ran inline).
  virtual uint64_t NotifyWhen(Offset offset, TailCallback cb) = 0;
  // True if the callback was removed before it ran.
  virtual bool CancelNotify(uint64_t id) = 0;
};

// Tracks a readable tail and wakes blocking waiters and callbacks when it passes their offset.
// Thread-safe. Callbacks run on the thread calling Advance/Close, outside the lock.
class TailNotifier {
 public:
  explicit TailNotifier(Offset tail) : tail_(tail) {}
  Offset tail() const;
  // Raises the tail (never lowers it) and runs callbacks it satisfies.
  void Advance(Offset tail);
  // Sets the tail to any value (truncate/reset); fires callbacks now satisfied.
  void Set(Offset tail);
  WaitOutcome Wait(Offset offset, Deadline deadline) const;
  uint64_t Notify(Offset offset, TailCallback cb);
  bool Cancel(uint64_t id);
  // Wakes everyone with kClosed; later waits answer kClosed at once.
  void Close();

 private:
  void FireLocked(std::unique_lock<std::mutex>& l);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int blocked_ = 0;
  Offset tail_;
  bool closed_ = false;
  uint64_t next_id_ = 1;
  struct Watch {
    Offset offset;
    TailCallback cb;
  };
  std::map<uint64_t, Watch> watches_;          // by id
  std::multimap<Offset, uint64_t> by_offset_;  // offset -> id
};

}  // namespace felix::storage
