// BrokerCore: the shard host — the broker's shards and the executors that own them. Where a
// durable shard's store lives and the custody claim around opening and closing it are
// ShardStorage's (shard_storage.h); the host decides when a store opens and closes.
//
// Streams and caches come from the catalog. A shard is opened on first use: the handle (its
// owning executor + a ShardCell) is returned at once, and the shard's logs are opened and
// replayed on the core's opener pool — never on the QUIC loop thread and never under the
// core's mutex — then settled into the cell on the owning executor, which owns the shard for
// good. Work for the shard posted before that waits in the cell, in order (shard_cell.h). A
// shard whose open failed keeps answering that error (logged once, counted in
// felix_broker_shard_open_failures_total).
//
// Threading: OpenStreamShard, OpenCacheShard, FindStream, StreamNow, FindCache and
// NextSubscriptionId are thread-safe and never block on I/O. Stop() (also run by the
// destructor) waits for opens in progress, drains the executors, then closes the shards and
// their logs; no handle may be used after it. The catalog and the metrics registry must
// outlive the core.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "broker/cache_shard.h"
#include "broker/executor.h"
#include "broker/group_metrics.h"
#include "broker/log_adapters.h"
#include "broker/log_appender.h"
#include "broker/shard_cell.h"
#include "broker/shard_producers.h"
#include "broker/shard_router.h"
#include "broker/shard_storage.h"
#include "broker/shard_store_layout.h"
#include "broker/store_custody.h"
#include "broker/stream_groups.h"
#include "broker/stream_shard.h"
#include "broker/task_pool.h"
#include "catalog/catalog.h"
#include "common/health.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/result.h"
#include "storage/ring_log.h"
#include "storage/shard_store.h"

namespace felix::broker {

struct BrokerCoreOptions {
  std::string storage_dir;  // durable shards live under <storage_dir>/<tenant>/<ns>/<stream>/<n>
  size_t executors = 0;     // 0: one per core
  storage::LogOptions log_defaults;
  storage::RingOptions ring;
  StreamShardOptions shard;
  CacheShardOptions cache;  // default_ttl_ms and metrics are filled per cache
  GroupOptions groups;
  // How often each durable stream shard with a size or age bound runs its retention pass
  // (FELIX_DURABLE_RETENTION_INTERVAL_SECONDS). Cache logs have no retention: their disk is
  // reclaimed by compaction only, so no live key is ever dropped by a size or age bound.
  std::chrono::milliseconds retention_interval{60000};
  // Test seam: runs on the opener pool before a shard's logs are opened (ShardId string).
  std::function<void(const std::string& shard)> before_open;
  // Optional; must outlive the core. Shards refused at open and logs whose writes fail are
  // listed there (/health).
  HealthRegistry* health = nullptr;
  // Cluster mode: whether this node's etcd lease is usable at this instant (NodeLease::ValidNow);
  // every shard's fence asks it just before an append takes its offset. Empty: always.
  std::function<bool()> lease_valid;
  // Cluster mode (optional; must outlive the core): durable shard directories are claimed here
  // before their store opens and released after it closed; a directory a replication follower
  // holds is refused (kUnavailable, retryable) until it is released (store_custody.h).
  StoreCustody* custody = nullptr;
  // Cluster mode: a durable shard's store was opened (opener thread), announced just before
  // the shard is adopted, so every on_shard_store_closing of that store comes after it (also
  // when the shard is dropped, deposed or the core stopped while it opened: then "closing"
  // follows at once), and, the custody being exclusive, after the "closing" of the shard's
  // previous store. The store stays valid until on_shard_store_closing for the same shard has
  // returned, which runs before the store closes (Drop, step-down, Stop; the caller's thread).
  // The replication leader
  // learns of the store through these without the core knowing about replication. Never call
  // back into the core from them.
  std::function<void(const ShardId&, storage::ShardStore&)> on_shard_store_opened;
  std::function<void(const ShardId&)> on_shard_store_closing;
  // The commit gate of `Quorum` shards (FELIX_PUBLISH_QUORUM_TIMEOUT_MS); the core fills the
  // counters (felix_broker_publish_quorum_failed_total).
  CommitGateOptions commit_gate;
  // Cluster mode (replication.md §8.2–8.4): asked on the opener thread, before a durable
  // `Quorum` stream or cache shard serves anything (after its store opened, before
  // on_shard_store_opened), whether its writes wait for a replica majority. True installs the
  // shard's commit gates (commit_gate.h; a cache has one per log); `advance` (any thread; posts
  // to the shard's executor; does nothing once the shard is gone) then moves a log's commit
  // offset — the replication leader calls it with each log's mark (logs without a gate are
  // ignored). False or unset: the shard acknowledges after its own commit (replication factor
  // 1: the leader alone is the majority). Never call back into the core from it.
  using CommitAdvance = std::function<void(storage::LogKind log, Offset commit)>;
  std::function<bool(const ShardId&, CommitAdvance advance)> gate_quorum_shard;
  // Cluster mode (replication.md §10, cluster-etcd.md D3): run on the opener thread for a
  // durable `Quorum` stream or cache shard right after its store opened and before it takes
  // its generation and serves — the promotion fence, which may fetch records into the store
  // and truncate a divergent suffix of its own log (nothing reads the store yet). Blocks; an
  // error fails the open (the shard stays closed: requests are answered with it). Unset: no
  // fence. Never call back into the core from it.
  std::function<Result<void>(const ShardId&, storage::ShardStore&)> fence_quorum_shard;
  // Cluster mode (optional; must outlive the core): who serves each shard — the one place that
  // decides it (shard_router.h) — and this node's id. A shard opens only while the router
  // names this broker its leader, at that generation G: a durable shard's store accepts G
  // first (ballot naming `node_id`, history entry at its own log's tail), every record
  // appended then carries G, and the shard's fence refuses appends (kUnavailable, nothing
  // written) once the router names another leader or generation. StepDownDeposed() closes
  // such shards. Null: every shard is served at its stored generation (a single node).
  const ShardRouter* router = nullptr;
  std::string node_id;
};

// What a stream shard is once open: the shard, and (durable shards only) its consumer groups,
// both owned by the handle's executor.
struct OpenedStream {
  std::shared_ptr<StreamShard> shard;
  std::shared_ptr<StreamGroups> groups;
  std::shared_ptr<ShardProducers> producers;  // idempotent publishing
};
struct OpenedCache {
  std::shared_ptr<CacheShard> shard;
};
using StreamShardHandle = ShardHandle<OpenedStream>;
using CacheShardHandle = ShardHandle<OpenedCache>;

class BrokerCore {
 public:
  BrokerCore(BrokerCoreOptions options, const catalog::Catalog& catalog, MetricsRegistry& metrics);
  ~BrokerCore();
  BrokerCore(const BrokerCore&) = delete;
  BrokerCore& operator=(const BrokerCore&) = delete;

  // The stream as the catalog has it now, or nullopt.
  std::optional<catalog::Stream> FindStream(std::string_view tenant, std::string_view ns,
                                            std::string_view stream) const;
  // The same, not copied: it shares ownership of the catalog snapshot it is in (immutable);
  // null when there is no such stream. For the request path, which resolves a stream per request.
  std::shared_ptr<const catalog::Stream> StreamNow(std::string_view tenant, std::string_view ns,
                                                   std::string_view stream) const;

  // kInvalidArgument: shard out of range; kUnavailable: stopping. A failure to open the logs
  // (kIo/kCorruption, naming the file) reaches the work through the cell.
  Result<StreamShardHandle> OpenStreamShard(const catalog::Stream& stream, uint32_t shard);
  // The same for `id` (ShardKind::kStream, naming `stream` and one of its shards), which the
  // caller built already.
  Result<StreamShardHandle> OpenStreamShard(const catalog::Stream& stream, const ShardId& id);

  // Caches, as streams: durable cache shards keep a ShardStore (cache and counter logs) under
  // <storage_dir>/_caches/<tenant>/<ns>/<cache>/<shard> ("_caches" is no valid tenant name);
  // the index is rebuilt from the logs before the handle is returned.
  std::optional<catalog::Cache> FindCache(std::string_view tenant, std::string_view ns,
                                          std::string_view cache) const;
  Result<CacheShardHandle> OpenCacheShard(const catalog::Cache& cache, uint32_t shard);

  // Where this core keeps a durable stream's (cache's) shard, and with which log options.
  ShardStoreLayout StreamLayout(const catalog::Stream& stream, uint32_t shard) const;
  ShardStoreLayout CacheLayout(const catalog::Cache& cache, uint32_t shard) const;

  // Broker-wide subscription ids (subscribe without an id).
  uint64_t NextSubscriptionId() { return next_subscription_id_.fetch_add(1); }

  // Delete means delete (issue 12 item 5): called after the catalog deleted a stream (cache),
  // and before it creates one (leftovers of an interrupted delete). Closes the open shards —
  // live subscriptions end with `not_found` "... was deleted", waiting group polls are
  // answered the same, work still waiting for an open is refused the same — then removes the
  // directory, so a stream created again under the same name starts empty. Blocks until done;
  // never call it on a shard executor.
  void DropStream(const std::string& tenant, const std::string& ns, const std::string& stream);
  void DropCache(const std::string& tenant, const std::string& ns, const std::string& cache);

  // Cluster mode (options.router): steps down from every open shard another broker leads now
  // (this broker was paused or cut off past its lease and a follower was promoted), or that is
  // led here at another generation than it opened at (a replica-set change: it reopens at the
  // new one on the next request or reconcile), or that the router calls Unavailable at another
  // generation (a planned move's fence: a gated shard's admitted writes first wait, up to 2 s,
  // for their majority). A deposed shard
  // stops serving: its fence refuses every append still queued for it, live subscriptions end
  // with `not_leader` naming the new owner (the client resumes there), waiting group requests
  // are answered `shard_unavailable`, its logs close (appends already past the fence complete
  // first and are answered from their own write), the store is handed back
  // (on_shard_store_closing, then the custody released), so the replication side may open it
  // as a follower. A later request resolves through the router again. A shard the router
  // calls Unavailable at its own generation (a lapsed lease) is kept: nobody else leads it.
  // Returns
  // how many shards stepped down. Blocks until they are closed; never on a shard executor.
  size_t StepDownDeposed();

  void Stop();

 private:
  struct OpenShard;
  // The opener's work: open and replay the logs (I/O), fill `open`, return what the cell gets.
  Result<OpenedStream> OpenStreamLogs(const catalog::Stream& stream, uint32_t shard_index,
                                      Executor& executor, OpenShard& open);
  Result<OpenedCache> OpenCacheLogs(const catalog::Cache& cache, uint32_t shard_index,
                                    Executor& executor, OpenShard& open);
  Executor& ExecutorFor(const std::string& key);
  // Runs `shard`'s retention pass every retention_interval on its executor, for as long as the
  // shard exists (the task holds it weakly).
  void ScheduleRetention(const std::shared_ptr<StreamShard>& shard, Executor& executor);

  // One entry per shard ever asked for. The executor and the cell are set at creation; the
  // rest is filled by the opener (under mu_) once the logs are open.
  struct OpenShard {
    Executor* executor = nullptr;
    ShardId id;             // set by the opener
    std::string store_dir;  // durable shards: the directory claimed in the custody
    std::shared_ptr<ShardCell<OpenedStream>> stream_cell;  // stream shards
    std::shared_ptr<ShardCell<OpenedCache>> cache_cell;    // cache shards
    std::unique_ptr<storage::ShardStore> store;            // durable shards only
    // The shard's write fence (its stored generation) and the group logs' appenders; every
    // log of the shard appends through the fence (log_appender.h).
    std::unique_ptr<ShardFence> fence;
    std::unique_ptr<LogAppender> cursors_appender;
    std::unique_ptr<LogAppender> dead_letters_appender;
    // The generation the router named this broker leader at when the shard opened.
    Generation led_generation;
    std::shared_ptr<StreamShard> shard;
    std::shared_ptr<CacheShard> cache;  // cache shards (then `shard` is null)
    std::shared_ptr<StreamGroups> groups;
    std::shared_ptr<ShardProducers> producers;
    std::unique_ptr<LogAppender> marks_appender;  // durable shards: the producers log
  };
  // Moves what the opener built into the shard's entry; false (and `built` closed) when the
  // core stopped or the shard was dropped meanwhile. Under mu_.
  bool AdoptLocked(const std::string& key, const void* cell, OpenShard& built) REQUIRES(mu_);
  // A failed open: the entry goes (the next request retries the open). Under mu_.
  void ForgetLocked(const std::string& key, const void* cell) REQUIRES(mu_);
  void DropShards(const ShardId& any_shard, const std::string& dir);
  // Closes a shard taken out of shards_ on its executor: the fence refuses from then on (when
  // `refusal` is set), readers end with `end`, group waiters with `group_end`, logs and store
  // close, then the custody is released and the entry kept in dropped_. Blocks.
  void CloseRemoved(std::shared_ptr<OpenShard> shared, const QueueEnd& end,
                    const GroupError& group_end, std::optional<Error> refusal);
  // Cluster mode: the generation the router names this broker leader of `id` at, taken into
  // `store` (when durable; `own` is the shard's own log) before the shard serves; refused
  // (kUnavailable, retryable) when the router names no such leadership or the store already
  // accepted a newer generation or the same one from another leader. Without a router: the
  // store's generation (0 without one).
  Result<Generation> TakeGeneration(const ShardId& id, storage::ShardStore* store,
                                    storage::LogKind own);
  // Cluster mode: arms `fence` to refuse appends once the router stops naming this broker
  // leader of `id` at the fence's generation.
  void ArmFence(const ShardId& id, ShardFence& fence);
  // Opens the shard with `open` on the opener pool and settles the result into the handle's
  // cell on its executor (running `started` there first when it opened).
  template <typename Opened>
  void StartOpen(const std::string& key, const ShardHandle<Opened>& handle,
                 std::function<Result<Opened>(OpenShard&)> open,
                 std::function<void(Opened&)> started = {});
  // Closes whatever part of a shard the opener built and empties `built`.
  void CloseBuilt(OpenShard& built);
  // Opens `layout`'s store for `key` (ShardStorage::Open: under the custody claim; refused
  // retryably when a follower holds it) and records its directory in `open`.
  Result<std::unique_ptr<storage::ShardStore>> OpenStore(const std::string& key,
                                                         const ShardStoreLayout& layout,
                                                         OpenShard& open);
  // The store of `open` is about to close: ShardStorage::Closing; after the close,
  // ShardStorage::Released.
  void StoreClosing(const OpenShard& open);
  void StoreClosed(const OpenShard& open);

  BrokerCoreOptions options_;
  const ShardStorage storage_;  // after options_: built from them
  const catalog::Catalog& catalog_;
  std::vector<std::unique_ptr<Executor>> executors_;
  // Opens and replays shard logs, a few shards at a time (a slow one holds up no other).
  TaskPool opener_{"felix-open", 4};
  Mutex mu_;
  std::map<std::string, OpenShard, ShardKeyLess> shards_ GUARDED_BY(mu_);  // by ShardId::ToString()
  // Closed shards of deleted streams/caches: handles resolved before the drop may still reach
  // them (and answer errors), so they stay alive until Stop().
  std::vector<std::shared_ptr<OpenShard>> dropped_ GUARDED_BY(mu_);
  std::atomic<uint64_t> next_subscription_id_{1};
  bool stopped_ GUARDED_BY(mu_) = false;
  Gauge& open_shards_;
  Counter& failed_opens_;
  Counter& retention_segments_deleted_;
  CacheMetrics cache_metrics_;
  GroupMetrics group_metrics_;
};

}  // namespace felix::broker
