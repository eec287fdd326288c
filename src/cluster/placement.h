// Placement: which node leads each shard and which nodes follow it (control-plane.md §9,
// cluster-etcd.md §5). A pure, deterministic function of (registered nodes, zones, shards with
// their replication factor, current assignment): the same inputs in any order give the same
// output, so two controllers reading the same state decide the same.
//
// - Leader: rendezvous hashing — every node scores each shard (shard key and node id hashed
//   independently with the frozen FNV-1a, then mixed), highest score wins — with a bounded-load
//   cap: a node already leading ceil(shards / nodes) shards, or holding ceil(roles / nodes)
//   roles, is skipped. A shard whose leader is registered keeps it while that node is within the
//   cap (minimal moves); a node over the cap (after a join lowered it) sheds its lowest-scoring
//   shards. A shard is never left led by a node that is not in `nodes`.
// - Followers: replication_factor − 1 (fewer when there are fewer nodes). Registered current
//   followers are kept within the role cap; free slots go to the best-scoring node with room in
//   a zone the shard has no copy in yet, else the best-scoring node with room, else the
//   best-scoring node at all. A node without a zone is its own zone.
//
// The output is the *target*. Carrying out a leader change of a live shard (stage → fence → cut
// over) is the controller's job, not this function's. Pure; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace felix::cluster {

struct PlacementNode {
  std::string id;
  std::string zone;  // empty: the node is a zone of its own
};

struct PlacementShard {
  std::string key;  // unique and stable, e.g. "stream/t/ns/name/3"
  uint32_t replication_factor = 1;
};

struct ReplicaSet {
  std::string leader;
  std::vector<std::string> followers;  // never contains the leader; no duplicates
  bool operator==(const ReplicaSet&) const = default;
};

struct PlacementInput {
  std::vector<PlacementNode> nodes;           // registered nodes (duplicates ignored)
  std::vector<PlacementShard> shards;         // every shard to place (duplicate keys ignored)
  std::map<std::string, ReplicaSet> current;  // by shard key; may name unregistered nodes
};

struct PlacementResult {
  std::map<std::string, ReplicaSet> assignment;  // every shard when there is at least one node
  std::vector<std::string> unplaced;             // shards with no node to go to (no nodes)
  std::vector<std::string> zone_unspread;        // placed with two copies in one zone
};

PlacementResult Place(const PlacementInput& input);

// The rendezvous score of `node_id` for `shard_key` (stable across builds and machines).
uint64_t RendezvousScore(std::string_view shard_key, std::string_view node_id);

}  // namespace felix::cluster
