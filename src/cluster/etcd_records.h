// The JSON values stored under the cluster's etcd keys (cluster-etcd.md §2): node
// registrations, the controller record, shard assignments and leader reports. Encoders write
// compact JSON; decoders bound the input size and every list before building anything and
// refuse wrong types, missing fields and out-of-range values with kCorruption naming the field
// (a value in etcd that fails these checks is corrupt metadata, never a crash).
//
// Plain value types and pure functions; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace felix::cluster {

inline constexpr size_t kMaxRecordBytes = 64 * 1024;
inline constexpr size_t kMaxRecordListSize = 256;

// nodes/<node_id>, under the node's lease.
struct NodeRecord {
  std::string node_id;
  uint64_t incarnation = 0;   // nodes-incarnation/<id> after this start's +1
  std::string internal_addr;  // host:port peers dial (FELIX_NODE_ADVERTISE_ADDR)
  std::string client_addr;    // host:port clients dial (FELIX_CLIENT_ADVERTISE_ADDR)
  std::string zone;           // FELIX_NODE_ZONE; empty = none
  std::string version;        // the broker's build version
  std::vector<std::string> capabilities;
  bool operator==(const NodeRecord&) const = default;
};

// controller, under the controller's lease.
struct ControllerRecord {
  std::string node_id;
  uint64_t incarnation = 0;
  bool operator==(const ControllerRecord&) const = default;
};

enum class AssignmentState {
  kActive,       // leader serves
  kMoving,       // a planned move is under way (see `move`)
  kUnavailable,  // held unplaced: no caught-up replica alive (cluster-etcd.md §5)
};

enum class MoveStep { kStage, kFence, kCutOver };

struct MovePlan {
  std::string target;  // the node that will lead after the cut-over
  MoveStep step = MoveStep::kStage;
  bool operator==(const MovePlan&) const = default;
};

// assign/<kind>/<t>/<ns>/<name>/<shard>, written by the controller only.
struct Assignment {
  uint64_t generation = 0;            // >= 1; +1 on every write (never an etcd revision)
  std::string leader;                 // empty only when kUnavailable
  std::vector<std::string> replicas;  // the full replica set, the leader included
  AssignmentState state = AssignmentState::kActive;
  std::optional<MovePlan> move;  // present exactly when kMoving
  // A follower being copied in to restore the replication factor (replication.md §19): a
  // member of `replicas`, never the leader. It is shipped to and counts toward the majority
  // like any replica; the controller seats it (drops the replica it replaces and clears this)
  // once the leader reports it caught up.
  std::optional<std::string> joining;
  bool operator==(const Assignment&) const = default;
};

// reports/<kind>/<t>/<ns>/<name>/<shard>, written by the shard's leader only.
struct Report {
  uint64_t generation = 0;
  std::string leader;
  std::vector<std::string> caught_up;
  std::map<std::string, uint64_t> durable;  // node → durable offset
  uint64_t commit = 0;
  bool operator==(const Report&) const = default;
};

// moves/<kind>/<t>/<ns>/<name>/<shard>: an operator's request to move the shard's leadership
// to `target` (a registered replica of the shard); the controller carries it out (fence, then
// cut over) and deletes it.
struct MoveRequest {
  std::string target;
  bool operator==(const MoveRequest&) const = default;
};

std::string EncodeMoveRequest(const MoveRequest& request);
Result<MoveRequest> DecodeMoveRequest(std::string_view json);

std::string EncodeNodeRecord(const NodeRecord& record);
Result<NodeRecord> DecodeNodeRecord(std::string_view json);

std::string EncodeControllerRecord(const ControllerRecord& record);
Result<ControllerRecord> DecodeControllerRecord(std::string_view json);

// Checks the invariants listed on Assignment (kInvalidArgument); Encode does not check.
Result<void> ValidateAssignment(const Assignment& a);
std::string EncodeAssignment(const Assignment& a);
Result<Assignment> DecodeAssignment(std::string_view json);  // also applies ValidateAssignment

std::string EncodeReport(const Report& report);
Result<Report> DecodeReport(std::string_view json);

}  // namespace felix::cluster
