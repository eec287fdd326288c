// The one append path: the fence's generation lands in every record header, a lapsed lease
// refuses the append before it takes an offset, and completions follow the log's fsync mode
// (inline for periodic, after the flush for on_commit or AckAfter::kFlush).
#include "broker/log_appender.h"

#include <future>

#include <gtest/gtest.h>

#include "support/child_process.h"

namespace felix::broker {
namespace {

std::unique_ptr<storage::DurableLog> OpenLog(storage::FsyncMode mode) {
  storage::LogOptions options;
  options.fsync_mode = mode;
  auto log = storage::DurableLog::Open(felix::testing::MakeTempDir("log-appender"), options);
  EXPECT_TRUE(log.has_value());
  return log ? std::move(*log) : nullptr;
}

Result<storage::AppendResult> AppendAndWait(LogAppender& appender, std::string_view payload) {
  storage::AppendRecord record{storage::AsBytes(payload), Generation(0), 0};
  std::promise<Result<storage::AppendResult>> done;
  appender.Append(std::span<storage::AppendRecord>(&record, 1),
                  [&done](Result<storage::AppendResult> r) { done.set_value(std::move(r)); });
  return done.get_future().get();
}

TEST(LogAppender, StampsTheFenceGenerationOnEveryRecord) {
  auto log = OpenLog(storage::FsyncMode::kOnCommit);
  ShardFence fence(Generation(4));
  LogAppender appender(*log, fence, AckAfter::kPolicy);
  ASSERT_TRUE(AppendAndWait(appender, "a"));
  fence.SetGeneration(Generation(5));
  auto second = AppendAndWait(appender, "b");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->first_offset, Offset(1));
  auto read = log->Read(Offset(0), storage::ReadLimits{10, 1 << 20});
  ASSERT_TRUE(read);
  ASSERT_EQ(read->records.size(), 2u);
  EXPECT_EQ(read->records[0].generation, Generation(4));
  EXPECT_EQ(read->records[1].generation, Generation(5));
}

TEST(LogAppender, ALapsedLeaseRefusesBeforeAnOffsetIsTaken) {
  auto log = OpenLog(storage::FsyncMode::kPeriodic);
  ShardFence fence(Generation(1));
  bool lease_valid = false;
  fence.SetLeaseCheck([&] { return lease_valid; });
  LogAppender appender(*log, fence, AckAfter::kPolicy);
  auto refused = AppendAndWait(appender, "x");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(log->TailOffset(), Offset(0)) << "nothing was written";
  lease_valid = true;
  auto accepted = AppendAndWait(appender, "y");
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->first_offset, Offset(0));
}

TEST(LogAppender, PeriodicAnswersInlineAndFlushWaitsForTheFsync) {
  auto log = OpenLog(storage::FsyncMode::kPeriodic);
  ShardFence fence;
  LogAppender policy(*log, fence, AckAfter::kPolicy);
  storage::AppendRecord record{storage::AsBytes("p"), Generation(0), 0};
  bool answered = false;
  policy.Append(std::span<storage::AppendRecord>(&record, 1),
                [&](Result<storage::AppendResult> r) { answered = r.has_value(); });
  EXPECT_TRUE(answered) << "under periodic the answer needs no fsync";

  LogAppender flushed(*log, fence, AckAfter::kFlush);
  auto result = AppendAndWait(flushed, "f");
  ASSERT_TRUE(result);
  EXPECT_GE(log->DurableOffset(), result->last_offset + 1)
      << "answered only once a flush covered the record";
}

}  // namespace
}  // namespace felix::broker
