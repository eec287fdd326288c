// One placement pass of the controller (cluster-etcd.md §2, §5): from a ControllerView, compute the
// target with Place() and write the difference to etcd, one WriteAssignment / DeleteAssignment
// transaction per shard (each compares the controller key's create_revision and the
// assignment's mod_revision, and raises the shard's generation by exactly one).
//
// What a pass writes (PlanShard):
// - a shard with no assignment gets the target leader, replicas = leader + target followers;
// - a shard whose assignment is active keeps its current leader — changing a live leader is a
//   move (fence → cut over, move_plan.h: an operator's request or a draining leader) and
//   replacing a dead one is failover (after DownTracker says "down") — and takes the target's
//   followers when they
//   differ. A target leader other than the current one becomes a follower first (it is where a
//   later move goes). Current followers whose node is not registered keep their slot: replacing
//   a replica is for after its grace period (restore-RF, cluster-etcd.md §5), not for every
//   lapse of a lease. Nothing is written when the set is unchanged. A shard with a follower
//   `joining` belongs to the restore plan (restore_plan.h) until it is seated or abandoned.
// - a shard in state moving or unavailable, or with an undecodable value, is left alone;
// - an assignment whose stream/cache left the catalog (or whose shard number is beyond the
//   catalog's shard count) is deleted; one whose catalog value does not decode is left alone.
// A lost race (kLostRace) re-plans that shard from the value the failed txn returned; kDeposed
// ends the pass at once. Nodes absent from nodes/ are never given a new role.
//
// Blocking (etcd round trips); any thread; no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/assignment_txn.h"
#include "cluster/controller_view.h"
#include "cluster/placement.h"
#include "etcd/etcd_client.h"

namespace felix::cluster {

// The assignment to write for one shard, or nullopt when nothing changes. `target` is Place()'s
// choice (null: no node to place on); `registered` the node ids present under nodes/. The
// result's generation is left 0 (WriteAssignment sets it).
std::optional<Assignment> PlanShard(const std::optional<Assignment>& current,
                                    const ReplicaSet* target, uint32_t replication_factor,
                                    const std::set<std::string>& registered);

// Failover (cluster-etcd.md §5, replication.md §14): the assignment that promotes a follower of
// `current` (active, or fenced in a move) whose leader is in `down`, or nullopt. Only a follower
// the leader's newest report at the current generation (for a fenced shard: or the one before,
// which the fence generation wrote nothing after) names caught up, that is registered and not down,
// is a candidate; the one furthest ahead (report.durable) wins, ties go to the earlier replica. The
// replica set is kept, the dead leader included (it comes back as a follower and is repaired
// there); the new leader is listed first; a restore under way ends (the joiner stays a plain
// replica when it joined an even-sized set, else it is dropped: replication.md §19). No report at
// this generation, or no candidate: nullopt — the shard stays with its dead leader and unavailable
// rather than go to a replica that may lack acknowledged writes (an RF 1 shard never has a report,
// so it always waits for its owner).
std::optional<Assignment> PlanFailover(const std::optional<Assignment>& current,
                                       const Report* report, const std::set<std::string>& down,
                                       const std::set<std::string>& registered);

struct PassOptions {
  // Nodes DownTracker declares down now: their shards fail over (PlanFailover).
  std::set<std::string> down;
  // Nodes down for at least the restore grace period: the followers they hold are replaced
  // (restore_plan.h). Empty when restoring is off.
  std::set<std::string> lost;
  // Fenced moves older than the controller's move timeout: retaken (move_plan.h).
  std::set<ShardRef> fence_expired;
  // Checked before every write; false ends the pass early (paused) without writing.
  std::function<bool()> can_write;
  // Re-plans of one shard after lost races before the pass gives up on it (counted as error).
  int max_attempts = 8;
};

struct PassResult {
  uint64_t writes = 0;                // assignments put
  uint64_t deletes = 0;               // assignments deleted
  uint64_t lost_races = 0;            // failed compares on the assignment (each re-planned)
  uint64_t errors = 0;                // etcd errors, or a shard still racing after max_attempts
  uint64_t skipped = 0;               // shards left alone because their stored metadata is corrupt
  uint64_t promotions = 0;            // failovers written (included in `writes`)
  uint64_t leaders_returned = 0;      // failovers not written: the leader registered again
  uint64_t restores = 0;              // restore steps written (join/seat/abandon; in `writes`)
  uint64_t move_steps = 0;            // planned-move steps written (fence/cut over/retake)
  std::vector<std::string> unplaced;  // shards with no node to go to
  std::vector<std::string> leaderless;  // led by a down node with no caught-up follower
  int64_t written_revision = 0;         // the newest revision a put or delete wrote; 0: none
  bool deposed = false;                 // the controller key is not this term's any more
  bool paused = false;                  // can_write said no
  // Every shard reached its target (or was deliberately left alone).
  bool complete() const { return !deposed && !paused && errors == 0; }
};

PassResult RunPass(etcd::EtcdClient& etcd, const ControllerTerm& term, const ControllerView& view,
                   const PassOptions& options);

}  // namespace felix::cluster
