// ControllerView: what the controller knows of the cluster's metadata in etcd, built from one
// mirror of the whole cluster prefix (one snapshot revision for nodes, catalog, assignments and
// the controller key, so a placement pass plans from a consistent cut). It keeps:
// - nodes/<id>: registered nodes (a record that does not decode keeps the node registered but
//   not placeable: its zone and addresses are unknown);
// - catalog/streams/<t>/<ns>/<name> and catalog/caches/...: the streams' and caches' shard
//   counts and replication factors, from `catalog::ToJson(...)` values (a value that does not
//   decode is kept as unreadable: its shards are neither placed nor deleted);
// - assign/<kind>/<t>/<ns>/<name>/<shard>: the assignments with their mod_revision (a value
//   that does not decode is kept as corrupt with its mod_revision);
// - controller: the controller key as stored;
// - reports/<kind>/<t>/<ns>/<name>/<shard>: each shard leader's newest replica report (a value
//   that does not decode is dropped: failover then treats the shard as unreported).
// - moves/<kind>/<t>/<ns>/<name>/<shard>: operators' move requests (one that does not decode
//   is dropped); drains/<node>: the brokers shutting down that give up what they lead.
// Everything else under the prefix (tenants, namespaces, keys, suspects, ...) is ignored.
// Put/Delete say which part changed, so the caller knows whether to re-plan.
//
// A plain value (copied for each pass); not thread-safe. (The broker's own, thread-safe view of
// nodes/ and assign/ is ClusterView, cluster_view.h; the controller needs the catalog and the
// controller key at the same revision, and mod_revisions to plan transactions from.)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "cluster/assignment_txn.h"
#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "etcd/etcd_client.h"

namespace felix::cluster {

// A stream or cache of the catalog.
struct EntityRef {
  ShardKind kind = ShardKind::kStream;
  std::string tenant;
  std::string ns;
  std::string name;
  auto operator<=>(const EntityRef&) const = default;
  bool operator==(const EntityRef&) const = default;
};

EntityRef EntityOf(const ShardRef& shard);

struct CatalogShape {
  uint32_t shards = 0;
  uint32_t replication_factor = 1;
};

struct AssignmentSlot {
  AssignmentRead read;   // value empty when corrupt
  bool corrupt = false;  // the stored value did not decode (mod_revision still valid)
};

class ControllerView {
 public:
  enum class Area { kOther, kNodes, kCatalog, kAssign, kController, kReports, kMoves };

  explicit ControllerView(ClusterKeys keys) : keys_(std::move(keys)) {}

  // Forgets everything (before a snapshot is applied).
  void Clear();
  // Applies one key's new value / deletion; returns the part of the layout it touched.
  Area Put(const etcd::KeyValue& kv);
  Area Delete(std::string_view key);

  int64_t revision() const { return revision_; }
  void set_revision(int64_t revision) { revision_ = revision; }

  // Registered node ids → record (nullopt: registered, record undecodable).
  const std::map<std::string, std::optional<NodeRecord>>& nodes() const { return nodes_; }
  std::set<std::string> RegisteredIds() const;
  // Catalog streams and caches → shape (nullopt: present but unreadable).
  const std::map<EntityRef, std::optional<CatalogShape>>& catalog() const { return catalog_; }
  const std::map<ShardRef, AssignmentSlot>& assignments() const { return assignments_; }
  const std::optional<etcd::KeyValue>& controller() const { return controller_; }
  const std::map<ShardRef, Report>& reports() const { return reports_; }
  const std::map<ShardRef, MoveRequest>& moves() const { return moves_; }
  const std::set<std::string>& drains() const { return drains_; }
  const ClusterKeys& keys() const { return keys_; }

 private:
  ClusterKeys keys_;
  int64_t revision_ = 0;
  std::map<std::string, std::optional<NodeRecord>> nodes_;
  std::map<EntityRef, std::optional<CatalogShape>> catalog_;
  std::map<ShardRef, AssignmentSlot> assignments_;
  std::optional<etcd::KeyValue> controller_;
  std::map<ShardRef, Report> reports_;
  std::map<ShardRef, MoveRequest> moves_;
  std::set<std::string> drains_;
};

}  // namespace felix::cluster
