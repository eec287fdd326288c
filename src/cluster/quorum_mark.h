// QuorumMark: the pure mark computation of replication.md §8.1–§8.3 (counting rule of §27),
// kept apart from the replicator so the table can be tested without logs or peers.
//
// Mark = sort {leader tail (if it counts)} ∪ {min(confirmed, leader tail) of every answered,
// non-halted follower} descending and take the majority-th, majority = replicas/2 + 1 with the
// leader counted in `replicas` (1→1, 3→2, 4→3, 5→3); 0 when fewer positions than a majority
// are countable. A follower that has not answered at this generation, or is halted, counts for
// nothing (its cursor's starting guess is never counted). With `own_start` (the offset where
// the leader's own generation begins, §8.3) a majority that does not reach past it counts as 0.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "common/strong_types.h"

namespace felix::cluster {

struct FollowerPosition {
  Offset confirmed;       // what the follower answered holding at this generation
  bool answered = false;  // false: the cursor still holds its starting guess
  bool halted = false;
};

struct MarkInputs {
  Offset leader_tail;
  // False once the leader's log has accepted a newer generation (§8.2): it then counts nothing.
  bool leader_counts = true;
  size_t replicas = 1;  // the replica set at this generation, leader included
  std::optional<Offset> own_start;
};

// Majority of a replica set of `replicas` members, leader included.
size_t Majority(size_t replicas);

Offset QuorumMark(const MarkInputs& in, std::span<const FollowerPosition> followers);

}  // namespace felix::cluster
