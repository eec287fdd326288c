#include "cluster/etcd_records.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace felix::cluster {
namespace {

using Json = nlohmann::json;

tl::unexpected<Error> Corrupt(std::string_view record, std::string_view why) {
  return Fail(ErrorCode::kCorruption, std::string(record) + ": " + std::string(why));
}

Result<Json> ParseObject(std::string_view text, std::string_view record) {
  if (text.size() > kMaxRecordBytes) return Corrupt(record, "value larger than 64 KiB");
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Corrupt(record, "not JSON");
  if (!j.is_object()) return Corrupt(record, "not a JSON object");
  return j;
}

// Field readers: each fails when the field is missing (unless optional) or has the wrong type.
Result<std::string> GetString(const Json& j, const char* field, std::string_view record,
                              bool optional = false) {
  auto it = j.find(field);
  if (it == j.end()) {
    if (optional) return std::string();
    return Corrupt(record, std::string("missing field ") + field);
  }
  if (!it->is_string()) return Corrupt(record, std::string(field) + " is not a string");
  return it->get<std::string>();
}

Result<uint64_t> GetU64(const Json& j, const char* field, std::string_view record) {
  auto it = j.find(field);
  if (it == j.end()) return Corrupt(record, std::string("missing field ") + field);
  if (!it->is_number_unsigned()) {
    return Corrupt(record, std::string(field) + " is not an unsigned integer");
  }
  return it->get<uint64_t>();
}

Result<std::vector<std::string>> GetStrings(const Json& j, const char* field,
                                            std::string_view record, bool optional = false) {
  auto it = j.find(field);
  if (it == j.end()) {
    if (optional) return std::vector<std::string>();
    return Corrupt(record, std::string("missing field ") + field);
  }
  if (!it->is_array()) return Corrupt(record, std::string(field) + " is not an array");
  if (it->size() > kMaxRecordListSize) return Corrupt(record, std::string(field) + " too long");
  std::vector<std::string> out;
  out.reserve(it->size());
  for (const auto& e : *it) {
    if (!e.is_string()) return Corrupt(record, std::string(field) + " has a non-string entry");
    out.push_back(e.get<std::string>());
  }
  return out;
}

const char* StateName(AssignmentState s) {
  switch (s) {
    case AssignmentState::kActive:
      return "active";
    case AssignmentState::kMoving:
      return "moving";
    case AssignmentState::kUnavailable:
      return "unavailable";
  }
  return "active";
}

const char* StepName(MoveStep s) {
  switch (s) {
    case MoveStep::kStage:
      return "stage";
    case MoveStep::kFence:
      return "fence";
    case MoveStep::kCutOver:
      return "cut_over";
  }
  return "stage";
}

}  // namespace

std::string EncodeNodeRecord(const NodeRecord& r) {
  Json j = {{"node_id", r.node_id},
            {"incarnation", r.incarnation},
            {"internal_addr", r.internal_addr},
            {"client_addr", r.client_addr},
            {"zone", r.zone},
            {"version", r.version},
            {"capabilities", r.capabilities}};
  return j.dump();
}

Result<NodeRecord> DecodeNodeRecord(std::string_view text) {
  constexpr std::string_view kRec = "node record";
  auto j = ParseObject(text, kRec);
  if (!j) return tl::unexpected(j.error());
  NodeRecord r;
  auto id = GetString(*j, "node_id", kRec);
  auto inc = GetU64(*j, "incarnation", kRec);
  auto internal = GetString(*j, "internal_addr", kRec);
  auto client = GetString(*j, "client_addr", kRec, true);
  auto zone = GetString(*j, "zone", kRec, true);
  auto version = GetString(*j, "version", kRec, true);
  auto caps = GetStrings(*j, "capabilities", kRec, true);
  for (const Error* e : {id ? nullptr : &id.error(), inc ? nullptr : &inc.error(),
                         internal ? nullptr : &internal.error(), client ? nullptr : &client.error(),
                         zone ? nullptr : &zone.error(), version ? nullptr : &version.error(),
                         caps ? nullptr : &caps.error()}) {
    if (e != nullptr) return tl::unexpected(*e);
  }
  if (id->empty()) return Corrupt(kRec, "empty node_id");
  if (internal->empty()) return Corrupt(kRec, "empty internal_addr");
  r.node_id = *id;
  r.incarnation = *inc;
  r.internal_addr = *internal;
  r.client_addr = *client;
  r.zone = *zone;
  r.version = *version;
  r.capabilities = *caps;
  return r;
}

std::string EncodeMoveRequest(const MoveRequest& request) {
  return Json{{"target", request.target}}.dump();
}

Result<MoveRequest> DecodeMoveRequest(std::string_view text) {
  constexpr std::string_view kRec = "move request";
  auto j = ParseObject(text, kRec);
  if (!j) return tl::unexpected(j.error());
  auto target = GetString(*j, "target", kRec);
  if (!target) return tl::unexpected(target.error());
  if (target->empty()) return Corrupt(kRec, "empty target");
  return MoveRequest{*target};
}

std::string EncodeControllerRecord(const ControllerRecord& r) {
  return Json{{"node_id", r.node_id}, {"incarnation", r.incarnation}}.dump();
}

Result<ControllerRecord> DecodeControllerRecord(std::string_view text) {
  constexpr std::string_view kRec = "controller record";
  auto j = ParseObject(text, kRec);
  if (!j) return tl::unexpected(j.error());
  auto id = GetString(*j, "node_id", kRec);
  if (!id) return tl::unexpected(id.error());
  auto inc = GetU64(*j, "incarnation", kRec);
  if (!inc) return tl::unexpected(inc.error());
  if (id->empty()) return Corrupt(kRec, "empty node_id");
  return ControllerRecord{*id, *inc};
}

Result<void> ValidateAssignment(const Assignment& a) {
  auto bad = [](std::string why) {
    return Fail(ErrorCode::kInvalidArgument, "assignment: " + why);
  };
  if (a.generation == 0) return bad("generation must be >= 1");
  if (a.replicas.size() > kMaxRecordListSize) return bad("too many replicas");
  std::set<std::string> seen;
  for (const auto& r : a.replicas) {
    if (r.empty()) return bad("empty replica id");
    if (!seen.insert(r).second) return bad("replica " + r + " listed twice");
  }
  if (a.state == AssignmentState::kUnavailable) {
    if (!a.leader.empty()) return bad("an unavailable shard has no leader");
  } else {
    if (a.leader.empty()) return bad("no leader");
    if (!seen.contains(a.leader)) return bad("leader " + a.leader + " is not a replica");
  }
  if ((a.state == AssignmentState::kMoving) != a.move.has_value()) {
    return bad("move must be present exactly when the state is moving");
  }
  if (a.move && a.move->target.empty()) return bad("move without a target");
  if (a.joining) {
    if (!seen.contains(*a.joining)) return bad("joining " + *a.joining + " is not a replica");
    if (*a.joining == a.leader) return bad("the leader cannot be joining");
  }
  return Ok();
}

std::string EncodeAssignment(const Assignment& a) {
  Json j = {{"generation", a.generation},
            {"leader", a.leader},
            {"replicas", a.replicas},
            {"state", StateName(a.state)}};
  if (a.move) j["move"] = {{"target", a.move->target}, {"step", StepName(a.move->step)}};
  if (a.joining) j["joining"] = *a.joining;
  return j.dump();
}

Result<Assignment> DecodeAssignment(std::string_view text) {
  constexpr std::string_view kRec = "assignment";
  auto j = ParseObject(text, kRec);
  if (!j) return tl::unexpected(j.error());
  Assignment a;
  auto gen = GetU64(*j, "generation", kRec);
  if (!gen) return tl::unexpected(gen.error());
  auto leader = GetString(*j, "leader", kRec);
  if (!leader) return tl::unexpected(leader.error());
  auto replicas = GetStrings(*j, "replicas", kRec);
  if (!replicas) return tl::unexpected(replicas.error());
  auto state = GetString(*j, "state", kRec);
  if (!state) return tl::unexpected(state.error());
  a.generation = *gen;
  a.leader = *leader;
  a.replicas = *replicas;
  if (*state == "active") {
    a.state = AssignmentState::kActive;
  } else if (*state == "moving") {
    a.state = AssignmentState::kMoving;
  } else if (*state == "unavailable") {
    a.state = AssignmentState::kUnavailable;
  } else {
    return Corrupt(kRec, "unknown state '" + *state + "'");
  }
  if (auto it = j->find("move"); it != j->end() && !it->is_null()) {
    if (!it->is_object()) return Corrupt(kRec, "move is not an object");
    auto target = GetString(*it, "target", kRec);
    if (!target) return tl::unexpected(target.error());
    auto step = GetString(*it, "step", kRec);
    if (!step) return tl::unexpected(step.error());
    MovePlan m;
    m.target = *target;
    if (*step == "stage") {
      m.step = MoveStep::kStage;
    } else if (*step == "fence") {
      m.step = MoveStep::kFence;
    } else if (*step == "cut_over") {
      m.step = MoveStep::kCutOver;
    } else {
      return Corrupt(kRec, "unknown move step '" + *step + "'");
    }
    a.move = m;
  }
  if (auto it = j->find("joining"); it != j->end() && !it->is_null()) {
    auto joining = GetString(*j, "joining", kRec);
    if (!joining) return tl::unexpected(joining.error());
    a.joining = *joining;
  }
  if (auto ok = ValidateAssignment(a); !ok) {
    return Fail(ErrorCode::kCorruption, ok.error().message);
  }
  return a;
}

std::string EncodeReport(const Report& r) {
  Json durable = Json::object();
  for (const auto& [node, offset] : r.durable) durable[node] = offset;
  return Json{{"generation", r.generation},
              {"leader", r.leader},
              {"caught_up", r.caught_up},
              {"durable", durable},
              {"commit", r.commit}}
      .dump();
}

Result<Report> DecodeReport(std::string_view text) {
  constexpr std::string_view kRec = "report";
  auto j = ParseObject(text, kRec);
  if (!j) return tl::unexpected(j.error());
  Report r;
  auto gen = GetU64(*j, "generation", kRec);
  if (!gen) return tl::unexpected(gen.error());
  auto leader = GetString(*j, "leader", kRec);
  if (!leader) return tl::unexpected(leader.error());
  auto caught_up = GetStrings(*j, "caught_up", kRec);
  if (!caught_up) return tl::unexpected(caught_up.error());
  auto commit = GetU64(*j, "commit", kRec);
  if (!commit) return tl::unexpected(commit.error());
  auto it = j->find("durable");
  if (it == j->end() || !it->is_object()) return Corrupt(kRec, "durable is not an object");
  if (it->size() > kMaxRecordListSize) return Corrupt(kRec, "durable too long");
  for (const auto& [node, offset] : it->items()) {
    if (!offset.is_number_unsigned()) return Corrupt(kRec, "durable offset of " + node);
    r.durable[node] = offset.get<uint64_t>();
  }
  if (*gen == 0) return Corrupt(kRec, "generation must be >= 1");
  if (leader->empty()) return Corrupt(kRec, "empty leader");
  r.generation = *gen;
  r.leader = *leader;
  r.caught_up = *caught_up;
  r.commit = *commit;
  return r;
}

}  // namespace felix::cluster
