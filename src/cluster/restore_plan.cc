#include "cluster/restore_plan.h"

#include <algorithm>
#include <vector>

#include "cluster/placement.h"

namespace felix::cluster {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Assignment Without(const Assignment& a, const std::string& node) {
  Assignment next = a;
  next.generation = 0;
  next.replicas.erase(std::remove(next.replicas.begin(), next.replicas.end(), node),
                      next.replicas.end());
  next.joining.reset();
  return next;
}

}  // namespace

std::optional<Assignment> PlanRestore(const std::optional<Assignment>& current,
                                      const RestoreInputs& in) {
  if (!current || current->state != AssignmentState::kActive || current->leader.empty() ||
      in.down->contains(current->leader)) {
    return std::nullopt;
  }
  const Assignment& a = *current;
  auto is_lost_follower = [&](const std::string& node) {
    return node != a.leader && (!a.joining || node != *a.joining) && in.lost->contains(node);
  };
  const bool any_lost = std::any_of(a.replicas.begin(), a.replicas.end(), is_lost_follower);
  const bool reported = in.report != nullptr && in.report->generation == a.generation &&
                        in.report->leader == a.leader;

  if (a.joining) {
    const std::string& joiner = *a.joining;
    if (!in.registered->contains(joiner) || in.down->contains(joiner) || !any_lost) {
      return Without(a, joiner);  // abandoned: the copy died, or nothing needs replacing
    }
    if (!reported || !Contains(in.report->caught_up, joiner)) return std::nullopt;  // copying
    Assignment next = a;
    next.generation = 0;
    next.joining.reset();
    for (const auto& node : a.replicas) {
      if (next.replicas.size() <= in.replication_factor) break;
      if (is_lost_follower(node)) {
        next.replicas.erase(std::find(next.replicas.begin(), next.replicas.end(), node));
      }
    }
    return next;
  }

  if (!any_lost || !reported) return std::nullopt;
  const std::string* best = nullptr;
  uint64_t best_score = 0;
  for (const auto& node : *in.registered) {  // sorted: ties go to the smaller id
    if (in.down->contains(node) || Contains(a.replicas, node)) continue;
    const uint64_t score = RendezvousScore(in.shard_key, node);
    if (!best || score > best_score) {
      best = &node;
      best_score = score;
    }
  }
  if (!best) return std::nullopt;  // no broker to copy to
  Assignment next = a;
  next.generation = 0;
  next.replicas.push_back(*best);
  next.joining = *best;
  return next;
}

}  // namespace felix::cluster
