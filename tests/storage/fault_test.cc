// Fault seams (FELIX_FAULT_INJECTION builds): a failed fsync poisons the log (later appends,
// syncs and the next open report it); a failed write is undone and consumes no offsets.
#include <cerrno>
#include <filesystem>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "storage/durable_log.h"
#include "test_util.h"

namespace felix::storage {
namespace {

#if FELIX_FAULT_INJECTION

using test::AppendN;
using test::ExpectRecords;
using test::MustOpen;
using test::Opts;
using test::Payload;
using test::TempDir;

// Options of a log whose fsyncs and writes the test's injector controls.
LogOptions WithFaults(const std::shared_ptr<FaultInjector>& faults,
                      FsyncMode mode = FsyncMode::kOnCommit) {
  LogOptions o = Opts(mode);
  o.faults = faults;
  return o;
}

TEST(Faults, FailedFsyncPoisonsLaterAppendsAndTheNextOpen) {
  auto dir = TempDir("poison");
  auto faults = std::make_shared<FaultInjector>();
  MetricsRegistry registry;
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.faults = faults;
  o.metrics = &registry;
  {
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 5);
    faults->FailSyncs(1, EIO);
    std::string p = Payload(5);
    auto failed = log->Append(AppendRecord{AsBytes(p)});
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code, StorageErrc::kPoisoned);
    EXPECT_EQ(failed.error().sys_errno, EIO);
    EXPECT_TRUE(log->poisoned());
    EXPECT_EQ(log->DurableOffset(), Offset(5));
    // The fault is gone, but the log stays poisoned (fsyncgate).
    auto later = log->Append(AppendRecord{AsBytes(p)});
    ASSERT_FALSE(later);
    EXPECT_EQ(later.error().code, StorageErrc::kPoisoned);
    EXPECT_FALSE(log->Sync());
    auto read = log->Read(Offset(0), ReadLimits{});
    ASSERT_TRUE(read);
    EXPECT_EQ(read->records.size(), 5u);  // only what is known durable
    EXPECT_FALSE(log->Truncate(Offset(5)));
    EXPECT_FALSE(log->Close());
    EXPECT_NE(registry.RenderPrometheus().find("felix_storage_sync_failures_total{log=\"log\"} 1"),
              std::string::npos);
  }
  o.faults = nullptr;
  auto reopened = DurableLog::Open(dir, o);
  ASSERT_FALSE(reopened);
  EXPECT_EQ(reopened.error().code, StorageErrc::kPoisoned);
  EXPECT_NE(reopened.error().message.find("Input/output error"), std::string::npos)
      << reopened.error().message;
  o.clear_poison = true;
  auto log = MustOpen(dir, o);
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->recovery().previous_poison.empty());
  ExpectRecords(*log, Offset(0), Offset(5));  // everything acknowledged is there
  EXPECT_GE(log->TailOffset(), Offset(5));
  Offset tail = log->TailOffset();
  AppendN(*log, tail, 1);
  ASSERT_TRUE(log->Close());
  o.clear_poison = false;
  EXPECT_TRUE(DurableLog::Open(dir, o));  // poison acknowledged and cleared
}

TEST(Faults, FailedFsyncFailsEveryConcurrentWaiter) {
  auto dir = TempDir("poison-many");
  auto faults = std::make_shared<FaultInjector>();
  auto log = MustOpen(dir, WithFaults(faults));
  faults->FailSyncs(1000, EIO);
  std::atomic<int> acked{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        auto r = log->Append(AppendRecord{AsBytes("x")});
        (r ? acked : failed)++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(acked.load(), 0);
  EXPECT_EQ(failed.load(), 40);
}

// Waits (bounded) for a condition another thread makes true.
template <typename F>
bool Eventually(F cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(Faults, GroupCommitOneFlushCoversEveryQueuedAppender) {
  auto dir = TempDir("group-commit");
  auto faults = std::make_shared<FaultInjector>();
  MetricsRegistry registry;
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.faults = faults;
  o.metrics = &registry;
  auto log = MustOpen(dir, o);
  const int before = faults->syncs_started();
  faults->HoldSyncs(true);
  // The first appender becomes the flush leader and blocks inside its fdatasync.
  std::thread leader([&] { ASSERT_TRUE(log->Append(AppendRecord{AsBytes("first")})); });
  ASSERT_TRUE(Eventually([&] { return faults->syncs_held() == 1; }));
  // Seven more write their records and queue behind that flush.
  std::vector<std::thread> queued;
  for (int i = 0; i < 7; ++i) {
    queued.emplace_back([&] { ASSERT_TRUE(log->Append(AppendRecord{AsBytes("queued")})); });
  }
  ASSERT_TRUE(Eventually([&] { return log->WrittenOffset() == Offset(8); }));
  EXPECT_EQ(log->DurableOffset(), Offset(0));
  EXPECT_EQ(log->TailOffset(), Offset(0));  // nothing acknowledged, nothing readable yet
  faults->HoldSyncs(false);
  leader.join();
  for (auto& t : queued) t.join();
  // The leader's flush covered only its own record; the next one covered all seven.
  EXPECT_EQ(faults->syncs_started() - before, 2);
  EXPECT_EQ(log->DurableOffset(), Offset(8));
  EXPECT_NE(registry.RenderPrometheus().find(
                "felix_storage_sync_batch_appends_bucket{log=\"log\",le=\"8\"} 2"),
            std::string::npos)
      << registry.RenderPrometheus();
}

// A Quorum leader's replicator ships records before its own flush covers them: under
// kOnCommit ReadWritten and NotifyWrittenWhen see a batch as soon as it is written, while
// Read, TailOffset and NotifyWhen wait for the fdatasync. A poisoned log serves neither past
// what is durable.
TEST(Faults, WrittenRecordsAreReadableBeforeTheirFlushOnlyThroughTheWrittenVariants) {
  auto dir = TempDir("written-reads");
  auto faults = std::make_shared<FaultInjector>();
  auto log = MustOpen(dir, WithFaults(faults));
  AppendN(*log, Offset(0), 2);
  std::promise<WaitOutcome> written_seen, durable_seen;
  ASSERT_NE(log->NotifyWrittenWhen(Offset(3), [&](WaitOutcome w) { written_seen.set_value(w); }),
            0u);
  ASSERT_NE(log->NotifyWhen(Offset(3), [&](WaitOutcome w) { durable_seen.set_value(w); }), 0u);
  auto durable_future = durable_seen.get_future();
  faults->HoldSyncs(true);
  std::promise<StorageResult<void>> flushed;
  const std::string p2 = Payload(2), p3 = Payload(3);
  const AppendRecord batch[] = {AppendRecord{AsBytes(p2)}, AppendRecord{AsBytes(p3)}};
  ASSERT_TRUE(log->AppendAsync(batch, [&](const StorageResult<void>& r) { flushed.set_value(r); }));
  // The written watch fired on this (the appending) thread, inside AppendAsync.
  EXPECT_EQ(written_seen.get_future().get(), WaitOutcome::kReady);
  ASSERT_TRUE(Eventually([&] { return faults->syncs_held() == 1; }));
  EXPECT_EQ(log->WrittenOffset(), Offset(4));
  EXPECT_EQ(log->TailOffset(), Offset(2));
  auto written = log->ReadWritten(Offset(2), ReadLimits{100, 1 << 20});
  ASSERT_TRUE(written) << written.error().ToString();
  ASSERT_EQ(written->records.size(), 2u);
  EXPECT_EQ(written->records[0].offset, Offset(2));
  EXPECT_EQ(written->records[0].payload, p2);
  EXPECT_EQ(written->records[1].payload, p3);
  EXPECT_EQ(written->next_offset, Offset(4));
  auto read = log->Read(Offset(2), ReadLimits{100, 1 << 20});
  ASSERT_TRUE(read);
  EXPECT_TRUE(read->records.empty()) << "Read serves only what is durable under kOnCommit";
  EXPECT_EQ(durable_future.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  faults->HoldSyncs(false);
  ASSERT_TRUE(flushed.get_future().get());
  EXPECT_EQ(durable_future.get(), WaitOutcome::kReady);
  EXPECT_EQ(log->TailOffset(), Offset(4));

  // Poisoned: a written record the failed flush did not cover is no longer served.
  faults->FailSyncs(1, EIO);
  const std::string p4 = Payload(4);
  std::promise<StorageResult<void>> failed;
  const AppendRecord unflushed{AsBytes(p4)};
  ASSERT_TRUE(log->AppendAsync({&unflushed, 1},
                               [&](const StorageResult<void>& r) { failed.set_value(r); }));
  EXPECT_FALSE(failed.get_future().get());
  ASSERT_TRUE(log->poisoned());
  auto after = log->ReadWritten(Offset(4), ReadLimits{100, 1 << 20});
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->records.empty());
}

TEST(Faults, AppendAsyncReportsTheFailedFlush) {
  auto dir = TempDir("async-poison");
  auto faults = std::make_shared<FaultInjector>();
  auto log = MustOpen(dir, WithFaults(faults));
  faults->FailSyncs(1, EIO);
  std::promise<StorageResult<void>> done;
  std::string p = Payload(0);
  AppendRecord rec{AsBytes(p)};
  auto r =
      log->AppendAsync({&rec, 1}, [&](const StorageResult<void>& res) { done.set_value(res); });
  ASSERT_TRUE(r);
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  auto res = f.get();
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, StorageErrc::kPoisoned);
  EXPECT_EQ(log->TailOffset(), Offset(0));  // never durable, never readable
  EXPECT_FALSE(log->AppendAsync({&rec, 1}, [](const StorageResult<void>&) {}));
}

TEST(Faults, PeriodicAndNoneModesPoisonOnFailedSync) {
  for (FsyncMode mode : {FsyncMode::kNone, FsyncMode::kPeriodic}) {
    auto dir = TempDir("poison-mode");
    auto faults = std::make_shared<FaultInjector>();
    LogOptions o = Opts(mode);
    o.fsync_interval = std::chrono::hours(1);
    o.faults = faults;
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 3);
    faults->FailSyncs(1);
    auto s = log->Sync();
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, StorageErrc::kPoisoned);
    auto a = log->Append(AppendRecord{AsBytes("y")});
    ASSERT_FALSE(a);
    EXPECT_EQ(a.error().code, StorageErrc::kPoisoned);
  }
}

TEST(Faults, FailedWriteConsumesNoOffsetsAndLeavesNoBytes) {
  auto dir = TempDir("write-fail");
  auto faults = std::make_shared<FaultInjector>();
  MetricsRegistry registry;
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.faults = faults;
  o.metrics = &registry;
  {
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 3, 20);
    faults->FailWrites(1, ENOSPC, 25);  // a partial write that reached the file
    std::string p = Payload(3, 20);
    std::string q = Payload(4, 20);
    AppendRecord batch[] = {{AsBytes(p)}, {AsBytes(q)}};
    auto failed = log->Append(batch);
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code, StorageErrc::kIo);
    EXPECT_EQ(failed.error().sys_errno, ENOSPC);
    EXPECT_FALSE(log->poisoned());
    EXPECT_EQ(log->TailOffset(), Offset(3));
    // The next append lands where the failed one would have.
    AppendN(*log, Offset(3), 2, 20);
    ExpectRecords(*log, Offset(0), Offset(5), 20);
    ASSERT_TRUE(log->Close());
  }
  o.faults = nullptr;
  auto log = MustOpen(dir, o);
  EXPECT_FALSE(log->recovery().torn_tail_repaired);
  ExpectRecords(*log, Offset(0), Offset(5), 20);
  EXPECT_NE(registry.RenderPrometheus().find("felix_storage_write_failures_total{log=\"log\"} 1"),
            std::string::npos);
}

TEST(Faults, FailedAppendAtWriteKeepsTheTail) {
  auto dir = TempDir("write-fail-at");
  auto faults = std::make_shared<FaultInjector>();
  LogOptions o = Opts();
  o.faults = faults;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 2);
  faults->FailWrites(1, EIO);
  std::string p = Payload(2);
  AppendRecord rec{AsBytes(p)};
  ASSERT_FALSE(log->AppendAt(Offset(2), {&rec, 1}));
  auto ok = log->AppendAt(Offset(2), {&rec, 1});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first_offset, Offset(2));
}

#else
TEST(Faults, CompiledOut) {
  GTEST_SKIP() << "FELIX_FAULT_INJECTION is off";
}
#endif

}  // namespace
}  // namespace felix::storage
