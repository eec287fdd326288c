// CacheShard's watches on in-process fake logs (cache_shard.h "Watches"): register-before-read
// with writes still in flight (each change exactly once, in offset order), the bounded queue
// ending a live watcher lagged at the first change it could not take, and the retained state
// walk paced in small steps with a key rewritten mid-walk arriving once, as a live change.
#include <future>

#include <gtest/gtest.h>

#include "broker/cache_shard.h"
#include "fake_record_log.h"

namespace felix::broker {
namespace {

using namespace std::chrono_literals;
using testing::FakeRecordLog;

template <typename F>
auto OnExecutor(Executor& executor, F fn) -> decltype(fn()) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto future = task.get_future();
  executor.Post([&task] { task(); });
  EXPECT_EQ(future.wait_for(20s), std::future_status::ready);
  return future.get();
}

class CacheWatchTest : public ::testing::Test {
 protected:
  void Open(CacheShardOptions options = {}) {
    auto cache = std::make_unique<FakeRecordLog>();
    log_ = cache.get();
    options.sweep_interval = 0ms;
    options.now_ms = [] { return uint64_t{1000}; };
    shard_ =
        std::make_unique<CacheShard>(ShardId{"t", "ns", "c", ShardKind::kCache, 0}, executor_,
                                     std::move(cache), std::make_unique<FakeRecordLog>(), options);
    ASSERT_TRUE(shard_->Open());
  }
  void TearDown() override {
    executor_.Stop();
    if (shard_) shard_->CloseLogs();
  }
  // Posts a put (answered whenever its append completes).
  void PutAsync(const std::string& key, const std::string& value) {
    executor_.Post([this, key, value] { shard_->Put(key, value, std::nullopt, [](auto) {}); });
  }
  CacheWatchRegistration Watch(CacheWatchFilter filter, CacheWatchStart start) {
    auto result = OnExecutor(executor_, [&] { return shard_->Watch(filter, start, [] {}); });
    EXPECT_TRUE(std::holds_alternative<CacheWatchRegistration>(result));
    return std::get<CacheWatchRegistration>(result);
  }
  // Pops what the queue holds once the executor has run everything posted so far.
  std::vector<std::pair<std::string, Offset>> Drain(CacheWatchQueue& queue, size_t want) {
    std::vector<std::pair<std::string, Offset>> out;
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
      OnExecutor(executor_, [] { return 0; });  // let posted steps run
      while (auto change = queue.Pop()) out.emplace_back((*change)->key, (*change)->offset);
    }
    return out;
  }

  Executor executor_{"cache-watch-test"};
  FakeRecordLog* log_ = nullptr;
  std::unique_ptr<CacheShard> shard_;
};

using Changes = std::vector<std::pair<std::string, Offset>>;

TEST_F(CacheWatchTest, AWriteInFlightAtRegistrationArrivesOnceAsALiveChange) {
  Open();
  PutAsync("a", "1");  // offset 0, applied
  OnExecutor(executor_, [&] { return log_->hold_completions = true; });
  PutAsync("b", "2");  // offset 1, appended but not applied (its fsync is pending)
  auto reg = Watch(CacheWatchFilter{true, ""},
                   CacheWatchStart{CacheWatchStart::Kind::kFromOffset, Offset(0)});
  EXPECT_EQ(reg.resume_offset, Offset(1)) << "the applied frontier, not the log's next offset";
  EXPECT_EQ(Drain(*reg.queue, 1), (Changes{{"a", Offset(0)}}));
  OnExecutor(executor_, [&] {
    log_->CompleteHeld();
    return 0;
  });
  PutAsync("c", "3");  // held too: complete it as well
  OnExecutor(executor_, [&] {
    log_->CompleteHeld();
    return 0;
  });
  EXPECT_EQ(Drain(*reg.queue, 2), (Changes{{"b", Offset(1)}, {"c", Offset(2)}}));
  EXPECT_EQ(reg.queue->size(), 0u);
}

TEST_F(CacheWatchTest, ALiveChangeThatFindsTheQueueFullEndsTheWatchLagged) {
  CacheShardOptions options;
  options.watch_queue_changes = 2;
  Open(options);
  auto reg = Watch(CacheWatchFilter{false, "k"}, CacheWatchStart{});
  for (int i = 0; i < 4; ++i) PutAsync("k", std::to_string(i));
  PutAsync("other", "x");
  OnExecutor(executor_, [] { return 0; });
  EXPECT_EQ(OnExecutor(executor_, [&] { return shard_->watcher_count(); }), 0u)
      << "a lagged watcher is forgotten";
  EXPECT_EQ(Drain(*reg.queue, 2), (Changes{{"k", Offset(0)}, {"k", Offset(1)}}));
  auto end = reg.queue->TakeEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->kind, WatchEnd::Kind::kLagged);
  EXPECT_EQ(end->resume_from, Offset(2));
}

// The retained set is the values as of resume_offset; a key rewritten after registration is
// walked with its value then, and its rewrite follows as a live change (no gap, no offset twice).
TEST_F(CacheWatchTest, TheRetainedWalkIsPacedAndARewrittenKeyFollowsAsALiveChange) {
  CacheShardOptions options;
  options.watch_changes_per_step = 1;
  options.watch_queue_changes = 1;  // every change waits for room: the walk spans many tasks
  Open(options);
  for (const char* key : {"p:a", "p:b", "p:c", "q:z"}) PutAsync(key, "v");  // offsets 0..3
  // The puts' append completions are posted while the puts run: two barriers let them apply
  // before the watch registers (the test is about a walk over applied keys).
  OnExecutor(executor_, [] { return 0; });
  OnExecutor(executor_, [] { return 0; });
  auto reg = Watch(CacheWatchFilter{true, "p:"},
                   CacheWatchStart{CacheWatchStart::Kind::kRetained, Offset(0)});
  EXPECT_EQ(reg.retained_count, 3u);
  EXPECT_EQ(reg.resume_offset, Offset(4));
  Changes seen;
  auto pop_one = [&] {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      OnExecutor(executor_, [] { return 0; });
      if (auto change = reg.queue->Pop()) {
        seen.emplace_back((*change)->key, (*change)->offset);
        return;
      }
    }
    ADD_FAILURE() << "no change";
  };
  pop_one();                                // p:a
  PutAsync("p:c", "w");                     // offset 4: rewritten before the walk reaches it
  OnExecutor(executor_, [] { return 0; });  // the put runs and posts its append completion,
  OnExecutor(executor_, [] { return 0; });  // which applies it: p:c is at 4 in the index
  pop_one();                                // p:b
  pop_one();                                // p:c, retained: its value at registration
  pop_one();                                // p:c, the live change at 4
  EXPECT_EQ(
      seen,
      (Changes{{"p:a", Offset(0)}, {"p:b", Offset(1)}, {"p:c", Offset(2)}, {"p:c", Offset(4)}}));
  OnExecutor(executor_, [] { return 0; });
  EXPECT_EQ(reg.queue->size(), 0u) << "nothing more";
}

}  // namespace
}  // namespace felix::broker
