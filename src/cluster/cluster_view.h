// ClusterView: this broker's copy of the cluster's membership (`nodes/`) and shard assignments
// (`assign/`), as the etcd watches deliver them (cluster-etcd.md §4).
//
// Fed by two PrefixMirrors (ClusterNode wires them): a snapshot replaces everything of its
// prefix; events apply in revision order, and an assignment event whose generation is not
// above the one held for that shard is ignored (a stale or replayed write never moves a shard
// back). A deletion always applies (the stream or cache is gone). Values that do not decode
// are logged and skipped: corrupt metadata never crashes a broker.
//
// Threading: every method may be called from any thread (one mutex; readers copy out what
// they need). The feeding callbacks come from the mirrors' threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "etcd/etcd_client.h"

namespace felix::cluster {

class ClusterView {
 public:
  // `metrics` (optional, must outlive the view) gets felix_cluster_assignment_generation per
  // shard and felix_cluster_nodes.
  explicit ClusterView(ClusterKeys keys, MetricsRegistry* metrics = nullptr);

  // Runs after every snapshot or batch of events of the assign/ mirror has been applied (on
  // the mirror's thread, outside the view's mutex; it may read the view). Set before the
  // mirror starts feeding the view; the listener must not block for long.
  void SetAssignmentsListener(std::function<void()> listener) {
    assignments_listener_ = std::move(listener);
  }

  // nodes/ mirror.
  void ReplaceNodes(const std::vector<etcd::KeyValue>& kvs);
  void ApplyNodeEvents(const std::vector<etcd::Event>& events);
  // assign/ mirror.
  void ReplaceAssignments(const std::vector<etcd::KeyValue>& kvs);
  void ApplyAssignmentEvents(const std::vector<etcd::Event>& events);

  std::optional<Assignment> FindAssignment(const ShardRef& shard) const;
  std::optional<NodeRecord> FindNode(std::string_view node_id) const;
  std::vector<NodeRecord> Nodes() const;  // by node id
  std::map<ShardRef, Assignment> Assignments() const;
  // When this view saw the nodes/ key of the shard's previous leader go (its lease lapsed) —
  // the leader before the current assignment's, if the leader changed and that node's key has
  // not come back since; else nullopt. The start of a failover as this broker saw it.
  std::optional<std::chrono::steady_clock::time_point> PreviousLeaderLostAt(
      const ShardRef& shard) const;

 private:
  void PutAssignmentLocked(const etcd::KeyValue& kv, bool only_newer) REQUIRES(mu_);
  void PutNodeLocked(const etcd::KeyValue& kv) REQUIRES(mu_);
  void NoteGenerationLocked(const ShardRef& shard, uint64_t generation) REQUIRES(mu_);

  const ClusterKeys keys_;
  MetricsRegistry* metrics_;
  std::function<void()> assignments_listener_;  // set before feeding; read-only after
  Gauge* nodes_gauge_ = nullptr;

  mutable Mutex mu_;
  std::map<std::string, NodeRecord, std::less<>> nodes_ GUARDED_BY(mu_);
  std::map<ShardRef, Assignment> assignments_ GUARDED_BY(mu_);
  std::map<ShardRef, std::string> previous_leader_ GUARDED_BY(mu_);  // set when the leader changes
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> lost_at_
      GUARDED_BY(mu_);  // node id → when its nodes/ key was seen deleted
};

}  // namespace felix::cluster
