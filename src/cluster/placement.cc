#include "cluster/placement.h"

#include <algorithm>
#include <set>

#include "wire/shard_hash.h"

namespace felix::cluster {
namespace {

struct Node {
  std::string id;
  std::string zone;
  uint32_t leaders = 0;
  uint32_t roles = 0;
};

uint32_t CeilDiv(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

// Higher score first; node id breaks (astronomically unlikely) ties.
bool Better(const std::string& shard, const Node& a, const Node& b) {
  uint64_t sa = RendezvousScore(shard, a.id);
  uint64_t sb = RendezvousScore(shard, b.id);
  if (sa != sb) return sa > sb;
  return a.id < b.id;
}

// The shards a node holds, the ones it scores highest first (what it keeps when over a cap).
void SortByScoreFor(const std::string& node_id, std::vector<std::string>& shard_keys) {
  std::sort(shard_keys.begin(), shard_keys.end(), [&](const std::string& a, const std::string& b) {
    uint64_t sa = RendezvousScore(a, node_id);
    uint64_t sb = RendezvousScore(b, node_id);
    return sa != sb ? sa > sb : a < b;
  });
}

// Every node with room is already in `key`'s replica set: find another shard T with a follower
// X that `key` can take, and a node U with room that T can take instead (U -> T, X -> key).
// Keeps every role count within the cap where the greedy fill alone would exceed it.
bool SwapForRoom(const std::string& key, const std::map<std::string, uint32_t>& shards,
                 std::map<std::string, std::string>& leader,
                 std::map<std::string, std::vector<std::string>>& followers,
                 std::map<std::string, Node>& nodes, uint32_t role_cap) {
  auto& mine = followers[key];
  auto in = [&](const std::string& shard, const std::string& id) {
    const auto& f = followers[shard];
    return leader[shard] == id || std::find(f.begin(), f.end(), id) != f.end();
  };
  for (auto& [u_id, u] : nodes) {
    if (u.roles >= role_cap) continue;
    for (const auto& [other, rf] : shards) {
      if (other == key || in(other, u_id)) continue;
      auto& theirs = followers[other];
      for (auto& x : theirs) {
        if (in(key, x)) continue;
        mine.push_back(x);  // X's count is unchanged: it leaves `other` and joins `key`
        x = u_id;
        ++u.roles;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

uint64_t RendezvousScore(std::string_view shard_key, std::string_view node_id) {
  // Independent hashes, then mixed (hashing the concatenation skews badly, control-plane §9.2).
  uint64_t s = wire::Fnv1a64(shard_key);
  uint64_t n = wire::FinalizeHash(wire::Fnv1a64(node_id));
  return wire::FinalizeHash(s ^ n);
}

PlacementResult Place(const PlacementInput& input) {
  PlacementResult result;

  // Canonical order of the inputs: results must not depend on how they were listed.
  std::map<std::string, Node> nodes;
  for (const auto& n : input.nodes) {
    if (n.id.empty() || nodes.contains(n.id)) continue;
    nodes[n.id] = Node{n.id, n.zone.empty() ? "\x01node:" + n.id : n.zone};
  }
  std::map<std::string, uint32_t> shards;  // key → replication factor
  for (const auto& s : input.shards)
    shards.emplace(s.key, std::max<uint32_t>(1, s.replication_factor));
  if (nodes.empty()) {
    for (const auto& [key, rf] : shards) result.unplaced.push_back(key);
    return result;
  }
  const uint64_t n_nodes = nodes.size();
  std::set<std::string> all_zones;
  for (const auto& [id, n] : nodes) all_zones.insert(n.zone);
  uint64_t total_roles = 0;
  for (const auto& [key, rf] : shards) total_roles += std::min<uint64_t>(rf, n_nodes);
  const uint32_t leader_cap = CeilDiv(std::max<uint64_t>(shards.size(), 1), n_nodes);
  const uint32_t role_cap = CeilDiv(std::max<uint64_t>(total_roles, 1), n_nodes);

  auto current = [&](const std::string& key) -> const ReplicaSet* {
    auto it = input.current.find(key);
    return it == input.current.end() ? nullptr : &it->second;
  };

  // 1. Keep registered leaders within the cap; an over-cap node keeps its best-scoring shards.
  std::map<std::string, std::string> leader;  // shard → node
  for (auto& node_entry : nodes) {
    const std::string& id = node_entry.first;  // (no structured binding: lambdas capture it)
    Node& node = node_entry.second;
    std::vector<std::string> led;
    for (const auto& shard_entry : shards) {
      const std::string& key = shard_entry.first;
      const ReplicaSet* cur = current(key);
      if (cur != nullptr && cur->leader == id) led.push_back(key);
    }
    SortByScoreFor(node.id, led);
    for (const auto& key : led) {
      if (node.leaders >= leader_cap) break;
      leader[key] = id;
      ++node.leaders;
      ++node.roles;
    }
  }

  // 2. Leaders for the rest: a current follower with room first (it holds the data), then the
  //    best-scoring node with room; the caps are relaxed only if nobody has room.
  for (const auto& shard_entry : shards) {
    const std::string& key = shard_entry.first;
    if (leader.contains(key)) continue;
    const ReplicaSet* cur = current(key);
    Node* best = nullptr;
    auto consider = [&](Node& n, bool need_room, bool followers_only) {
      if (need_room && (n.leaders >= leader_cap || n.roles >= role_cap)) return;
      if (followers_only &&
          (cur == nullptr ||
           std::find(cur->followers.begin(), cur->followers.end(), n.id) == cur->followers.end())) {
        return;
      }
      if (best == nullptr || Better(key, n, *best)) best = &n;
    };
    for (auto& [id, n] : nodes) consider(n, true, true);
    if (best == nullptr) {
      for (auto& [id, n] : nodes) consider(n, true, false);
    }
    if (best == nullptr) {
      for (auto& [id, n] : nodes) consider(n, false, false);
    }
    leader[key] = best->id;
    ++best->leaders;
    ++best->roles;
  }

  // 3. Keep registered current followers within the role cap (per node, best-scoring first).
  std::map<std::string, std::vector<std::string>> followers;  // shard → nodes
  for (auto& node_entry : nodes) {
    const std::string& id = node_entry.first;  // (no structured binding: lambdas capture it)
    Node& node = node_entry.second;
    std::vector<std::string> kept;
    for (const auto& shard_entry : shards) {
      const std::string& key = shard_entry.first;
      const ReplicaSet* cur = current(key);
      if (cur == nullptr || leader[key] == id) continue;
      if (std::find(cur->followers.begin(), cur->followers.end(), id) != cur->followers.end()) {
        kept.push_back(key);
      }
    }
    SortByScoreFor(node.id, kept);
    for (const auto& key : kept) {
      if (node.roles >= role_cap) break;
      uint64_t want = std::min<uint64_t>(shards[key], n_nodes) - 1;
      if (followers[key].size() >= want) continue;
      followers[key].push_back(id);
      ++node.roles;
    }
  }

  // 4. Fill the free follower slots, spreading over zones.
  for (const auto& shard_entry : shards) {
    const std::string& key = shard_entry.first;
    const uint32_t rf = shard_entry.second;
    auto& mine = followers[key];
    uint64_t want = std::min<uint64_t>(rf, n_nodes) - 1;
    auto in_set = [&](const std::string& id) {
      return id == leader[key] || std::find(mine.begin(), mine.end(), id) != mine.end();
    };
    while (mine.size() < want) {
      std::set<std::string> zones{nodes[leader[key]].zone};
      for (const auto& f : mine) zones.insert(nodes[f].zone);
      Node* best = nullptr;
      auto pick = [&](bool new_zone, bool need_room) {
        for (auto& [id, n] : nodes) {
          if (in_set(id)) continue;
          if (need_room && n.roles >= role_cap) continue;
          if (new_zone && zones.contains(n.zone)) continue;
          if (best == nullptr || Better(key, n, *best)) best = &n;
        }
      };
      pick(true, true);
      if (best == nullptr) pick(false, true);
      if (best == nullptr && SwapForRoom(key, shards, leader, followers, nodes, role_cap)) {
        continue;  // another shard's follower moved here; its slot went to a node with room
      }
      if (best == nullptr) pick(true, false);
      if (best == nullptr) pick(false, false);
      mine.push_back(best->id);
      ++best->roles;
    }
  }

  // 5. Results (after every swap of step 4), followers in a canonical order (by score).
  for (const auto& shard_entry : shards) {
    const std::string& key = shard_entry.first;
    auto& mine = followers[key];
    std::sort(mine.begin(), mine.end(), [&](const std::string& a, const std::string& b) {
      return Better(key, nodes[a], nodes[b]);
    });
    std::set<std::string> zones{nodes[leader[key]].zone};
    for (const auto& f : mine) zones.insert(nodes[f].zone);
    if (zones.size() < std::min<size_t>(mine.size() + 1, all_zones.size())) {
      result.zone_unspread.push_back(key);
    }
    result.assignment[key] = ReplicaSet{leader[key], mine};
  }
  return result;
}

}  // namespace felix::cluster
