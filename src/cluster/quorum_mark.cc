#include "cluster/quorum_mark.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace felix::cluster {

size_t Majority(size_t replicas) {
  return replicas / 2 + 1;
}

Offset QuorumMark(const MarkInputs& in, std::span<const FollowerPosition> followers) {
  std::vector<Offset> held;
  held.reserve(followers.size() + 1);
  if (in.leader_counts) held.push_back(in.leader_tail);
  for (const FollowerPosition& f : followers) {
    if (!f.answered || f.halted) continue;
    held.push_back(std::min(f.confirmed, in.leader_tail));
  }
  const size_t majority = Majority(std::max<size_t>(in.replicas, 1));
  if (held.size() < majority) return Offset(0);
  std::nth_element(held.begin(), held.begin() + (majority - 1), held.end(), std::greater<>());
  const Offset mark = held[majority - 1];
  // §8.3: a majority counts only once it covers a record of the leader's own generation.
  if (in.own_start && mark <= *in.own_start) return Offset(0);
  return mark;
}

}  // namespace felix::cluster
