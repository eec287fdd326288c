// LatencyHistogram: an HDR-style log-linear histogram of nanosecond latencies for benchmarks.
//
// Values below 128 ns are exact; above, each power of two is split into 64 linear
// sub-buckets, so a percentile is at most ~1.6% above the true value over the whole u64 range
// (a percentile reports its bucket's upper edge: it never under-reports). Recording is a couple of
// shifts and an increment, no allocation. Not thread-safe: one per thread, then Merge().
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace felix::bench {

class LatencyHistogram {
 public:
  void Record(uint64_t nanos);
  void Merge(const LatencyHistogram& other);

  uint64_t Count() const { return count_; }
  uint64_t Max() const { return max_; }
  uint64_t Min() const { return count_ == 0 ? 0 : min_; }
  double MeanNanos() const { return count_ == 0 ? 0 : static_cast<double>(sum_) / count_; }
  // Smallest recorded bucket value v such that at least `p` percent of samples are <= v.
  uint64_t Percentile(double p) const;

  // {"count":…,"p50_us":…,"p90_us":…,"p99_us":…,"p999_us":…,"max_us":…} (microseconds).
  std::string SummaryJson() const;

 private:
  static constexpr int kLinearBits = 7;        // exact below 2^7
  static constexpr uint64_t kSubBuckets = 64;  // per power of two above
  static constexpr size_t kBuckets = 128 + (64 - kLinearBits) * kSubBuckets;
  static size_t IndexOf(uint64_t nanos);
  static uint64_t ValueAt(size_t index);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace felix::bench
