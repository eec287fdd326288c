#include "storage/shard_store.h"

namespace felix::storage {

const char* LogKindName(LogKind kind) {
  switch (kind) {
    case LogKind::kStream:
      return "stream";
    case LogKind::kCache:
      return "cache";
    case LogKind::kCursors:
      return "cursors";
    case LogKind::kDeadLetters:
      return "dead_letters";
    case LogKind::kCounters:
      return "counters";
    case LogKind::kProducers:
      return "producers";
  }
  return "unknown";
}

std::optional<LogKind> ParseLogKind(std::string_view name) {
  for (size_t i = 0; i < kLogKindCount; ++i) {
    if (name == LogKindName(LogKind(i))) return LogKind(i);
  }
  return std::nullopt;
}

ShardStoreOptions ShardStoreOptions::Uniform(const LogOptions& options) {
  ShardStoreOptions o;
  for (auto& l : o.logs) l = options;
  return o;
}

StorageResult<std::unique_ptr<ShardStore>> ShardStore::Open(const std::string& dir,
                                                            ShardStoreOptions options) {
  if (auto r = MakeDirectories(dir); !r) return tl::unexpected(r.error());
  std::unique_ptr<ShardStore> store(new ShardStore());
  store->dir_ = dir;
  for (size_t i = 0; i < kLogKindCount; ++i) {
    LogOptions o = options.logs[i];
    if (o.metrics_label == "log") o.metrics_label = LogKindName(LogKind(i));
    auto log = DurableLog::Open(dir + "/" + LogKindName(LogKind(i)), std::move(o));
    if (!log) return tl::unexpected(log.error());
    store->logs_[i] = std::move(*log);
  }
  return store;
}

ShardStore::~ShardStore() {
  (void)Close();
}

StorageResult<void> ShardStore::Close() {
  StorageResult<void> first;
  for (auto& l : logs_) {
    if (!l) continue;
    auto r = l->Close();
    if (!r && first) first = r;
  }
  return first;
}

}  // namespace felix::storage
