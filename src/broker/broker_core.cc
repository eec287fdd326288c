#include "broker/broker_core.h"

#include <filesystem>
#include <functional>
#include <future>
#include <thread>

#include <spdlog/spdlog.h>

#include "broker/log_adapters.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace {

// The replica-set size from which a `Quorum` leader hides what it inherited until its mark
// covers it: a later fence can form without both brokers known to hold such a record once
// n − 2 ≥ ⌊n/2⌋ + 1.
constexpr uint32_t kHoldInheritedFromReplicas = 5;

// A shard stepping down for a planned move (its route turned Unavailable at a newer
// generation, its fence refusing new appends already): waits, up to `wait`, until the writes it
// admitted are all committed — a `Quorum` shard's held writes reach their majority (its
// replicator still runs) — so that their publishers get an answer, not an unknown outcome when
// the shard closes. Polls the shard's executor; never on it.
void SettleAdmittedWrites(Executor& executor, const std::shared_ptr<StreamShard>& stream,
                          const std::shared_ptr<CacheShard>& cache, storage::ShardStore* store,
                          std::chrono::milliseconds wait) {
  if (store == nullptr || !((stream && stream->gated()) || (cache && cache->gated()))) return;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    auto settled = std::make_shared<std::promise<bool>>();
    auto answer = settled->get_future();
    if (!executor.Post([stream, cache, store, settled] {
          if (stream) {
            settled->set_value(store->log(storage::LogKind::kStream).WrittenOffset() <=
                               stream->committed_next());
          } else {
            settled->set_value(cache->held_writes() == 0);
          }
        })) {
      return;
    }
    if (answer.get()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

ShardStorageOptions StorageOptionsOf(const BrokerCoreOptions& core, MetricsRegistry& metrics) {
  ShardStorageOptions o;
  o.storage_dir = core.storage_dir;
  o.log_defaults = core.log_defaults;
  o.log_defaults.metrics = &metrics;
  o.custody = core.custody;
  o.health = core.health;
  o.on_store_closing = core.on_shard_store_closing;
  return o;
}

}  // namespace

BrokerCore::BrokerCore(BrokerCoreOptions options, const catalog::Catalog& catalog,
                       MetricsRegistry& metrics)
    : options_(std::move(options)),
      storage_(StorageOptionsOf(options_, metrics)),
      catalog_(catalog),
      open_shards_(metrics.AddGauge("felix_broker_open_shards", "stream shards open here")),
      failed_opens_(metrics.AddCounter("felix_broker_shard_open_failures_total",
                                       "shard opens that failed (the next request retries)")),
      retention_segments_deleted_(
          metrics.AddCounter("felix_storage_retention_segments_deleted_total",
                             "stream log segments deleted by retention (size or age bound)")),
      cache_metrics_(metrics),
      group_metrics_(metrics) {
  size_t n = options_.executors;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < n; ++i) {
    executors_.push_back(std::make_unique<Executor>("felix-shard-" + std::to_string(i)));
  }
  options_.log_defaults.metrics = &metrics;
  const char* quorum_failed_help =
      "Quorum publishes answered without a majority (timed_out: quorum_timeout; not_leading: "
      "the shard closed while they waited)";
  options_.commit_gate.timed_out = &metrics.AddCounter("felix_broker_publish_quorum_failed_total",
                                                       quorum_failed_help, "reason=\"timed_out\"");
  options_.commit_gate.not_leading = &metrics.AddCounter(
      "felix_broker_publish_quorum_failed_total", quorum_failed_help, "reason=\"not_leading\"");
}

BrokerCore::~BrokerCore() {
  Stop();
}

std::optional<catalog::Stream> BrokerCore::FindStream(std::string_view tenant, std::string_view ns,
                                                      std::string_view stream) const {
  auto found = StreamNow(tenant, ns, stream);
  if (found == nullptr) return std::nullopt;
  return *found;
}

std::shared_ptr<const catalog::Stream> BrokerCore::StreamNow(std::string_view tenant,
                                                             std::string_view ns,
                                                             std::string_view stream) const {
  auto snapshot = catalog_.Snapshot();
  const catalog::Stream* found = snapshot->FindStream(tenant, ns, stream);
  if (found == nullptr) return nullptr;
  return std::shared_ptr<const catalog::Stream>(std::move(snapshot), found);  // aliasing
}

Executor& BrokerCore::ExecutorFor(const std::string& key) {
  return *executors_[std::hash<std::string>{}(key) % executors_.size()];
}

ShardStoreLayout BrokerCore::StreamLayout(const catalog::Stream& stream, uint32_t shard) const {
  return storage_.StreamLayout(stream, shard);
}

ShardStoreLayout BrokerCore::CacheLayout(const catalog::Cache& cache, uint32_t shard) const {
  return storage_.CacheLayout(cache, shard);
}

Result<std::unique_ptr<storage::ShardStore>> BrokerCore::OpenStore(const std::string& key,
                                                                   const ShardStoreLayout& layout,
                                                                   OpenShard& open) {
  auto store = storage_.Open(key, layout);
  if (store) open.store_dir = layout.dir;
  return store;
}

void BrokerCore::StoreClosing(const OpenShard& open) {
  if (open.store) storage_.Closing(open.id);
}

void BrokerCore::StoreClosed(const OpenShard& open) {
  if (!open.store_dir.empty()) storage_.Released(open.store_dir);
}

Result<Generation> BrokerCore::TakeGeneration(const ShardId& id, storage::ShardStore* store,
                                              storage::LogKind own) {
  if (options_.router == nullptr) {
    return store != nullptr ? Generation(store->replica_state().generation) : Generation();
  }
  const std::string key = id.ToString();
  Route route = options_.router->RouteShard(id);
  if (!route.is_local()) {
    // The request that opened it resolved Local a moment ago; the view moved on since.
    return Fail(ErrorCode::kUnavailable,
                "shard " + key + " unavailable: this broker does not lead it now" +
                    (route.is_remote() ? " (" + route.owner_node_id + " does)"
                                       : ": " + route.unavailable_reason));
  }
  if (store == nullptr) return route.generation;
  const Generation g = route.generation;
  const Generation accepted = store->replica_state().generation;
  const auto& ballot = store->ballot();
  if (accepted > g ||
      (accepted == g && ballot && ballot->generation == g && ballot->leader != options_.node_id)) {
    // This store took a newer generation (or this one from another leader) as a follower:
    // the view naming this broker leader at g lags. Serving would fork the log.
    return Fail(ErrorCode::kUnavailable,
                "shard " + key + " unavailable: its store accepted generation " +
                    to_string(accepted) + (ballot ? " from " + ballot->leader : std::string()) +
                    ", the view names this broker leader at generation " + to_string(g) +
                    " (the view lags; retry)");
  }
  if (accepted < g) {
    // The leader takes its generation before it serves (replication.md §9.3): the ballot,
    // then the replica file, then the history entry "g begins at my tail".
    const Offset start = store->log(own).TailOffset();
    if (auto taken = store->AcceptGeneration(g, options_.node_id, start); !taken) {
      return tl::unexpected(taken.error().ToError());
    }
    spdlog::info("shard {} takes generation {} as its leader (was {}), starting at offset {}", key,
                 g, accepted, start);
  }
  return route.generation;
}

void BrokerCore::ArmFence(const ShardId& id, ShardFence& fence) {
  if (options_.router == nullptr) return;
  fence.SetLeadershipCheck([router = options_.router, id,
                            g = fence.generation()]() -> Result<void> {
    Route route = router->RouteShard(id);
    if (route.is_local() && route.generation == g) return {};
    std::string now = route.is_remote() ? "led by " + route.owner_node_id + " at generation " +
                                              std::to_string(route.generation.value())
                      : route.is_local()
                          ? "led here at generation " + std::to_string(route.generation.value())
                          : "unavailable: " + route.unavailable_reason;
    return Fail(ErrorCode::kUnavailable, "shard " + id.ToString() + " is " + now +
                                             ", not at generation " + std::to_string(g.value()) +
                                             " by this broker: nothing written (retry)");
  });
}

template <typename Opened>
void BrokerCore::StartOpen(const std::string& key, const ShardHandle<Opened>& handle,
                           std::function<Result<Opened>(OpenShard&)> open,
                           std::function<void(Opened&)> started) {
  opener_.Post([this, key, handle, open = std::move(open), started = std::move(started)] {
    {
      MutexLock lock(mu_);
      if (stopped_) return;  // shutting down: nobody will use the shard
    }
    OpenShard built;
    Result<Opened> opened = open(built);
    // Announced before the shard is adopted, i.e. before a Drop, a step-down or Stop can see
    // its store: whatever closes it announces "closing" after this "opened", never before
    // (the replication host would otherwise keep a closed store). Outside mu_: the hook takes
    // its own locks, and their owner calls into the core while holding them.
    const bool announced =
        opened && built.store != nullptr && static_cast<bool>(options_.on_shard_store_opened);
    if (announced) options_.on_shard_store_opened(built.id, *built.store);
    bool adopted = false;
    {
      MutexLock lock(mu_);
      if (!opened) {
        CloseBuilt(built);
        ForgetLocked(key, handle.cell.get());
        failed_opens_.Increment();
      } else {
        adopted = AdoptLocked(key, handle.cell.get(), built);
      }
    }
    if (opened && !adopted) {
      // Stop() closed the shards it knew, or the shard was dropped or deposed while it opened.
      if (announced) StoreClosing(built);
      CloseBuilt(built);
      opened = Fail(ErrorCode::kNotFound, "shard " + key + " was closed while it opened");
    }
    handle.executor->Post([cell = handle.cell, started, opened = std::move(opened)]() mutable {
      if (opened && started) started(*opened);
      cell->Settle(std::move(opened));
    });
  });
}

Result<StreamShardHandle> BrokerCore::OpenStreamShard(const catalog::Stream& stream,
                                                      uint32_t shard_index) {
  return OpenStreamShard(stream, ShardId{stream.tenant_id, stream.namespace_name, stream.name,
                                         ShardKind::kStream, shard_index});
}

Result<StreamShardHandle> BrokerCore::OpenStreamShard(const catalog::Stream& stream,
                                                      const ShardId& id) {
  const uint32_t shard_index = id.shard;
  if (shard_index >= stream.shards) {
    return Fail(ErrorCode::kInvalidArgument, "shard " + std::to_string(shard_index) +
                                                 " out of range: stream has " +
                                                 std::to_string(stream.shards) + " shards");
  }
  MutexLock lock(mu_);
  if (stopped_) return Fail(ErrorCode::kUnavailable, "broker is stopping");
  // Open already (every request but the first): found by the id, no key built.
  if (auto open = shards_.find(id); open != shards_.end())
    return StreamShardHandle{open->second.stream_cell, open->second.executor};
  const std::string key = id.ToString();
  OpenShard& entry = shards_.try_emplace(key).first->second;  // not found above: new
  entry.executor = &ExecutorFor(key);
  entry.stream_cell = std::make_shared<ShardCell<OpenedStream>>();
  StreamShardHandle handle{entry.stream_cell, entry.executor};
  StartOpen<OpenedStream>(
      key, handle, [this, stream, shard_index, executor = handle.executor](OpenShard& built) {
        return OpenStreamLogs(stream, shard_index, *executor, built);
      });
  return handle;
}

Result<OpenedStream> BrokerCore::OpenStreamLogs(const catalog::Stream& stream, uint32_t shard_index,
                                                Executor& executor, OpenShard& open) {
  ShardId id{stream.tenant_id, stream.namespace_name, stream.name, ShardKind::kStream, shard_index};
  std::string key = id.ToString();
  open.id = id;
  if (options_.before_open) options_.before_open(key);
  std::unique_ptr<RecordLog> log;
  bool bounded_retention = false;
  if (stream.durable) {
    ShardStoreLayout layout = StreamLayout(stream, shard_index);
    bounded_retention = layout.bounded_retention();
    auto store = OpenStore(key, layout, open);
    if (!store) return tl::unexpected(store.error());
    open.store = std::move(*store);
    if (stream.consistency == catalog::Consistency::kQuorum && options_.fence_quorum_shard) {
      if (auto fenced = options_.fence_quorum_shard(id, *open.store); !fenced) {
        return tl::unexpected(fenced.error());
      }
    }
    auto generation = TakeGeneration(id, open.store.get(), storage::LogKind::kStream);
    if (!generation) return tl::unexpected(generation.error());
    open.led_generation = *generation;
    open.fence = std::make_unique<ShardFence>(*generation);
    if (options_.lease_valid) open.fence->SetLeaseCheck(options_.lease_valid);
    ArmFence(id, *open.fence);
    log = std::make_unique<DurableRecordLog>(open.store->log(storage::LogKind::kStream),
                                             *open.fence, storage_.Reporting("stream"));
    spdlog::info("shard opened shard={} durable=true next_offset={} generation={}", key,
                 log->next_offset(), open.fence->generation().value());
  } else {
    auto generation = TakeGeneration(id, nullptr, storage::LogKind::kStream);
    if (!generation) return tl::unexpected(generation.error());
    open.led_generation = *generation;
    log = std::make_unique<RingRecordLog>(options_.ring);
  }
  open.shard = std::make_shared<StreamShard>(id, executor, std::move(log), options_.shard);
  if (open.store && stream.consistency == catalog::Consistency::kQuorum &&
      options_.gate_quorum_shard) {
    std::weak_ptr<StreamShard> weak = open.shard;
    // The replicator calls this holding its own executor, often on the peer loop's thread
    // (ShardReplicator runs record answers inline): run the gate there too when the shard's
    // executor is idle, so the held publishes are answered without another thread wakeup.
    auto advance = [weak, &executor](storage::LogKind log, Offset offset) {
      if (log != storage::LogKind::kStream) return;
      executor.RunOrPost([weak, offset] {
        if (auto shard = weak.lock()) shard->AdvanceCommit(offset);
      });
    };
    if (options_.gate_quorum_shard(id, std::move(advance))) {
      open.shard->InstallCommitGate(options_.commit_gate);
      if (stream.replication_factor >= kHoldInheritedFromReplicas) {
        // What this leader inherited is on two brokers at least (it and the one it came
        // from), a majority of 3 or 4 but not of 5 or more: shown only once the start record
        // carries the mark over it (docs/cluster.md, "Promotion fence").
        const Offset floor = open.store->replica_state().commit_offset;
        if (uint64_t held = open.shard->HoldInheritedAbove(floor); held > 0) {
          spdlog::info(
              "shard {} shows readers nothing from offset {} ({} records) until a "
              "replica majority holds it",
              key, floor, held);
        }
      }
      spdlog::info("shard {} acknowledges behind a replica majority (Quorum, timeout {} ms)", key,
                   options_.commit_gate.timeout.count());
    }
  }
  if (open.store) {
    // Consumer groups live beside the shard, on its executor, with their own two logs.
    open.cursors_appender = std::make_unique<LogAppender>(
        open.store->log(storage::LogKind::kCursors), *open.fence, AckAfter::kFlush);
    open.dead_letters_appender = std::make_unique<LogAppender>(
        open.store->log(storage::LogKind::kDeadLetters), *open.fence, AckAfter::kFlush);
    open.groups = std::make_shared<StreamGroups>(key, executor, *open.shard, *open.cursors_appender,
                                                 *open.dead_letters_appender, options_.groups,
                                                 group_metrics_);
    if (auto recovered = open.groups->Recover(); !recovered) {
      return tl::unexpected(recovered.error());
    }
    open.shard->SetCommitListener([groups = open.groups.get()] { groups->OnCommitted(); });
  }
  // Idempotent producers: marks in the shard's producers log (in memory without a store).
  if (open.store) {
    open.marks_appender = std::make_unique<LogAppender>(
        open.store->log(storage::LogKind::kProducers), *open.fence, AckAfter::kFlush);
  }
  open.producers =
      std::make_shared<ShardProducers>(executor, *open.shard, open.marks_appender.get());
  if (auto recovered = open.producers->Recover(); !recovered) {
    return tl::unexpected(recovered.error());
  }
  if (bounded_retention) ScheduleRetention(open.shard, executor);
  return OpenedStream{open.shard, open.groups, open.producers};
}

void BrokerCore::CloseBuilt(OpenShard& built) {
  if (built.groups) built.groups->Stop();
  if (built.shard) built.shard->CloseLog();
  if (built.cache) built.cache->CloseLogs();
  if (built.store) (void)built.store->Close();
  StoreClosed(built);
  built = OpenShard{};
}

void BrokerCore::ForgetLocked(const std::string& key, const void* cell) {
  auto it = shards_.find(key);
  if (it == shards_.end()) return;
  const void* entry_cell = it->second.stream_cell
                               ? static_cast<const void*>(it->second.stream_cell.get())
                               : it->second.cache_cell.get();
  if (entry_cell == cell) shards_.erase(it);
}

bool BrokerCore::AdoptLocked(const std::string& key, const void* cell, OpenShard& built) {
  auto it = shards_.find(key);
  const void* entry_cell = nullptr;
  if (it != shards_.end()) {
    entry_cell = it->second.stream_cell ? static_cast<const void*>(it->second.stream_cell.get())
                                        : it->second.cache_cell.get();
  }
  if (stopped_ || entry_cell != cell) return false;  // the caller closes what was opened
  OpenShard& entry = it->second;
  entry.store = std::move(built.store);
  entry.fence = std::move(built.fence);
  entry.led_generation = built.led_generation;
  entry.cursors_appender = std::move(built.cursors_appender);
  entry.dead_letters_appender = std::move(built.dead_letters_appender);
  entry.shard = std::move(built.shard);
  entry.cache = std::move(built.cache);
  entry.groups = std::move(built.groups);
  entry.producers = std::move(built.producers);
  entry.marks_appender = std::move(built.marks_appender);
  entry.id = std::move(built.id);
  entry.store_dir = std::move(built.store_dir);
  if (entry.shard || entry.cache) open_shards_.Add(1);
  return true;
}

std::optional<catalog::Cache> BrokerCore::FindCache(std::string_view tenant, std::string_view ns,
                                                    std::string_view cache) const {
  auto snapshot = catalog_.Snapshot();
  const catalog::Cache* found = snapshot->FindCache(tenant, ns, cache);
  if (found == nullptr) return std::nullopt;
  return *found;
}

Result<CacheShardHandle> BrokerCore::OpenCacheShard(const catalog::Cache& cache,
                                                    uint32_t shard_index) {
  if (shard_index >= cache.shards) {
    return Fail(ErrorCode::kInvalidArgument, "shard " + std::to_string(shard_index) +
                                                 " out of range: cache has " +
                                                 std::to_string(cache.shards) + " shards");
  }
  const ShardId id{cache.tenant_id, cache.namespace_name, cache.name, ShardKind::kCache,
                   shard_index};
  MutexLock lock(mu_);
  if (stopped_) return Fail(ErrorCode::kUnavailable, "broker is stopping");
  if (auto open = shards_.find(id); open != shards_.end())
    return CacheShardHandle{open->second.cache_cell, open->second.executor};
  const std::string key = id.ToString();
  OpenShard& entry = shards_.try_emplace(key).first->second;  // not found above: new
  entry.executor = &ExecutorFor(key);
  entry.cache_cell = std::make_shared<ShardCell<OpenedCache>>();
  CacheShardHandle handle{entry.cache_cell, entry.executor};
  StartOpen<OpenedCache>(
      key, handle,
      [this, cache, shard_index, executor = handle.executor](OpenShard& built) {
        return OpenCacheLogs(cache, shard_index, *executor, built);
      },
      [](OpenedCache& opened) { opened.shard->StartSweep(); });
  return handle;
}

Result<OpenedCache> BrokerCore::OpenCacheLogs(const catalog::Cache& cache, uint32_t shard_index,
                                              Executor& executor, OpenShard& open) {
  ShardId id{cache.tenant_id, cache.namespace_name, cache.name, ShardKind::kCache, shard_index};
  open.id = id;
  if (options_.before_open) options_.before_open(id.ToString());
  std::unique_ptr<RecordLog> cache_log, counter_log;
  if (cache.durable) {
    auto store = OpenStore(id.ToString(), CacheLayout(cache, shard_index), open);
    if (!store) return tl::unexpected(store.error());
    open.store = std::move(*store);
    if (cache.consistency == catalog::Consistency::kQuorum && options_.fence_quorum_shard) {
      if (auto fenced = options_.fence_quorum_shard(id, *open.store); !fenced) {
        return tl::unexpected(fenced.error());
      }
    }
    auto generation = TakeGeneration(id, open.store.get(), storage::LogKind::kCache);
    if (!generation) return tl::unexpected(generation.error());
    open.led_generation = *generation;
    open.fence = std::make_unique<ShardFence>(*generation);
    if (options_.lease_valid) open.fence->SetLeaseCheck(options_.lease_valid);
    ArmFence(id, *open.fence);
    cache_log = std::make_unique<DurableRecordLog>(open.store->log(storage::LogKind::kCache),
                                                   *open.fence, storage_.Reporting("cache"));
    counter_log = std::make_unique<DurableRecordLog>(open.store->log(storage::LogKind::kCounters),
                                                     *open.fence, storage_.Reporting("counters"));
  }
  if (!cache.durable) {
    auto generation = TakeGeneration(id, nullptr, storage::LogKind::kCache);
    if (!generation) return tl::unexpected(generation.error());
    open.led_generation = *generation;
  }
  CacheShardOptions cache_options = options_.cache;
  cache_options.default_ttl_ms = cache.default_ttl_ms;
  cache_options.metrics = &cache_metrics_;
  open.cache = std::make_shared<CacheShard>(id, executor, std::move(cache_log),
                                            std::move(counter_log), std::move(cache_options));
  if (auto opened = open.cache->Open(); !opened) return tl::unexpected(opened.error());
  if (open.store && cache.consistency == catalog::Consistency::kQuorum &&
      options_.gate_quorum_shard) {
    std::weak_ptr<CacheShard> weak = open.cache;
    auto advance = [weak, &executor](storage::LogKind log, Offset offset) {
      if (log != storage::LogKind::kCache && log != storage::LogKind::kCounters) return;
      executor.RunOrPost([weak, log, offset] {  // as for streams, above
        auto shard = weak.lock();
        if (!shard) return;
        if (log == storage::LogKind::kCache) {
          shard->AdvanceCacheCommit(offset);
        } else {
          shard->AdvanceCounterCommit(offset);
        }
      });
    };
    if (options_.gate_quorum_shard(id, std::move(advance))) {
      open.cache->InstallCommitGates(options_.commit_gate);
      spdlog::info("cache shard {} acknowledges behind a replica majority (Quorum, timeout {} ms)",
                   id.ToString(), options_.commit_gate.timeout.count());
    }
  }
  return OpenedCache{open.cache};
}

void BrokerCore::ScheduleRetention(const std::shared_ptr<StreamShard>& shard, Executor& executor) {
  std::weak_ptr<StreamShard> weak = shard;
  executor.PostAfter(options_.retention_interval, [this, weak, &executor] {
    auto live = weak.lock();
    if (!live) return;  // the shard was closed
    auto deleted = live->EnforceRetention();
    if (!deleted) {
      spdlog::error("retention failed shard={} error={}", live->id().ToString(),
                    deleted.error().message);
    } else if (*deleted > 0) {
      retention_segments_deleted_.Increment(*deleted);
      spdlog::info("retention shard={} segments_deleted={} start_offset={}", live->id().ToString(),
                   *deleted, live->start_offset());
    }
    ScheduleRetention(live, executor);
  });
}

void BrokerCore::DropStream(const std::string& tenant, const std::string& ns,
                            const std::string& stream) {
  ShardId id{tenant, ns, stream, ShardKind::kStream, 0};
  DropShards(id, StreamDir(options_.storage_dir, tenant, ns, stream));
}

void BrokerCore::DropCache(const std::string& tenant, const std::string& ns,
                           const std::string& cache) {
  ShardId id{tenant, ns, cache, ShardKind::kCache, 0};
  DropShards(id, CacheDir(options_.storage_dir, tenant, ns, cache));
}

void BrokerCore::DropShards(const ShardId& any_shard, const std::string& dir) {
  std::string key = any_shard.ToString();
  std::string prefix = key.substr(0, key.rfind('#') + 1);  // "t/ns/name#", one name only
  std::vector<std::shared_ptr<OpenShard>> dropped;
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    for (auto it = shards_.begin(); it != shards_.end();) {
      if (it->first.compare(0, prefix.size(), prefix) == 0) {
        if (it->second.shard || it->second.cache) open_shards_.Add(-1);
        dropped.push_back(std::make_shared<OpenShard>(std::move(it->second)));
        it = shards_.erase(it);  // an open still in progress is closed by its opener
      } else {
        ++it;
      }
    }
  }
  std::string what = std::string(any_shard.kind == ShardKind::kCache ? "cache " : "stream ") +
                     any_shard.tenant + "/" + any_shard.name_space + "/" + any_shard.name +
                     " was deleted";
  QueueEnd end;
  end.kind = QueueEnd::Kind::kError;
  end.code = Code(wire::flx1::ProtocolErrorCode::kNotFound);
  end.message = what;
  for (auto& shared : dropped) {
    CloseRemoved(shared, end, GroupError{GroupErrc::kGone, false, what}, std::nullopt);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) {
    spdlog::error("cannot remove the data of deleted shard dir={} error={}", dir, ec.message());
  } else if (!dropped.empty()) {
    spdlog::info("{}: closed {} shard(s) and removed {}", what, dropped.size(), dir);
  }
}

void BrokerCore::CloseRemoved(std::shared_ptr<OpenShard> shared, const QueueEnd& end,
                              const GroupError& group_end, std::optional<Error> refusal) {
  StoreClosing(*shared);
  // On the shard's executor: end its readers and close its logs (pending appends complete
  // and post their answers), then, in a task queued after those answers, let go of it.
  std::promise<void> done;
  auto finished = done.get_future();
  Executor* executor = shared->executor;
  bool posted = executor->Post([shared, executor, &end, &group_end, &refusal, &done] {
    if (refusal && shared->fence) {
      shared->fence->SetLeadershipCheck(
          [refused = *refusal]() -> Result<void> { return tl::unexpected(refused); });
    }
    if (shared->groups) shared->groups->Abort(group_end);
    if (shared->shard) {
      shared->shard->EndAll(end);
      shared->shard->CloseLog();
    }
    if (shared->cache) {
      WatchEnd watch_end;
      watch_end.kind = WatchEnd::Kind::kError;
      watch_end.code = end.code;
      watch_end.message = end.message;
      shared->cache->EndWatches(watch_end);
      shared->cache->CloseLogs();
    }
    if (shared->store) (void)shared->store->Close();
    if (!executor->Post([&done] { done.set_value(); })) done.set_value();
  });
  if (posted) finished.wait();
  StoreClosed(*shared);
  MutexLock lock(mu_);
  dropped_.push_back(std::move(shared));
}

size_t BrokerCore::StepDownDeposed() {
  if (options_.router == nullptr) return 0;
  struct Deposed {
    std::shared_ptr<OpenShard> shard;
    Route route;
  };
  std::vector<Deposed> deposed;
  {
    MutexLock lock(mu_);
    if (stopped_) return 0;
    for (auto it = shards_.begin(); it != shards_.end();) {
      OpenShard& open = it->second;
      // A shard still opening asks the router itself before it serves (TakeGeneration).
      if (!open.shard && !open.cache) {
        ++it;
        continue;
      }
      Route route = options_.router->RouteShard(open.id);
      // Led elsewhere, or here at another generation (a replica-set change raises it): the
      // shard reopens at the new one (its replicator stops before the store closes, so the
      // store's generation never changes under a running replicator).
      // A planned move's fence is Unavailable at a newer generation: the shard closes too
      // (the replication host then drains its store to the target). A lapsed lease keeps the
      // generation: nobody else may lead it, so it stays open.
      bool deposed_here = route.is_remote() || route.generation != open.led_generation;
      if (!deposed_here) {
        ++it;
        continue;
      }
      open_shards_.Add(-1);
      deposed.push_back({std::make_shared<OpenShard>(std::move(open)), std::move(route)});
      it = shards_.erase(it);
    }
  }
  for (auto& d : deposed) {
    const std::string key = d.shard->id.ToString();
    const uint64_t own = d.shard->led_generation.value();
    std::string now =
        d.route.is_remote()
            ? d.route.owner_node_id +
                  (d.route.owner_client_addr.empty() ? ""
                                                     : " (" + d.route.owner_client_addr + ")") +
                  " leads it at generation " + std::to_string(d.route.generation.value())
        : d.route.is_local()
            ? "this broker leads it at generation " + std::to_string(d.route.generation.value())
            : "generation " + std::to_string(d.route.generation.value()) + " is " +
                  d.route.unavailable_reason;
    if (!d.route.is_local() && !d.route.is_remote()) {
      SettleAdmittedWrites(*d.shard->executor, d.shard->shard, d.shard->cache, d.shard->store.get(),
                           std::chrono::milliseconds(2000));
    }
    std::string why = "shard " + key + " moved: " + now + "; this broker stepped down from " +
                      "generation " + std::to_string(own);
    spdlog::warn("{}: closing it here (subscriptions end with not_leader)", why);
    QueueEnd end;
    end.kind = QueueEnd::Kind::kMoved;
    end.code = Code(wire::flx1::ProtocolErrorCode::kNotLeader);
    end.message = why + " (resume there)";
    end.generation = d.route.generation.value();
    if (d.route.is_remote()) {
      end.node_id = d.route.owner_node_id;
      end.addr = d.route.owner_client_addr;
    }
    CloseRemoved(d.shard, end, GroupError{GroupErrc::kUnavailable, false, why + " (retry)"},
                 Error{ErrorCode::kUnavailable, why + ": nothing written (retry)"});
  }
  return deposed.size();
}

void BrokerCore::Stop() {
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  opener_.Stop();  // an open in progress finishes; queued ones find the core stopped
  for (auto& e : executors_) e->Stop();
  // The replication leader lets go of every store before it closes (outside mu_: the hook
  // waits for the replicator to stop, which may read the core's shards' logs meanwhile).
  std::vector<const OpenShard*> closing;
  {
    MutexLock lock(mu_);
    for (auto& [key, open] : shards_) closing.push_back(&open);
  }
  for (const OpenShard* open : closing) StoreClosing(*open);
  MutexLock lock(mu_);
  for (auto& [key, open] : shards_) {
    if (open.groups) open.groups->Stop();
    if (open.shard) open.shard->CloseLog();  // a durable shard's last appends complete first
    if (open.cache) open.cache->CloseLogs();
    open.groups.reset();
    open.shard.reset();
    open.cache.reset();
    if (open.store) {
      if (auto closed = open.store->Close(); !closed) {
        spdlog::error("shard close failed shard={} error={}", key, closed.error().ToString());
      }
      StoreClosed(open);
    }
  }
  open_shards_.Set(0);
  shards_.clear();
  dropped_.clear();  // closed when they were dropped
}

}  // namespace felix::broker
