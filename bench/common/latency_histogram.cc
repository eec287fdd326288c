#include "latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

namespace felix::bench {

size_t LatencyHistogram::IndexOf(uint64_t nanos) {
  if (nanos < (uint64_t{1} << kLinearBits)) return static_cast<size_t>(nanos);
  // msb >= 7: the power's 64 sub-buckets are `group` bits wide.
  int msb = 63 - std::countl_zero(nanos);
  int group = msb - (kLinearBits - 1);  // >= 1
  uint64_t sub = (nanos >> group) - kSubBuckets;
  return (uint64_t{1} << kLinearBits) + static_cast<size_t>(group - 1) * kSubBuckets + sub;
}

uint64_t LatencyHistogram::ValueAt(size_t index) {
  if (index < (size_t{1} << kLinearBits)) return index;
  size_t rest = index - (size_t{1} << kLinearBits);
  int group = static_cast<int>(rest / kSubBuckets) + 1;
  uint64_t sub = rest % kSubBuckets;
  // Upper edge of the bucket (saturating for the very top one).
  uint64_t edge = (sub + kSubBuckets + 1) << group;
  return edge == 0 ? UINT64_MAX : edge - 1;
}

void LatencyHistogram::Record(uint64_t nanos) {
  ++buckets_[IndexOf(nanos)];
  ++count_;
  sum_ += nanos;
  max_ = std::max(max_, nanos);
  min_ = std::min(min_, nanos);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
  min_ = std::min(min_, other.min_);
}

uint64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(ValueAt(i), max_);
  }
  return max_;
}

std::string LatencyHistogram::SummaryJson() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "{\"count\":%llu,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,"
                "\"p999_us\":%.1f,\"max_us\":%.1f}",
                static_cast<unsigned long long>(count_), Percentile(50) / 1e3, Percentile(90) / 1e3,
                Percentile(99) / 1e3, Percentile(99.9) / 1e3, max_ / 1e3);
  return buf;
}

}  // namespace felix::bench
