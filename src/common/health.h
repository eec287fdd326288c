// HealthRegistry: faults the broker keeps running through but must not hide (issue 12 items 6
// and 8) — a shard whose log was refused at open, a log whose writes fail (a full disk). Each
// problem has a kind and a key (the shard or log directory) and a human-readable detail; the
// broker's HTTP endpoint lists them on /health, and one gauge per kind counts them:
//   felix_health_problems{kind="storage_write"}  logs whose last write failed
//   felix_health_problems{kind="shard_open"}     shards refused at open
//
// Threading: every method is thread-safe. The MetricsRegistry must outlive the registry.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/metrics.h"

namespace felix {

enum class HealthKind { kStorageWrite, kShardOpen };
const char* HealthKindName(HealthKind kind);  // "storage_write" | "shard_open"

struct HealthProblem {
  HealthKind kind;
  std::string key;     // e.g. the log or shard directory
  std::string detail;  // what failed, with file and position where known
};

class HealthRegistry {
 public:
  explicit HealthRegistry(MetricsRegistry& metrics);
  HealthRegistry(const HealthRegistry&) = delete;
  HealthRegistry& operator=(const HealthRegistry&) = delete;

  // Records (or replaces) the problem under (kind, key); returns true if it is new.
  bool Set(HealthKind kind, const std::string& key, std::string detail);
  // Clears it; returns true if there was one.
  bool Clear(HealthKind kind, const std::string& key);
  std::vector<HealthProblem> Problems() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<HealthKind, std::string>, std::string> problems_;
  Gauge& storage_write_;
  Gauge& shard_open_;
};

}  // namespace felix
