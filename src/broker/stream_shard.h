// StreamShard: one shard of a stream on the broker that serves it — its record log, its
// live subscribers, and the publish → commit → fanout pipeline (semantics.md §2, §5).
//
// Publish appends a batch to the log; once the log reports it committed (per its durability
// mode) the batch is fanned out, as one shared EventBatch, to every live subscriber, then the
// publisher is answered. Commits settle in append order, so fanout follows offset order.
//
// Subscribe registers the subscriber before reading history ("register-before-read"):
// records below the committed tail at registration (live_offset) are replayed from the log,
// never dropped (replay waits for queue room); the subscriber then turns live in the same
// executor task in which replay reaches the committed tail, so there is no gap and no
// duplicate. The publisher never waits for a subscriber. A live batch that finds a
// subscriber's queue full:
//   - in-memory stream: is lost for that subscriber (drop_new; counted, no detection possible);
//   - durable stream, subscriber asked to be ended on lag (FEATURE_SUBSCRIPTION_LAGGED with
//     offsets): the queue is ended with `lagged{resume_from = the batch's first offset}`;
//   - durable stream otherwise: the subscriber goes back to replay from that offset, so it is
//     slowed down to what it reads and never loses a record (issue 12 item 2).
// A replay read that fails (corruption in a sealed segment) ends the subscription with an
// error naming the offset and the file: never a silent jump to the tail.
//
// Quorum streams (commit_gate.h): with a commit gate installed, a batch the log committed is
// held until AdvanceCommit covers it, and only then fanned out and answered; committed_next(),
// Subscribe, replay, Read and the commit listener all stop at the gate's released offset, so
// no reader sees a record a failover could still lose. Without a gate nothing changes.
//
// Threading: every method runs on `executor` (the shard's owner); other threads Post to it.
// The executor and the shard must outlive every pending append completion: close the log
// (completing or failing its appends) and drain the executor before destroying the shard.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <variant>

#include "broker/commit_gate.h"
#include "broker/executor.h"
#include "broker/record_log.h"
#include "broker/shard_router.h"
#include "broker/shard_state.h"
#include "broker/subscriber_queue.h"

namespace felix::broker {

struct StreamShardOptions {
  size_t default_queue_capacity = 512;   // FELIX_SUBSCRIBER_QUEUE_CAPACITY
  size_t max_queue_capacity = 4096;      // FELIX_SUBSCRIBER_QUEUE_CAPACITY_MAX
  size_t event_batch_max_records = 64;   // FELIX_EVENT_BATCH_MAX_EVENTS (replay chunks)
  size_t event_batch_max_bytes = 65536;  // FELIX_EVENT_BATCH_MAX_BYTES
  size_t replay_batches_per_step = 16;   // replay yields the executor after this many
#if FELIX_FAULT_INJECTION
  // Test seam (FELIX_TEST_DROP_ACKED_EVERY, a deliberately broken broker for the fault
  // harness's checker, docs/reliability.md): every Nth publish batch of a shard is answered
  // with the log's next offset and never written — an acknowledgement before a write that
  // then never happens. 0 = off.
  uint32_t drop_acked_every = 0;
#endif
};

struct StartPosition {
  enum class Kind : uint8_t { kLatest, kEarliest, kOffset };
  Kind kind = Kind::kLatest;
  Offset offset;  // kOffset only
};

struct CursorError {
  enum class Reason : uint8_t { kTooOld, kInFuture };
  Reason reason;
  Offset requested;
  Offset available;  // oldest retained (too_old) or the tail (in_future)
};

struct Subscription {
  uint64_t id = 0;
  Offset start_offset;  // first offset this subscription delivers
  // Committed tail at registration, short of the generation-start records at its end
  // (replication.md §17: they hold no event, so a reader waiting for live_offset - 1 would
  // wait for nothing); never below start_offset.
  Offset live_offset;
  uint32_t queue_capacity = 0;
  std::shared_ptr<SubscriberQueue> queue;
};

class StreamShard {
 public:
  StreamShard(ShardId id, Executor& executor, std::unique_ptr<RecordLog> log,
              StreamShardOptions options = {});
  StreamShard(const StreamShard&) = delete;
  StreamShard& operator=(const StreamShard&) = delete;

  using PublishDone = std::function<void(Result<Offset>)>;
  // `done` runs on the executor with the batch's first offset, after fanout. Gated shards only:
  // `late` runs (executor, with the offset) when a batch `done` was answered quorum_timeout for
  // is released after all.
  void Publish(PayloadBatch batch, PublishDone done, PublishDone late = {});

  // Atomic commit (semantics.md §8): `body` is an encoded CommitRecord, appended as one
  // commit-flagged record through the same path as a publish (durable logs only; a ring log
  // refuses it). Subscribers and groups see its event bytes at the offset `done` gets; the
  // state view applies its ops in the same executor task as the fanout, before `done`.
  void Commit(std::shared_ptr<const std::vector<uint8_t>> body, uint64_t timestamp_micros,
              PublishDone done);
  // The state view at the committed tail. Loaded from the log (every retained commit record,
  // in offset order) on first use, then kept current by each commit; a read failure (a
  // corrupt record) is answered as the error and the load is retried next time.
  Result<StateLookup> StateGet(const std::string& key);

  // `on_ready` runs (on any thread) when the subscriber's queue turns non-empty.
  // `requested_capacity` 0 = the default; otherwise clamped to 1..max_queue_capacity.
  // `end_on_lag`: on a durable stream, end the subscription at its first overflow (lagged)
  // instead of slowing it down to replay.
  std::variant<Subscription, CursorError> Subscribe(StartPosition start,
                                                    uint32_t requested_capacity,
                                                    std::function<void()> on_ready,
                                                    bool end_on_lag = false);
  void Unsubscribe(uint64_t subscription_id);
  // Ends every subscription with `end` (after what is queued) and forgets them (the stream
  // was deleted).
  void EndAll(const QueueEnd& end);

  // Consumer groups (StreamGroups): `listener` runs on the executor after each commit's fanout,
  // and Read gives them committed records (never past committed_next()).
  void SetCommitListener(std::function<void()> listener) { commit_listener_ = std::move(listener); }
  RecordLog::ReadOutcome Read(Offset from, size_t max_records, size_t max_bytes);
  // offset_for_time (client-protocol.md §6.4): the lowest committed, retained offset whose
  // append time is at or after `at_micros`; nullopt when no readable record is that recent.
  // Append times follow offset order (each publish is stamped when the broker takes it, and
  // one shard's publishes are appended in the order they reach its executor), so this is a
  // binary search over single-record reads, O(log n) reads; two publishes racing from
  // different connections within one millisecond can be stamped out of order, which moves
  // the answer by at most those records. A read failure is answered as the error.
  Result<std::optional<Offset>> OffsetForTime(uint64_t at_micros);

  // Makes this a gated (`Quorum`) shard: before the shard is shared with any other thread
  // (BrokerCore's opener) or on the executor before the first Publish.
  void InstallCommitGate(CommitGateOptions options);
  // A gated shard opened over records no majority may hold yet (replication.md §17; with a
  // replica set of 5 or more a record the new leader inherited can be on two brokers only):
  // readers see nothing at or above `floor` (a commit offset this broker persisted) until the
  // quorum commit offset covers it. After InstallCommitGate, before the shard is shared with any
  // other thread (BrokerCore's opener) or on the executor before the first Subscribe.
  // Returns how many records are held.
  uint64_t HoldInheritedAbove(Offset floor);
  // The quorum commit offset of the stream log rose to `offset` (executor only; nothing
  // without a gate): uncovers the inherited records it covers (live subscribers go back to
  // replay for them) and releases the held batches it covers.
  void AdvanceCommit(Offset offset);
  bool gated() const { return gate_ != nullptr; }

  // Retention pass over the record log (executor only; blocks on the unlinks). Subscribers
  // and groups below the new start offset learn it on their next read (too_old / settled).
  Result<uint64_t> EnforceRetention() { return log_->EnforceRetention(); }

  // Closes the log (pending appends complete first). On the executor (then held batches are
  // answered outcome-unknown: CommitGate::Close), or once the executor has stopped (then their
  // answers are dropped, like the completions of pending appends).
  void CloseLog();

  const ShardId& id() const { return id_; }
  Offset committed_next() const { return committed_next_; }
  Offset start_offset() const { return log_->start_offset(); }
  bool durable() const { return log_->durable(); }
  size_t subscriber_count() const { return subscribers_.size(); }
  uint64_t live_drops() const { return live_drops_; }
  // Durable subscribers sent back to replay because their queue was full.
  uint64_t replay_fallbacks() const { return replay_fallbacks_; }

 private:
  struct Subscriber {
    std::shared_ptr<SubscriberQueue> queue;
    bool live = false;
    bool end_on_lag = false;
    Offset replay_next;
    uint64_t skipped = 0;   // offsets passed over since the last replay batch (retention)
    EventBatchRef pending;  // replay batch refused for lack of room, offered again first
  };

  void OnAppended(const PayloadBatch& batch, Result<Offset> result, const PublishDone& done);
  void ReplayStep(uint64_t subscription_id);

  ShardId id_;
  Executor& executor_;
  std::unique_ptr<RecordLog> log_;
  StreamShardOptions options_;
  Offset committed_next_;
  // Generation-start records at the end of the log (written by a promotion fence before the
  // shard opened); 0 once anything is appended here.
  uint64_t trailing_start_records_ = 0;
  // HoldInheritedAbove: the log's tail at open; records in [committed_next_, this) were
  // inherited and are not yet covered by the quorum commit offset.
  Offset inherited_end_;
#if FELIX_FAULT_INJECTION
  uint64_t seam_publishes_ = 0;  // counts publishes for drop_acked_every
#endif
  uint64_t next_subscription_id_ = 1;
  std::map<uint64_t, Subscriber> subscribers_;
  uint64_t live_drops_ = 0;
  uint64_t replay_fallbacks_ = 0;
  std::function<void()> commit_listener_;
  std::unique_ptr<CommitGate> gate_;  // Quorum shards led with replication only
  std::optional<ShardState> state_;   // loaded on first StateGet
};

}  // namespace felix::broker
