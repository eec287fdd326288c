#include "cluster/replication_host.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <set>

#include <spdlog/spdlog.h>

#include "broker/shard_storage.h"
#include "cluster/fence_answer.h"
#include "cluster/follower_compaction.h"
#include "cluster/promotion_fence.h"
#include "cluster/replica_role.h"

namespace felix::cluster {

namespace flxi = wire::flxi;

struct ReplicationHost::FollowerSlot {
  ShardRef shard;
  broker::Executor* executor = nullptr;
  std::string dir;
  // Executor only.
  std::unique_ptr<storage::ShardStore> store;
  std::unique_ptr<ReplicaFollower> follower;
  // A durable cache's follower: its compaction of the cache and the counter log.
  std::unique_ptr<FollowerCompaction> cache_compaction;
  std::unique_ptr<FollowerCompaction> counter_compaction;
  bool bounded_retention = false;  // a stream follower runs retention passes
  // The shard's catalog consistency is `Quorum`: its batches' answers gate acknowledgements.
  bool quorum = false;
  // How long the last records frame took to apply, µs (written by the executor, read by the
  // loop): whether the loop's polling for the next answer would be short (Serve).
  std::atomic<uint32_t> last_apply_us{0};
};

struct ReplicationHost::LeaderSlot {
  ShardRef shard;
  broker::Executor* executor = nullptr;
  uint64_t generation = 0;
  // Node id, and the address dialled with the node's incarnation: a change restarts it.
  std::vector<std::pair<std::string, std::string>> followers;
  storage::ShardStore* store = nullptr;
  std::unique_ptr<ShardReplicator> replicator;
};

// A fenced move's drain (see the header): the store this host opened after the core closed
// the shard, and the replicator shipping it.
struct ReplicationHost::DrainSlot {
  ShardRef shard;
  broker::Executor* executor = nullptr;
  std::string dir;
  uint64_t fence_generation = 0;  // the assignment's: reports are written at it
  uint64_t generation = 0;        // the store's: the shard was led (and is shipped) at it
  std::vector<std::string> followers;
  std::unique_ptr<storage::ShardStore> store;  // opened and closed on the executor
  std::unique_ptr<ShardReplicator> replicator;
};

namespace {

// How often the commit offset shipped to followers may rise (ShardReplicatorOptions::
// commit_carry_interval): a follower writes its `replica` file through once per rise instead
// of once per batch (docs/performance.md, change 11).
constexpr std::chrono::milliseconds kCommitCarryInterval{25};

// The largest replication frame whose apply the follower's loop polls for (see Serve): a
// few records; 64 records of 256 B are ~17 KB and were slower polled (change 31).
constexpr size_t kPollApplyMaxBytes = size_t{8} * 1024;
// ... and only while the last apply took at most this long: where the follower's fdatasync is
// slow (a shared virtual disk: 200 µs and more) the loop would spin through it and take the CPU
// the leader and the client need (change 31).
constexpr uint32_t kPollApplyMaxMicros = 100;
// The largest `Quorum` records frame the follower's loop applies itself when the shard's
// executor is idle (see Serve): 64 records of 256 B fit, a bulk batch is handed over.
constexpr size_t kInlineApplyMaxBytes = size_t{64} * 1024;

// Whether the catalog names `shard`'s stream or cache `Quorum` (false when it is unknown here).
bool IsQuorum(const broker::BrokerCore* core, const ShardRef& shard) {
  if (core == nullptr) return false;
  if (shard.kind == ShardKind::kStream) {
    auto stream = core->FindStream(shard.tenant, shard.ns, shard.name);
    return stream && stream->consistency == catalog::Consistency::kQuorum;
  }
  auto cache = core->FindCache(shard.tenant, shard.ns, shard.name);
  return cache && cache->consistency == catalog::Consistency::kQuorum;
}

bool Fenced(const Assignment& a) {
  return a.state == AssignmentState::kMoving && a.move && a.move->step == MoveStep::kFence;
}

ShardRef RefOf(const broker::ShardId& id) {
  return ShardRef{id.kind == broker::ShardKind::kCache ? ShardKind::kCache : ShardKind::kStream,
                  id.tenant, id.name_space, id.name, id.shard};
}

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The logs of a shard, in the order /replication lists them.
std::vector<storage::LogKind> LogsOf(const ShardRef& shard) {
  if (shard.kind == ShardKind::kCache) {
    return {storage::LogKind::kCache, storage::LogKind::kCounters};
  }
  return {storage::LogKind::kStream, storage::LogKind::kCursors, storage::LogKind::kDeadLetters};
}

nlohmann::ordered_json ShardJson(const ShardRef& shard) {
  return nlohmann::ordered_json{{"kind", ShardKindName(shard.kind)},
                                {"tenant", shard.tenant},
                                {"namespace", shard.ns},
                                {"name", shard.name},
                                {"shard", shard.shard}};
}

// Runs `fn` on `executor` and waits for it; false when the executor is stopping.
template <typename Fn>
bool RunOn(broker::Executor& executor, Fn fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  if (!executor.Post([fn = std::move(fn), done]() mutable {
        fn();
        done->set_value();
      })) {
    return false;
  }
  finished.wait();
  return true;
}

flxi::ErrorCode RefusalCode(FollowerRole role) {
  switch (role) {
    case FollowerRole::kViewNewer:
      return flxi::ErrorCode::kFencedEpoch;
    case FollowerRole::kViewOlder:
      return flxi::ErrorCode::kStaleRoute;
    case FollowerRole::kFollower:
      return flxi::ErrorCode::kUnavailable;
    case FollowerRole::kNotReplica:
      break;
  }
  return flxi::ErrorCode::kUnauthorized;
}

constexpr flxi::Kind kServedKinds[] = {
    flxi::Kind::kReplicateRecords,
    flxi::Kind::kReplicateCacheRecords,
    flxi::Kind::kReplicateGroupRecords,
    flxi::Kind::kReplicateDeadLetterRecords,
    flxi::Kind::kReplicateCounterRecords,
    flxi::Kind::kReplicateMarkedRecords,
    flxi::Kind::kReplicateCommittedRecords,
    flxi::Kind::kReplicateLabelledRecords,
    flxi::Kind::kReplicateTimedRecords,
    flxi::Kind::kReplicateBootstrap,
    flxi::Kind::kReplicateCacheBootstrap,
    flxi::Kind::kReplicateGroupBootstrap,
    flxi::Kind::kReplicateDeadLetterBootstrap,
    flxi::Kind::kReplicateCounterBootstrap,
    flxi::Kind::kReplicateRebuild,
    // The replica side of the promotion fence (fence_answer.h).
    flxi::Kind::kFence,
    flxi::Kind::kReplicateFetch,
    flxi::Kind::kReplicateLabelledFetch,
    flxi::Kind::kReplicateTimedFetch,
};

}  // namespace

ReplicationHost::ReplicationHost(const ClusterView& view, ReplicationHostOptions options,
                                 MetricsRegistry& metrics)
    : view_(view),
      options_(std::move(options)),
      metrics_(metrics),
      followed_gauge_(metrics.AddGauge("felix_broker_replication_followed_shards",
                                       "shards this broker holds as a replication follower")),
      led_gauge_(metrics.AddGauge("felix_broker_replication_led_shards",
                                  "shards this broker leads with a running replicator")),
      follower_open_failures_(metrics.AddCounter(
          "felix_broker_replication_follower_open_failures_total",
          "follower stores that could not be opened (retried at the next reconcile)")),
      follower_compacted_segments_(metrics.AddCounter(
          "felix_replication_follower_compacted_segments_total",
          "sealed segments a cache follower deleted because every record in them was superseded")),
      stepdowns_(metrics.AddCounter(
          "felix_cluster_stepdowns_total",
          "shards this broker stopped serving because the view named another leader or a newer "
          "generation (a deposed leader stepping down)")),
      fences_opened_(metrics.AddCounter("felix_broker_promotion_fences_total",
                                        "promotion fences of Quorum shards led here",
                                        "outcome=\"opened\"")),
      fences_failed_(metrics.AddCounter("felix_broker_promotion_fences_total",
                                        "promotion fences of Quorum shards led here",
                                        "outcome=\"failed\"")),
      promotion_truncated_(metrics.AddCounter(
          "felix_broker_promotion_truncated_total",
          "own records a promotion fence dropped (a divergent suffix no majority held)")),
      applied_on_loop_(metrics.AddCounter(
          "felix_broker_replication_follower_applies_total",
          "records frames this broker applied as a follower, by thread: `loop` (a small Quorum "
          "batch the loop applied itself while the shard's executor was idle) or `executor`",
          "thread=\"loop\"")),
      applied_on_executor_(metrics.AddCounter(
          "felix_broker_replication_follower_applies_total",
          "records frames this broker applied as a follower, by thread: `loop` (a small Quorum "
          "batch the loop applied itself while the shard's executor was idle) or `executor`",
          "thread=\"executor\"")),
      failover_seconds_(metrics.AddHistogram(
          "felix_cluster_failover_seconds",
          "failovers to this broker: from seeing the dead leader's node key go (its lease "
          "lapsed) to serving the shard here (store open, promotion fence done)",
          {0.25, 0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 20, 30})) {
  size_t n = std::max<size_t>(1, options_.executors);
  for (size_t i = 0; i < n; ++i) {
    executors_.push_back(std::make_unique<broker::Executor>("felix-repl-" + std::to_string(i)));
  }
}

ReplicationHost::~ReplicationHost() {
  Stop();
}

Result<void> ReplicationHost::RegisterOn(PeerServer& server) {
  for (flxi::Kind kind : kServedKinds) {
    auto r = server.Handle(kind, [this](const PeerRequest& request, PeerReply reply) {
      Serve(request, std::move(reply));
    });
    if (!r) return r;
  }
  return {};
}

broker::Executor& ReplicationHost::ExecutorFor(const ShardRef& shard) {
  return *executors_[std::hash<std::string>{}(shard.Path()) % executors_.size()];
}

void ReplicationHost::Start(broker::BrokerCore& core, broker::StoreCustody& custody,
                            ReplicaTransport& transport) {
  {
    MutexLock lock(mu_);
    if (started_ || stopped_) return;
    core_ = &core;
    custody_ = &custody;
    transport_ = &transport;
    started_ = true;
  }
  ScheduleReconcile();
  // The periodic pass: catalog entries that arrive after their assignment, stores released by
  // the core, addresses that appear.
  auto tick_ptr = std::make_shared<std::function<void()>>();
  *tick_ptr = [this, weak = std::weak_ptr<std::function<void()>>(tick_ptr)] {
    ScheduleReconcile();
    if (auto again = weak.lock()) control_.PostAfter(options_.reconcile_interval, *again);
  };
  periodic_ = tick_ptr;
  control_.PostAfter(options_.reconcile_interval, *tick_ptr);
}

void ReplicationHost::Stop() {
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  control_.Stop();  // no reconcile runs after this
  periodic_.reset();
  std::map<ShardRef, std::shared_ptr<DrainSlot>> drains;
  {
    std::lock_guard lock(leader_mu_);
    drains.swap(drains_);
  }
  for (auto& [shard, slot] : drains) CloseDrain(slot);
  std::map<ShardRef, std::shared_ptr<LeaderSlot>> leaders;
  {
    std::lock_guard lock(leader_mu_);
    leaders.swap(leaders_);
    for (auto& [shard, slot] : leaders) {
      if (slot->replicator) slot->replicator->Stop();
      slot->replicator.reset();
    }
    core_stores_.clear();
  }
  led_gauge_.Set(0);
  std::map<ShardRef, std::shared_ptr<FollowerSlot>> followers;
  {
    MutexLock lock(mu_);
    followers.swap(followers_);
  }
  for (auto& [shard, slot] : followers) CloseFollower(slot, /*wait=*/true);
  followed_gauge_.Set(0);
  for (auto& e : executors_) e->Stop();
}

void ReplicationHost::OnAssignmentsChanged() {
  ScheduleReconcile();
}

void ReplicationHost::ScheduleReconcile() {
  {
    MutexLock lock(mu_);
    if (!started_ || stopped_ || reconcile_queued_) return;
    reconcile_queued_ = true;
  }
  control_.Post([this] {
    {
      MutexLock lock(mu_);
      reconcile_queued_ = false;
      if (stopped_) return;
    }
    Reconcile();
  });
}

void ReplicationHost::Reconcile() {
  // A shard the view hands to another broker (or to a newer generation) stops being served
  // here first: the core closes it and releases its store, so the follower below may open it
  // (issue 16: a deposed leader steps down and is repaired as a follower, §9.1).
  if (size_t stepped = core_->StepDownDeposed(); stepped > 0) stepdowns_.Increment(stepped);
  auto assignments = view_.Assignments();
  // Drains next: one that ended releases its store before this broker follows the shard.
  ReconcileDrains(assignments);
  // Followers first: a shard this broker now leads is closed as a follower before the core is
  // asked to open it (the handover rule).
  ReconcileFollowers(assignments);
  ReconcileLeaders(assignments);
}

void ReplicationHost::ReconcileFollowers(const std::map<ShardRef, Assignment>& assignments) {
  std::set<ShardRef> wanted;
  for (const auto& [shard, a] : assignments) {
    if (a.state == AssignmentState::kUnavailable) continue;
    if (a.leader != options_.own_node_id && Contains(a.replicas, options_.own_node_id)) {
      wanted.insert(shard);
    }
  }
  std::vector<std::shared_ptr<FollowerSlot>> closing;
  std::vector<ShardRef> opening;
  {
    MutexLock lock(mu_);
    for (auto it = followers_.begin(); it != followers_.end();) {
      if (wanted.count(it->first) == 0) {
        closing.push_back(it->second);
        it = followers_.erase(it);
      } else {
        ++it;
      }
    }
    for (const auto& shard : wanted) {
      if (followers_.count(shard) == 0) opening.push_back(shard);
    }
  }
  for (auto& slot : closing) {
    spdlog::info("replication: no longer a follower of {}: closing its store", slot->shard.Path());
    CloseFollower(slot, /*wait=*/true);
  }
  for (const auto& shard : opening) OpenFollower(shard);
  MutexLock lock(mu_);
  followed_gauge_.Set(static_cast<int64_t>(followers_.size()));
}

namespace {

// Where the broker core keeps `shard`'s store (the same directory and log options the core
// would open), or nullopt when the catalog has no such durable stream or cache shard.
std::optional<broker::ShardStoreLayout> LayoutOf(const broker::BrokerCore& core,
                                                 const ShardRef& shard) {
  if (shard.kind == ShardKind::kStream) {
    auto stream = core.FindStream(shard.tenant, shard.ns, shard.name);
    if (!stream || !stream->durable || shard.shard >= stream->shards) return std::nullopt;
    return core.StreamLayout(*stream, shard.shard);
  }
  auto cache = core.FindCache(shard.tenant, shard.ns, shard.name);
  if (!cache || !cache->durable || shard.shard >= cache->shards) return std::nullopt;
  return core.CacheLayout(*cache, shard.shard);
}

}  // namespace

void ReplicationHost::OpenFollower(const ShardRef& shard) {
  std::optional<broker::ShardStoreLayout> layout = LayoutOf(*core_, shard);
  if (!layout) return;
  if (!custody_->Claim(layout->dir, broker::StoreHolder::kFollower)) {
    // The core still holds it (this broker led the shard before): promotion's handover.
    spdlog::debug("replication: {} is held by the broker core; not opened as a follower",
                  shard.Path());
    return;
  }
  auto slot = std::make_shared<FollowerSlot>();
  slot->shard = shard;
  slot->executor = &ExecutorFor(shard);
  slot->dir = layout->dir;
  slot->quorum = IsQuorum(core_, shard);
  {
    MutexLock lock(mu_);
    followers_[shard] = slot;
  }
  bool posted = slot->executor->Post([this, slot, layout = *layout] {
    auto store = storage::ShardStore::Open(layout.dir, layout.store_options());
    if (!store) {
      follower_open_failures_.Increment();
      spdlog::error("replication: cannot open the follower store of {} dir={} error={}",
                    slot->shard.Path(), layout.dir, store.error().ToString());
      custody_->Release(layout.dir, broker::StoreHolder::kFollower);
      MutexLock lock(mu_);
      auto it = followers_.find(slot->shard);
      if (it != followers_.end() && it->second == slot) followers_.erase(it);
      return;
    }
    slot->store = std::move(*store);
    slot->follower = std::make_unique<ReplicaFollower>(
        *slot->store, slot->shard.kind == ShardKind::kCache, &metrics_);
    // A follower never deletes at or above its commit offset (the carried mark; §20), and the
    // hold is saved so a restart keeps it before anything else runs.
    if (auto held = slot->store->SetRetentionHold(true); !held) {
      spdlog::error(
          "replication: the retention hold of the follower store of {} could not be "
          "saved: {}",
          slot->shard.Path(), held.error().ToString());
    }
    // A follower of a bounded stream trims as its leader does: what it deletes a majority holds,
    // and the leader ships to it from its tail, so nothing it dropped is asked for again. A
    // cache's follower drops what its leader's compaction superseded (follower_compaction.h).
    if (slot->shard.kind == ShardKind::kStream && layout.bounded_retention()) {
      slot->bounded_retention = true;
      ScheduleFollowerTrim(slot, options_.retention_interval);
    } else if (slot->shard.kind == ShardKind::kCache) {
      slot->cache_compaction = std::make_unique<FollowerCompaction>(CompactedLog::kCache);
      slot->counter_compaction = std::make_unique<FollowerCompaction>(CompactedLog::kCounters);
      ScheduleFollowerTrim(slot, options_.retention_interval);
    }
    spdlog::info("replication: following {} dir={} stream_tail={} generation={}",
                 slot->shard.Path(), layout.dir,
                 slot->store
                     ->log(slot->shard.kind == ShardKind::kCache ? storage::LogKind::kCache
                                                                 : storage::LogKind::kStream)
                     .TailOffset(),
                 slot->store->replica_state().generation);
  });
  if (!posted) custody_->Release(layout->dir, broker::StoreHolder::kFollower);
}

void ReplicationHost::ScheduleFollowerTrim(const std::shared_ptr<FollowerSlot>& slot,
                                           std::chrono::milliseconds delay) {
  std::weak_ptr<FollowerSlot> weak = slot;
  slot->executor->PostAfter(delay, [this, weak] {
    auto live = weak.lock();
    if (!live || !live->store) return;  // closed: the store went with the slot
    bool more = false;
    if (live->bounded_retention) {
      auto pass = live->store->log(storage::LogKind::kStream).EnforceRetention();
      if (!pass) {
        spdlog::error("replication: retention of the follower store of {} failed: {}",
                      live->shard.Path(), pass.error().ToString());
      } else if (pass->segments_deleted > 0) {
        spdlog::info("replication: follower retention {} segments_deleted={} base={}",
                     live->shard.Path(), pass->segments_deleted, pass->base_offset);
      }
    } else {
      more = CompactFollower(*live);
    }
    ScheduleFollowerTrim(live, more ? std::chrono::milliseconds(0) : options_.retention_interval);
  });
}

bool ReplicationHost::CompactFollower(FollowerSlot& slot) {
  const uint64_t now_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  bool more = false;
  auto run = [&](FollowerCompaction& compaction, storage::LogKind kind, Offset floor) {
    storage::DurableLog& log = slot.store->log(kind);
    auto pass = compaction.Run(log, floor, now_ms);
    if (!pass) {
      spdlog::error("replication: compaction of the follower store of {} log={} failed: {}",
                    slot.shard.Path(), storage::LogKindName(kind), pass.error().ToString());
      return;
    }
    more |= pass->more;
    if (pass->segments_deleted > 0) {
      follower_compacted_segments_.Increment(pass->segments_deleted);
      spdlog::info(
          "replication: follower compaction {} log={} segments_deleted={} bytes={} base={} "
          "superseded_through={}",
          slot.shard.Path(), storage::LogKindName(kind), pass->segments_deleted,
          pass->bytes_reclaimed, pass->base, pass->superseded_through);
    }
  };
  // Floors: the cache log's commit offset (persisted, or newer in the log), the counter log's
  // carried one (in memory; 0 after a restart until the leader carries it again).
  const storage::DurableLog& cache = slot.store->log(storage::LogKind::kCache);
  run(*slot.cache_compaction, storage::LogKind::kCache,
      std::max(slot.store->replica_state().commit_offset, cache.CommitOffset()));
  run(*slot.counter_compaction, storage::LogKind::kCounters,
      slot.store->log(storage::LogKind::kCounters).CommitOffset());
  return more;
}

void ReplicationHost::CloseFollower(const std::shared_ptr<FollowerSlot>& slot, bool wait) {
  auto close = [this, slot] {
    slot->follower.reset();
    if (slot->store) {
      if (auto closed = slot->store->Close(); !closed) {
        spdlog::error("replication: closing the follower store of {} failed: {}",
                      slot->shard.Path(), closed.error().ToString());
      }
      slot->store.reset();
    }
    custody_->Release(slot->dir, broker::StoreHolder::kFollower);
  };
  if (wait) {
    if (!RunOn(*slot->executor, close)) close();
  } else if (!slot->executor->Post(close)) {
    close();
  }
}

ShardReplicatorOptions ReplicationHost::ReplicatorOptions(const ShardRef& shard,
                                                          uint64_t generation) const {
  ShardReplicatorOptions ro;
  ro.tenant = shard.tenant;
  ro.ns = shard.ns;
  ro.name = shard.name;
  ro.shard = shard.shard;
  ro.cache_shard = shard.kind == ShardKind::kCache;
  ro.generation = Generation(generation);
  ro.rebuild_max_concurrent = options_.rebuild_max_concurrent;
  ro.rebuild_bytes_per_sec = options_.rebuild_bytes_per_sec;
  ro.commit_carry_interval = kCommitCarryInterval;
  return ro;
}

void ReplicationHost::ReconcileLeaders(const std::map<ShardRef, Assignment>& assignments) {
  std::lock_guard lock(leader_mu_);
  // Replicators whose shard is no longer led here at their generation stop.
  for (auto it = leaders_.begin(); it != leaders_.end();) {
    auto a = assignments.find(it->first);
    const bool led = a != assignments.end() && a->second.leader == options_.own_node_id &&
                     a->second.generation == it->second->generation &&
                     core_stores_.count(it->first) > 0;
    const bool keep = led && a->second.replicas.size() > 1;
    if (!keep) {
      spdlog::info("replication: stopping the replicator of {} generation={}", it->first.Path(),
                   it->second->generation);
      // Still led here, alone now: nothing will raise the mark its logs are held at.
      it->second->replicator->Stop(/*lift_hold=*/led);
      it = leaders_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [shard, a] : assignments) {
    if (a.leader != options_.own_node_id || a.replicas.size() < 2) continue;
    // A fenced move is drained (ReconcileDrains), not opened; a staged one serves as usual.
    if (a.state == AssignmentState::kUnavailable || Fenced(a)) continue;
    auto store = core_stores_.find(shard);
    if (store == core_stores_.end()) {
      // Open it in the core now: replication starts without waiting for a client. The core
      // reports the store through OnStoreOpened (which schedules the next pass).
      if (shard.kind == ShardKind::kStream) {
        auto stream = core_->FindStream(shard.tenant, shard.ns, shard.name);
        if (stream && stream->durable) (void)core_->OpenStreamShard(*stream, shard.shard);
      } else {
        auto cache = core_->FindCache(shard.tenant, shard.ns, shard.name);
        if (cache && cache->durable) (void)core_->OpenCacheShard(*cache, shard.shard);
      }
      continue;
    }
    std::vector<PeerAddress> followers;
    std::vector<std::pair<std::string, std::string>> dialled;
    for (const auto& node : a.replicas) {
      if (node == options_.own_node_id) continue;
      auto addr = options_.internal_addr_of(node);
      // A follower not registered now is still part of the set (it counts for the majority);
      // it is dialled at an address that fails until it registers, then the replicator is
      // restarted with the real one.
      HostPort where = addr ? *addr : HostPort{"127.0.0.1", 0};
      followers.push_back(PeerAddress{node, where});
      // The incarnation too: a follower that came back (perhaps with an empty disk) gets fresh
      // cursors, so nothing it answered before it went away is still counted.
      auto record = view_.FindNode(node);
      dialled.emplace_back(node, (addr ? addr->ToString() : std::string()) + "#" +
                                     std::to_string(record ? record->incarnation : 0));
    }
    auto existing = leaders_.find(shard);
    if (existing != leaders_.end()) {
      if (existing->second->followers == dialled) continue;
      existing->second->replicator->Stop();
      leaders_.erase(existing);
    }
    auto slot = std::make_shared<LeaderSlot>();
    slot->shard = shard;
    slot->executor = &ExecutorFor(shard);
    slot->generation = a.generation;
    slot->followers = dialled;
    slot->store = store->second;
    ShardReplicatorOptions ro = ReplicatorOptions(shard, a.generation);
    ro.followers = std::move(followers);
    ShardReplicator::MarkListener on_mark;
    if (auto gate = gates_.find(shard); gate != gates_.end()) {
      // Quorum: a log's mark is the commit offset its writers and readers wait for, and the
      // followers' flushes may run beside the leader's own.
      on_mark = gate->second;
      ro.ship_unflushed = true;
      ro.acks_wait_for_mark = true;
    }
    slot->replicator = std::make_unique<ShardReplicator>(
        *slot->store, std::move(ro), *transport_, *slot->executor, &metrics_, std::move(on_mark),
        [this, path = shard.Path(), g = a.generation] {
          spdlog::warn(
              "replication: a follower fenced this broker's replication of {} at "
              "generation {}: no longer its leader",
              path, g);
          ScheduleReconcile();
        });
    slot->replicator->Start();
    spdlog::info("replication: replicating {} generation={} followers={}", shard.Path(),
                 a.generation, a.replicas.size() - 1);
    leaders_[shard] = std::move(slot);
  }
  led_gauge_.Set(static_cast<int64_t>(leaders_.size()));
}

void ReplicationHost::ReconcileDrains(const std::map<ShardRef, Assignment>& assignments) {
  std::vector<std::shared_ptr<DrainSlot>> closing;
  std::vector<std::pair<ShardRef, Assignment>> opening;
  {
    std::lock_guard lock(leader_mu_);
    for (auto it = drains_.begin(); it != drains_.end();) {
      auto a = assignments.find(it->first);
      bool keep = a != assignments.end() && Fenced(a->second) &&
                  a->second.leader == options_.own_node_id &&
                  a->second.generation == it->second->fence_generation;
      if (keep) {
        ++it;
        continue;
      }
      closing.push_back(it->second);
      it = drains_.erase(it);
    }
    for (const auto& [shard, a] : assignments) {
      if (!Fenced(a) || a.leader != options_.own_node_id || a.replicas.size() < 2) continue;
      // The core still holds it (its step-down comes first; the next reconcile retries).
      if (drains_.count(shard) > 0 || core_stores_.count(shard) > 0) continue;
      opening.emplace_back(shard, a);
    }
  }
  for (auto& slot : closing) CloseDrain(slot);
  for (auto& [shard, a] : opening) {
    std::optional<broker::ShardStoreLayout> layout = LayoutOf(*core_, shard);
    if (!layout || !custody_->Claim(layout->dir, broker::StoreHolder::kFollower)) continue;
    auto slot = std::make_shared<DrainSlot>();
    slot->shard = shard;
    slot->executor = &ExecutorFor(shard);
    slot->dir = layout->dir;
    slot->fence_generation = a.generation;
    std::string error;
    RunOn(*slot->executor, [&] {
      auto store = storage::ShardStore::Open(layout->dir, layout->store_options());
      if (!store) {
        error = store.error().ToString();
        return;
      }
      slot->store = std::move(*store);
      slot->generation = slot->store->replica_state().generation.value();
    });
    if (!slot->store) {
      spdlog::error("replication: cannot open {} to drain it for its move: {}", shard.Path(),
                    error);
      custody_->Release(layout->dir, broker::StoreHolder::kFollower);
      continue;
    }
    ShardReplicatorOptions ro = ReplicatorOptions(shard, slot->generation);
    for (const auto& node : a.replicas) {
      if (node == options_.own_node_id) continue;
      slot->followers.push_back(node);
      ro.followers.push_back(
          PeerAddress{node, options_.internal_addr_of(node).value_or(HostPort{"127.0.0.1", 0})});
    }
    slot->replicator = std::make_unique<ShardReplicator>(*slot->store, std::move(ro), *transport_,
                                                         *slot->executor, &metrics_);
    slot->replicator->Start();
    spdlog::info("replication: draining {} for its move to {}: generation={} fence={}",
                 shard.Path(), a.move->target, slot->generation, a.generation);
    std::lock_guard lock(leader_mu_);
    drains_[shard] = std::move(slot);
  }
}

void ReplicationHost::CloseDrain(const std::shared_ptr<DrainSlot>& slot) {
  spdlog::info("replication: drain of {} (fence generation {}) ended", slot->shard.Path(),
               slot->fence_generation);
  slot->replicator->Stop();
  auto close = [slot] {
    slot->replicator.reset();
    if (slot->store) {
      if (auto closed = slot->store->Close(); !closed) {
        spdlog::error("replication: closing the drained store of {} failed: {}", slot->shard.Path(),
                      closed.error().ToString());
      }
      slot->store.reset();
    }
  };
  if (!RunOn(*slot->executor, close)) close();
  custody_->Release(slot->dir, broker::StoreHolder::kFollower);
}

void ReplicationHost::OnStoreOpened(const broker::ShardId& id, storage::ShardStore& store) {
  const ShardRef shard = RefOf(id);
  auto a = view_.FindAssignment(shard);
  auto lost = view_.PreviousLeaderLostAt(shard);
  // Led alone (a replica set of one, or not in the view): no replicator will run, so a hold
  // saved while the shard had followers is lifted (replication.md §20). The store is not
  // shared yet (the core announces it before adopting it). With followers the replicator
  // decides when it starts, and until then the saved hold stands.
  if ((!a || a->replicas.size() < 2) && store.replica_state().retention_held) {
    if (auto lifted = store.SetRetentionHold(false); !lifted) {
      spdlog::error("replication: lifting the retention hold of {} failed: {}", shard.Path(),
                    lifted.error().ToString());
    }
  }
  {
    std::lock_guard lock(leader_mu_);
    core_stores_[shard] = &store;
    // A failover to this broker: measured once per generation, and only while the lapse is
    // recent (a shard reopened much later is no failover).
    const auto since = lost ? std::chrono::steady_clock::now() - *lost
                            : std::chrono::steady_clock::duration::max();
    if (a && a->leader == options_.own_node_id && since < std::chrono::minutes(5) &&
        failover_observed_[shard] != a->generation) {
      failover_observed_[shard] = a->generation;
      failover_seconds_.Observe(std::chrono::duration<double>(since).count());
    }
  }
  ScheduleReconcile();
}

Result<void> ReplicationHost::FenceQuorumShard(const broker::ShardId& id,
                                               storage::ShardStore& store) {
  const ShardRef shard = RefOf(id);
  auto a = view_.FindAssignment(shard);
  // Not led here at all: the core's own generation check refuses it next, with the reason.
  if (!a || a->leader != options_.own_node_id) return {};
  // The leader alone is the majority of a set of one.
  if (a->replicas.size() < 2) return {};
  ReplicaTransport* transport = nullptr;
  {
    MutexLock lock(mu_);
    if (started_ && !stopped_) transport = transport_;
  }
  const std::string where = shard.Path() + " at generation " + std::to_string(a->generation);
  if (transport == nullptr) {
    fences_failed_.Increment();
    return Fail(ErrorCode::kUnavailable,
                "shard " + where +
                    " unavailable: replication is not running, so no promotion "
                    "fence can reach the replica set (retry)");
  }
  PromotionFenceOptions fo;
  fo.tenant = shard.tenant;
  fo.ns = shard.ns;
  fo.name = shard.name;
  fo.shard = shard.shard;
  fo.cache_shard = shard.kind == ShardKind::kCache;
  fo.generation = Generation(a->generation);
  fo.self_node_id = options_.own_node_id;
  fo.attempt_timeout = options_.fence_attempt_timeout;
  fo.own_log_full = &broker::ShardStorage::FullCounter(
      metrics_, shard.kind == ShardKind::kCache ? "cache" : "stream");
  fo.counter_log_full = &broker::ShardStorage::FullCounter(metrics_, "counters");
  for (const std::string& node : a->replicas) {
    if (node == options_.own_node_id) continue;
    // An unregistered replica keeps its seat in the count: an empty address fails to send,
    // which counts against the majority (never shrinks the set the majority is taken of).
    fo.replicas.push_back(PeerAddress{node, options_.internal_addr_of(node).value_or(HostPort{})});
  }
  auto opened = std::make_shared<std::promise<Offset>>();
  auto opened_at = opened->get_future();
  PromotionFence fence(store, std::move(fo), *transport, ExecutorFor(shard),
                       [opened](Offset start) { opened->set_value(start); });
  fence.Start();
  const bool done = opened_at.wait_for(options_.fence_wait) == std::future_status::ready;
  fence.Stop();
  promotion_truncated_.Increment(fence.truncated());
  if (!done) {
    fences_failed_.Increment();
    std::string why;
    RunOn(ExecutorFor(shard), [&] { why = fence.last_error(); });
    spdlog::warn("replication: promotion fence of {} failed after {} attempts: {}", where,
                 fence.attempts(), why);
    return Fail(ErrorCode::kUnavailable,
                "shard " + where +
                    " unavailable: no majority of its replica set answered the "
                    "promotion fence within " +
                    std::to_string(options_.fence_wait.count()) + " ms (" + why + "); retry");
  }
  fences_opened_.Increment();
  spdlog::info(
      "replication: promotion fence of {} done: serving from offset {} ({} attempts, {} "
      "own records dropped)",
      where, opened_at.get(), fence.attempts(), fence.truncated());
  return {};
}

bool ReplicationHost::GateQuorumShard(const broker::ShardId& id,
                                      broker::BrokerCoreOptions::CommitAdvance advance) {
  ShardRef shard = RefOf(id);
  auto a = view_.FindAssignment(shard);
  if (!a || a->leader != options_.own_node_id || a->replicas.size() < 2) return false;
  std::lock_guard lock(leader_mu_);
  gates_[shard] = std::move(advance);
  return true;
}

void ReplicationHost::OnStoreClosing(const broker::ShardId& id) {
  ShardRef shard = RefOf(id);
  std::lock_guard lock(leader_mu_);
  core_stores_.erase(shard);
  gates_.erase(shard);
  auto it = leaders_.find(shard);
  if (it == leaders_.end()) return;
  it->second->replicator->Stop();
  leaders_.erase(it);
  led_gauge_.Set(static_cast<int64_t>(leaders_.size()));
}

void ReplicationHost::Serve(const PeerRequest& request, PeerReply reply) {
  auto target = ReplicaTargetOf(request.frame);
  auto refuse = [&reply](flxi::ErrorCode code, const std::string& detail) {
    reply(flxi::Frame{flxi::Kind::kReplicateError, flxi::ReplicateError{0, code, 0, detail}});
  };
  if (!target) {
    refuse(flxi::ErrorCode::kMalformed, "not a replication frame");
    return;
  }
  FollowerRole role = FollowerRoleFor(view_.FindAssignment(target->shard), target->generation,
                                      options_.own_node_id);
  std::shared_ptr<FollowerSlot> slot;
  {
    MutexLock lock(mu_);
    if (!started_ || stopped_) {
      refuse(flxi::ErrorCode::kUnavailable, "replication is not running on this broker");
      return;
    }
    auto it = followers_.find(target->shard);
    if (it != followers_.end()) slot = it->second;
  }
  if (!slot) {
    std::string detail =
        role == FollowerRole::kFollower
            ? "the follower store of " + target->shard.Path() + " is not open here yet"
            : "no follower of " + target->shard.Path() + " at generation " +
                  std::to_string(target->generation) + " on this broker";
    refuse(RefusalCode(role), detail);
    return;
  }
  const bool records = std::holds_alternative<flxi::Records>(request.frame.body);
  // Shared: a task the executor refuses (stopping) is dropped, and the reply still runs here.
  auto shared_reply = std::make_shared<PeerReply>(std::move(reply));
  transport::Endpoint* endpoint = request.endpoint;
  uint64_t correlation_id = request.correlation_id;
  // A small `Quorum` batch's answer is on a client's acknowledgement path and its apply is
  // short: the loop polls while the shard's executor applies it (EndpointOptions::
  // poll_while_awaiting, FELIX_FORWARD_POLL_US) instead of sleeping, so the answer leaves
  // without a wakeup of the loop (~40 µs on a VM without guest halt polling; docs/
  // performance.md change 31). A large batch takes long enough to apply that polling would
  // only take CPU from the apply.
  const bool poll_apply =
      slot->quorum && records && request.body.size() <= kPollApplyMaxBytes &&
      slot->last_apply_us.load(std::memory_order_relaxed) <= kPollApplyMaxMicros;
  // And such a batch, up to 64 KiB, while the shard's executor is idle and its applies are
  // not slow (ReplicationHostOptions::inline_apply_max_us): the loop applies it itself —
  // blocking in the log's fdatasync, when it would otherwise sleep until the executor's answer
  // woke it — so the answer leaves with no thread hop on this broker (docs/performance.md
  // change 33). TryRunInline keeps the one-owner rule: the loop holds the executor meanwhile.
  const bool inline_apply =
      options_.inline_apply_max_us > 0 && slot->quorum && records &&
      request.body.size() <= kInlineApplyMaxBytes &&
      slot->last_apply_us.load(std::memory_order_relaxed) <= options_.inline_apply_max_us;
  if (poll_apply) endpoint->AwaitingAnswers(+1);
  // Applies `frame` on the shard's executor (or answers `refusal` when there is none) and
  // posts the answer to the loop.
  auto apply = [&on_loop = applied_on_loop_, &on_executor = applied_on_executor_, slot, role,
                endpoint, correlation_id, shared_reply, poll_apply,
                sender = std::string(request.peer_node_id),
                log = target->log](const flxi::Frame* frame, std::string refusal) {
    auto answer = std::make_shared<std::optional<FollowerAnswer>>();
    auto fence = std::make_shared<std::optional<FenceAnswer>>();
    auto fetch = std::make_shared<std::optional<FetchAnswer>>();
    const bool cache_shard = slot->shard.kind == ShardKind::kCache;
    if (frame == nullptr) {
      // `refusal` says why.
    } else if (!slot->follower) {
      refusal = "the follower store of " + slot->shard.Path() + " is closed or not open yet";
    } else if (const auto* records = std::get_if<flxi::Records>(&frame->body)) {
      (endpoint->InLoopThread() ? on_loop : on_executor).Increment();
      const auto started = std::chrono::steady_clock::now();
      *answer = slot->follower->ApplyRecords(*records, StorageLog(log), role, sender);
      const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - started);
      slot->last_apply_us.store(uint32_t(std::min<int64_t>(took.count(), UINT32_MAX)),
                                std::memory_order_relaxed);
    } else if (const auto* bootstrap = std::get_if<flxi::Bootstrap>(&frame->body)) {
      *answer = slot->follower->ApplyBootstrap(*bootstrap, StorageLog(log), role, sender);
    } else if (const auto* rebuild = std::get_if<flxi::Rebuild>(&frame->body)) {
      *answer = slot->follower->ApplyRebuild(*rebuild, role, sender);
    } else if (const auto* f = std::get_if<flxi::Fence>(&frame->body)) {
      *fence = AnswerFence(slot->store.get(), cache_shard, *f, role, sender);
      spdlog::info("replication: fence of {} at generation {} from {}: {}", slot->shard.Path(),
                   f->shard.generation, sender, (*fence)->outcome);
    } else if (const auto* f = std::get_if<flxi::Fetch>(&frame->body)) {
      *fetch = AnswerFetch(slot->store.get(), cache_shard, *f, frame->kind, role, sender);
    } else {
      refusal = "not a replication frame";
    }
    endpoint->Post([answer, fence, fetch, refusal = std::move(refusal), correlation_id,
                    shared_reply, poll_apply, endpoint] {
      if (poll_apply) endpoint->AwaitingAnswers(-1);
      if (answer->has_value()) {
        (*shared_reply)((*answer)->ToFrame(correlation_id));
      } else if (fence->has_value()) {
        (*shared_reply)((*fence)->ToFrame(correlation_id));
      } else if (fetch->has_value()) {
        (*shared_reply)((*fetch)->ToFrame(correlation_id));
      } else {
        (*shared_reply)(
            flxi::Frame{flxi::Kind::kReplicateError,
                        flxi::ReplicateError{0, flxi::ErrorCode::kUnavailable, 0, refusal}});
      }
    });
  };
  auto stopping = [&] {
    if (poll_apply) endpoint->AwaitingAnswers(-1);
    std::string detail = "replication is stopping on this broker";
    (*shared_reply)(flxi::Frame{flxi::Kind::kReplicateError,
                                flxi::ReplicateError{0, flxi::ErrorCode::kUnavailable, 0, detail}});
  };
  if (inline_apply) {
    // Applied with the request's own frame: its views are valid during this call.
    switch (slot->executor->TryRunInline([&] { apply(&request.frame, {}); })) {
      case broker::Executor::InlineRun::kRan:
        return;
      case broker::Executor::InlineRun::kStopped:
        stopping();
        return;
      case broker::Executor::InlineRun::kBusy:
        break;
    }
  }
  // The frame's views die with this call: the task carries the body's bytes to the shard's
  // executor and decodes them there.
  auto body =
      std::make_shared<const std::vector<uint8_t>>(request.body.begin(), request.body.end());
  const flxi::Kind kind = request.frame.kind;
  if (!slot->executor->Post([apply, body, kind] {
        auto frame = flxi::DecodeBody(kind, *body);
        if (!frame) {
          apply(nullptr, "the frame did not survive its copy: " + frame.error().ToString());
          return;
        }
        apply(&*frame, {});
      })) {
    stopping();
  }
}

std::vector<LeaderReport> ReplicationHost::Reports() const {
  std::vector<LeaderReport> reports;
  std::lock_guard lock(leader_mu_);
  for (const auto& entry : leaders_) {
    // Named copies, not structured bindings: lambdas below capture them (clang 14).
    const ShardRef& shard = entry.first;
    const std::shared_ptr<LeaderSlot>& slot = entry.second;
    const bool quorum = IsQuorum(core_, shard);
    std::vector<std::string> followers;
    for (const auto& [node, addr] : slot->followers) followers.push_back(node);
    RunOn(*slot->executor, [&] {
      const auto own =
          shard.kind == ShardKind::kCache ? storage::LogKind::kCache : storage::LogKind::kStream;
      const Offset durable = slot->store->log(own).DurableOffset();
      const Offset mark = slot->replicator->mark(own);
      std::vector<CaughtUpFloor> floors = {{own, quorum ? mark : durable}};
      if (shard.kind == ShardKind::kCache) {
        floors.push_back({storage::LogKind::kCounters,
                          slot->store->log(storage::LogKind::kCounters).DurableOffset()});
      }
      reports.push_back({shard, MakeReport(slot->generation, options_.own_node_id, durable, mark,
                                           followers, floors, slot->replicator->status())});
    });
  }
  // Drains report at the fence generation; caught up there means every log held to its final
  // tail (what the cut-over waits for).
  for (const auto& entry : drains_) {
    const ShardRef& shard = entry.first;
    const std::shared_ptr<DrainSlot>& slot = entry.second;
    RunOn(*slot->executor, [&] {
      if (!slot->store || !slot->replicator) return;
      const auto logs = LogsOf(shard);
      std::vector<CaughtUpFloor> floors;
      for (auto log : logs) {
        const auto& l = slot->store->log(log);
        if (l.TailOffset() > l.BaseOffset()) floors.push_back({log, l.TailOffset()});
      }
      const Offset tail = slot->store->log(logs.front()).TailOffset();
      if (floors.empty() || floors.front().log != logs.front()) {
        floors.insert(floors.begin(), {logs.front(), tail});  // the own log first, even empty
      }
      reports.push_back({shard, MakeReport(slot->fence_generation, options_.own_node_id, tail,
                                           slot->replicator->mark(logs.front()), slot->followers,
                                           floors, slot->replicator->status())});
    });
  }
  return reports;
}

nlohmann::ordered_json ReplicationHost::Status() const {
  using Json = nlohmann::ordered_json;
  Json led = Json::array();
  {
    std::lock_guard lock(leader_mu_);
    for (const auto& led_slot : leaders_) {
      const ShardRef& shard = led_slot.first;  // not a structured binding: captured below
      const std::shared_ptr<LeaderSlot>& slot = led_slot.second;
      Json entry = ShardJson(shard);
      entry["generation"] = slot->generation;
      Json followers = Json::array();
      Json marks = Json::object();
      Json tails = Json::object();
      RunOn(*slot->executor, [&] {
        for (const auto& c : slot->replicator->status()) {
          followers.push_back(Json{{"node_id", c.node_id},
                                   {"log", storage::LogKindName(c.log)},
                                   {"next", c.next_offset.value()},
                                   {"confirmed", c.confirmed.value()},
                                   {"lag", c.lag_records},
                                   {"in_sync", c.in_sync},
                                   {"stalled", c.stalled},
                                   {"rebuilding", c.rebuilding},
                                   {"halted", ReplicaHaltName(c.halt)},
                                   {"halt_detail", c.halt_detail}});
        }
        for (auto log : LogsOf(shard)) {
          marks[storage::LogKindName(log)] = slot->replicator->mark(log).value();
          tails[storage::LogKindName(log)] = slot->store->log(log).TailOffset().value();
        }
      });
      entry["tails"] = std::move(tails);
      entry["marks"] = std::move(marks);
      entry["followers"] = std::move(followers);
      led.push_back(std::move(entry));
    }
  }
  std::vector<std::shared_ptr<FollowerSlot>> slots;
  {
    MutexLock lock(mu_);
    for (const auto& [shard, slot] : followers_) slots.push_back(slot);
  }
  Json followed = Json::array();
  for (const auto& slot : slots) {
    Json entry = ShardJson(slot->shard);
    Json logs = Json::array();
    bool open = false;
    uint64_t generation = 0;
    RunOn(*slot->executor, [&] {
      if (!slot->follower) return;
      open = true;
      generation = slot->store->replica_state().generation.value();
      for (auto log : LogsOf(slot->shard)) {
        auto s = slot->follower->status(log);
        logs.push_back(Json{{"log", storage::LogKindName(log)},
                            {"base", s.base_offset.value()},
                            {"tail", s.tail.value()},
                            {"durable", s.durable_offset.value()},
                            {"halted", FollowerHaltName(s.halt)},
                            {"halt_detail", s.halt_detail}});
      }
    });
    entry["open"] = open;
    entry["generation"] = generation;
    entry["logs"] = std::move(logs);
    followed.push_back(std::move(entry));
  }
  return Json{{"node_id", options_.own_node_id},
              {"led", std::move(led)},
              {"followed", std::move(followed)}};
}

}  // namespace felix::cluster
