#include "cluster/cluster_view.h"

#include <spdlog/spdlog.h>

namespace felix::cluster {

ClusterView::ClusterView(ClusterKeys keys, MetricsRegistry* metrics)
    : keys_(std::move(keys)), metrics_(metrics) {
  if (metrics_ != nullptr) {
    nodes_gauge_ = &metrics_->AddGauge("felix_cluster_nodes",
                                       "brokers registered in etcd, as this broker last saw");
  }
}

void ClusterView::NoteGenerationLocked(const ShardRef& shard, uint64_t generation) {
  if (metrics_ == nullptr) return;
  metrics_
      ->AddGauge("felix_cluster_assignment_generation",
                 "the assignment generation this broker holds per shard (0: unassigned)",
                 "shard=\"" + shard.Path() + "\"")
      .Set(static_cast<int64_t>(generation));
}

void ClusterView::PutNodeLocked(const etcd::KeyValue& kv) {
  auto id = keys_.ParseNode(kv.key);
  auto record = DecodeNodeRecord(kv.value);
  if (!id || !record) {
    spdlog::error("cluster: ignoring undecodable node record key={} error={}", kv.key,
                  id ? record.error().message : id.error().message);
    return;
  }
  nodes_[*id] = std::move(*record);
}

void ClusterView::PutAssignmentLocked(const etcd::KeyValue& kv, bool only_newer) {
  auto shard = keys_.ParseAssign(kv.key);
  auto value = DecodeAssignment(kv.value);
  if (!shard || !value) {
    spdlog::error("cluster: ignoring undecodable assignment key={} error={}", kv.key,
                  shard ? value.error().message : shard.error().message);
    return;
  }
  auto it = assignments_.find(*shard);
  if (only_newer && it != assignments_.end() && value->generation <= it->second.generation) {
    spdlog::warn("cluster: ignoring assignment shard={} generation={} (holding {})", shard->Path(),
                 value->generation, it->second.generation);
    return;
  }
  NoteGenerationLocked(*shard, value->generation);
  if (it != assignments_.end() && it->second.leader != value->leader &&
      !it->second.leader.empty()) {
    previous_leader_[*shard] = it->second.leader;
  }
  assignments_[*shard] = std::move(*value);
}

void ClusterView::ReplaceNodes(const std::vector<etcd::KeyValue>& kvs) {
  MutexLock lock(mu_);
  nodes_.clear();
  for (const auto& kv : kvs) PutNodeLocked(kv);
  if (nodes_gauge_ != nullptr) nodes_gauge_->Set(static_cast<int64_t>(nodes_.size()));
}

void ClusterView::ApplyNodeEvents(const std::vector<etcd::Event>& events) {
  MutexLock lock(mu_);
  for (const auto& event : events) {
    if (event.type == etcd::Event::Type::kPut) {
      PutNodeLocked(event.kv);
      if (auto id = keys_.ParseNode(event.kv.key)) lost_at_.erase(*id);
    } else if (auto id = keys_.ParseNode(event.kv.key)) {
      nodes_.erase(*id);
      lost_at_[*id] = std::chrono::steady_clock::now();
    }
  }
  if (nodes_gauge_ != nullptr) nodes_gauge_->Set(static_cast<int64_t>(nodes_.size()));
}

void ClusterView::ReplaceAssignments(const std::vector<etcd::KeyValue>& kvs) {
  {
    MutexLock lock(mu_);
    for (const auto& [shard, _] : assignments_) NoteGenerationLocked(shard, 0);
    assignments_.clear();
    for (const auto& kv : kvs) PutAssignmentLocked(kv, /*only_newer=*/false);
  }
  if (assignments_listener_) assignments_listener_();
}

void ClusterView::ApplyAssignmentEvents(const std::vector<etcd::Event>& events) {
  {
    MutexLock lock(mu_);
    for (const auto& event : events) {
      if (event.type == etcd::Event::Type::kPut) {
        PutAssignmentLocked(event.kv, /*only_newer=*/true);
      } else if (auto shard = keys_.ParseAssign(event.kv.key)) {
        NoteGenerationLocked(*shard, 0);
        assignments_.erase(*shard);
      }
    }
  }
  if (assignments_listener_) assignments_listener_();
}

std::optional<Assignment> ClusterView::FindAssignment(const ShardRef& shard) const {
  MutexLock lock(mu_);
  auto it = assignments_.find(shard);
  if (it == assignments_.end()) return std::nullopt;
  return it->second;
}

std::optional<NodeRecord> ClusterView::FindNode(std::string_view node_id) const {
  MutexLock lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::vector<NodeRecord> ClusterView::Nodes() const {
  MutexLock lock(mu_);
  std::vector<NodeRecord> out;
  out.reserve(nodes_.size());
  for (const auto& [_, node] : nodes_) out.push_back(node);
  return out;
}

std::map<ShardRef, Assignment> ClusterView::Assignments() const {
  MutexLock lock(mu_);
  return assignments_;
}

std::optional<std::chrono::steady_clock::time_point> ClusterView::PreviousLeaderLostAt(
    const ShardRef& shard) const {
  MutexLock lock(mu_);
  auto previous = previous_leader_.find(shard);
  if (previous == previous_leader_.end()) return std::nullopt;
  auto lost = lost_at_.find(previous->second);
  if (lost == lost_at_.end()) return std::nullopt;
  return lost->second;
}

}  // namespace felix::cluster
