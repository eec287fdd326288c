// ShardStore: the six durable logs of one shard, each in its own subdirectory of the shard
// directory, opened (and recovered) in one call:
//   <dir>/stream        stream records
//   <dir>/cache         cache operations
//   <dir>/cursors       consumer-group cursors
//   <dir>/dead_letters  dead letters
//   <dir>/counters      counters
//   <dir>/producers     idempotent-producer marks (broker/shard_producers.h)
// Each log keeps its own DurableLog contract (see durable_log.h); the store only owns them.
// Thread-safe as its logs are; Close (or the destructor) closes all six. A shard directory
// written before a kind existed gets that log created empty.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "storage/durable_log.h"

namespace felix::storage {

enum class LogKind { kStream = 0, kCache, kCursors, kDeadLetters, kCounters, kProducers };
inline constexpr size_t kLogKindCount = 6;
const char* LogKindName(LogKind kind);  // the subdirectory name
std::optional<LogKind> ParseLogKind(std::string_view name);

struct ShardStoreOptions {
  // Options for each log, indexed by LogKind; metrics_label defaults to the kind's name.
  std::array<LogOptions, kLogKindCount> logs;
  // Convenience: the same options for every kind.
  static ShardStoreOptions Uniform(const LogOptions& options);
};

class ShardStore {
 public:
  static StorageResult<std::unique_ptr<ShardStore>> Open(const std::string& dir,
                                                         ShardStoreOptions options);
  ~ShardStore();

  DurableLog& log(LogKind kind) { return *logs_[size_t(kind)]; }
  const DurableLog& log(LogKind kind) const { return *logs_[size_t(kind)]; }
  const std::string& dir() const { return dir_; }
  // Closes every log; returns the first error.
  StorageResult<void> Close();

 private:
  ShardStore() = default;
  std::string dir_;
  std::array<std::unique_ptr<DurableLog>, kLogKindCount> logs_;
};

}  // namespace felix::storage
