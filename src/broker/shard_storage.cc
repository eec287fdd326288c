#include "broker/shard_storage.h"

#include <spdlog/spdlog.h>

#include "broker/protocol_codes.h"

namespace felix::broker {

ShardStoreLayout ShardStorage::StreamLayout(const catalog::Stream& stream, uint32_t shard) const {
  return StreamStoreLayout(options_.storage_dir, options_.log_defaults, stream, shard);
}

ShardStoreLayout ShardStorage::CacheLayout(const catalog::Cache& cache, uint32_t shard) const {
  return CacheStoreLayout(options_.storage_dir, options_.log_defaults, cache, shard);
}

Result<std::unique_ptr<storage::ShardStore>> ShardStorage::Open(
    const std::string& key, const ShardStoreLayout& layout) const {
  if (options_.custody != nullptr && !options_.custody->Claim(layout.dir, StoreHolder::kCore)) {
    // Retryable: the follower releases it once the assignment names this broker leader; the
    // core's own previous store of the shard (stepped down a moment ago) once it closed.
    const bool own = options_.custody->HolderOf(layout.dir) == StoreHolder::kCore;
    return Fail(ErrorCode::kUnavailable,
                "shard " + key + " unavailable: " +
                    (own ? "its previous store on this broker is still closing (retry)"
                         : "its store is held by this broker's replication follower (retry "
                           "once the leadership handover completed)"));
  }
  auto store = storage::ShardStore::Open(layout.dir, layout.store_options());
  if (!store) {
    Released(layout.dir);
    return tl::unexpected(Refused(key, layout.dir, store.error()));
  }
  if (options_.custody == nullptr && (*store)->replica_state().retention_held) {
    // A single node has no replication to raise the commit offset a saved hold waits at
    // (replication.md §20: a broker without membership lifts saved holds at open).
    if (auto lifted = (*store)->SetRetentionHold(false); !lifted) {
      Released(layout.dir);
      return tl::unexpected(Refused(key, layout.dir, lifted.error()));
    }
  }
  if (options_.health != nullptr) options_.health->Clear(HealthKind::kShardOpen, layout.dir);
  return std::move(*store);
}

void ShardStorage::Closing(const ShardId& id) const {
  if (options_.on_store_closing) options_.on_store_closing(id);
}

void ShardStorage::Released(const std::string& dir) const {
  if (options_.custody != nullptr) options_.custody->Release(dir, StoreHolder::kCore);
}

Error ShardStorage::Refused(const std::string& key, const std::string& dir,
                            const storage::StorageError& error) const {
  std::string detail = error.ToString();
  if (options_.health == nullptr || options_.health->Set(HealthKind::kShardOpen, dir, detail)) {
    spdlog::error("shard log refused at open shard={} dir={} error={}", key, dir, detail);
  }
  // `shard_unavailable` has retry class `retry`: nothing was written (issue 12 item 6).
  return Error{ErrorCode::kUnavailable,
               "shard " + key + " unavailable: its log was refused at open: " + detail};
}

WriteFaultReporting ShardStorage::Reporting(const char* log_kind) const {
  WriteFaultReporting r;
  r.health = options_.health;
  if (options_.log_defaults.metrics != nullptr)
    r.full = &FullCounter(*options_.log_defaults.metrics, log_kind);
  return r;
}

Counter& ShardStorage::FullCounter(MetricsRegistry& metrics, const char* log_kind) {
  return metrics.AddCounter("felix_storage_full_total",
                            "log writes refused because the disk or quota is full (ENOSPC, EDQUOT)",
                            std::string("log=\"") + log_kind + "\"");
}

}  // namespace felix::broker
