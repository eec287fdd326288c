// CacheShard on real durable logs (a ShardStore in a temp directory) and in memory: put/get/
// delete, miss vs empty value, counters, rebuild from the logs, TTL with an injected clock
// (lazy and swept), compaction that keeps offsets and shrinks the disk; plus the cache and
// counter record layouts of storage.md §17.1 / §18.
#include "broker/cache_shard.h"

#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "broker/cache_record.h"
#include "broker/log_adapters.h"
#include "storage/shard_store.h"
#include "support/child_process.h"

namespace felix::broker {
namespace {

using namespace std::chrono_literals;

template <typename F>
auto OnExecutor(Executor& executor, F fn) -> decltype(fn()) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto future = task.get_future();
  executor.Post([&task] { task(); });
  EXPECT_EQ(future.wait_for(20s), std::future_status::ready);
  return future.get();
}

std::vector<uint8_t> Hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

TEST(CacheRecord, LayoutsMatchStorageSpecExamples) {
  std::string v = "v";
  std::span<const uint8_t> value(reinterpret_cast<const uint8_t*>(v.data()), v.size());
  EXPECT_EQ(EncodeCacheRecord({CacheRecord::Op::kPut, 0, std::nullopt, "k", value}),
            Hex("0100000000000000000001000000"
                "6b76"));
  EXPECT_EQ(EncodeCacheRecord({CacheRecord::Op::kPut, 1700000000000, 42, "k", value}),
            Hex("02000068e5cf8b01000001000000"
                "2a00000000000000"
                "6b76"));
  EXPECT_EQ(EncodeCacheRecord({CacheRecord::Op::kDelete, 0, std::nullopt, "k", {}}),
            Hex("0101000000000000000001000000"
                "6b"));
  EXPECT_EQ(EncodeCounterRecord({CounterRecord::Op::kDelta, -5, "c"}),
            Hex("0100fbffffffffffffff01000000"
                "63"));
  EXPECT_EQ(EncodeCounterRecord({CounterRecord::Op::kCheckpoint, 42, "c"}),
            Hex("01012a0000000000000001000000"
                "63"));

  auto copy_bytes =
      Hex("02000068e5cf8b01000001000000"
          "2a00000000000000"
          "6b76");
  auto copy = DecodeCacheRecord(copy_bytes);
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->op, CacheRecord::Op::kPut);
  EXPECT_EQ(copy->expires_at_millis, 1700000000000u);
  EXPECT_EQ(copy->carried_version, 42u);
  EXPECT_EQ(copy->key, "k");
  EXPECT_EQ(std::string(copy->value.begin(), copy->value.end()), "v");
  auto delta_bytes =
      Hex("0100fbffffffffffffff01000000"
          "63");
  auto delta = DecodeCounterRecord(delta_bytes);
  ASSERT_TRUE(delta);
  EXPECT_EQ(delta->value, -5);
  EXPECT_EQ(delta->key, "c");
}

TEST(CacheRecord, MalformedRecordsAreTypedErrors) {
  auto message = [](auto result) { return result ? std::string("ok") : result.error().message; };
  EXPECT_EQ(message(DecodeCacheRecord(Hex("0100"))), "CacheRecordTooShort");
  EXPECT_EQ(message(DecodeCacheRecord(Hex("0300000000000000000001000000"
                                          "6b"))),
            "CacheRecordVersion");
  EXPECT_EQ(message(DecodeCacheRecord(Hex("0100000000000000000005000000"
                                          "6b"))),
            "CacheRecordKeyLength");
  EXPECT_EQ(message(DecodeCacheRecord(Hex("0100000000000000000001000000"
                                          "ff"))),
            "CacheRecordKeyNotUtf8");
  EXPECT_EQ(message(DecodeCacheRecord(Hex("0102000000000000000001000000"
                                          "6b"))),
            "CacheRecordOp");
  EXPECT_EQ(message(DecodeCacheRecord(Hex("02010000000000000000010000002a00000000000000"
                                          "6b"))),
            "CacheRecordOp");
  EXPECT_NE(message(DecodeCounterRecord(Hex("0100fbffffffffffffff02000000"
                                            "63"))),
            "ok");
  EXPECT_NE(message(DecodeCounterRecord(Hex("0200fbffffffffffffff01000000"
                                            "63"))),
            "ok");
  EXPECT_NE(message(DecodeCounterRecord(Hex("0102fbffffffffffffff01000000"
                                            "63"))),
            "ok");
  EXPECT_NE(message(DecodeCounterRecord(Hex("0100fbff"))), "ok");
}

struct Clock {
  std::atomic<uint64_t> now{1'000'000};
  std::function<uint64_t()> Fn() {
    return [this] { return now.load(); };
  }
};

class CacheShardTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = felix::testing::MakeTempDir("cache-shard-test"); }
  void TearDown() override {
    Close();
    std::filesystem::remove_all(dir_);
  }

  CacheShard& OpenDurable(CacheShardOptions options = {}) {
    Close();
    storage::LogOptions log;
    log.fsync_mode = storage::FsyncMode::kOnCommit;
    auto store = storage::ShardStore::Open(dir_, storage::ShardStoreOptions::Uniform(log));
    EXPECT_TRUE(store) << (store ? "" : store.error().message);
    store_ = std::move(*store);
    executor_ = std::make_unique<Executor>("cache-test");
    options.now_ms = clock_.Fn();
    options.sweep_interval = 0ms;  // tests sweep by hand
    shard_ = std::make_unique<CacheShard>(
        ShardId{"t", "ns", "c", ShardKind::kCache, 0}, *executor_,
        std::make_unique<DurableRecordLog>(store_->log(storage::LogKind::kCache), fence_),
        std::make_unique<DurableRecordLog>(store_->log(storage::LogKind::kCounters), fence_),
        options);
    auto opened = shard_->Open();
    EXPECT_TRUE(opened) << (opened ? "" : opened.error().message);
    return *shard_;
  }

  CacheShard& OpenInMemory(CacheShardOptions options = {}) {
    Close();
    executor_ = std::make_unique<Executor>("cache-test");
    options.now_ms = clock_.Fn();
    options.sweep_interval = 0ms;
    shard_ = std::make_unique<CacheShard>(ShardId{"t", "ns", "c", ShardKind::kCache, 0}, *executor_,
                                          nullptr, nullptr, options);
    EXPECT_TRUE(shard_->Open());
    return *shard_;
  }

  void Close() {
    if (executor_) executor_->Stop();
    if (shard_) shard_->CloseLogs();
    shard_.reset();
    executor_.reset();
    if (store_) {
      EXPECT_TRUE(store_->Close());
    }
    store_.reset();
  }

  Result<void> Put(const std::string& key, const std::string& value,
                   std::optional<uint64_t> ttl = std::nullopt) {
    std::promise<Result<void>> done;
    auto f = done.get_future();
    executor_->Post([&] {
      shard_->Put(key, value, ttl, [&](Result<void> r) { done.set_value(std::move(r)); });
    });
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    return f.get();
  }
  std::optional<std::string> Get(const std::string& key) {
    return OnExecutor(*executor_, [&] { return shard_->Get(key); });
  }
  Result<std::optional<std::string>> Delete(const std::string& key) {
    std::promise<Result<std::optional<std::string>>> done;
    auto f = done.get_future();
    executor_->Post([&] {
      shard_->Delete(key, [&](Result<std::optional<std::string>> r) { done.set_value(r); });
    });
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    return f.get();
  }
  Result<int64_t> Add(const std::string& key, int64_t delta) {
    std::promise<Result<int64_t>> done;
    auto f = done.get_future();
    executor_->Post(
        [&] { shard_->CounterAdd(key, delta, [&](Result<int64_t> r) { done.set_value(r); }); });
    EXPECT_EQ(f.wait_for(20s), std::future_status::ready);
    return f.get();
  }
  Result<std::optional<int64_t>> Counter(const std::string& key) {
    return OnExecutor(*executor_, [&] { return shard_->CounterGet(key); });
  }
  Result<void> Compact() {
    std::promise<Result<void>> done;
    auto f = done.get_future();
    executor_->Post([&] { shard_->CompactNow([&](Result<void> r) { done.set_value(r); }); });
    EXPECT_EQ(f.wait_for(30s), std::future_status::ready);
    return f.get();
  }
  // Waits until the sweep's deletes (posted by SweepExpired) have been applied.
  void SweepAndSettle() {
    OnExecutor(*executor_, [&] {
      shard_->SweepExpired();
      return 0;
    });
    // The sweep's append completes on the log thread, then posts its apply; a put through
    // the same log completes after it (completions are in append order).
    ASSERT_TRUE(Put("__settle", "x"));
  }

  std::string dir_;
  Clock clock_;
  ShardFence fence_;  // generation 0, no lease: admits every append
  std::unique_ptr<storage::ShardStore> store_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<CacheShard> shard_;
};

TEST_F(CacheShardTest, PutGetDeleteAndEmptyValueIsNotAMiss) {
  OpenDurable();
  EXPECT_EQ(Get("k"), std::nullopt);
  ASSERT_TRUE(Put("k", "v1"));
  ASSERT_TRUE(Put("empty", ""));
  EXPECT_EQ(Get("k"), "v1");
  EXPECT_EQ(Get("empty"), std::string());
  ASSERT_TRUE(Put("k", "v2"));
  EXPECT_EQ(Get("k"), "v2");
  auto removed = Delete("k");
  ASSERT_TRUE(removed);
  EXPECT_EQ(*removed, "v2");
  EXPECT_EQ(Get("k"), std::nullopt);
  auto again = Delete("k");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, std::nullopt);
  auto empty_removed = Delete("empty");
  ASSERT_TRUE(empty_removed);
  EXPECT_EQ(*empty_removed, std::string());
}

TEST_F(CacheShardTest, ReopenRebuildsValuesVersionsAndCounters) {
  OpenDurable();
  ASSERT_TRUE(Put("a", "1"));
  ASSERT_TRUE(Put("b", "2"));
  ASSERT_TRUE(Put("a", "3"));
  ASSERT_TRUE(Delete("b"));
  ASSERT_TRUE(Put("empty", ""));
  EXPECT_EQ(*Add("hits", 5), 5);
  EXPECT_EQ(*Add("hits", -2), 3);
  auto version = OnExecutor(*executor_, [&] { return shard_->VersionOf("a"); });
  ASSERT_TRUE(version);
  Offset cache_next = shard_->cache_log_next();

  OpenDurable();
  EXPECT_EQ(shard_->cache_log_next(), cache_next);
  EXPECT_EQ(Get("a"), "3");
  EXPECT_EQ(Get("b"), std::nullopt);
  EXPECT_EQ(Get("empty"), std::string());
  EXPECT_EQ(OnExecutor(*executor_, [&] { return shard_->VersionOf("a"); }), version);
  EXPECT_EQ(*Counter("hits"), 3);
  EXPECT_EQ(*Counter("never"), std::nullopt);
  EXPECT_EQ(*Add("hits", 10), 13);
}

TEST_F(CacheShardTest, TtlExpiresOnReadAndTheSweepMakesItPermanent) {
  CacheShardOptions options;
  options.default_ttl_ms = 5000;
  OpenDurable(options);
  ASSERT_TRUE(Put("short", "s", 1000));
  ASSERT_TRUE(Put("default", "d"));  // default TTL 5000
  ASSERT_TRUE(Put("forever", "f", 1'000'000'000));
  EXPECT_EQ(Get("short"), "s");
  clock_.now += 999;
  EXPECT_EQ(Get("short"), "s");
  clock_.now += 1;  // expires_at <= now: gone
  EXPECT_EQ(Get("short"), std::nullopt);
  EXPECT_EQ(Get("default"), "d");
  clock_.now += 4000;
  EXPECT_EQ(Get("default"), std::nullopt);

  Offset before = shard_->cache_log_next();
  SweepAndSettle();
  // Two expiry deletes plus the settle put were written.
  EXPECT_EQ(shard_->cache_log_next(), before + 3);
  EXPECT_EQ(OnExecutor(*executor_, [&] { return shard_->entry_count(); }), 2u);  // + __settle

  // Reopening with a clock from before the expiry: the written deletes keep them gone.
  clock_.now -= 10'000;
  OpenDurable(options);
  EXPECT_EQ(Get("short"), std::nullopt);
  EXPECT_EQ(Get("default"), std::nullopt);
  EXPECT_EQ(Get("forever"), "f");
}

TEST_F(CacheShardTest, ExpiryIsDecidedByLogContentAndClock) {
  OpenDurable();
  ASSERT_TRUE(Put("k", "v", 1000));
  clock_.now += 2000;
  // Reopen without sweeping: the expiry recorded in the log still applies.
  OpenDurable();
  EXPECT_EQ(Get("k"), std::nullopt);
  clock_.now -= 1500;
  EXPECT_EQ(Get("k"), "v");
}

TEST_F(CacheShardTest, CountersSumDeltasAndNeverWrittenIsDistinctFromZero) {
  OpenDurable();
  EXPECT_EQ(*Counter("c"), std::nullopt);
  EXPECT_EQ(*Add("c", 0), 0);
  EXPECT_EQ(*Counter("c"), 0);
  EXPECT_EQ(*Add("c", -7), -7);
  EXPECT_EQ(*Add("c", 10), 3);
  // The cache value with the same key is unrelated.
  EXPECT_EQ(Get("c"), std::nullopt);
}

TEST_F(CacheShardTest, CompactionKeepsOffsetsAndShrinksTheDisk) {
  CacheShardOptions options;
  options.cache_compaction_floor_bytes = 1u << 30;  // only CompactNow compacts here
  options.counter_compaction_floor_bytes = 1u << 30;
  OpenDurable(options);
  std::string big(4096, 'x');
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(Put("hot", big + std::to_string(i)));
  ASSERT_TRUE(Put("cold", "c", 1'000'000));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Add("n", 1));
  auto version_hot = OnExecutor(*executor_, [&] { return shard_->VersionOf("hot"); });
  auto version_cold = OnExecutor(*executor_, [&] { return shard_->VersionOf("cold"); });
  Offset next_before = shard_->cache_log_next();
  Offset counter_next_before = shard_->counter_log_next();
  uint64_t disk_before = shard_->disk_bytes();

  ASSERT_TRUE(Compact());
  EXPECT_EQ(shard_->compactions(), 2u);
  // Offsets go on from where they were: the live set was copied to the tail.
  EXPECT_EQ(shard_->cache_log_start(), next_before);
  EXPECT_EQ(shard_->cache_log_next(), next_before + 2);
  EXPECT_EQ(shard_->counter_log_start(), counter_next_before);
  EXPECT_EQ(shard_->counter_log_next(), counter_next_before + 1);
  EXPECT_LT(shard_->disk_bytes(), disk_before / 10);
  EXPECT_EQ(Get("hot"), big + "199");
  EXPECT_EQ(Get("cold"), "c");
  EXPECT_EQ(*Counter("n"), 100);
  EXPECT_EQ(OnExecutor(*executor_, [&] { return shard_->VersionOf("hot"); }), version_hot);

  // Writes continue at the tail, and a reopen replays the compacted log to the same state.
  ASSERT_TRUE(Put("after", "a"));
  EXPECT_EQ(*Add("n", 1), 101);
  OpenDurable(options);
  EXPECT_EQ(shard_->cache_log_start(), next_before);
  EXPECT_EQ(Get("hot"), big + "199");
  EXPECT_EQ(Get("cold"), "c");
  EXPECT_EQ(Get("after"), "a");
  EXPECT_EQ(*Counter("n"), 101);
  EXPECT_EQ(OnExecutor(*executor_, [&] { return shard_->VersionOf("cold"); }), version_cold);
  clock_.now += 2'000'000;  // the copy kept the expiry
  EXPECT_EQ(Get("cold"), std::nullopt);
}

TEST_F(CacheShardTest, WritesDuringCompactionWinOverTheCopies) {
  CacheShardOptions options;
  options.cache_compaction_floor_bytes = 1u << 30;
  options.counter_compaction_floor_bytes = 1u << 30;
  options.compaction_batch_records = 2;  // several copy batches interleave with the writes
  OpenDurable(options);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(Put("k" + std::to_string(i), "old" + std::to_string(round)));
      ASSERT_TRUE(Add("c" + std::to_string(i), 1));
    }
  }
  // Start the pass and, in the same executor turn, queue writes to the keys being copied.
  std::promise<Result<void>> compacted;
  std::vector<std::promise<Result<void>>> puts(10);
  std::vector<std::promise<Result<int64_t>>> adds(10);
  executor_->Post([&] {
    shard_->CompactNow([&](Result<void> r) { compacted.set_value(r); });
    for (int i = 0; i < 10; ++i) {
      shard_->Put("k" + std::to_string(i), "new", std::nullopt,
                  [&, i](Result<void> r) { puts[i].set_value(r); });
      shard_->CounterAdd("c" + std::to_string(i), 100,
                         [&, i](Result<int64_t> r) { adds[i].set_value(r); });
    }
  });
  for (auto& p : puts) ASSERT_TRUE(p.get_future().get());
  for (auto& a : adds) EXPECT_EQ(*a.get_future().get(), 103);
  ASSERT_TRUE(compacted.get_future().get());
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Get("k" + std::to_string(i)), "new");
    EXPECT_EQ(*Counter("c" + std::to_string(i)), 103);
  }
  // Whatever the pass managed to drop, the log replays to the same state.
  OpenDurable(options);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Get("k" + std::to_string(i)), "new") << i;
    EXPECT_EQ(*Counter("c" + std::to_string(i)), 103) << i;
  }
}

TEST_F(CacheShardTest, CompactionTriggersOnItsOwnWhenGarbageDominates) {
  CacheShardOptions options;
  options.cache_compaction_floor_bytes = 64 * 1024;
  OpenDurable(options);
  std::string big(2048, 'y');
  for (int i = 0; i < 200 && OnExecutor(*executor_, [&] { return shard_->compactions(); }) == 0;
       ++i) {
    ASSERT_TRUE(Put("k" + std::to_string(i % 3), big + std::to_string(i)));
  }
  ASSERT_TRUE(Put("k0", big));
  // The pass runs on the executor after a write completes: wait for it with a deadline.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (OnExecutor(*executor_, [&] { return shard_->compactions(); }) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(Put("k0", big));
  }
  EXPECT_GE(shard_->compactions(), 1u);
  EXPECT_GT(shard_->cache_log_start(), Offset(0));
  EXPECT_EQ(Get("k0"), big);
}

TEST_F(CacheShardTest, InMemoryShardServesValuesButNoCounters) {
  OpenInMemory();
  ASSERT_TRUE(Put("k", ""));
  EXPECT_EQ(Get("k"), std::string());
  ASSERT_TRUE(Put("t", "v", 0));  // ttl 0 expires at once
  EXPECT_EQ(Get("t"), std::nullopt);
  ASSERT_TRUE(Put("t", "v", 10));
  clock_.now += 10;
  OnExecutor(*executor_, [&] {
    shard_->SweepExpired();
    return 0;
  });
  EXPECT_EQ(OnExecutor(*executor_, [&] { return shard_->entry_count(); }), 1u);
  auto added = Add("c", 1);
  ASSERT_FALSE(added);
  EXPECT_EQ(added.error().code, ErrorCode::kInvalidArgument);
}

// --- Quorum: the commit gates --------------------------------------------------------------------

class GatedCacheShardTest : public CacheShardTest {
 protected:
  void OpenGated(std::chrono::milliseconds timeout) {
    OpenDurable();
    OnExecutor(*executor_, [&] {
      shard_->InstallCommitGates(CommitGateOptions{timeout});
      return 0;
    });
  }
  // Starts a put / counter add; its answers (every one: a second would be a bug) land in
  // the returned list.
  template <class T>
  struct Answers {
    std::mutex mu;
    std::vector<Result<T>> got;
    size_t size() {
      std::lock_guard lock(mu);
      return got.size();
    }
    Result<T> at(size_t i) {
      std::lock_guard lock(mu);
      return got.at(i);
    }
  };
  std::shared_ptr<Answers<void>> StartPut(const std::string& key, const std::string& value) {
    auto answers = std::make_shared<Answers<void>>();
    executor_->Post([this, key, value, answers] {
      shard_->Put(key, value, std::nullopt, [answers](Result<void> r) {
        std::lock_guard lock(answers->mu);
        answers->got.push_back(std::move(r));
      });
    });
    return answers;
  }
  std::shared_ptr<Answers<int64_t>> StartAdd(const std::string& key, int64_t delta) {
    auto answers = std::make_shared<Answers<int64_t>>();
    executor_->Post([this, key, delta, answers] {
      shard_->CounterAdd(key, delta, [answers](Result<int64_t> r) {
        std::lock_guard lock(answers->mu);
        answers->got.push_back(std::move(r));
      });
    });
    return answers;
  }
  size_t Held() {
    return OnExecutor(*executor_, [&] { return shard_->held_writes(); });
  }
  // Waits (bounded) until `n` writes committed locally and sit in the gates.
  bool WaitHeld(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (Held() != n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  template <class T>
  bool WaitAnswers(Answers<T>& a, size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (a.size() < n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      OnExecutor(*executor_, [] { return 0; });
    }
    return true;
  }
  void Advance(bool cache_log, Offset commit) {
    OnExecutor(*executor_, [&] {
      if (cache_log) {
        shard_->AdvanceCacheCommit(commit);
      } else {
        shard_->AdvanceCounterCommit(commit);
      }
      return 0;
    });
  }
};

// A gated shard applies (reads see) and answers a write only once its log's commit offset
// covers it, in offset order; each log has its own commit offset.
TEST_F(GatedCacheShardTest, WritesAreAppliedAndAnsweredOnlyOnceTheirLogsCommitCoversThem) {
  OpenGated(60s);
  auto first = StartPut("k", "v0");
  auto second = StartPut("k", "v1");
  auto add = StartAdd("n", 7);
  ASSERT_TRUE(WaitHeld(3));
  EXPECT_EQ(first->size(), 0u);
  EXPECT_EQ(Get("k"), std::nullopt) << "a write no majority holds is invisible";
  EXPECT_EQ(*Counter("n"), std::nullopt);
  EXPECT_TRUE(OnExecutor(*executor_, [&] { return shard_->WriteInFlight("k"); }));

  Advance(/*cache_log=*/true, Offset(1));  // covers the first put only
  ASSERT_TRUE(WaitAnswers(*first, 1));
  EXPECT_TRUE(first->at(0));
  EXPECT_EQ(second->size(), 0u);
  EXPECT_EQ(Get("k"), "v0");
  EXPECT_EQ(add->size(), 0u) << "the counter log has its own commit offset";

  Advance(true, Offset(2));
  Advance(/*cache_log=*/false, Offset(1));
  ASSERT_TRUE(WaitAnswers(*second, 1));
  ASSERT_TRUE(WaitAnswers(*add, 1));
  EXPECT_EQ(Get("k"), "v1");
  ASSERT_TRUE(add->at(0));
  EXPECT_EQ(*add->at(0), 7);
  EXPECT_EQ(*Counter("n"), std::optional<int64_t>(7));
  EXPECT_EQ(Held(), 0u);
  // A commit offset that ran ahead (the mark can pass a write before it settles here)
  // releases the next write as soon as it committed.
  Advance(true, Offset(10));
  ASSERT_TRUE(Put("k", "v2"));
  EXPECT_EQ(Get("k"), "v2");
}

// Not covered in time: answered kTimeout (quorum_timeout, outcome unknown) once, still not
// visible; applied when a majority holds it after all, with no second answer.
TEST_F(GatedCacheShardTest, AWriteNotCoveredInTimeIsAnsweredTimeoutAndAppliedWhenCovered) {
  OpenGated(20ms);
  auto put = StartPut("k", "late");
  auto add = StartAdd("n", 3);
  ASSERT_TRUE(WaitAnswers(*put, 1));
  ASSERT_TRUE(WaitAnswers(*add, 1));
  ASSERT_FALSE(put->at(0));
  EXPECT_EQ(put->at(0).error().code, ErrorCode::kTimeout);
  ASSERT_FALSE(add->at(0));
  EXPECT_EQ(add->at(0).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(Get("k"), std::nullopt);
  EXPECT_EQ(Held(), 2u);
  EXPECT_TRUE(OnExecutor(*executor_, [&] { return shard_->WriteInFlight("k"); }))
      << "a conditional write must still wait for it";

  Advance(true, Offset(1));
  Advance(false, Offset(1));
  EXPECT_EQ(Held(), 0u);
  EXPECT_EQ(Get("k"), "late");
  EXPECT_EQ(*Counter("n"), std::optional<int64_t>(3));
  EXPECT_FALSE(OnExecutor(*executor_, [&] { return shard_->WriteInFlight("k"); }));
  EXPECT_EQ(put->size(), 1u) << "answered once";
  EXPECT_EQ(add->size(), 1u) << "answered once";
}

// The shard closing on its executor (it stopped leading) answers held writes `internal`
// (outcome unknown) and applies nothing.
TEST_F(GatedCacheShardTest, ClosingAnswersHeldWritesInternal) {
  OpenGated(60s);
  auto put = StartPut("k", "v");
  ASSERT_TRUE(WaitHeld(1));
  OnExecutor(*executor_, [&] {
    shard_->CloseLogs();
    return 0;
  });
  ASSERT_EQ(put->size(), 1u);
  ASSERT_FALSE(put->at(0));
  EXPECT_EQ(put->at(0).error().code, ErrorCode::kInternal);
  EXPECT_EQ(Get("k"), std::nullopt);
}

}  // namespace
}  // namespace felix::broker
