#include "broker/memory_trimmer.h"

#include <malloc.h>

namespace felix::broker {

MemoryTrimmer::MemoryTrimmer(const std::atomic<size_t>& inflight, MetricsRegistry& metrics,
                             size_t threshold, std::chrono::milliseconds interval)
    : inflight_(inflight),
      threshold_(threshold),
      interval_(interval),
      trims_(metrics.AddCounter("felix_memory_trims_total",
                                "times freed heap memory was given back to the OS after a "
                                "publish burst (malloc_trim)")) {
  thread_ = std::thread([this] { Run(); });
}

MemoryTrimmer::~MemoryTrimmer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MemoryTrimmer::Run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    if (peak_.load() < threshold_ || inflight_.load() != 0) continue;
    peak_.store(0);
    lock.unlock();
    malloc_trim(0);
    trims_.Increment();
    lock.lock();
  }
}

}  // namespace felix::broker
