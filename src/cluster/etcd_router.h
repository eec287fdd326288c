// EtcdRouter: the cluster's ShardRouter (broker/shard_router.h), answering from the assignments
// this broker holds (ClusterView):
//   - the assignment names this node as leader → Local(generation), unless this node's lease
//     is not usable now (the cached flag): then Unavailable "node lease not valid" — a broker
//     that cannot prove its lease stops serving before the lease could have expired
//     (cluster-etcd.md §3);
//   - another node leads → Remote(leader, its client address from nodes/ if registered,
//     generation);
//   - no assignment yet, the shard is held unplaced, or a planned move has fenced it
//     (move_plan.h; on every broker, its leader included) → Unavailable with the reason.
// Brokers() lists registered nodes with a client address (FLX1 `topology`).
//
// Threading: thread-safe (ClusterView is). The view must outlive the router; `lease_valid`
// must be cheap (it runs on every request) and callable from any thread.
#pragma once

#include <functional>
#include <string>

#include "broker/shard_router.h"
#include "cluster/cluster_view.h"

namespace felix::cluster {

class EtcdRouter final : public broker::ShardRouter {
 public:
  EtcdRouter(const ClusterView& view, std::string node_id, std::function<bool()> lease_valid)
      : view_(view), node_id_(std::move(node_id)), lease_valid_(std::move(lease_valid)) {}

  broker::Route RouteShard(const broker::ShardId& shard) const override;
  std::vector<broker::BrokerEndpoint> Brokers() const override;

 private:
  const ClusterView& view_;
  const std::string node_id_;
  const std::function<bool()> lease_valid_;
};

// The cluster's name of a broker shard.
ShardRef ToShardRef(const broker::ShardId& shard);

}  // namespace felix::cluster
