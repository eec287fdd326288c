#include "common/health.h"

namespace felix {

const char* HealthKindName(HealthKind kind) {
  switch (kind) {
    case HealthKind::kStorageWrite:
      return "storage_write";
    case HealthKind::kShardOpen:
      return "shard_open";
  }
  return "?";
}

namespace {
constexpr char kHelp[] = "faults the broker runs through, by kind (details on /health)";
}

HealthRegistry::HealthRegistry(MetricsRegistry& metrics)
    : storage_write_(metrics.AddGauge("felix_health_problems", kHelp, "kind=\"storage_write\"")),
      shard_open_(metrics.AddGauge("felix_health_problems", kHelp, "kind=\"shard_open\"")) {}

bool HealthRegistry::Set(HealthKind kind, const std::string& key, std::string detail) {
  std::lock_guard lock(mu_);
  auto [it, added] = problems_.insert_or_assign({kind, key}, std::move(detail));
  if (added) (kind == HealthKind::kStorageWrite ? storage_write_ : shard_open_).Add(1);
  return added;
}

bool HealthRegistry::Clear(HealthKind kind, const std::string& key) {
  std::lock_guard lock(mu_);
  if (problems_.erase({kind, key}) == 0) return false;
  (kind == HealthKind::kStorageWrite ? storage_write_ : shard_open_).Add(-1);
  return true;
}

std::vector<HealthProblem> HealthRegistry::Problems() const {
  std::lock_guard lock(mu_);
  std::vector<HealthProblem> out;
  for (const auto& [k, detail] : problems_) out.push_back({k.first, k.second, detail});
  return out;
}

}  // namespace felix
