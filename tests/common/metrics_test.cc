#include "common/metrics.h"

#include <gtest/gtest.h>

namespace felix {
namespace {

TEST(MetricsRegistry, RendersCountersGaugesAndLabels) {
  MetricsRegistry registry;
  registry.AddCounter("felix_publish_requests_total", "publishes", "result=\"ok\"").Increment(3);
  registry.AddCounter("felix_publish_requests_total", "publishes", "result=\"error\"").Increment();
  registry.AddGauge("felix_sub_queue_len", "queued").Set(-2);
  std::string text = registry.RenderPrometheus();
  EXPECT_NE(text.find("# TYPE felix_publish_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("felix_publish_requests_total{result=\"ok\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("felix_publish_requests_total{result=\"error\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("felix_sub_queue_len -2\n"), std::string::npos);
  // One header per name, however many label sets.
  EXPECT_EQ(text.find("# TYPE felix_publish_requests_total"),
            text.rfind("# TYPE felix_publish_requests_total"));
}

TEST(MetricsRegistry, SameNameAndLabelsIsTheSameSeries) {
  MetricsRegistry registry;
  Counter& a = registry.AddCounter("c", "h");
  Counter& b = registry.AddCounter("c", "h");
  EXPECT_EQ(&a, &b);
  Counter& labelled = registry.AddCounter("c", "h", "k=\"v\"");
  EXPECT_NE(&a, &labelled);
  EXPECT_EQ(&labelled, &registry.AddCounter("c", "h", "k=\"v\""));
  // A name that is another's name plus its labels' text is still a different series.
  EXPECT_NE(&labelled, &registry.AddCounter("ck=\"v\"", "h"));
  labelled.Increment(3);
  EXPECT_EQ(registry.AddCounter("c", "h", "k=\"v\"").Value(), 3u);
  EXPECT_EQ(a.Value(), 0u);
}

TEST(Histogram, BucketsAreCumulativeInOutput) {
  MetricsRegistry registry;
  Histogram& h =
      registry.AddHistogram("felix_storage_sync_duration_seconds", "fsync", {0.001, 0.01});
  h.Observe(0.0005);
  h.Observe(0.005);
  h.Observe(0.005);
  h.Observe(1.0);
  std::string text = registry.RenderPrometheus();
  EXPECT_NE(text.find("felix_storage_sync_duration_seconds_bucket{le=\"0.001\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("felix_storage_sync_duration_seconds_bucket{le=\"0.01\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("felix_storage_sync_duration_seconds_bucket{le=\"+Inf\"} 4\n"),
            std::string::npos);
  EXPECT_NE(text.find("felix_storage_sync_duration_seconds_count 4\n"), std::string::npos);
  EXPECT_NEAR(h.Sum(), 1.0105, 1e-6);
}

}  // namespace
}  // namespace felix
