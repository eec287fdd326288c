#include "latency_histogram.h"

#include <random>

#include <gtest/gtest.h>

namespace felix::bench {
namespace {

TEST(LatencyHistogram, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 50; ++v) h.Record(v);
  EXPECT_EQ(h.Count(), 50u);
  EXPECT_EQ(h.Percentile(50), 25u);
  EXPECT_EQ(h.Percentile(100), 50u);
  EXPECT_EQ(h.Min(), 1u);
  EXPECT_EQ(h.Max(), 50u);
}

TEST(LatencyHistogram, PercentilesWithinTwoPercentOfExact) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(11.0, 1.0);  // ~60 µs median, long tail
  std::vector<uint64_t> values;
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    auto v = static_cast<uint64_t>(dist(rng)) + 1;
    values.push_back(v);
    h.Record(v);
  }
  std::sort(values.begin(), values.end());
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    auto exact = values[static_cast<size_t>(std::ceil(p / 100 * values.size())) - 1];
    auto approx = h.Percentile(p);
    EXPECT_GE(approx, exact) << p;  // upper bucket edge: never under-reports
    EXPECT_LE(static_cast<double>(approx), exact * 1.02) << p;
  }
  EXPECT_EQ(h.Max(), values.back());
}

TEST(LatencyHistogram, MergeEqualsRecordingEverythingInOne) {
  LatencyHistogram a, b, all;
  for (uint64_t v = 1; v < 5000000; v = v * 3 / 2 + 1) {
    (v % 2 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.Count(), all.Count());
  for (double p : {1.0, 50.0, 99.0}) EXPECT_EQ(a.Percentile(p), all.Percentile(p));
  EXPECT_EQ(a.Max(), all.Max());
  EXPECT_EQ(a.Min(), all.Min());
}

TEST(LatencyHistogram, HugeValuesClampButMaxStaysExact) {
  LatencyHistogram h;
  h.Record(UINT64_MAX / 2);
  EXPECT_EQ(h.Max(), UINT64_MAX / 2);
  EXPECT_EQ(h.Percentile(100), UINT64_MAX / 2);
}

}  // namespace
}  // namespace felix::bench
