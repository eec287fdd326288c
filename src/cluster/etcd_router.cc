#include "cluster/etcd_router.h"

namespace felix::cluster {

ShardRef ToShardRef(const broker::ShardId& shard) {
  return ShardRef{shard.kind == broker::ShardKind::kStream ? ShardKind::kStream : ShardKind::kCache,
                  shard.tenant, shard.name_space, shard.name, shard.shard};
}

broker::Route EtcdRouter::RouteShard(const broker::ShardId& shard) const {
  broker::Route route;
  auto assignment = view_.FindAssignment(ToShardRef(shard));
  if (!assignment) {
    route.where = broker::Route::Where::kUnavailable;
    route.unavailable_reason = "not assigned to a broker yet (the controller places it)";
    return route;
  }
  route.generation = Generation(assignment->generation);
  if (assignment->state == AssignmentState::kUnavailable || assignment->leader.empty()) {
    route.where = broker::Route::Where::kUnavailable;
    route.unavailable_reason = "held unplaced: no caught-up replica is alive";
    return route;
  }
  if (assignment->state == AssignmentState::kMoving && assignment->move &&
      assignment->move->step == MoveStep::kFence) {
    // A planned move's fence (move_plan.h): nobody serves it until the cut-over, which follows
    // in moments; the leader closes it and drains its logs to the target.
    route.where = broker::Route::Where::kUnavailable;
    route.unavailable_reason = "moving from " + assignment->leader + " to " +
                               assignment->move->target + " (retry shortly)";
    return route;
  }
  if (assignment->leader == node_id_) {
    if (lease_valid_ && !lease_valid_()) {
      route.where = broker::Route::Where::kUnavailable;
      route.unavailable_reason =
          "this broker leads it but its etcd lease is not valid now (retry shortly)";
      return route;
    }
    route.where = broker::Route::Where::kLocal;
    return route;
  }
  route.where = broker::Route::Where::kRemote;
  route.owner_node_id = assignment->leader;
  if (auto node = view_.FindNode(assignment->leader)) route.owner_client_addr = node->client_addr;
  return route;
}

std::vector<broker::BrokerEndpoint> EtcdRouter::Brokers() const {
  std::vector<broker::BrokerEndpoint> out;
  for (const auto& node : view_.Nodes()) {
    if (node.client_addr.empty()) continue;
    out.push_back({node.node_id, node.client_addr});
  }
  return out;
}

}  // namespace felix::cluster
