// AnswerSlot: the one value a blocking client call waits for, set once by the client's I/O
// thread.
//
// Why not std::promise / std::future: libstdc++'s set_value goes through std::call_once, and
// glibc's pthread_once ends with a futex wake whether or not anyone waits — a system call per
// answer on the I/O thread, on the path of every blocking request (docs/performance.md, change
// 43). Here the setter makes one only when the waiter already sleeps.
//
// Threading: Set from any one thread, once (later calls are ignored); Ready, WaitUntil and
// Take from the one waiting thread. Shared by both through a shared_ptr, so a waiter that gave
// up (timeout) leaves the slot to the setter.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <utility>

namespace felix::client_impl {

template <class T>
class AnswerSlot {
 public:
  // Stores `value` and wakes the waiter if it sleeps. Only the first call counts.
  void Set(T value) {
    uint32_t s = state_.load(std::memory_order_relaxed);
    if (s == kReady || setting_.exchange(true, std::memory_order_acq_rel)) return;
    value_.emplace(std::move(value));
    if (state_.exchange(kReady, std::memory_order_acq_rel) == kSleeping) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr,
              nullptr, 0);
    }
  }

  bool Ready() const { return state_.load(std::memory_order_acquire) == kReady; }

  // Sleeps until the value is set (true) or `deadline` passed (false).
  bool WaitUntil(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      uint32_t s = state_.load(std::memory_order_acquire);
      if (s == kReady) return true;
      if (s == kEmpty && !state_.compare_exchange_strong(s, kSleeping, std::memory_order_acq_rel))
        continue;  // set meanwhile: read it again
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return Ready();
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      // Returns at once (EAGAIN) when Set changed the state after the load above.
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, kSleeping, &ts,
              nullptr, 0);
    }
  }

  // The value; only after Ready() or WaitUntil returned true.
  T Take() { return std::move(*value_); }

 private:
  static constexpr uint32_t kEmpty = 0;
  static constexpr uint32_t kSleeping = 1;  // empty, and the waiter is (about to be) asleep
  static constexpr uint32_t kReady = 2;

  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                std::atomic<uint32_t>::is_always_lock_free);
  std::atomic<uint32_t> state_{kEmpty};
  std::atomic<bool> setting_{false};  // the first Set's claim: a second Set changes nothing
  std::optional<T> value_;            // written by the first Set before state_ is kReady
};

}  // namespace felix::client_impl
