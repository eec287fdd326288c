// A LeaseClock for tests: time moves only when the test moves it (starts at 1000 s).
#pragma once

#include <atomic>
#include <cstdint>

#include "cluster/node_lease.h"

namespace felix::cluster {

class FakeLeaseClock final : public LeaseClock {
 public:
  int64_t NowNs() const override { return now_.load(); }
  void Set(int64_t t) { now_ = t; }
  void Advance(int64_t d) { now_ += d; }

 private:
  std::atomic<int64_t> now_{1000 * int64_t{1'000'000'000}};
};

}  // namespace felix::cluster
