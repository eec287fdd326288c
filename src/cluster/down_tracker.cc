#include "cluster/down_tracker.h"

#include <algorithm>

namespace felix::cluster {

DownTracker::DownTracker(int64_t lease_ttl_ns, int64_t margin_ns)
    : ttl_ns_(lease_ttl_ns), margin_ns_(margin_ns > 0 ? margin_ns : lease_ttl_ns / 4) {}

void DownTracker::Elected(int64_t now_ns) {
  elected_ns_ = now_ns;
  absent_since_.clear();
  known_.clear();
}

void DownTracker::Present(const std::string& node_id) {
  absent_since_.erase(node_id);
  known_.insert(node_id);
}

void DownTracker::Absent(const std::string& node_id, int64_t now_ns) {
  known_.insert(node_id);
  absent_since_.emplace(node_id, now_ns);  // an earlier observation stays
}

void DownTracker::Snapshot(const std::set<std::string>& present, int64_t now_ns) {
  for (const auto& id : known_) {
    if (!present.contains(id)) absent_since_.emplace(id, now_ns);
  }
  for (const auto& id : present) Present(id);
}

void DownTracker::Mentioned(const std::string& node_id, int64_t now_ns) {
  if (!known_.contains(node_id)) Absent(node_id, now_ns);
}

int64_t DownTracker::DownAt(int64_t absent_since_ns) const {
  return std::max(absent_since_ns + margin_ns_, elected_ns_ + ttl_ns_ + margin_ns_);
}

bool DownTracker::IsDown(const std::string& node_id, int64_t now_ns) const {
  auto it = absent_since_.find(node_id);
  return it != absent_since_.end() && now_ns >= DownAt(it->second);
}

std::vector<std::string> DownTracker::Down(int64_t now_ns, int64_t for_ns) const {
  std::vector<std::string> down;
  for (const auto& [id, since] : absent_since_) {
    if (now_ns >= DownAt(since) + for_ns) down.push_back(id);
  }
  return down;  // std::map order: sorted
}

std::optional<int64_t> DownTracker::NextDownAt(int64_t now_ns, int64_t for_ns) const {
  std::optional<int64_t> next;
  for (const auto& [id, since] : absent_since_) {
    const int64_t at = DownAt(since) + for_ns;
    if (at > now_ns && (!next || at < *next)) next = at;
  }
  return next;
}

}  // namespace felix::cluster
