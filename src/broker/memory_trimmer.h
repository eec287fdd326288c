// MemoryTrimmer: gives memory back to the operating system after a publish burst (issue 12
// item 11). glibc keeps freed heap memory for reuse, so a burst that briefly held hundreds of
// megabytes in flight left the broker's RSS there for good. Once the broker-wide in-flight
// publish cost has returned to zero after reaching `threshold` since the last trim, the trimmer
// calls malloc_trim(0) (counted in felix_memory_trims_total) — at most once per `interval`, on
// its own thread, never on the request path.
//
// Threading: NotePeak() from any thread (lock-free); the trimmer's thread reads the in-flight
// counter. The counter and the metrics registry must outlive the trimmer; the destructor stops
// and joins the thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

#include "common/metrics.h"

namespace felix::broker {

class MemoryTrimmer {
 public:
  MemoryTrimmer(const std::atomic<size_t>& inflight, MetricsRegistry& metrics, size_t threshold,
                std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~MemoryTrimmer();
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  // The in-flight cost just reached `inflight` (called where it grows).
  void NotePeak(size_t inflight) {
    size_t seen = peak_.load(std::memory_order_relaxed);
    while (inflight > seen && !peak_.compare_exchange_weak(seen, inflight)) {
    }
  }

 private:
  void Run();

  const std::atomic<size_t>& inflight_;
  const size_t threshold_;
  const std::chrono::milliseconds interval_;
  Counter& trims_;
  std::atomic<size_t> peak_{0};  // highest in-flight cost since the last trim

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // under mu_
  std::thread thread_;
};

}  // namespace felix::broker
