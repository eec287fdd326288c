// Backoff: jittered exponential delays between reconnect attempts (watch streams, keepalive
// streams, mirror re-reads). Each delay is drawn uniformly from [d/2, d], d doubling from
// `initial` up to `max`; jitter keeps many brokers from reconnecting to a restarted etcd in
// lock step. Not thread-safe: one owner.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace felix::etcd {

class Backoff {
 public:
  explicit Backoff(std::chrono::milliseconds initial = std::chrono::milliseconds(50),
                   std::chrono::milliseconds max = std::chrono::milliseconds(1000))
      : initial_(initial), max_(max), current_(initial), rng_(std::random_device{}()) {}

  std::chrono::milliseconds Next() {
    auto ceiling = current_;
    current_ = std::min(max_, current_ * 2);
    std::uniform_int_distribution<int64_t> pick(ceiling.count() / 2, ceiling.count());
    return std::chrono::milliseconds(pick(rng_));
  }
  void Reset() { current_ = initial_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds current_;
  std::minstd_rand rng_;
};

}  // namespace felix::etcd
