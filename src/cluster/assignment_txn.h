// The controller's etcd transactions (cluster-etcd.md §2, §5):
// - Campaign: controller election — create-if-absent of the `controller` key under the
//   candidate's lease with {node_id, incarnation}. The winner's term is identified by the key's
//   create_revision; when the lease lapses the key goes and the next Campaign can win.
// - NextIncarnation: nodes-incarnation/<id> + 1 in a txn (compare mod_revision), once per start.
// - WriteAssignment: one txn that compares (a) the controller key's create_revision with the
//   term's and (b) the assignment's mod_revision with the one it was planned from (absent key:
//   create_revision == 0), and puts the new value with generation = planned + 1 (1 for a new
//   key). A failed compare writes nothing and returns, from the same txn's else branch, the
//   current controller and assignment: a deposed controller learns it is deposed; a lost race
//   returns the winner's value so the caller re-plans from it. A failover also compares (c) that
//   the deposed leader's nodes/<id> key is still absent: a leader that registered again after
//   the controller saw it gone keeps its shard (kNodeReturned) — it may already serve it from a
//   view that caught up to its registration, which a failover written after that could not be
//   in.
// - DeleteAssignment: the same two compares, then deletes the key (a shard whose stream or cache
//   left the catalog); the same outcomes.
//
// Errors: etcd failures pass through as kUnavailable/kTimeout (a write that timed out is
// indeterminate: re-read before retrying); a stored value that does not decode is kCorruption.
// Pure functions over an EtcdClient; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "common/result.h"
#include "etcd/etcd_client.h"

namespace felix::cluster {

// What a controller proves it is the controller with.
struct ControllerTerm {
  ControllerRecord record;
  int64_t create_revision = 0;  // of the controller key it created
  int64_t lease = 0;
};

struct CampaignResult {
  bool won = false;
  ControllerTerm term;  // ours when won; the current holder's otherwise (lease 0 if unknown)
};

Result<CampaignResult> Campaign(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                const ControllerRecord& me, int64_t lease);

// Deletes the controller key if it is still this term's (clean shutdown); false if it was not.
Result<bool> Resign(etcd::EtcdClient& etcd, const ClusterKeys& keys, const ControllerTerm& term);

// The current controller term, or nullopt when nobody holds it.
Result<std::optional<ControllerTerm>> ReadController(etcd::EtcdClient& etcd,
                                                     const ClusterKeys& keys);

// Raises nodes-incarnation/<node_id> by one and returns the new value (1 on the first start).
Result<uint64_t> NextIncarnation(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                 const std::string& node_id);

// An assignment as read: value and mod_revision (0 and nullopt when the key is absent).
struct AssignmentRead {
  std::optional<Assignment> value;
  int64_t mod_revision = 0;
};

Result<AssignmentRead> ReadAssignment(etcd::EtcdClient& etcd, const std::string& key);

struct WriteOutcome {
  enum class Kind {
    kWritten,       // `current` is what we wrote, with its new mod_revision
    kLostRace,      // the assignment changed since `planned_from`; `current` is the winner's
    kDeposed,       // the controller key is not our term's any more; nothing was written
    kNodeReturned,  // `absent_node_key` exists again; nothing was written
  };
  Kind kind = Kind::kWritten;
  AssignmentRead current;
};

// Writes `next` (its generation is ignored and set to planned_from's + 1) to `key`.
// `next` must satisfy ValidateAssignment with any generation >= 1 (kInvalidArgument otherwise).
// `absent_node_key` (a failover: the deposed leader's nodes/<id>) must not exist when it lands.
Result<WriteOutcome> WriteAssignment(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                     const ControllerTerm& term, const std::string& key,
                                     const AssignmentRead& planned_from, Assignment next,
                                     const std::string& absent_node_key = {});

// Deletes `key` if the controller key is still `term`'s and the assignment's mod_revision is
// still `planned_from`'s. kWritten: deleted (`current` is empty, its mod_revision the deletion's
// revision); kLostRace / kDeposed as for WriteAssignment. `planned_from` must name a present
// key (mod_revision != 0; kInvalidArgument otherwise).
Result<WriteOutcome> DeleteAssignment(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                      const ControllerTerm& term, const std::string& key,
                                      const AssignmentRead& planned_from);

}  // namespace felix::cluster
