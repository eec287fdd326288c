#include "broker/executor.h"

#include <future>
#include <thread>
#include <vector>

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

TEST(Executor, RunOrPostRunsInlineWhenIdleWithItsContinuations) {
  Executor executor("inline");
  std::vector<int> order;
  auto caller = std::this_thread::get_id();
  ASSERT_TRUE(executor.RunOrPost([&] {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_TRUE(executor.InExecutorThread());
    order.push_back(1);
    // A continuation on the same executor runs before the executor is handed back.
    executor.Post([&] {
      EXPECT_EQ(std::this_thread::get_id(), caller);
      order.push_back(2);
    });
  }));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_FALSE(executor.InExecutorThread());
}

TEST(Executor, RunOrPostQueuesBehindARunningTaskAndKeepsOrder) {
  Executor executor("busy");
  std::vector<int> order;
  std::promise<void> started, release, done;
  ASSERT_TRUE(executor.Post([&] {
    started.set_value();
    release.get_future().wait();
    order.push_back(1);
  }));
  started.get_future().wait();
  auto caller = std::this_thread::get_id();
  // The executor is busy: both are queued, and run on its thread in order.
  ASSERT_TRUE(executor.RunOrPost([&] {
    EXPECT_NE(std::this_thread::get_id(), caller);
    order.push_back(2);
  }));
  ASSERT_TRUE(executor.RunOrPost([&] {
    EXPECT_NE(std::this_thread::get_id(), caller);
    order.push_back(3);
    done.set_value();
  }));
  release.set_value();
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

// TryRunInline runs a task that borrows the caller's data only when it can run it now; busy
// or stopped, it runs and queues nothing, and the caller decides what to post.
TEST(Executor, TryRunInlineRunsNowWhenIdleAndNeverQueuesWhenBusyOrStopped) {
  Executor executor("try");
  std::vector<int> order;
  auto caller = std::this_thread::get_id();
  EXPECT_EQ(executor.TryRunInline([&] {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_TRUE(executor.InExecutorThread());
    order.push_back(1);
    executor.Post([&] { order.push_back(2); });  // a continuation runs before it returns
  }),
            Executor::InlineRun::kRan);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));

  std::promise<void> started, release, done;
  ASSERT_TRUE(executor.Post([&] {
    started.set_value();
    release.get_future().wait();
    order.push_back(3);
  }));
  started.get_future().wait();
  EXPECT_EQ(executor.TryRunInline([&] { order.push_back(99); }), Executor::InlineRun::kBusy);
  ASSERT_TRUE(executor.Post([&] {
    order.push_back(4);
    done.set_value();
  }));
  release.set_value();
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}))
      << "the busy attempt ran nothing, queued nothing";

  executor.Stop();
  EXPECT_EQ(executor.TryRunInline([&] { order.push_back(99); }), Executor::InlineRun::kStopped);
  EXPECT_EQ(order.size(), 4u);
}

TEST(Executor, TasksPostedDuringAnInlineRunWaitForIt) {
  Executor executor("exclusive");
  std::vector<int> order;
  std::promise<void> posted, done;
  std::thread other;
  ASSERT_TRUE(executor.RunOrPost([&] {
    // Another thread posts while the inline task holds the executor: its task may not start
    // before this one ends.
    other = std::thread([&] {
      executor.Post([&] {
        order.push_back(2);
        done.set_value();
      });
      posted.set_value();
    });
    posted.get_future().wait();
    order.push_back(1);
  }));
  other.join();
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

// A log's flusher completes appends with RunAloneOrPost: the completion runs on the calling
// thread when the executor is idle, but what anyone posted meanwhile (a close that would join
// that very thread) runs on the executor's own thread, after it.
TEST(Executor, RunAloneOrPostLeavesWhatWasPostedMeanwhileToTheExecutorThread) {
  Executor executor("alone");
  const auto caller = std::this_thread::get_id();
  std::vector<int> order;
  std::promise<std::thread::id> continuation_thread;
  ASSERT_TRUE(executor.RunAloneOrPost([&] {
    EXPECT_TRUE(executor.InExecutorThread());
    EXPECT_EQ(std::this_thread::get_id(), caller) << "idle: runs inline";
    executor.Post([&] {
      order.push_back(2);
      continuation_thread.set_value(std::this_thread::get_id());
    });
    order.push_back(1);
  }));
  auto ran_on = continuation_thread.get_future();
  ASSERT_EQ(ran_on.wait_for(10s), std::future_status::ready);
  EXPECT_NE(ran_on.get(), caller) << "the continuation went to the executor's thread";
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(Executor, StopAfterInlineRunsRunsWhatWasQueued) {
  int ran = 0;
  Executor executor("stop-inline");
  ASSERT_TRUE(executor.RunOrPost([&] {
    ++ran;
    for (int i = 0; i < 3; ++i) executor.Post([&] { ++ran; });
  }));
  executor.Stop();
  EXPECT_EQ(ran, 4);
  EXPECT_FALSE(executor.RunOrPost([&] { ++ran; }));
  EXPECT_EQ(ran, 4);
}

}  // namespace
}  // namespace felix::broker
