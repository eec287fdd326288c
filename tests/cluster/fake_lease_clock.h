// FakeLeaseClock: a LeaseClock whose time only moves when a test moves it (any thread may read
// it while the test thread sets it).
#pragma once

#include <atomic>
#include <cstdint>

#include "cluster/node_lease.h"

namespace felix::cluster::testing {

inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kSec = 1'000 * kMs;

class FakeLeaseClock final : public LeaseClock {
 public:
  int64_t NowNs() const override { return now_.load(); }
  void Set(int64_t t) { now_ = t; }
  void Advance(int64_t d) { now_ += d; }

 private:
  std::atomic<int64_t> now_{1000 * kSec};
};

}  // namespace felix::cluster::testing
