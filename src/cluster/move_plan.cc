#include "cluster/move_plan.h"

#include <algorithm>

namespace felix::cluster {

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

const char* MoveActionName(MoveAction action) {
  switch (action) {
    case MoveAction::kFence:
      return "fence";
    case MoveAction::kCutOver:
      return "cut_over";
    case MoveAction::kRetake:
      return "retake";
    case MoveAction::kStage:
      return "stage";
    case MoveAction::kAbandon:
      return "abandon";
  }
  return "?";
}

std::optional<PlannedMove> PlanMove(const std::optional<Assignment>& current,
                                    const MoveInputs& in) {
  if (!current || current->leader.empty()) return std::nullopt;
  static const std::set<std::string> kNone;
  const auto& draining = in.draining ? *in.draining : kNone;
  const auto& down = in.down ? *in.down : kNone;
  const auto& registered = in.registered ? *in.registered : kNone;
  const std::string& leader = current->leader;
  auto alive = [&](const std::string& node) {
    return registered.contains(node) && !down.contains(node);
  };
  const bool reported =
      in.report && in.report->generation == current->generation && in.report->leader == leader;

  if (current->state == AssignmentState::kActive) {
    // A dead leader is failover's; a restore under way finishes first.
    if (current->joining || !alive(leader)) return std::nullopt;
    std::optional<std::string> target;
    if (in.request && in.request->target != leader) {
      const std::string& t = in.request->target;
      if (!alive(t)) return std::nullopt;  // waits for it (or the request goes)
      if (!Contains(current->replicas, t)) {
        // Not a replica yet: copied in first (stage), fenced once caught up.
        PlannedMove out{*current, MoveAction::kStage};
        out.next.generation = 0;
        out.next.replicas.push_back(t);
        out.next.state = AssignmentState::kMoving;
        out.next.move = MovePlan{t, MoveStep::kStage};
        return out;
      }
      if (!reported || !Contains(in.report->caught_up, t)) {
        return std::nullopt;  // waits until the target is caught up
      }
      target = t;
    } else if (draining.contains(leader) && reported) {
      uint64_t best = 0;
      for (const auto& node : current->replicas) {
        if (node == leader || !alive(node) || draining.contains(node) ||
            !Contains(in.report->caught_up, node)) {
          continue;
        }
        auto d = in.report->durable.find(node);
        const uint64_t durable = d == in.report->durable.end() ? 0 : d->second;
        if (!target || durable > best) {
          target = node;
          best = durable;
        }
      }
    }
    if (!target) return std::nullopt;
    PlannedMove out{*current, MoveAction::kFence};
    out.next.generation = 0;
    out.next.state = AssignmentState::kMoving;
    out.next.move = MovePlan{*target, MoveStep::kFence};
    return out;
  }

  if (current->state != AssignmentState::kMoving || !current->move) return std::nullopt;
  const std::string& target = current->move->target;
  if (current->move->step == MoveStep::kStage) {
    if (!alive(leader)) return std::nullopt;  // failover's
    if (!alive(target) || !Contains(current->replicas, target)) {
      // The copy died: dropped, the shard active again as it was.
      PlannedMove out{*current, MoveAction::kAbandon};
      out.next.generation = 0;
      out.next.replicas.erase(
          std::remove(out.next.replicas.begin(), out.next.replicas.end(), target),
          out.next.replicas.end());
      out.next.state = AssignmentState::kActive;
      out.next.move.reset();
      return out;
    }
    if (!reported || !Contains(in.report->caught_up, target)) return std::nullopt;  // copying
    PlannedMove out{*current, MoveAction::kFence};
    out.next.generation = 0;
    out.next.move = MovePlan{target, MoveStep::kFence};
    return out;
  }
  if (current->move->step != MoveStep::kFence) return std::nullopt;
  if (reported && Contains(in.report->caught_up, target) && alive(target) &&
      Contains(current->replicas, target)) {
    PlannedMove out{Assignment{}, MoveAction::kCutOver};
    out.next.leader = target;
    out.next.replicas.push_back(target);
    // The old leader keeps its seat unless the set outgrew the replication factor (a target
    // copied in by a stage): then it is the one that leaves.
    const bool drop_old =
        in.replication_factor > 0 && current->replicas.size() > in.replication_factor;
    for (const auto& node : current->replicas) {
      if (node == target || (drop_old && node == leader)) continue;
      out.next.replicas.push_back(node);
    }
    return out;
  }
  if (!alive(leader)) return std::nullopt;  // failover's
  if (!alive(target) || in.fence_expired || !Contains(current->replicas, target)) {
    PlannedMove out{*current, MoveAction::kRetake};
    out.next.generation = 0;
    out.next.state = AssignmentState::kActive;
    out.next.move.reset();
    return out;
  }
  return std::nullopt;  // the leader is still draining
}

}  // namespace felix::cluster
