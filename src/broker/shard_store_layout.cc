#include "broker/shard_store_layout.h"

#include <filesystem>

namespace felix::broker {

std::string StreamDir(const std::string& storage_dir, const std::string& tenant,
                      const std::string& ns, const std::string& stream) {
  return (std::filesystem::path(storage_dir) / tenant / ns / stream).string();
}

std::string CacheDir(const std::string& storage_dir, const std::string& tenant,
                     const std::string& ns, const std::string& cache) {
  return (std::filesystem::path(storage_dir) / "_caches" / tenant / ns / cache).string();
}

ShardStoreLayout StreamStoreLayout(const std::string& storage_dir,
                                   const storage::LogOptions& defaults,
                                   const catalog::Stream& stream, uint32_t shard) {
  ShardStoreLayout out;
  out.log_options = defaults;
  if (stream.fsync_mode) out.log_options.fsync_mode = *stream.fsync_mode;
  if (stream.retention.max_size_bytes) {
    out.log_options.retention_bytes = *stream.retention.max_size_bytes;
  }
  if (stream.retention.max_age_seconds) {
    out.log_options.retention_age = std::chrono::seconds(*stream.retention.max_age_seconds);
  }
  out.dir = (std::filesystem::path(
                 StreamDir(storage_dir, stream.tenant_id, stream.namespace_name, stream.name)) /
             std::to_string(shard))
                .string();
  return out;
}

ShardStoreLayout CacheStoreLayout(const std::string& storage_dir,
                                  const storage::LogOptions& defaults, const catalog::Cache& cache,
                                  uint32_t shard) {
  ShardStoreLayout out;
  out.log_options = defaults;
  out.log_options.retention_bytes = 0;
  out.log_options.retention_age = std::chrono::seconds(0);
  out.dir = (std::filesystem::path(
                 CacheDir(storage_dir, cache.tenant_id, cache.namespace_name, cache.name)) /
             std::to_string(shard))
                .string();
  return out;
}

}  // namespace felix::broker
