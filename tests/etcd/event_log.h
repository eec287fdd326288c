// EventLog: collects watch/mirror callbacks from another thread and lets a test wait, with a
// deadline, until a condition over what arrived holds (no sleeps as synchronisation).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include <map>
#include <string>

#include "etcd/etcd_client.h"
#include "etcd/prefix_mirror.h"

namespace felix::etcd::testing {

class EventLog {
 public:
  void Add(const std::vector<Event>& events) {
    {
      std::lock_guard lock(mu_);
      events_.insert(events_.end(), events.begin(), events.end());
    }
    cv_.notify_all();
  }
  void AddCompacted(int64_t revision) {
    {
      std::lock_guard lock(mu_);
      compacted_.push_back(revision);
    }
    cv_.notify_all();
  }
  // Wakes waiters after state they read in their predicate changed (lock first: no lost wakeup).
  void Touch() {
    { std::lock_guard lock(mu_); }
    cv_.notify_all();
  }

  // Waits until `pred(events)` holds; false on timeout.
  bool WaitFor(const std::function<bool(const std::vector<Event>&)>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(events_); });
  }
  bool WaitForCount(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return WaitFor([n](const std::vector<Event>& e) { return e.size() >= n; }, timeout);
  }
  bool WaitForCompacted(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return !compacted_.empty(); });
  }
  std::vector<Event> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<int64_t> compacted() {
    std::lock_guard lock(mu_);
    return compacted_;
  }

  WatchCallbacks Callbacks() {
    WatchCallbacks cb;
    cb.on_events = [this](const std::vector<Event>& e) { Add(e); };
    cb.on_compacted = [this](int64_t r) { AddCompacted(r); };
    return cb;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
  std::vector<int64_t> compacted_;
};

// MirrorRecorder: applies a PrefixMirror's callbacks to a map and counts snapshots, so a test
// can wait for a state and then inspect it.
class MirrorRecorder {
 public:
  MirrorCallbacks Callbacks() {
    MirrorCallbacks cb;
    cb.on_snapshot = [this](const std::vector<KeyValue>& kvs, int64_t revision) {
      {
        std::lock_guard lock(mu_);
        state_.clear();
        for (const auto& kv : kvs) state_[kv.key] = kv.value;
        ++snapshots_;
        revision_ = revision;
      }
      log_.Touch();
    };
    cb.on_events = [this](const std::vector<Event>& events) {
      {
        std::lock_guard lock(mu_);
        for (const auto& e : events) {
          if (e.kv.mod_revision < revision_) order_ok_ = false;
          revision_ = e.kv.mod_revision;
          if (e.type == Event::Type::kPut) {
            state_[e.kv.key] = e.kv.value;
          } else {
            state_.erase(e.kv.key);
          }
        }
      }
      log_.Touch();
    };
    return cb;
  }

  bool WaitForSnapshots(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return log_.WaitFor([&](auto&) { return Snapshots() >= n; }, timeout);
  }
  bool WaitForRevision(int64_t rev, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return log_.WaitFor([&](auto&) { return Revision() >= rev; }, timeout);
  }
  int Snapshots() {
    std::lock_guard lock(mu_);
    return snapshots_;
  }
  int64_t Revision() {
    std::lock_guard lock(mu_);
    return revision_;
  }
  std::map<std::string, std::string> State() {
    std::lock_guard lock(mu_);
    return state_;
  }
  bool OrderOk() {
    std::lock_guard lock(mu_);
    return order_ok_;
  }

 private:
  EventLog log_;
  std::mutex mu_;
  std::map<std::string, std::string> state_;
  int snapshots_ = 0;
  int64_t revision_ = 0;
  bool order_ok_ = true;
};

}  // namespace felix::etcd::testing
