// Rebuild refusal backoff (replication.md §13): `base` after the first refusal, doubling per
// consecutive refusal, capped at `max` (5 s → 5 min by default). Pure, for the replicator and
// its tests.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace felix::cluster {

inline std::chrono::milliseconds RebuildBackoff(uint32_t refusals, std::chrono::milliseconds base,
                                                std::chrono::milliseconds max) {
  if (refusals == 0) return std::chrono::milliseconds(0);
  std::chrono::milliseconds delay = base;
  for (uint32_t i = 1; i < refusals && delay < max; ++i) delay *= 2;
  return std::min(delay, max);
}

}  // namespace felix::cluster
