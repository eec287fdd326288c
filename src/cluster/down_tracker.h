// DownTracker: the controller's rule for when a node is "down" (cluster-etcd.md §3, controller
// side). A node is down only once this controller has itself observed its `nodes/<id>` key gone
// and then waited `margin` (default L/4) on its own clock, and, in any case, not before `L +
// margin` has passed since this controller was elected (a new controller may have missed the
// effects of keepalives its predecessor saw). Only then can the node's own view of its lease
// (usable until anchor + L − L/4 on its clock) no longer be live, so only then may failover
// hand its shards to another leader.
//
// "Observed gone" is a deletion event of the mirror, or — for a node named in an assignment, or
// known from an earlier snapshot — its absence from a (re-)snapshot, timed at that snapshot: the
// key went before the snapshot, so the real deletion was no later than what is recorded. An
// earlier observation is never moved later; the key reappearing (a restart) clears it.
//
// Pure bookkeeping over times the caller reads from its LeaseClock; not thread-safe (the
// controller guards it with its lock).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace felix::cluster {

class DownTracker {
 public:
  // `lease_ttl_ns` = L, the node lease TTL etcd grants; `margin_ns` <= 0 means L/4.
  DownTracker(int64_t lease_ttl_ns, int64_t margin_ns);

  // A new term starts at `now_ns`: forgets every observation (they belong to an older view).
  void Elected(int64_t now_ns);
  // The node's key is present (put event or in a snapshot).
  void Present(const std::string& node_id);
  // The node's key was observed gone at `now_ns` (kept if an earlier observation exists).
  void Absent(const std::string& node_id, int64_t now_ns);
  // A (re-)snapshot of nodes/ at `now_ns`: every node in `present` is present; every node
  // observed before and missing from it is absent from `now_ns`.
  void Snapshot(const std::set<std::string>& present, int64_t now_ns);
  // An assignment names the node: a node never observed at all is not registered (registered
  // nodes are observed through the snapshot and put events), so it is absent from `now_ns`.
  void Mentioned(const std::string& node_id, int64_t now_ns);

  bool IsDown(const std::string& node_id, int64_t now_ns) const;
  // Every node down at `now_ns` for at least `for_ns` (0: down at all), sorted. With `for_ns`
  // the restore grace period, these are the "lost" replicas (replication.md §19).
  std::vector<std::string> Down(int64_t now_ns, int64_t for_ns = 0) const;
  // The earliest time after `now_ns` at which a node observed gone has been down for `for_ns`;
  // nullopt when no such node is pending (the controller wakes then to fail its shards over,
  // or to restore their replicas).
  std::optional<int64_t> NextDownAt(int64_t now_ns, int64_t for_ns = 0) const;
  int64_t margin_ns() const { return margin_ns_; }

 private:
  int64_t DownAt(int64_t absent_since_ns) const;

  int64_t ttl_ns_;
  int64_t margin_ns_;
  int64_t elected_ns_ = 0;
  std::map<std::string, int64_t> absent_since_;  // nodes observed gone
  std::set<std::string> known_;                  // every node observed at all
};

}  // namespace felix::cluster
