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
#include "broker/log_adapters.h"
#include "broker/stream_groups.h"
#include "broker/stream_shard.h"
#include "catalog/catalog.h"
#include "common/health.h"
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
  // Optional; must outlive the core. Shards refused at open and logs whose writes fail are
  // listed there (/health).
  HealthRegistry* health = nullptr;
};

struct StreamShardHandle {
  std::shared_ptr<StreamShard> shard;
  Executor* executor = nullptr;
  std::shared_ptr<StreamGroups> groups;  // durable shards only; on `executor` like the shard
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

  // Delete means delete (issue 12 item 5): called after the catalog deleted a stream (cache),
  // and before it creates one (leftovers of an interrupted delete). Closes the open shards —
  // live subscriptions end with `not_found` "... was deleted", waiting group polls are
  // answered the same — then removes the directory, so a stream created again under the same
  // name starts empty. Blocks until done; never call it on a shard executor.
  void DropStream(const std::string& tenant, const std::string& ns, const std::string& stream);
  void DropCache(const std::string& tenant, const std::string& ns, const std::string& cache);

  void Stop();

 private:
  struct OpenShard {
    std::unique_ptr<storage::ShardStore> store;  // durable shards only
    std::shared_ptr<StreamShard> shard;
    std::shared_ptr<CacheShard> cache;  // cache shards (then `shard` is null)
    Executor* executor = nullptr;
    std::shared_ptr<StreamGroups> groups;
  };

  void DropShards(const ShardId& any_shard, const std::string& dir);
  // A shard's logs were refused at open: logged once (requests retry the open), listed on
  // /health, answered `shard_unavailable`.
  Error ShardRefused(const std::string& key, const std::string& dir,
                     const storage::StorageError& error);
  WriteFaultReporting Reporting(const char* log_kind);

  BrokerCoreOptions options_;
  const catalog::Catalog& catalog_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::mutex mu_;
  std::map<std::string, OpenShard> shards_;          // by ShardId::ToString()
  std::vector<std::shared_ptr<OpenShard>> dropped_;  // closed shards of deleted streams/caches
  std::atomic<uint64_t> next_subscription_id_{1};
  bool stopped_ = false;
  Gauge& open_shards_;
  CacheMetrics cache_metrics_;
  GroupMetrics group_metrics_;
};

}  // namespace felix::broker
