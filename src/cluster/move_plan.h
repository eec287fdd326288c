// Planned moves (control-plane.md §12, cluster-etcd.md §5: "a shard whose leader is alive is
// only ever moved"): the controller's rule for one shard. Two writes, each raising the
// generation by one:
//
//   1. fence — an active shard with a move request (moves/, an operator's `felix cluster move`)
//      naming a live replica T that the leader's report at the current generation names caught
//      up — or, with no request, a shard whose leader is draining (drains/: a broker shutting
//      down), then T is the caught-up live follower furthest ahead that is not draining itself —
//      becomes kMoving {T, fence}, same leader and replica set. Every broker then routes the
//      shard Unavailable (a retryable refusal, nothing written). The leader closes the shard
//      (appends already admitted land; a `Quorum` shard's held writes wait for their majority),
//      ships its logs as they now stand to every follower (replication_host.h: the drain) and
//      reports at the fence generation naming caught up the followers that hold every log of
//      the shard to its final tail;
//   2. cut over — once that report names T (alive): leader T, listed first; the old leader
//      keeps its seat as a follower; state active.
//
// A target that is not a replica yet is first copied in — 0. stage: appended to `replicas`,
// kMoving {T, stage}; the leader serves and ships to it like any follower (it counts toward a
// `Quorum` majority like a restore's joiner, where the reference does not count it) — and the
// fence follows once the leader's report names it caught up. A staged copy that dies is
// abandoned (dropped, active again). At the cut-over the old leader keeps its seat unless the
// set is larger than the replication factor (after a stage), when it leaves.
//
// A fenced shard whose target went down, left the replica set or did not drain within the move
// timeout (`fence_expired`) is retaken: active again under its leader, at a new generation (it
// kept every write; clients find it again). A moving shard whose leader is down is failover's
// (PlanFailover).
//
// Pure; any thread.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "cluster/etcd_records.h"

namespace felix::cluster {

enum class MoveAction { kStage, kFence, kCutOver, kRetake, kAbandon };

const char* MoveActionName(MoveAction action);

struct MoveInputs {
  const Report* report = nullptr;                     // the shard's newest report, if any
  const MoveRequest* request = nullptr;               // its move request, if any
  const std::set<std::string>* draining = nullptr;    // nodes under drains/
  const std::set<std::string>* down = nullptr;        // DownTracker's verdict
  const std::set<std::string>* registered = nullptr;  // present under nodes/
  bool fence_expired = false;       // fenced for longer than the controller's move timeout
  uint32_t replication_factor = 0;  // the catalog's; 0: unknown (the old leader keeps its seat)
};

struct PlannedMove {
  Assignment next;  // generation left 0 (WriteAssignment sets it)
  MoveAction action = MoveAction::kFence;
};

std::optional<PlannedMove> PlanMove(const std::optional<Assignment>& current, const MoveInputs& in);

}  // namespace felix::cluster
