// ReplicationHost: replication wired into the cluster broker (issue 20). It follows this
// broker's ClusterView and, for every shard whose assignment names this broker:
//
//   - as a follower (in `replicas`, not `leader`, of a durable stream or cache): holds the
//     shard's ShardStore — at exactly the directory and log options BrokerCore would use
//     (broker/shard_store_layout.h) — and a ReplicaFollower on it, both owned by one of the
//     host's executors (the shard's strand; a small pool), opened and closed there, never on
//     a QUIC loop thread. The store is closed once the assignment no longer names this
//     broker a follower;
//   - as the leader with replication_factor > 1: opens the shard in BrokerCore at once (so
//     replication starts without waiting for a client), and runs a ShardReplicator at the
//     assignment's generation on the core's store, from when the core reports the store open
//     (BrokerCoreOptions::on_shard_store_opened → OnStoreOpened) until it closes
//     (on_shard_store_closing → OnStoreClosing) or the generation, the replica set or a
//     follower's address or incarnation changes (then it is restarted with fresh cursors: a
//     follower that restarted, perhaps with an empty disk, is never counted for what it
//     answered before). For a `Quorum` stream or cache shard the core gated (GateQuorumShard),
//     every rise of a log's mark advances that log's commit gate (broker/commit_gate.h).
//
// A planned move's fence (move_plan.h) names this broker leader of a shard the core has just
// closed (BrokerCore::StepDownDeposed): the host opens the shard's store itself — its logs are
// final, nobody appends to them — and drains it, a ShardReplicator at the generation the shard
// was led at shipping every log to the followers (which follow the fence generation's leader at
// the generation before, replica_role.h). Its reports carry the fence generation and name caught
// up the followers holding every log to its final tail, which the controller's cut-over waits
// for. The drain ends when the assignment moves on (cut over: this broker then follows the
// target; retaken: the core opens the shard again).
//
// Peer handlers (RegisterOn): kinds 7, 14, 16, 18, 20, 25, 26, 32, 36 (records), 10, 15, 17,
// 19, 21 (bootstrap) and 24 (rebuild). The handler finds the follower for the frame's shard,
// computes the FollowerRole from the view (replica_role.h), copies the frame (its views die
// with the handler), posts it to the shard's executor, applies it and replies on the
// endpoint's loop. A shard this broker holds no follower for is answered from the role:
// FencedEpoch (view newer), StaleRoute (view older), Unavailable (a follower here whose store
// is still opening), Unauthorized (not a replica here / unknown shard).
//
// Handover rule (store_custody.h): the core and the host never hold one store at once. The
// host claims a directory before opening it as a follower and releases it after closing; it
// does not open over the core's claim. Each reconcile first asks the core to step down from
// the shards the view gives to another broker or a newer generation
// (BrokerCore::StepDownDeposed, counted in felix_cluster_stepdowns_total): the core closes
// them and releases their stores, and the same reconcile opens them as followers when this
// broker is still in the replica set (its divergent unreplicated suffix, if any, is repaired
// there under replication.md §9.1 or halts). When the view names
// this broker leader of a shard it follows, the host closes the follower (waiting for the
// close) before it asks the core to open the shard, and the core refuses (retryably) to open
// a directory the follower still holds.
//
// Threading and lifetime: construct before the BrokerCore (whose hooks call into it) and
// before the internal listener (RegisterOn before listen_handlers()). Start() once the core,
// the custody and the transport exist; Stop() before the core stops and before the
// transport's pool is destroyed (it stops every replicator and closes every follower store;
// afterwards the hooks and handlers do nothing but answer Unavailable). Everything else is
// thread-safe. The view, the metrics registry, the core, the custody and the transport must
// outlive the host.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/broker_core.h"
#include "broker/executor.h"
#include "broker/store_custody.h"
#include "cluster/cluster_view.h"
#include "cluster/peer_server.h"
#include "cluster/replica_follower.h"
#include "cluster/report_writer.h"
#include "cluster/shard_replicator.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/net_address.h"
#include "common/result.h"

namespace felix::cluster {

struct ReplicationHostOptions {
  std::string own_node_id;
  // A node's internal (FLXI) address, nullopt while it is not registered.
  std::function<std::optional<HostPort>(std::string_view node_id)> internal_addr_of;
  size_t executors = 2;  // the follower/replicator strands
  // FELIX_REPLICATION_REBUILD_MAX_CONCURRENT (0: never rebuild).
  uint32_t rebuild_max_concurrent = 1;
  uint64_t rebuild_bytes_per_sec = 0;  // FELIX_REPLICATION_REBUILD_BYTES_PER_SEC (0: unpaced)
  // FenceQuorumShard: how long the opener waits for the promotion fence, and one attempt's
  // bound (a silent replica must not hold the shard).
  std::chrono::milliseconds fence_wait{3000};
  std::chrono::milliseconds fence_attempt_timeout{1000};
  // How often the host reconciles even without a view change (a catalog entry arriving after
  // its assignment, a store the core released, a follower's address appearing).
  std::chrono::milliseconds reconcile_interval{500};
  // FELIX_FOLLOWER_INLINE_APPLY_US: a follower's loop applies a small `Quorum` records frame
  // itself (blocking in the log's fdatasync instead of handing it to the shard's executor and
  // sleeping) while the executor is idle and the slot's last apply took at most this many µs;
  // 0: never (docs/performance.md change 33).
  uint32_t inline_apply_max_us = 1000;
  // FELIX_DURABLE_RETENTION_INTERVAL_SECONDS: how often a follower of a stream with a size or
  // age bound runs its retention pass (as the leader's core does), and a follower of a durable
  // cache its compaction pass (follower_compaction.h), held at the follower's commit offset
  // (replication.md §20).
  std::chrono::milliseconds retention_interval{60000};
};

class ReplicationHost {
 public:
  ReplicationHost(const ClusterView& view, ReplicationHostOptions options,
                  MetricsRegistry& metrics);
  ~ReplicationHost();
  ReplicationHost(const ReplicationHost&) = delete;
  ReplicationHost& operator=(const ReplicationHost&) = delete;

  // The peer handlers listed above.
  Result<void> RegisterOn(PeerServer& server);

  // BrokerCore hooks (any thread).
  void OnStoreOpened(const broker::ShardId& shard, storage::ShardStore& store);
  void OnStoreClosing(const broker::ShardId& shard);
  // BrokerCoreOptions::gate_quorum_shard (opener thread): a durable `Quorum` stream or cache
  // shard this broker leads with a replica set of more than one is gated (true), and its
  // replicator's marks go to `advance` (from the replicator's executor; advance posts to the
  // shard's). The decision is taken once, when the shard opens: a replica set that changes size
  // later does not add or remove the gate (docs/cluster.md).
  bool GateQuorumShard(const broker::ShardId& shard,
                       broker::BrokerCoreOptions::CommitAdvance advance);
  // BrokerCoreOptions::fence_quorum_shard (opener thread; blocks): the promotion fence of
  // replication.md §10 for a durable `Quorum` shard this broker leads with a replica set of
  // more than one, at the view's generation, before the shard takes its generation and serves:
  // a majority of the set (this broker counted) persists the generation and refuses older
  // leaders, and this store takes what the most advanced of them holds and it lacks
  // (promotion_fence.h). Not done within `fence_wait` → kUnavailable (the open fails; the next
  // open fences again). A shard not led here, or with a set of one, passes at once.
  Result<void> FenceQuorumShard(const broker::ShardId& shard, storage::ShardStore& store);
  // ClusterView's assignments listener (any thread; only schedules a reconcile).
  void OnAssignmentsChanged();

  void Start(broker::BrokerCore& core, broker::StoreCustody& custody, ReplicaTransport& transport);
  void Stop();

  // GET /replication: per shard led here, per follower and log: next, confirmed, lag,
  // in_sync, stalled, halted; per shard followed here, per log: base, tail, durable, halt.
  nlohmann::ordered_json Status() const;

  // The replica report of every shard led here with a replicator (report_writer.h): a
  // follower is caught up when it holds the leader's durable tail (`Leader` consistency) or
  // the mark (`Quorum`) on the shard's own log, and a cache's counter log up to its tail.
  // Waits on each replicator's executor; any thread but those executors.
  std::vector<LeaderReport> Reports() const;

  struct FollowerSlot;
  struct LeaderSlot;
  struct DrainSlot;

 private:
  void ScheduleReconcile();
  void Reconcile();  // control executor only
  void ReconcileFollowers(const std::map<ShardRef, Assignment>& assignments);
  void ReconcileLeaders(const std::map<ShardRef, Assignment>& assignments);
  void ReconcileDrains(const std::map<ShardRef, Assignment>& assignments);
  void CloseDrain(const std::shared_ptr<DrainSlot>& slot);
  // A replicator of `shard` at `generation` under this host's rebuild policy (followers unset).
  ShardReplicatorOptions ReplicatorOptions(const ShardRef& shard, uint64_t generation) const;
  void OpenFollower(const ShardRef& shard);
  void CloseFollower(const std::shared_ptr<FollowerSlot>& slot, bool wait);
  // Runs a bounded stream follower's retention, or a cache follower's compaction
  // (follower_compaction.h), `delay` from now on its executor and then every
  // retention_interval, for as long as the slot holds its store.
  void ScheduleFollowerTrim(const std::shared_ptr<FollowerSlot>& slot,
                            std::chrono::milliseconds delay);
  // One pass of a cache follower's compaction over its cache and counter logs; true when a log
  // has more to read than one pass's budget (the next pass follows at once).
  bool CompactFollower(FollowerSlot& slot);
  broker::Executor& ExecutorFor(const ShardRef& shard);
  void Serve(const PeerRequest& request, PeerReply reply);

  const ClusterView& view_;
  const ReplicationHostOptions options_;
  MetricsRegistry& metrics_;
  std::vector<std::unique_ptr<broker::Executor>> executors_;
  broker::Executor control_{"felix-repl-ctl"};
  std::shared_ptr<std::function<void()>> periodic_;  // the periodic reconcile (Start/Stop)

  // Set by Start (control executor and handlers read them once started_ is set).
  broker::BrokerCore* core_ = nullptr;
  broker::StoreCustody* custody_ = nullptr;
  ReplicaTransport* transport_ = nullptr;

  mutable Mutex mu_;  // the follower map and the lifecycle flags
  bool started_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  bool reconcile_queued_ GUARDED_BY(mu_) = false;
  std::map<ShardRef, std::shared_ptr<FollowerSlot>> followers_ GUARDED_BY(mu_);

  // The leader side: the core's stores and the replicators on them. Held across starting and
  // stopping a replicator, so a store the core is closing is never handed to a new one.
  mutable std::mutex leader_mu_;
  std::map<ShardRef, storage::ShardStore*> core_stores_;     // leader_mu_
  std::map<ShardRef, std::shared_ptr<LeaderSlot>> leaders_;  // leader_mu_
  std::map<ShardRef, broker::BrokerCoreOptions::CommitAdvance>
      gates_;                                              // leader_mu_: gated shards' advance
  std::map<ShardRef, std::shared_ptr<DrainSlot>> drains_;  // leader_mu_: fenced moves led here

  Gauge& followed_gauge_;
  Gauge& led_gauge_;
  Counter& follower_open_failures_;
  Counter& follower_compacted_segments_;  // sealed segments a cache follower's compaction deleted
  Counter& stepdowns_;
  Counter& fences_opened_;
  Counter& fences_failed_;
  Counter& promotion_truncated_;
  Counter& applied_on_loop_;      // records frames applied on the loop thread (Serve)
  Counter& applied_on_executor_;  // ... and on the shard's executor
  // felix_cluster_failover_seconds: the previous leader's lease lapse as this broker saw it
  // (its nodes/ key deleted) → this broker serving the shard (the store open, the fence done).
  Histogram& failover_seconds_;
  std::map<ShardRef, uint64_t> failover_observed_;  // leader_mu_: generation observed per shard
};

}  // namespace felix::cluster
