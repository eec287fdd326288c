#include "broker/cache_watch_queue.h"

#include <algorithm>

namespace felix::broker {

CacheWatchQueue::CacheWatchQueue(size_t max_changes, size_t max_bytes,
                                 std::function<void()> on_ready, std::function<void()> on_room)
    : max_changes_(std::max<size_t>(1, max_changes)),
      max_bytes_(max_bytes),
      on_ready_(std::move(on_ready)),
      on_room_(std::move(on_room)) {}

bool CacheWatchQueue::Push(CacheChangeRef& change, bool* was_empty) {
  if (end_) return false;
  if (!items_.empty() && (items_.size() >= max_changes_ || bytes_ + change->bytes() > max_bytes_)) {
    return false;
  }
  *was_empty = items_.empty();
  bytes_ += change->bytes();
  items_.push_back(std::move(change));
  return true;
}

bool CacheWatchQueue::OfferLive(CacheChangeRef change) {
  bool was_empty = false;
  {
    std::lock_guard lock(mu_);
    if (!Push(change, &was_empty)) return false;
  }
  if (was_empty && on_ready_) on_ready_();
  return true;
}

bool CacheWatchQueue::OfferReplay(CacheChangeRef change) {
  bool was_empty = false;
  {
    std::lock_guard lock(mu_);
    if (!Push(change, &was_empty)) {
      replay_waiting_ = !end_.has_value();
      return false;
    }
  }
  if (was_empty && on_ready_) on_ready_();
  return true;
}

std::optional<CacheChangeRef> CacheWatchQueue::Pop() {
  CacheChangeRef out;
  bool notify_room = false;
  {
    std::lock_guard lock(mu_);
    if (items_.empty()) return std::nullopt;
    out = std::move(items_.front());
    items_.pop_front();
    bytes_ -= std::min(bytes_, out->bytes());
    if (replay_waiting_) {
      replay_waiting_ = false;
      notify_room = true;
    }
  }
  if (notify_room && on_room_) on_room_();
  return out;
}

void CacheWatchQueue::End(WatchEnd end) {
  {
    std::lock_guard lock(mu_);
    if (end_) return;
    end_ = std::move(end);
    replay_waiting_ = false;
  }
  if (on_ready_) on_ready_();  // the writer may be idle on an empty queue
}

bool CacheWatchQueue::ended() const {
  std::lock_guard lock(mu_);
  return end_.has_value();
}

std::optional<WatchEnd> CacheWatchQueue::TakeEnd() {
  std::lock_guard lock(mu_);
  if (!end_ || end_taken_ || !items_.empty()) return std::nullopt;
  end_taken_ = true;
  return end_;
}

size_t CacheWatchQueue::size() const {
  std::lock_guard lock(mu_);
  return items_.size();
}

}  // namespace felix::broker
