#include "broker/broker_core.h"

#include <filesystem>
#include <functional>
#include <thread>

#include <spdlog/spdlog.h>

#include "broker/log_adapters.h"

namespace felix::broker {

BrokerCore::BrokerCore(BrokerCoreOptions options, const catalog::Catalog& catalog,
                       MetricsRegistry& metrics)
    : options_(std::move(options)),
      catalog_(catalog),
      open_shards_(metrics.AddGauge("felix_broker_open_shards", "stream shards open here")),
      cache_metrics_(metrics),
      group_metrics_(metrics) {
  size_t n = options_.executors;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < n; ++i) {
    executors_.push_back(std::make_unique<Executor>("felix-shard-" + std::to_string(i)));
  }
  options_.log_defaults.metrics = &metrics;
}

BrokerCore::~BrokerCore() {
  Stop();
}

std::optional<catalog::Stream> BrokerCore::FindStream(std::string_view tenant, std::string_view ns,
                                                      std::string_view stream) const {
  auto snapshot = catalog_.Snapshot();
  const catalog::Stream* found = snapshot->FindStream(tenant, ns, stream);
  if (found == nullptr) return std::nullopt;
  return *found;
}

Result<StreamShardHandle> BrokerCore::OpenStreamShard(const catalog::Stream& stream,
                                                      uint32_t shard_index) {
  if (shard_index >= stream.shards) {
    return Fail(ErrorCode::kInvalidArgument, "shard " + std::to_string(shard_index) +
                                                 " out of range: stream has " +
                                                 std::to_string(stream.shards) + " shards");
  }
  ShardId id{stream.tenant_id, stream.namespace_name, stream.name, ShardKind::kStream, shard_index};
  std::string key = id.ToString();
  std::lock_guard lock(mu_);
  if (stopped_) return Fail(ErrorCode::kUnavailable, "broker is stopping");
  auto it = shards_.find(key);
  if (it != shards_.end()) {
    return StreamShardHandle{it->second.shard, it->second.executor, it->second.groups,
                             it->second.producers};
  }

  OpenShard open;
  open.executor = executors_[std::hash<std::string>{}(key) % executors_.size()].get();
  std::unique_ptr<RecordLog> log;
  if (stream.durable) {
    storage::LogOptions log_options = options_.log_defaults;
    if (stream.fsync_mode) {
      switch (*stream.fsync_mode) {
        case catalog::FsyncMode::kNone:
          log_options.fsync_mode = storage::FsyncMode::kNone;
          break;
        case catalog::FsyncMode::kPeriodic:
          log_options.fsync_mode = storage::FsyncMode::kPeriodic;
          break;
        case catalog::FsyncMode::kOnCommit:
          log_options.fsync_mode = storage::FsyncMode::kOnCommit;
          break;
      }
    }
    if (stream.retention.max_size_bytes)
      log_options.retention_bytes = *stream.retention.max_size_bytes;
    if (stream.retention.max_age_seconds) {
      log_options.retention_age = std::chrono::seconds(*stream.retention.max_age_seconds);
    }
    std::filesystem::path dir = std::filesystem::path(options_.storage_dir) / stream.tenant_id /
                                stream.namespace_name / stream.name / std::to_string(shard_index);
    auto store =
        storage::ShardStore::Open(dir.string(), storage::ShardStoreOptions::Uniform(log_options));
    if (!store) return tl::unexpected(store.error().ToError());
    open.store = std::move(*store);
    log = std::make_unique<DurableRecordLog>(open.store->log(storage::LogKind::kStream));
    spdlog::info("shard opened shard={} durable=true next_offset={}", key, log->next_offset());
  } else {
    log = std::make_unique<RingRecordLog>(options_.ring);
  }
  open.shard = std::make_shared<StreamShard>(id, *open.executor, std::move(log), options_.shard);
  if (open.store) {
    // Consumer groups live beside the shard, on its executor, with their own two logs.
    open.groups = std::make_shared<StreamGroups>(
        key, *open.executor, *open.shard, open.store->log(storage::LogKind::kCursors),
        open.store->log(storage::LogKind::kDeadLetters), options_.groups, group_metrics_);
    if (auto recovered = open.groups->Recover(); !recovered) {
      return tl::unexpected(recovered.error());
    }
    open.shard->SetCommitListener([groups = open.groups.get()] { groups->OnCommitted(); });
  }
  // Idempotent producers: marks in the shard's producers log (in memory without a store).
  open.producers = std::make_shared<ShardProducers>(
      *open.executor, *open.shard,
      open.store ? &open.store->log(storage::LogKind::kProducers) : nullptr);
  if (auto recovered = open.producers->Recover(); !recovered) {
    return tl::unexpected(recovered.error());
  }
  StreamShardHandle handle{open.shard, open.executor, open.groups, open.producers};
  shards_.emplace(key, std::move(open));
  open_shards_.Add(1);
  return handle;
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
  ShardId id{cache.tenant_id, cache.namespace_name, cache.name, ShardKind::kCache, shard_index};
  std::string key = id.ToString();
  std::lock_guard lock(mu_);
  if (stopped_) return Fail(ErrorCode::kUnavailable, "broker is stopping");
  auto it = shards_.find(key);
  if (it != shards_.end()) return CacheShardHandle{it->second.cache, it->second.executor};

  OpenShard open;
  open.executor = executors_[std::hash<std::string>{}(key) % executors_.size()].get();
  std::unique_ptr<RecordLog> cache_log, counter_log;
  if (cache.durable) {
    std::filesystem::path dir = std::filesystem::path(options_.storage_dir) / "_caches" /
                                cache.tenant_id / cache.namespace_name / cache.name /
                                std::to_string(shard_index);
    auto store = storage::ShardStore::Open(
        dir.string(), storage::ShardStoreOptions::Uniform(options_.log_defaults));
    if (!store) return tl::unexpected(store.error().ToError());
    open.store = std::move(*store);
    cache_log = std::make_unique<DurableRecordLog>(open.store->log(storage::LogKind::kCache));
    counter_log = std::make_unique<DurableRecordLog>(open.store->log(storage::LogKind::kCounters));
  }
  CacheShardOptions cache_options = options_.cache;
  cache_options.default_ttl_ms = cache.default_ttl_ms;
  cache_options.metrics = &cache_metrics_;
  open.cache = std::make_shared<CacheShard>(id, *open.executor, std::move(cache_log),
                                            std::move(counter_log), std::move(cache_options));
  if (auto opened = open.cache->Open(); !opened) {
    open.cache->CloseLogs();
    open.cache.reset();
    if (open.store) (void)open.store->Close();
    return tl::unexpected(opened.error());
  }
  CacheShardHandle handle{open.cache, open.executor};
  open.executor->Post([shard = open.cache] { shard->StartSweep(); });
  shards_.emplace(key, std::move(open));
  open_shards_.Add(1);
  return handle;
}

void BrokerCore::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  for (auto& e : executors_) e->Stop();
  std::lock_guard lock(mu_);
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
    }
  }
  open_shards_.Set(0);
  shards_.clear();
}

}  // namespace felix::broker
