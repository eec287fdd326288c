// AwaitReady, SpinUntil: how a blocking client call waits for its answer or event
// (ClientOptions::spin_wait).
//
// Threading: any thread but a client I/O thread (it blocks).
#pragma once

#include <algorithm>
#include <chrono>

#include "client/answer_slot.h"

namespace felix::client_impl {

// Spins until `done()` is true (true) or `spin` — never longer than `timeout` — has passed
// (false), without sleeping.
template <class Done>
bool SpinUntil(std::chrono::microseconds spin, std::chrono::milliseconds timeout, Done&& done) {
  using Clock = std::chrono::steady_clock;
  if (spin.count() <= 0) return false;
  const auto spin_until = Clock::now() + std::min<Clock::duration>(spin, timeout);
  for (unsigned round = 0;; ++round) {
    if (done()) return true;
    if ((round & 63) == 63 && Clock::now() >= spin_until) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// What is left of the time until `deadline` (0 once it passed), for AwaitReady.
inline std::chrono::milliseconds RemainingUntil(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

// Waits until `answer` is set or `timeout` passed (false). Spins first, for up to `spin`
// (never longer than `timeout`), checking the slot without sleeping: a thread that sleeps
// pays its own wakeup when the answer comes, which on a VM without guest halt polling is the
// largest part of a loopback round trip.
template <class T>
bool AwaitReady(AnswerSlot<T>& answer, std::chrono::microseconds spin,
                std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  if (SpinUntil(spin, timeout, [&] { return answer.Ready(); })) return true;
  return answer.WaitUntil(start + timeout);
}

}  // namespace felix::client_impl
