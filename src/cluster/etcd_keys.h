// ClusterKeys: the etcd key layout of the cluster (cluster-etcd.md §2), under
// "/felix/<cluster>/": builders for every key and parsers for the keys whose names carry data
// (nodes, assignments, reports, suspects). Parsers refuse anything else with kInvalidArgument.
//
// Builders do not validate: their inputs are node ids and catalog names that were validated
// where they entered the system (ValidateNodeId, the catalog model). Plain values; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/result.h"

namespace felix::cluster {

enum class ShardKind { kStream, kCache };

const char* ShardKindName(ShardKind kind);  // "stream" / "cache"

// One shard of a stream or cache.
struct ShardRef {
  ShardKind kind = ShardKind::kStream;
  std::string tenant;
  std::string ns;
  std::string name;
  uint32_t shard = 0;

  // "<kind>/<tenant>/<ns>/<name>/<shard>": the suffix of its assign/ and reports/ keys, and its
  // key for placement.
  std::string Path() const;
  bool operator==(const ShardRef&) const = default;
  auto operator<=>(const ShardRef&) const = default;
};

// A node id must be a DNS name (it is also the peer certificate's DNS name): lowercase
// letters, digits, '-' and '.', labels of 1–63 characters not starting or ending with '-',
// at most 253 characters in all.
Result<void> ValidateNodeId(std::string_view id);

// The cluster name (FELIX_CLUSTER_NAME) follows the same rule as a node id's label.
Result<void> ValidateClusterName(std::string_view name);

class ClusterKeys {
 public:
  static Result<ClusterKeys> Create(std::string_view cluster);

  const std::string& prefix() const { return prefix_; }  // "/felix/<cluster>/"

  std::string NodesPrefix() const { return prefix_ + "nodes/"; }
  std::string Node(std::string_view node_id) const;
  std::string NodeIncarnation(std::string_view node_id) const;
  std::string Controller() const { return prefix_ + "controller"; }
  std::string ConfigCadence() const { return prefix_ + "config/cadence"; }

  std::string CatalogPrefix() const { return prefix_ + "catalog/"; }
  std::string CatalogTenant(std::string_view tenant) const;
  std::string CatalogNamespace(std::string_view tenant, std::string_view ns) const;
  std::string CatalogStream(std::string_view tenant, std::string_view ns,
                            std::string_view name) const;
  std::string CatalogCache(std::string_view tenant, std::string_view ns,
                           std::string_view name) const;
  std::string CatalogKey(std::string_view tenant, std::string_view kid) const;

  std::string AssignPrefix() const { return prefix_ + "assign/"; }
  std::string Assign(const ShardRef& shard) const { return AssignPrefix() + shard.Path(); }
  std::string ReportsPrefix() const { return prefix_ + "reports/"; }
  std::string Report(const ShardRef& shard) const { return ReportsPrefix() + shard.Path(); }
  // Planned moves (control-plane.md §12): moves/<kind>/<t>/<ns>/<name>/<shard> = {target}, an
  // operator's request (admin API, `felix cluster move`) that the controller carries out and
  // deletes; drains/<node_id> = {} under that node's lease, written by a broker shutting down
  // gracefully (SIGTERM): the controller moves every shard it leads to a caught-up replica.
  std::string MovesPrefix() const { return prefix_ + "moves/"; }
  std::string Move(const ShardRef& shard) const { return MovesPrefix() + shard.Path(); }
  std::string DrainsPrefix() const { return prefix_ + "drains/"; }
  std::string Drain(std::string_view node_id) const;
  std::string SuspectsPrefix() const { return prefix_ + "suspects/"; }
  std::string Suspect(std::string_view follower, std::string_view leader) const;

  // Parsers of full keys (as a watch or range returns them).
  Result<std::string> ParseNode(std::string_view key) const;
  Result<ShardRef> ParseAssign(std::string_view key) const;
  Result<ShardRef> ParseReport(std::string_view key) const;
  Result<ShardRef> ParseMove(std::string_view key) const;
  Result<std::string> ParseDrain(std::string_view key) const;
  // {follower, leader}
  Result<std::pair<std::string, std::string>> ParseSuspect(std::string_view key) const;

 private:
  explicit ClusterKeys(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string prefix_;
};

// Parses "<kind>/<tenant>/<ns>/<name>/<shard>" (ShardRef::Path()).
Result<ShardRef> ParseShardPath(std::string_view path);

}  // namespace felix::cluster
