#include "cluster/replica_role.h"

#include <algorithm>

namespace felix::cluster {

namespace flxi = wire::flxi;

FollowerRole FollowerRoleFor(const std::optional<Assignment>& assignment, uint64_t generation,
                             std::string_view self) {
  if (!assignment) return FollowerRole::kNotReplica;
  // A planned move's fence raises the generation but keeps the leader, who drains the logs it
  // wrote at the generation before (move_plan.h): that one is still followed.
  const bool draining = assignment->state == AssignmentState::kMoving && assignment->move &&
                        assignment->move->step == MoveStep::kFence &&
                        assignment->generation == generation + 1;
  if (draining) generation = assignment->generation;
  if (assignment->generation > generation) return FollowerRole::kViewNewer;
  if (assignment->generation < generation) return FollowerRole::kViewOlder;
  if (assignment->leader == self) return FollowerRole::kNotReplica;
  bool member = std::find(assignment->replicas.begin(), assignment->replicas.end(), self) !=
                assignment->replicas.end();
  return member ? FollowerRole::kFollower : FollowerRole::kNotReplica;
}

std::optional<ReplicaTarget> ReplicaTargetOf(const flxi::Frame& frame) {
  auto log = flxi::TargetLog(frame);
  if (!log) return std::nullopt;
  const flxi::ShardRef* ref = nullptr;
  if (const auto* r = std::get_if<flxi::Records>(&frame.body)) ref = &r->shard;
  if (const auto* b = std::get_if<flxi::Bootstrap>(&frame.body)) ref = &b->shard;
  if (const auto* b = std::get_if<flxi::Rebuild>(&frame.body)) ref = &b->shard;
  if (const auto* f = std::get_if<flxi::Fence>(&frame.body)) ref = &f->shard;
  if (const auto* f = std::get_if<flxi::Fetch>(&frame.body)) ref = &f->shard;
  if (ref == nullptr) return std::nullopt;
  bool cache = *log == flxi::ReplicaLog::kCache || *log == flxi::ReplicaLog::kCounters;
  ReplicaTarget out;
  out.shard = ShardRef{cache ? ShardKind::kCache : ShardKind::kStream, std::string(ref->tenant),
                       std::string(ref->ns), std::string(ref->stream), ref->shard};
  out.log = *log;
  out.generation = ref->generation;
  return out;
}

}  // namespace felix::cluster
