// ShardStorage: the storage-custody half of the broker core. It knows where each durable
// shard's ShardStore lives (shard_store_layout.h) and opens and closes stores under the
// StoreCustody claim; BrokerCore, the shard-host half, owns everything that serves a shard
// (executors, the map of shards, the generation and write fence, the open / close / step-down
// lifecycle, retention timers) and asks this class for a store from its opener pool — never on
// a QUIC loop thread, never under the core's mutex, because Open replays all six logs.
//
//   Open     claim the directory for the core (a directory a replication follower holds, or
//            that this core's previous store of the shard still holds while it closes, is
//            refused: kUnavailable, retryable), then open and recover the store. A store whose
//            logs are refused releases the claim and is answered kUnavailable (retry class
//            `retry`: nothing was written), logged once while it stays refused and listed on
//            /health; a later success clears the listing.
//   Closing  before a store the core held closes: tells the replication side
//            (on_store_closing), which stops reading it.
//   Released after it closed: gives the directory back (a follower may open it now).
//
// Threading: const after construction; every method may run on any thread (the custody and
// the health registry are thread-safe). The custody, the health registry and the metrics
// registry (log_defaults.metrics) must outlive it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "broker/log_appender.h"
#include "broker/shard_router.h"
#include "broker/shard_store_layout.h"
#include "broker/store_custody.h"
#include "catalog/catalog.h"
#include "common/health.h"
#include "common/result.h"
#include "storage/shard_store.h"

namespace felix::broker {

struct ShardStorageOptions {
  std::string storage_dir;
  storage::LogOptions log_defaults;  // metrics set: the registry of felix_storage_full_total
  StoreCustody* custody = nullptr;   // null: a single node, nothing else opens stores
  HealthRegistry* health = nullptr;  // optional
  std::function<void(const ShardId&)> on_store_closing;  // optional
};

class ShardStorage {
 public:
  explicit ShardStorage(ShardStorageOptions options) : options_(std::move(options)) {}

  ShardStoreLayout StreamLayout(const catalog::Stream& stream, uint32_t shard) const;
  ShardStoreLayout CacheLayout(const catalog::Cache& cache, uint32_t shard) const;

  // `key` names the shard in errors and logs (ShardId::ToString()). Blocks on I/O.
  Result<std::unique_ptr<storage::ShardStore>> Open(const std::string& key,
                                                    const ShardStoreLayout& layout) const;
  void Closing(const ShardId& id) const;
  void Released(const std::string& dir) const;

  // How appends to a log of `log_kind` report write faults: /health, and ENOSPC/EDQUOT
  // refusals counted in felix_storage_full_total{log}.
  WriteFaultReporting Reporting(const char* log_kind) const;
  // felix_storage_full_total{log=`log_kind`} in `metrics`: also counted by writes outside the
  // append path (a promotion's generation-start record, cluster/promotion_fence.h).
  static Counter& FullCounter(MetricsRegistry& metrics, const char* log_kind);

 private:
  Error Refused(const std::string& key, const std::string& dir,
                const storage::StorageError& error) const;

  const ShardStorageOptions options_;
};

}  // namespace felix::broker
