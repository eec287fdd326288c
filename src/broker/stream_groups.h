// StreamGroups: every consumer group of one durable stream shard (consumer-groups.md), beside
// the StreamShard and owned by the same executor.
//
// Keeps one ConsumerGroup (the in-memory state machine) per group name, reads records for
// polls through the StreamShard, and persists what must survive a restart on the shard's own
// logs (storage.md §19): the committed cursor per group on the cursors log, dead-letter
// entries on the dead-letters log. Recover() replays both logs, so a restarted broker (or,
// later, a promoted replica that has the same logs) resumes every group at its committed
// cursor with its dead letters. Claims, owed offsets and attempt counts are memory only: what
// was in flight at a restart is delivered again with attempts starting at 1 (at-least-once).
//
// Durability before answering: an ack that moves the cursor, every dead-letter change and a
// seek are answered only after their record is durable (DurableLog::AppendAsync; the
// executor never waits on fsync). An ack above a gap is memory only until the gap closes.
// Visibility timeouts are executor timers (one per group, at its earliest deadline); a poll
// with wait_ms waits for a commit (SetCommitListener on the shard), a hand-back, a lapse or
// its own deadline, never by polling.
//
// Threading: Recover() before the object is shared; every other method on `executor` only.
// The executor, the shard and both logs must outlive it; Stop() (or the executor stopping)
// drops its timers and waiting polls. Completion callbacks run on the executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "broker/consumer_group.h"
#include "broker/executor.h"
#include "broker/group_metrics.h"
#include "broker/log_appender.h"
#include "broker/stream_shard.h"
#include "common/result.h"
#include "storage/durable_log.h"

namespace felix::broker {

struct GroupOptions {
  std::chrono::milliseconds visibility_timeout{30000};  // FELIX_GROUP_VISIBILITY_TIMEOUT_MS
  std::chrono::milliseconds max_visibility{43200000};   // FELIX_GROUP_MAX_VISIBILITY_MS
  std::chrono::milliseconds max_wait{30000};            // FELIX_GROUP_MAX_WAIT_MS
  uint32_t max_attempts = 5;                            // FELIX_GROUP_MAX_ATTEMPTS
  uint64_t max_in_flight = 10000;                       // FELIX_GROUP_MAX_IN_FLIGHT
  size_t max_records_per_poll = 1000;
  // Bound on a group_records answer's *encoded* size (base64 payloads plus their JSON), so an
  // answer always fits a frame: main() caps it below FELIX_MAX_FRAME_BYTES (issue 12 item 4).
  size_t max_bytes_per_poll = 4u << 20;
};

// Why a group request was refused. The client-protocol code and retry class are chosen at the
// edge (ClientSession), not here.
enum class GroupErrc {
  kInvalidRequest,  // the request cannot be served as asked
  kStaleClaim,      // the claim it names lapsed or moved on
  kStorage,         // group state could not be read or written
  kUnavailable,     // the shard may not write now (fence refused); nothing was written
  kGone,            // the stream was deleted
};

// JSON around one record of a group_records answer, generously (offset, attempts, timestamp,
// field names), and around the whole answer.
inline constexpr size_t kGroupRecordJsonOverhead = 256;
inline constexpr size_t kGroupAnswerJsonOverhead = 256;
// A stored publisher's `"publisher":"…"`, at most: 255 bytes, each escaped as \u00XX.
inline constexpr size_t kMaxPublisherJsonBytes = 16 + 6 * 255;
// Encoded size of one record with `payload_bytes` of payload and `publisher_bytes` of stored
// publisher in a group_records answer.
inline size_t GroupRecordEncodedBytes(size_t payload_bytes, size_t publisher_bytes = 0) {
  return 4 * ((payload_bytes + 2) / 3) + kGroupRecordJsonOverhead +
         (publisher_bytes == 0 ? 0 : 16 + 6 * publisher_bytes);
}
// The largest payload a group poll can ever deliver in a frame of `max_frame_bytes` (with the
// longest publisher); larger records are refused at publish on durable streams (they could
// never be consumed by a group).
inline size_t MaxGroupRecordBytes(size_t max_frame_bytes) {
  constexpr size_t kOverhead =
      kGroupRecordJsonOverhead + kMaxPublisherJsonBytes + kGroupAnswerJsonOverhead;
  if (max_frame_bytes <= kOverhead) return 0;
  return (max_frame_bytes - kOverhead) / 4 * 3;
}

struct GroupError {
  GroupErrc reason = GroupErrc::kStorage;
  bool fatal = false;  // a stale claim the client must not retry
  std::string message;
};
template <typename T>
using GroupResult = tl::expected<T, GroupError>;

struct GroupDelivery {
  Offset offset;
  uint32_t attempts = 0;
  uint64_t timestamp_micros = 0;
  // Offsets directly below `offset` that were settled without delivery (retention removed
  // them before the group reached them); 0 = none. Sent as `skipped_before` to clients that
  // offered FEATURE_GROUP_SKIPPED (consumer-groups.md §2 step 3).
  uint64_t skipped_before = 0;
  // The record's bytes where the log's read left them, valid while `owner` is held (the read's
  // buffers, shared by the deliveries it served): sent from there, never copied per record.
  std::span<const uint8_t> payload;
  std::span<const uint8_t> publisher;  // stored with the record (FELIX_RECORD_PUBLISHERS)
  std::shared_ptr<const void> owner;
};

struct GroupPollRequest {
  uint32_t max_records = 1;
  std::chrono::milliseconds wait{0};
  std::chrono::milliseconds visibility{0};  // 0: the broker's visibility timeout
  GroupMember member;                       // who polls (member empty: anonymous)
  bool reclaim = false;                     // take back the member's older claims first
};

struct GroupDescription {
  std::optional<Offset> committed;
  Offset tail;
  uint64_t in_flight = 0;
  uint64_t owed = 0;
  uint64_t dead_letters = 0;
};

struct GroupSeekTarget {
  enum class Kind : uint8_t { kEarliest, kLatest, kOffset };
  Kind kind = Kind::kLatest;
  Offset offset;
};

class StreamGroups {
 public:
  StreamGroups(
      std::string shard_name, Executor& executor, StreamShard& shard, LogAppender& cursors,
      LogAppender& dead_letters, GroupOptions options, GroupMetrics& metrics,
      std::function<GroupTime()> clock = [] { return GroupClock::now(); });
  ~StreamGroups();
  StreamGroups(const StreamGroups&) = delete;
  StreamGroups& operator=(const StreamGroups&) = delete;

  // Replays the cursor and dead-letter logs (kCorruption naming the log and offset when a
  // record does not decode).
  Result<void> Recover();

  template <typename T>
  using Done = std::function<void(GroupResult<T>)>;

  void Poll(const std::string& group, GroupPollRequest request,
            Done<std::vector<GroupDelivery>> done);
  void Ack(const std::string& group, Offset offset, Done<void> done);
  // `attempts` 0: whatever claim stands.
  void Nack(const std::string& group, Offset offset, std::chrono::milliseconds delay,
            uint32_t attempts, Done<void> done);
  // Answers the granted visibility in ms.
  void Extend(const std::string& group, Offset offset, uint32_t attempts,
              std::chrono::milliseconds extend, Done<uint64_t> done);
  void DeadLetter(const std::string& group, Offset offset, Done<void> done);
  void ListDeadLetters(const std::string& group, Done<std::vector<Offset>> done);
  void Redrive(const std::string& group, Offset offset, Done<void> done);
  void Discard(const std::string& group, Offset offset, Done<void> done);
  void Describe(const std::string& group, Done<GroupDescription> done);
  // Answers (position, moved).
  void Seek(const std::string& group, GroupSeekTarget target, bool if_new,
            Done<std::pair<Offset, bool>> done);
  // Answers whether the group existed.
  void Delete(const std::string& group, Done<bool> done);
  // Claims whose records never reached their consumer (its connection went away).
  void Release(const std::string& group, const std::vector<std::pair<Offset, uint32_t>>& claims);

  // The shard committed new records: serve waiting polls.
  void OnCommitted();
  // Cancels timers and drops waiting polls (their callbacks are not run).
  void Stop();
  // The stream was deleted: answers every waiting poll with `error`, then Stop().
  void Abort(const GroupError& error);

  size_t group_count() const { return groups_.size(); }

  // Cursor writes of one group in flight before further acks wait for the next one (Entry).
  // Four: up to four consumers acking one record at a time never wait.
  static constexpr uint32_t kMaxCursorWritesInFlight = 4;

 private:
  struct Entry {
    explicit Entry(ConsumerGroup s)
        : state(std::move(s)), durable_position(state.committed().value_or(Offset(0))) {}
    ConsumerGroup state;
    // The cursor the log is known to hold (recovered, or a cursor write that succeeded). Below
    // state.position() after a cursor write failed (a full disk, a failed fsync): an ack, even
    // a duplicate one, then writes the cursor again before it is answered.
    Offset durable_position;
    Executor::TimerId timer = 0;
    std::optional<GroupTime> timer_at;
    int64_t reported_in_flight = 0;
    // Runs of offsets retention removed before this tracker handed them out: the offset just
    // above a run → its length. Kept (memory only, like attempts) until the cursor passes the
    // offset, so a redelivery reports the same hole; merged when a run grows upwards.
    std::map<Offset, uint64_t> skipped_runs;
    // Cursor writes issued and not yet complete. While kMaxCursorWritesInFlight are, an ack
    // that moves the cursor appends no record of its own: its answer waits in `cursor_waiters`
    // for the next cursor write, issued as soon as one of them completes and carrying the
    // position reached by then (the cursors log keeps only the latest value). A burst of acks
    // then costs a record per flush instead of one each, while acks that come one at a time
    // (one being flushed, the next written for the flush after it) never wait for a write.
    uint32_t cursor_writes_in_flight = 0;
    std::vector<Done<void>> cursor_waiters;
    // Names this entry in its cursor writes' completions (a group deleted and made again is
    // another entry); 0 until its first cursor write.
    uint64_t serial = 0;
  };
  struct Waiting {
    std::string group;
    GroupPollRequest request;
    Done<std::vector<GroupDelivery>> done;
    Executor::TimerId timer = 0;
  };
  struct Write {
    LogAppender* log;
    std::vector<uint8_t> record;
    // A cursor write: the group and position, recorded as durable once the write succeeds.
    std::string group;
    std::optional<Offset> cursor;
    uint64_t entry_serial = 0;  // of a cursor write: Entry::serial
  };

  Entry& EntryFor(const std::string& group);
  // Retention removed [from, to) before `entry` handed any of it out: a hole below `to`.
  static void NoteSkipped(Entry& entry, Offset from, Offset to);
  GroupResult<std::vector<GroupDelivery>> Fill(const std::string& group, Entry& entry,
                                               const GroupPollRequest& request);
  // After any change: dead-letter work, the lapse timer, the in-flight gauge, waiting polls.
  void AfterChange(const std::string& group, Entry& entry, Done<void> dead_letters_done = {});
  void ProcessDeadLetters(const std::string& group, Entry& entry, Done<void> done);
  void ArmTimer(const std::string& group, Entry& entry);
  void OnTimer(const std::string& group);
  void ServeWaiting();
  // Appends the records and calls `done` (on the executor) once all are durable.
  void Persist(std::vector<Write> writes, Done<void> done);
  Write CursorWrite(const std::string& group, Entry& entry);
  void AnswerSettle(const SettleOutcome& outcome, Done<void> done, std::vector<Write> writes);
  // A cursor write of `group` (entry `serial`) at `position` completed, `durable` or not;
  // issues the write the waiting acks need once fewer than kMaxCursorWritesInFlight are.
  void CursorWriteDone(const std::string& group, uint64_t serial, Offset position, bool durable);

  std::string shard_name_;
  Executor& executor_;
  StreamShard& shard_;
  // Both append through the shard's one append path, answered after the flush.
  LogAppender& cursors_;
  LogAppender& dead_letters_;
  GroupOptions options_;
  GroupMetrics& metrics_;
  std::function<GroupTime()> clock_;
  std::map<std::string, std::unique_ptr<Entry>> groups_;
  std::map<uint64_t, Waiting> waiting_;
  uint64_t next_waiting_id_ = 1;
  uint64_t next_entry_serial_ = 1;
  bool stopped_ = false;
  // Completions of durable writes find this object through the token; Stop() clears it.
  std::shared_ptr<StreamGroups*> alive_;
};

}  // namespace felix::broker
