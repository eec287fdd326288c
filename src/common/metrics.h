// Prometheus metrics: counters, gauges and histograms owned by one MetricsRegistry.
//
// The registry is created by the daemon and handed to each subsystem, which registers its
// series once at start-up and keeps the returned references (they stay valid as long as the
// registry). Updating a series is lock-free and may happen on any thread; registration and
// rendering take the registry's mutex. There is no global registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace felix {

class Counter {
 public:
  void Increment(uint64_t by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  uint64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t by) { value_.fetch_add(by, std::memory_order_relaxed); }
  int64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Fixed upper bounds chosen at registration; Observe is a short scan plus two atomic adds.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  uint64_t BucketCount(size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }
  uint64_t Count() const { return count_.load(std::memory_order_relaxed); }
  double Sum() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // one per bound, plus +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};  // sum kept in millionths to stay integral
};

// Bucket bounds for latencies in seconds, 10 µs to ~10 s.
std::vector<double> LatencyBucketsSeconds();

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // `labels` is the rendered label set without braces, e.g. `result="ok"`, or empty.
  // Registering the same name and labels twice returns the same series.
  Counter& AddCounter(std::string_view name, std::string_view help, std::string_view labels = {});
  Gauge& AddGauge(std::string_view name, std::string_view help, std::string_view labels = {});
  Histogram& AddHistogram(std::string_view name, std::string_view help,
                          std::vector<double> upper_bounds, std::string_view labels = {});

  // Prometheus text exposition format 0.0.4.
  std::string RenderPrometheus() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    Type type;
    std::string name;
    std::string help;
    std::string labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  static std::string IndexKey(Type type, std::string_view name, std::string_view labels);
  Series* Find(Type type, std::string_view name, std::string_view labels);
  void Insert(std::unique_ptr<Series> series);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Series>> series_;  // registration order, for rendering
  // Some paths look their series up per request (labels built from the outcome): a hash
  // index keeps that O(1) however many series the broker has registered.
  std::unordered_map<std::string, Series*> index_;
};

}  // namespace felix
