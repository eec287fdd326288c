// Where a durable shard's ShardStore lives and with which per-log options: one definition,
// used by BrokerCore (the leader's custody) and by the cluster's replication host (a
// follower's custody), so a follower writes exactly the directory and log options its
// promoted self will later open as leader.
//
//   stream shard: <storage_dir>/<tenant>/<ns>/<stream>/<shard>, the defaults with the
//                 stream's fsync mode and retention bounds;
//   cache shard:  <storage_dir>/_caches/<tenant>/<ns>/<cache>/<shard> ("_caches" is no valid
//                 tenant name), the defaults without any size or age bound (only compaction
//                 reclaims a cache log, so no live key is ever dropped by retention).
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "catalog/catalog.h"
#include "storage/shard_store.h"

namespace felix::broker {

struct ShardStoreLayout {
  std::string dir;
  storage::LogOptions log_options;  // the same for every log of the shard
  storage::ShardStoreOptions store_options() const {
    return storage::ShardStoreOptions::Uniform(log_options);
  }
  // A size or age bound: retention runs on the shard (the leader's core, and each follower).
  bool bounded_retention() const {
    return log_options.retention_bytes > 0 || log_options.retention_age.count() > 0;
  }
};

ShardStoreLayout StreamStoreLayout(const std::string& storage_dir,
                                   const storage::LogOptions& defaults,
                                   const catalog::Stream& stream, uint32_t shard);
ShardStoreLayout CacheStoreLayout(const std::string& storage_dir,
                                  const storage::LogOptions& defaults, const catalog::Cache& cache,
                                  uint32_t shard);
// The directory holding every shard of a stream (cache): what deleting it removes.
std::string StreamDir(const std::string& storage_dir, const std::string& tenant,
                      const std::string& ns, const std::string& stream);
std::string CacheDir(const std::string& storage_dir, const std::string& tenant,
                     const std::string& ns, const std::string& cache);

}  // namespace felix::broker
