#include <gtest/gtest.h>

#include "workload.h"

namespace felix::bench {
namespace {

TEST(PublishLimit, StopsAtTheMessageCount) {
  Workload w;
  PublishLimit limit(w, 40, NowNanos());
  for (uint64_t sent = 0; sent < 40; ++sent) EXPECT_TRUE(limit.More(sent)) << sent;
  EXPECT_FALSE(limit.More(40));
  EXPECT_FALSE(limit.More(41));
}

TEST(PublishLimit, ADurationAlreadyOverStopsAtTheFirstTest) {
  Workload w;
  w.duration = 1;  // second
  const uint64_t ten_seconds_ago = NowNanos() - 10'000'000'000ULL;
  PublishLimit limit(w, 1'000'000, ten_seconds_ago);
  EXPECT_FALSE(limit.More(0));
}

TEST(PublishLimit, ADurationPassedIsSeenWithinOneClockInterval) {
  Workload w;
  w.duration = 1;
  const uint64_t ten_seconds_ago = NowNanos() - 10'000'000'000ULL;
  PublishLimit limit(w, 1'000'000, ten_seconds_ago);
  (void)limit.More(0);  // the test that reads the clock
  uint32_t more = 0;
  for (uint64_t sent = 1; sent <= PublishLimit::kClockEvery; ++sent) {
    if (!limit.More(sent)) break;
    ++more;
  }
  EXPECT_LT(more, PublishLimit::kClockEvery);
}

TEST(PublishLimit, ADurationNotYetOverLetsEveryPublishOn) {
  Workload w;
  w.duration = 3600;
  PublishLimit limit(w, 1'000, NowNanos());
  for (uint64_t sent = 0; sent < 1'000; ++sent) ASSERT_TRUE(limit.More(sent)) << sent;
  EXPECT_FALSE(limit.More(1'000));
}

TEST(Workload, OnlyAWorkloadWithSubscribersStampsPayloads) {
  Workload w;
  EXPECT_FALSE(w.StampsPayloads());
  w.fanout = 1;
  EXPECT_TRUE(w.StampsPayloads());
}

}  // namespace
}  // namespace felix::bench
