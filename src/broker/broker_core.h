// BrokerCore: the broker's shards and the executors that own them.
//
// Streams come from the catalog; a stream shard is opened on first use (its durable logs
// recovered, or an in-memory ring created) and assigned to one of the core's executors, which
// then owns it for good. Callers resolve a shard to a handle and post work to the handle's
// executor; the shard's methods run only there.
//
// Threading: OpenStreamShard, FindStream and NextSubscriptionId are thread-safe. Stop() (also
// run by the destructor) drains the executors, then closes the shards and their logs; no
// handle may be used after it. The catalog and the metrics registry must outlive the core.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "broker/cache_shard.h"
#include "broker/executor.h"
#include "broker/group_metrics.h"
#include "broker/shard_producers.h"
#include "broker/stream_groups.h"
#include "broker/stream_shard.h"
#include "catalog/catalog.h"
#include "common/metrics.h"
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
};

struct StreamShardHandle {
  std::shared_ptr<StreamShard> shard;
  Executor* executor = nullptr;
  std::shared_ptr<StreamGroups> groups;       // durable shards only; on `executor` like the shard
  std::shared_ptr<ShardProducers> producers;  // idempotent publishing; on `executor`
};

struct CacheShardHandle {
  std::shared_ptr<CacheShard> shard;
  Executor* executor = nullptr;
};

class BrokerCore {
 public:
  BrokerCore(BrokerCoreOptions options, const catalog::Catalog& catalog, MetricsRegistry& metrics);
  ~BrokerCore();
  BrokerCore(const BrokerCore&) = delete;
  BrokerCore& operator=(const BrokerCore&) = delete;

  // The stream as the catalog has it now, or nullopt.
  std::optional<catalog::Stream> FindStream(std::string_view tenant, std::string_view ns,
                                            std::string_view stream) const;

  // kNotFound: no such stream; kInvalidArgument: shard out of range; kIo/kCorruption: the
  // shard's logs could not be opened (the message names the file).
  Result<StreamShardHandle> OpenStreamShard(const catalog::Stream& stream, uint32_t shard);

  // Caches, as streams: durable cache shards keep a ShardStore (cache and counter logs) under
  // <storage_dir>/_caches/<tenant>/<ns>/<cache>/<shard> ("_caches" is no valid tenant name);
  // the index is rebuilt from the logs before the handle is returned.
  std::optional<catalog::Cache> FindCache(std::string_view tenant, std::string_view ns,
                                          std::string_view cache) const;
  Result<CacheShardHandle> OpenCacheShard(const catalog::Cache& cache, uint32_t shard);

  // Broker-wide subscription ids (subscribe without an id).
  uint64_t NextSubscriptionId() { return next_subscription_id_.fetch_add(1); }

  void Stop();

 private:
  struct OpenShard {
    std::unique_ptr<storage::ShardStore> store;  // durable shards only
    std::shared_ptr<StreamShard> shard;
    std::shared_ptr<CacheShard> cache;  // cache shards (then `shard` is null)
    Executor* executor = nullptr;
    std::shared_ptr<StreamGroups> groups;
    std::shared_ptr<ShardProducers> producers;
  };

  BrokerCoreOptions options_;
  const catalog::Catalog& catalog_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::mutex mu_;
  std::map<std::string, OpenShard> shards_;  // by ShardId::ToString()
  std::atomic<uint64_t> next_subscription_id_{1};
  bool stopped_ = false;
  Gauge& open_shards_;
  CacheMetrics cache_metrics_;
  GroupMetrics group_metrics_;
};

}  // namespace felix::broker
