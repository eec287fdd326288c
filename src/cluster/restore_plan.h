// Restoring the replication factor (cluster-etcd.md §5, replication.md §19): the controller's
// plan for a shard whose follower has stayed down past the grace period
// (FELIX_SHARD_RESTORE_AFTER_MS). Two writes, each raising the generation by one:
//
//   1. join — a live broker outside the set (the highest rendezvous score for the shard among
//      registered, not-down nodes) is added to `replicas` and named `joining`. The leader ships
//      to it like any follower (bootstrap, catch-up) and it counts toward the majority (3 of 4);
//   2. seat — once the leader's report at the current generation names the joiner caught up,
//      lost followers are dropped (while the set is larger than the replication factor) and
//      `joining` is cleared.
//
// A restore is abandoned (the joiner removed, `joining` cleared) when the joiner itself goes
// down or unregisters, or when no follower of the set is lost any more (the replica came back
// before the copy was seated). Nothing starts before the leader has reported at its current
// generation, while the leader is down (failover comes first), or when no broker is free.
//
// Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "cluster/etcd_records.h"

namespace felix::cluster {

struct RestoreInputs {
  const Report* report = nullptr;                     // the shard's newest report, if any
  const std::set<std::string>* lost = nullptr;        // down for at least the grace period
  const std::set<std::string>* down = nullptr;        // down at all
  const std::set<std::string>* registered = nullptr;  // present under nodes/
  uint32_t replication_factor = 1;
  std::string_view shard_key;  // ShardRef::Path(): the rendezvous key of the newcomer choice
};

// The assignment to write next (generation left 0: WriteAssignment sets it), or nullopt.
std::optional<Assignment> PlanRestore(const std::optional<Assignment>& current,
                                      const RestoreInputs& in);

}  // namespace felix::cluster
