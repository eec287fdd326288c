#include "broker/executor.h"

#include <future>

#include <gtest/gtest.h>

namespace felix::broker {
namespace {

using namespace std::chrono_literals;

TEST(Executor, RunsTasksInPostOrderOnItsOwnThread) {
  Executor executor("test");
  std::vector<int> order;
  std::promise<void> done;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(executor.Post([&, i] {
      EXPECT_TRUE(executor.InExecutorThread());
      order.push_back(i);
      if (i == 99) done.set_value();
    }));
  }
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_FALSE(executor.InExecutorThread());
}

TEST(Executor, TimersFireInDeadlineOrderAndCancelledOnesNever) {
  Executor executor("timers");
  std::vector<int> fired;
  std::promise<void> done;
  executor.PostAfter(30ms, [&] {
    fired.push_back(3);
    done.set_value();
  });
  auto cancelled = executor.PostAfter(10ms, [&] { fired.push_back(99); });
  executor.PostAfter(20ms, [&] { fired.push_back(2); });
  executor.PostAfter(0ms, [&] { fired.push_back(1); });
  EXPECT_TRUE(executor.Cancel(cancelled));
  EXPECT_FALSE(executor.Cancel(cancelled));
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
}

TEST(Executor, StopRunsPostedTasksThenRefusesNewOnes) {
  int ran = 0;
  Executor executor("stop");
  for (int i = 0; i < 10; ++i) executor.Post([&] { ++ran; });
  executor.PostAfter(1h, [&] { ran += 1000; });
  executor.Stop();
  EXPECT_EQ(ran, 10);
  EXPECT_FALSE(executor.Post([&] { ++ran; }));
  EXPECT_EQ(executor.PostAfter(0ms, [] {}), 0u);
  executor.Stop();  // idempotent
}

}  // namespace
}  // namespace felix::broker
