// PendingRequests: answers owed on a pipelined stream, keyed by request id. A request is
// completed exactly once: by its answer, or by FailAll when the stream or connection ends.
// Unknown ids (answers to requests already failed) are reported, not fatal.
//
// Not thread-safe: owned by the stream's reading thread (the endpoint's loop thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

namespace felix::client_impl {

template <typename T>
class PendingRequests {
 public:
  using Callback = std::function<void(T)>;

  // False when `id` is already pending (the caller must use fresh ids).
  bool Add(uint64_t id, Callback callback) {
    return pending_.emplace(id, std::move(callback)).second;
  }
  // Runs and removes the callback for `id`; false when no such request is pending.
  bool Complete(uint64_t id, T value) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return false;
    Callback cb = std::move(it->second);
    pending_.erase(it);
    cb(std::move(value));
    return true;
  }
  // Fails every pending request (oldest id first) with make(); callbacks may add new requests,
  // which are not failed by this call.
  template <typename Make>
  void FailAll(const Make& make) {
    std::map<uint64_t, Callback> failing;
    failing.swap(pending_);
    for (auto& [id, cb] : failing) cb(make());
  }
  bool contains(uint64_t id) const { return pending_.count(id) != 0; }
  size_t size() const { return pending_.size(); }
  bool empty() const { return pending_.empty(); }

 private:
  std::map<uint64_t, Callback> pending_;
};

}  // namespace felix::client_impl
