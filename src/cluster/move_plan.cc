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
      if (!Contains(current->replicas, t) || !alive(t) || !reported ||
          !Contains(in.report->caught_up, t)) {
        return std::nullopt;  // waits until the target is caught up (or the request goes)
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

  if (current->state != AssignmentState::kMoving || !current->move ||
      current->move->step != MoveStep::kFence) {
    return std::nullopt;
  }
  const std::string& target = current->move->target;
  if (reported && Contains(in.report->caught_up, target) && alive(target) &&
      Contains(current->replicas, target)) {
    PlannedMove out{Assignment{}, MoveAction::kCutOver};
    out.next.leader = target;
    out.next.replicas.push_back(target);
    for (const auto& node : current->replicas) {
      if (node != target) out.next.replicas.push_back(node);
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
