// AwaitReady: how a blocking client call waits for its answer (ClientOptions::spin_wait).
//
// Threading: any thread but a client I/O thread (it blocks).
#pragma once

#include <chrono>
#include <future>

namespace felix::client_impl {

// Waits until `answer` is ready or `timeout` passed (false). Spins first, for up to `spin`
// (never longer than `timeout`), checking the future without sleeping: a thread that sleeps
// pays its own wakeup when the answer comes, which on a VM without guest halt polling is the
// largest part of a loopback round trip.
template <class Future>
bool AwaitReady(const Future& answer, std::chrono::microseconds spin,
                std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  if (spin.count() > 0) {
    const auto spin_until = start + std::min<Clock::duration>(spin, timeout);
    for (unsigned round = 0;; ++round) {
      if (answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return true;
      if ((round & 63) == 63 && Clock::now() >= spin_until) break;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  return answer.wait_until(start + timeout) == std::future_status::ready;
}

}  // namespace felix::client_impl
