#include "fault/group_checker.h"

#include <map>
#include <set>
#include <sstream>

namespace felix::fault {

std::string GroupVerdict::Summary() const {
  std::ostringstream out;
  out << "groups " << (ok() ? "PASS" : "FAIL") << "\ngroup_polls " << polls << "\ngroup_deliveries "
      << deliveries << " (redeliveries " << redeliveries << ", after an ack across a leader change "
      << redelivered_after_rebuild << ")\ngroup_acks " << acks << "\ngroup_nacks " << nacks << "\n";
  for (const auto& v : violations) out << v.ToString() << "\n";
  return out.str();
}

namespace {

bool IsGroupOp(const Op& op) {
  return op.kind == OpKind::kPoll || op.kind == OpKind::kAck || op.kind == OpKind::kNack;
}

}  // namespace

GroupVerdict CheckGroups(const std::vector<Op>& history, const FinalLogs& final_logs,
                         const std::vector<Disruption>& disruptions) {
  GroupVerdict verdict;
  struct Delivery {
    int64_t invoke_us;
    uint64_t op_id;
    std::string value;
    int node;
  };
  struct GroupOps {
    uint32_t shard = 0;
    std::map<uint64_t, std::vector<Delivery>> deliveries;  // offset → each delivery
    std::vector<const Op*> acks, nacks;                    // acknowledged ones
    std::vector<const Op*> all;                            // every request, whatever its outcome
  };
  std::map<std::pair<std::string, uint32_t>, GroupOps> groups;
  for (const Op& op : history) {
    if (!IsGroupOp(op)) continue;
    GroupOps& g = groups[{op.key, op.shard}];
    g.shard = op.shard;
    g.all.push_back(&op);
    if (op.outcome != Outcome::kOk) continue;
    if (op.kind == OpKind::kPoll) {
      ++verdict.polls;
      for (const auto& [offset, value] : op.read) {
        auto& list = g.deliveries[offset];
        verdict.redeliveries += list.empty() ? 0 : 1;
        list.push_back({op.invoke_us, op.id, value, op.node});
        ++verdict.deliveries;
      }
    } else if (op.offset) {
      (op.kind == OpKind::kAck ? g.acks : g.nacks).push_back(&op);
    }
  }
  auto add = [&](std::string what, uint32_t shard, std::string value,
                 std::optional<uint64_t> offset, std::vector<uint64_t> found, uint64_t op) {
    verdict.violations.push_back(
        Violation{0, std::move(what), shard, std::move(value), offset, std::move(found), op});
  };
  for (const auto& [id, g] : groups) {
    std::map<uint64_t, const std::string*> log;
    if (auto it = final_logs.find(g.shard); it != final_logs.end()) {
      for (const auto& [offset, value] : it->second) log[offset] = &value;
    }
    verdict.acks += g.acks.size();
    verdict.nacks += g.nacks.size();
    // Whether the tracker that took `ack` may have been rebuilt before delivery `d` (see the
    // header): the leader changed, or something happened to it.
    auto rebuilt_between = [&](const Op& ack, const Delivery& d) {
      if (d.node != ack.node || ack.node == 0) return true;
      for (const Op* op : g.all) {
        if (op->invoke_us < ack.complete_us || op->invoke_us > d.invoke_us) continue;
        if (op->outcome != Outcome::kOk || op->node != ack.node) return true;
      }
      for (const Disruption& fault : disruptions) {
        bool touches = fault.node == 0 || fault.node == ack.node;
        if (touches && fault.from_us <= d.invoke_us && fault.to_us >= ack.complete_us) return true;
      }
      return false;
    };
    for (const Op* ack : g.acks) {
      auto it = g.deliveries.find(*ack->offset);
      if (it == g.deliveries.end()) continue;
      for (const Delivery& d : it->second) {
        if (d.invoke_us <= ack->complete_us) continue;
        if (rebuilt_between(*ack, d)) {
          ++verdict.redelivered_after_rebuild;
          continue;
        }
        add("redelivered_after_ack", g.shard, d.value, ack->offset, {*ack->offset}, d.op_id);
      }
    }
    for (const Op* nack : g.nacks) {
      auto it = g.deliveries.find(*nack->offset);
      bool again = false;
      if (it != g.deliveries.end()) {
        for (const Delivery& d : it->second) again |= d.invoke_us > nack->complete_us;
      }
      if (!again) add("nack_not_redelivered", g.shard, "", nack->offset, {}, nack->id);
    }
    for (const auto& [offset, list] : g.deliveries) {
      auto in_log = log.find(offset);
      for (const Delivery& d : list) {
        if (in_log == log.end() || *in_log->second != d.value) {
          add("delivery_mismatch", g.shard, d.value, offset, {}, d.op_id);
        }
      }
    }
    for (const auto& [offset, value] : log) {
      if (*value == kNoEvent) continue;  // no record: a group settles it without delivery
      if (!g.deliveries.count(offset)) add("undelivered", g.shard, *value, offset, {}, 0);
    }
  }
  return verdict;
}

}  // namespace felix::fault
