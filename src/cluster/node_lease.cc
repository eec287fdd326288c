#include "cluster/node_lease.h"

#include <time.h>

#include <algorithm>

namespace felix::cluster {

int64_t BoottimeClock::NowNs() const {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

NodeLease::NodeLease(etcd::EtcdClient& etcd, NodeLeaseOptions options, const LeaseClock& clock)
    : etcd_(etcd),
      options_(std::move(options)),
      clock_(clock),
      reopen_backoff_(options_.reopen_initial, options_.reopen_max) {}

NodeLease::~NodeLease() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  stream_.reset();
}

Result<void> NodeLease::Start(bool run_thread) {
  if (options_.lease.count() < 1) {
    return Fail(ErrorCode::kInvalidArgument, "FELIX_NODE_LEASE_MS must be at least 1");
  }
  // etcd TTLs are whole seconds: round up, then believe what etcd granted.
  int64_t ask_s = (options_.lease.count() + 999) / 1000;
  int64_t sent = clock_.NowNs();
  auto grant = etcd_.LeaseGrant(ask_s);
  if (!grant) return tl::unexpected(grant.error().ToError());
  id_ = grant->id;
  ttl_ms_ = grant->ttl_seconds * 1000;
  const int64_t ttl_ns = ttl_ms_ * 1'000'000;
  keepalive_every_ns_ = std::max<int64_t>(ttl_ns / 4, 1'000'000);
  refresh_every_ns_ = std::max<int64_t>((ttl_ns - ttl_ns / 4) / 16, 10'000'000);
  {
    std::lock_guard lock(mu_);
    window_ = std::make_unique<LeaseWindow>(ttl_ns);
    window_->Start(sent);
    next_keepalive_ns_ = sent + keepalive_every_ns_;
  }
  etcd::KeepAliveCallbacks cb;
  cb.on_answer = [this](int64_t, int64_t ttl) { OnAnswer(ttl); };
  cb.on_closed = [this](const etcd::EtcdError&) { OnClosed(); };
  auto stream = etcd_.OpenKeepAlive(cb);
  bool flipped;
  {
    std::lock_guard lock(mu_);
    if (stream) {
      stream_ = std::move(*stream);
    } else {
      stream_broken_ = true;
      next_reopen_ns_ = sent;
    }
    flipped = RefreshLocked(clock_.NowNs());
  }
  Notify(flipped);
  if (run_thread) thread_ = std::thread([this] { Run(); });
  return Ok();
}

Result<void> NodeLease::Revoke() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  stream_.reset();
  bool flipped;
  {
    std::lock_guard lock(mu_);
    lost_ = true;
    flipped = RefreshLocked(clock_.NowNs());
  }
  Notify(flipped);
  if (id_ == 0) return Ok();
  auto r = etcd_.LeaseRevoke(id_);
  if (!r && r.error().code != etcd::EtcdErrc::kLeaseNotFound) {
    return tl::unexpected(r.error().ToError());
  }
  return Ok();
}

void NodeLease::Tick() {
  int64_t now = clock_.NowNs();
  bool reopen;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || window_ == nullptr || lost_) return;
    reopen = stream_broken_ && now >= next_reopen_ns_;
  }
  if (reopen) {
    stream_.reset();  // waits for the old stream's reader (not under mu_: it takes mu_)
    {
      std::lock_guard lock(mu_);
      window_->OnStreamReset();
      stream_broken_ = false;
    }
    etcd::KeepAliveCallbacks cb;
    cb.on_answer = [this](int64_t, int64_t ttl) { OnAnswer(ttl); };
    cb.on_closed = [this](const etcd::EtcdError&) { OnClosed(); };
    auto stream = etcd_.OpenKeepAlive(cb);
    std::lock_guard lock(mu_);
    if (stream) {
      stream_ = std::move(*stream);
      next_keepalive_ns_ = now;  // renew at once on the new stream
    } else {
      stream_broken_ = true;
      next_reopen_ns_ = now + std::chrono::nanoseconds(reopen_backoff_.Next()).count();
    }
  }
  bool send = false;
  {
    std::lock_guard lock(mu_);
    if (stream_ != nullptr && !stream_broken_ && now >= next_keepalive_ns_) {
      // Recorded before sending: an answer may arrive before Send returns.
      window_->OnSend(now);
      next_keepalive_ns_ = now + keepalive_every_ns_;
      send = true;
    }
  }
  if (send && !stream_->Send(id_)) OnClosed();
  bool flipped;
  {
    std::lock_guard lock(mu_);
    flipped = RefreshLocked(clock_.NowNs());
  }
  Notify(flipped);
}

int64_t NodeLease::NextTickNs() const {
  std::lock_guard lock(mu_);
  int64_t next = std::min(next_keepalive_ns_, clock_.NowNs() + refresh_every_ns_);
  if (stream_broken_) next = std::min(next, next_reopen_ns_);
  return next;
}

bool NodeLease::ValidNow() const {
  int64_t now = clock_.NowNs();
  std::lock_guard lock(mu_);
  return !lost_ && window_ != nullptr && window_->ValidAt(now);
}

int64_t NodeLease::usable_until_ns() const {
  std::lock_guard lock(mu_);
  return window_ == nullptr ? 0 : window_->usable_until_ns();
}

void NodeLease::OnAnswer(int64_t ttl_seconds) {
  int64_t now = clock_.NowNs();
  bool flipped;
  {
    std::lock_guard lock(mu_);
    if (window_ == nullptr) return;
    if (ttl_seconds <= 0) {
      lost_ = true;  // etcd no longer has the lease: its keys are gone
    } else {
      window_->OnAnswer();
      last_answer_ns_ = now;
      reopen_backoff_.Reset();
    }
    flipped = RefreshLocked(now);
  }
  Notify(flipped);
}

void NodeLease::OnClosed() {
  {
    std::lock_guard lock(mu_);
    if (stream_broken_) return;
    stream_broken_ = true;
    next_reopen_ns_ = clock_.NowNs() + std::chrono::nanoseconds(reopen_backoff_.Next()).count();
  }
  cv_.notify_all();
}

bool NodeLease::RefreshLocked(int64_t now) {
  bool v = !lost_ && window_ != nullptr && window_->ValidAt(now);
  bool was = valid_.exchange(v, std::memory_order_acq_rel);
  return v != was;
}

void NodeLease::Notify(bool flipped) {
  if (flipped && options_.on_change) options_.on_change(valid());
}

void NodeLease::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    Tick();
    lock.lock();
    if (stopping_) break;
    int64_t now = clock_.NowNs();
    int64_t wake = std::min(next_keepalive_ns_, now + refresh_every_ns_);
    if (stream_broken_) wake = std::min(wake, next_reopen_ns_);
    cv_.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(wake - now, 0)));
  }
}

}  // namespace felix::cluster
