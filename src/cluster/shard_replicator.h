// ShardReplicator: the leader side of one shard's replication at one generation
// (replication.md §4, §8, §12, §13, §23, §24; seed "Replication").
//
// For each follower and each replicated log of the shard (stream shard: stream, cursors, dead
// letters; cache shard: counters first, then cache) it keeps a cursor — next_offset (where to
// ship), confirmed (what the follower answered holding at this generation), halt — and ships
// what the leader's log holds from next_offset in bounded batches, several in flight per
// follower (bounded by records and bytes), with the leader's generation:
//   ReplicateOk(d)       → next = min(d, batch_end), confirmed = next (never trust an answer
//                           past what was sent);
//   LogGap(expected)     → next = expected, confirmed = min(confirmed, expected);
//   LogConflict          → halt kDiverged (then a rebuild under the policy, §13);
//   FencedEpoch          → halt kFenced (this broker is no longer leader; on_fenced runs once);
//   Malformed            → resend the same records;
//   anything else, transport failure or timeout → retry after retry_delay (stalled).
// Reading below the leader's base (kTrimmed) offers a bootstrap (kinds 10/15/17/19/21); a
// refused bootstrap halts kNeedsBootstrap.
//
// The mark (replication.md §8.1/8.2, counting rule of §27: a follower counts only what it
// answered): per log, sort {leader durable tail} ∪ {min(confirmed, leader tail) of every
// non-halted follower} descending and take the majority-th (majority = replicas/2 + 1 with the
// leader counted). on_mark runs whenever a log's mark rises. A cursor's starting guess is
// never counted.
//
// Choices this implementation makes where the contract above leaves room (see also
// docs/cluster.md, "Leader side"):
//   - the commit offset (kinds 26/32/36) rides the shard's own log only (stream, or cache for a
//     cache shard) and is that log's mark as of its last refresh (at most once per
//     commit_carry_interval); cursor, dead-letter and counter batches carry none
//     (their own kinds 16/18/20, or 32 without commit for labelled counters);
//   - generation labels (kind 32/36): the leader's generation history entries overlapping the
//     batch for the shard's own log when the history covers it, else runs of the records' own
//     generations (auxiliary logs);
//   - a stalled cursor (after a failure) probes with one batch per retry_delay until an answer
//     succeeds; a Malformed answer is resent at once with the same records, a second Malformed
//     in a row waits retry_delay;
//   - an accepted bootstrap ships on from the follower's answered tail but counts nothing until
//     a records exchange confirms it;
//   - rebuild slots are counted per replicator (per leader shard), not across the broker; a
//     slot is taken when the Rebuild is sent and held until the follower is level;
//   - the gauges have no shard label, so each replicator adds its own share: lag_records is the
//     sum over shards of each shard's slowest non-halted follower log, halted and rebuilding
//     count follower logs;
//   - the producers log (storage::LogKind::kProducers) has no wire id and is not replicated.
//
// With ship_unflushed (Quorum shards) batches are read up to the written tail rather than the
// durable one; see ShardReplicatorOptions.
//
// Threading: every method and every callback runs holding `executor` (the host gives one):
// on its thread, or — for answers to records, which arrive on the transport's thread — on that
// thread when the executor is idle (Executor::RunOrPost), so on_mark may run there too.
// Start() after construction; Stop() before destruction, from any thread but the executor's
// (and not from inside a callback of this replicator): it cancels timers and waits until no
// callback of this replicator can run. The store, the transport and the executor must
// outlive the replicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/executor.h"
#include "cluster/peer_pool.h"
#include "common/metrics.h"
#include "common/strong_types.h"
#include "storage/shard_store.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// How the replicator reaches followers. PeerPool in the broker; scripted fakes in tests.
class ReplicaTransport {
 public:
  virtual ~ReplicaTransport() = default;
  // As PeerPool::Request: exactly one outcome via `done` (any thread), or an error now.
  virtual Result<void> Send(const PeerAddress& peer, const wire::flxi::Frame& request,
                            PeerCallback done) = 0;
};

// PeerPool as a ReplicaTransport.
class PeerPoolTransport final : public ReplicaTransport {
 public:
  explicit PeerPoolTransport(PeerPool& pool) : pool_(pool) {}
  Result<void> Send(const PeerAddress& peer, const wire::flxi::Frame& request,
                    PeerCallback done) override {
    return pool_.Request(peer, request, std::move(done));
  }

 private:
  PeerPool& pool_;
};

enum class ReplicaHalt { kNone, kDiverged, kFenced, kNeedsBootstrap };
const char* ReplicaHaltName(ReplicaHalt halt);  // "", "diverged", "fenced", "needs_bootstrap"

struct ShardReplicatorOptions {
  // The shard, as FLXI names it (ShardRef.stream is the cache name for a cache shard).
  std::string tenant, ns, name;
  uint32_t shard = 0;
  bool cache_shard = false;
  Generation generation;               // the leader's generation; every frame carries it
  std::vector<PeerAddress> followers;  // the replica set without this broker
  size_t max_batch_records = 1024;
  size_t max_batch_bytes = 1 << 20;
  size_t max_in_flight = 4;  // batches in flight per follower and log
  std::chrono::milliseconds retry_delay{100};
  // Ship what the leader's logs have written before their own fdatasync covers it
  // (DurableLog::ReadWritten), so the leader's flush and the followers' overlap. The mark still
  // counts the leader only up to its durable tail, so nothing is acknowledged before the
  // leader holds it durably. The host sets it for `Quorum` shards, whose leader reopens only
  // through the promotion fence (which takes back from a majority what its own disk lost);
  // `Leader` shards ship durable records only, since there a restart keeps serving its own log.
  bool ship_unflushed = false;
  // The shard's acknowledgements wait for the mark (`Quorum`; the host sets it beside
  // ship_unflushed). Only then does a base above the mark hold a bootstrap back (§12): a `Leader`
  // shard's commit offset is its own durable tail, so a retention (or, before the replicator
  // started, a compaction) that passed every follower is offered to them at once (bootstrap, or
  // a halt and a rebuild) — waiting for a mark only their answers could raise stalled them for
  // good. Retention and compaction are held at the mark (each log's commit offset) on `Quorum`
  // shards and on caches of either consistency.
  bool acks_wait_for_mark = false;
  // The commit offset the shard's own log (and a cache's counter log) carries (kinds 26/32/36)
  // is the mark, refreshed at most this often (0: every batch carries the current mark). Every rise
  // makes each follower flush its `replica` file before answering, on the disk its log flushes to;
  // the value only guards the follower's truncation and retention (a lower one guards less, never
  // wrongly).
  std::chrono::milliseconds commit_carry_interval{0};
  // Rebuild policy (FELIX_REPLICATION_REBUILD_MAX_CONCURRENT; 0 = never rebuild). In this
  // slice the slots are counted per replicator (per leader shard), not across the broker.
  uint32_t rebuild_max_concurrent = 1;
  // FELIX_REPLICATION_REBUILD_BYTES_PER_SEC (0 = unpaced): batches shipped to a rebuilding
  // follower draw on one token bucket per replicator holding at most a second's worth (at least
  // one batch); a batch the bucket cannot pay for waits until it can.
  uint64_t rebuild_bytes_per_sec = 0;
  // Refusal backoff of a rebuild (§13): first delay, doubling per refusal, capped. Fields added
  // after the interface was fixed (defaults are the spec's); tests shorten them.
  std::chrono::milliseconds rebuild_backoff{5000};
  std::chrono::milliseconds rebuild_backoff_max{300000};
};

struct ReplicaCursorStatus {
  std::string node_id;
  storage::LogKind log = storage::LogKind::kStream;
  Offset next_offset;
  Offset confirmed;          // durable offset the follower answered at this generation
  uint64_t lag_records = 0;  // leader tail − confirmed
  bool in_sync = false;      // confirmed == leader tail
  bool stalled = false;      // last exchange failed; retrying
  bool rebuilding = false;
  ReplicaHalt halt = ReplicaHalt::kNone;
  std::string halt_detail;
};

class ShardReplicator {
 public:
  using MarkListener = std::function<void(storage::LogKind log, Offset mark)>;
  using FencedListener = std::function<void()>;

  // `metrics` optional (must outlive): felix_broker_replication_shipped_total{outcome},
  // felix_broker_replication_lag_records, felix_broker_replication_halted,
  // felix_broker_replication_rebuilds_total{outcome}, felix_broker_replicate_seconds
  // (round-trip histogram), felix_broker_replication_bytes_shipped_total.
  ShardReplicator(storage::ShardStore& store, ShardReplicatorOptions options,
                  ReplicaTransport& transport, broker::Executor& executor, MetricsRegistry* metrics,
                  MarkListener on_mark = {}, FencedListener on_fenced = {});
  ~ShardReplicator();
  ShardReplicator(const ShardReplicator&) = delete;
  ShardReplicator& operator=(const ShardReplicator&) = delete;

  void Start();  // registers tail notifications on the logs and runs the first pass
  // `lift_hold`: the shard stays open here without replication (its replica set shrank to
  // this broker), so its logs' retention hold is lifted (and saved) before the stop returns.
  void Stop(bool lift_hold = false);

  // Something was appended (also noticed by itself through DurableLog::NotifyWhen); any thread.
  void Wake();

  // Executor only.
  Offset mark(storage::LogKind log) const;
  std::vector<ReplicaCursorStatus> status() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace felix::cluster
