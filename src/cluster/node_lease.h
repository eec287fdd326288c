// The broker's etcd lease and how long it may trust it (cluster-etcd.md §3).
//
// LeaseWindow is the pure arithmetic: the lease is usable until anchor + L − L/4, where L is
// the TTL etcd granted and `anchor` is the send time of the oldest unanswered keepalive when an
// answer arrives (answers carry no request id, so the oldest outstanding one is the only safe
// attribution), never moved backwards. The first anchor is the send time of the grant request.
//
// NodeLease keeps one lease alive: it grants it (asking FELIX_NODE_LEASE_MS rounded up to whole
// seconds; it uses the TTL etcd grants), sends a keepalive every L/4 on one keepalive stream
// (reopened with jittered backoff when it breaks), and keeps a cached "valid" flag refreshed
// every usable/16 (at least every 10 ms) for the admission path; ValidNow() reads the clock for
// the exact check just before an append takes its offset. An answer with TTL <= 0 means etcd
// dropped the lease: the lease is lost for good (lost() true) and the owner must register again
// with a new NodeLease.
//
// Time comes from a LeaseClock (CLOCK_BOOTTIME in production: it keeps counting through
// suspend, as etcd's clock does). Tests inject a fake clock and drive Tick() themselves
// (Start(false): no thread).
//
// Threading: valid(), ValidNow(), lost(), id(), ttl_ms(), usable_until_ns() from any thread.
// Start/Revoke/destructor from the owning thread. on_change runs on the lease thread (or the
// etcd client's callback thread), not under the lease's lock; it must not call Revoke.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "common/result.h"
#include "etcd/backoff.h"
#include "etcd/etcd_client.h"

namespace felix::cluster {

class LeaseClock {
 public:
  virtual ~LeaseClock() = default;
  virtual int64_t NowNs() const = 0;
};

// CLOCK_BOOTTIME.
class BoottimeClock final : public LeaseClock {
 public:
  int64_t NowNs() const override;
};

class LeaseWindow {
 public:
  explicit LeaseWindow(int64_t ttl_ns) : ttl_ns_(ttl_ns) {}

  void Start(int64_t grant_sent_ns) { anchor_ns_ = grant_sent_ns; }
  void OnSend(int64_t sent_ns) { unanswered_.push_back(sent_ns); }
  // An answer arrived: attribute it to the oldest unanswered keepalive. Ignored when none is
  // outstanding (an answer to a keepalive sent on a stream since reset).
  void OnAnswer() {
    if (unanswered_.empty()) return;
    int64_t sent = unanswered_.front();
    unanswered_.pop_front();
    if (sent > anchor_ns_) anchor_ns_ = sent;
  }
  // The stream broke: its unanswered keepalives will never be answered.
  void OnStreamReset() { unanswered_.clear(); }

  int64_t ttl_ns() const { return ttl_ns_; }
  int64_t anchor_ns() const { return anchor_ns_; }
  int64_t usable_until_ns() const { return anchor_ns_ + ttl_ns_ - ttl_ns_ / 4; }
  bool ValidAt(int64_t now_ns) const { return now_ns < usable_until_ns(); }
  size_t unanswered() const { return unanswered_.size(); }

 private:
  int64_t ttl_ns_;
  int64_t anchor_ns_ = 0;
  std::deque<int64_t> unanswered_;
};

struct NodeLeaseOptions {
  std::chrono::milliseconds lease{2000};  // FELIX_NODE_LEASE_MS
  std::chrono::milliseconds reopen_initial{50};
  std::chrono::milliseconds reopen_max{1000};
  // Called when the cached flag flips (true = usable again).
  std::function<void(bool valid)> on_change;
};

class NodeLease {
 public:
  // `etcd` and `clock` must outlive the NodeLease.
  NodeLease(etcd::EtcdClient& etcd, NodeLeaseOptions options, const LeaseClock& clock);
  ~NodeLease();
  NodeLease(const NodeLease&) = delete;
  NodeLease& operator=(const NodeLease&) = delete;

  // Grants the lease and opens the keepalive stream; with `run_thread` a thread then calls
  // Tick() on time. Errors: the grant's etcd error (kUnavailable/kTimeout), kInvalidArgument for
  // a lease option below 1 ms.
  Result<void> Start(bool run_thread = true);
  // Stops keeping the lease alive and revokes it (its keys go at once).
  Result<void> Revoke();

  // One step: reopen a broken stream, send a keepalive when one is due, refresh the flag.
  void Tick();
  // When Tick() next has something to do (lease clock).
  int64_t NextTickNs() const;

  int64_t id() const { return id_; }
  int64_t ttl_ms() const { return ttl_ms_; }
  bool valid() const { return valid_.load(std::memory_order_acquire); }
  bool ValidNow() const;
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  int64_t usable_until_ns() const;
  int64_t last_answer_ns() const { return last_answer_ns_.load(); }

 private:
  void OnAnswer(int64_t ttl_seconds);
  void OnClosed();
  // Recomputes the flag; returns whether it flipped (mu_ held).
  bool RefreshLocked(int64_t now);
  void Notify(bool flipped);
  void Run();

  etcd::EtcdClient& etcd_;
  NodeLeaseOptions options_;
  const LeaseClock& clock_;

  int64_t id_ = 0;
  int64_t ttl_ms_ = 0;
  int64_t keepalive_every_ns_ = 0;
  int64_t refresh_every_ns_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<LeaseWindow> window_;            // under mu_
  int64_t next_keepalive_ns_ = 0;                  // under mu_
  int64_t next_reopen_ns_ = 0;                     // under mu_
  bool stream_broken_ = false;                     // under mu_
  bool stopping_ = false;                          // under mu_
  etcd::Backoff reopen_backoff_;                   // under mu_
  std::unique_ptr<etcd::KeepAliveStream> stream_;  // touched by Tick (one caller at a time)

  std::atomic<bool> valid_{false};
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> last_answer_ns_{0};
  std::thread thread_;
};

}  // namespace felix::cluster
