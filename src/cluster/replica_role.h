// Step 1 of the follower's checks (replication.md §5): what this broker's routing view says
// about a replication message naming generation G of a shard, and which shard a frame is
// about. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "cluster/replica_follower.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// The view's assignment of the shard (nullopt: unknown here) against G:
//   newer than G → kViewNewer (FencedEpoch); older → kViewOlder (StaleRoute); at G and this
//   broker is in the replica set without leading it → kFollower; else kNotReplica. A fenced
//   move (move_plan.h) at G + 1 counts as G: its leader drains what it wrote at G.
FollowerRole FollowerRoleFor(const std::optional<Assignment>& assignment, uint64_t generation,
                             std::string_view self);

// The shard a records (7, 14, 16, 18, 20, 25, 26, 32, 36), bootstrap (10, 15, 17, 19, 21),
// rebuild (24), fence (29) or fetch (31, 33, 37) frame addresses, its log and generation;
// nullopt for other kinds. The cursor
// and dead-letter logs belong to their stream shard, the counter log to its cache shard.
struct ReplicaTarget {
  ShardRef shard;
  wire::flxi::ReplicaLog log = wire::flxi::ReplicaLog::kStream;
  uint64_t generation = 0;
};
std::optional<ReplicaTarget> ReplicaTargetOf(const wire::flxi::Frame& frame);

}  // namespace felix::cluster
