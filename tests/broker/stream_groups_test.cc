// StreamGroups on a fake stream log and real cursor / dead-letter DurableLogs: durable writes
// before answers, recovery from the logs, retention skipping, corrupt records refused.
#include "broker/stream_groups.h"

#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <optional>

#include <gtest/gtest.h>

#include "broker/fake_record_log.h"
#include "support/child_process.h"

namespace felix::broker {
namespace {

using namespace std::chrono_literals;
using testing::FakeRecordLog;

template <typename F>
auto OnExecutor(Executor& executor, F fn) -> decltype(fn()) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto future = task.get_future();
  executor.Post([&task] { task(); });
  EXPECT_EQ(future.wait_for(10s), std::future_status::ready);
  return future.get();
}

// Starts an async StreamGroups call on the executor and waits for its answer.
template <typename T, typename Start>
GroupResult<T> Call(Executor& executor, Start start) {
  auto promise = std::make_shared<std::promise<GroupResult<T>>>();
  auto future = promise->get_future();
  executor.Post([start, promise] {
    start([promise](GroupResult<T> r) { promise->set_value(std::move(r)); });
  });
  EXPECT_EQ(future.wait_for(10s), std::future_status::ready);
  return future.get();
}

PayloadBatch Batch(std::vector<std::string> payloads) {
  auto owner = std::make_shared<std::vector<std::string>>(std::move(payloads));
  PayloadBatch batch;
  for (const auto& p : *owner) {
    batch.payloads.emplace_back(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  }
  batch.owner = owner;
  return batch;
}

class StreamGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = felix::testing::MakeTempDir("stream-groups");
    OpenLogs();
    auto log = std::make_unique<FakeRecordLog>();
    log_ = log.get();
    shard_ = std::make_unique<StreamShard>(ShardId{"t", "ns", "s", ShardKind::kStream, 0},
                                           executor_, std::move(log));
  }
  void TearDown() override {
    if (groups_)
      OnExecutor(executor_, [&] {
        groups_->Stop();
        return 0;
      });
    executor_.Stop();
    groups_.reset();
  }
  void OpenLogs() {
    storage::LogOptions options;
    options.fsync_mode = storage::FsyncMode::kNone;
    auto cursors = storage::DurableLog::Open(dir_ + "/cursors", options);
    auto dead = storage::DurableLog::Open(dir_ + "/dead_letters", options);
    ASSERT_TRUE(cursors && dead);
    cursors_ = std::move(*cursors);
    dead_letters_ = std::move(*dead);
    cursors_appender_ = std::make_unique<LogAppender>(*cursors_, fence_, AckAfter::kFlush);
    dead_letters_appender_ =
        std::make_unique<LogAppender>(*dead_letters_, fence_, AckAfter::kFlush);
  }
  Result<void> OpenGroups() {
    groups_ = std::make_unique<StreamGroups>("t/ns/s/0", executor_, *shard_, *cursors_appender_,
                                             *dead_letters_appender_, options_, metrics_);
    // As BrokerCore wires it: commits wake waiting polls.
    shard_->SetCommitListener([groups = groups_.get()] { groups->OnCommitted(); });
    return groups_->Recover();
  }
  // Closes everything but the stream and reopens the group logs (a restart of the groups).
  void Reopen() {
    OnExecutor(executor_, [&] {
      groups_->Stop();
      return 0;
    });
    // Drain the executor so no completion still refers to the old object.
    OnExecutor(executor_, [] { return 0; });
    groups_.reset();
    ASSERT_TRUE(cursors_->Close());
    ASSERT_TRUE(dead_letters_->Close());
    OpenLogs();
  }
  void Publish(std::vector<std::string> payloads) {
    auto done = std::make_shared<std::promise<Result<Offset>>>();
    auto future = done->get_future();
    executor_.Post([&, payloads, done] {
      shard_->Publish(Batch(payloads), [done](Result<Offset> r) { done->set_value(r); });
    });
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    ASSERT_TRUE(future.get());
  }
  std::vector<GroupDelivery> Poll(const std::string& group, uint32_t max) {
    auto r = Call<std::vector<GroupDelivery>>(executor_, [&, group, max](auto done) {
      groups_->Poll(group, GroupPollRequest{max, 0ms, 0ms}, done);
    });
    EXPECT_TRUE(r);
    return r ? *r : std::vector<GroupDelivery>{};
  }
  GroupResult<void> Ack(const std::string& group, Offset offset) {
    return Call<void>(executor_,
                      [&, group, offset](auto done) { groups_->Ack(group, offset, done); });
  }
  // Publishes `n` records and claims them all for group "g".
  void ClaimBacklog(uint64_t n) {
    std::vector<std::string> payloads;
    for (uint64_t i = 0; i < n; ++i) payloads.push_back("r" + std::to_string(i));
    Publish(payloads);
    ASSERT_EQ(Poll("g", static_cast<uint32_t>(n)).size(), n);
  }
  // Group "g"'s committed cursor once the groups were closed and their logs reopened.
  std::optional<Offset> CommittedAfterReopen() {
    Reopen();
    EXPECT_TRUE(OpenGroups());
    return Describe("g").committed;
  }
  GroupDescription Describe(const std::string& group) {
    auto r = Call<GroupDescription>(executor_,
                                    [&, group](auto done) { groups_->Describe(group, done); });
    EXPECT_TRUE(r);
    return r ? *r : GroupDescription{};
  }

  MetricsRegistry registry_;
  GroupMetrics metrics_{registry_};
  GroupOptions options_;
  Executor executor_{"groups-test"};
  std::string dir_;
  FakeRecordLog* log_ = nullptr;
  std::unique_ptr<StreamShard> shard_;
  std::unique_ptr<storage::DurableLog> cursors_, dead_letters_;
  ShardFence fence_;
  std::unique_ptr<LogAppender> cursors_appender_, dead_letters_appender_;
  std::unique_ptr<StreamGroups> groups_;
};

TEST_F(StreamGroupsTest, AckedCursorAndDeadLettersSurviveReopen) {
  ASSERT_TRUE(OpenGroups());
  Publish({"a", "b", "c", "d"});
  auto got = Poll("g", 4);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(std::string(got[1].payload.begin(), got[1].payload.end()), "b");
  ASSERT_TRUE(Ack("g", Offset(0)));
  ASSERT_TRUE(Ack("g", Offset(1)));
  EXPECT_EQ(cursors_->TailOffset(),
            Offset(2));  // one cursor record per move, written before the answer
  auto dead = Call<void>(executor_, [&](auto done) { groups_->DeadLetter("g", Offset(2), done); });
  ASSERT_TRUE(dead);
  EXPECT_EQ(dead_letters_->TailOffset(), Offset(1));
  EXPECT_EQ(Describe("g").committed, Offset(3));

  Reopen();
  ASSERT_TRUE(OpenGroups());
  auto info = Describe("g");
  EXPECT_EQ(info.committed, Offset(3));
  EXPECT_EQ(info.dead_letters, 1u);
  EXPECT_EQ(info.in_flight, 0u);
  auto again = Poll("g", 10);
  ASSERT_EQ(again.size(), 1u);  // offset 3 was in flight: delivered again, attempts start over
  EXPECT_EQ(again[0].offset, Offset(3));
  EXPECT_EQ(again[0].attempts, 1u);
  EXPECT_EQ(metrics_.inflight.Value(), 1);
}

TEST_F(StreamGroupsTest, ARetriedAckOfAFailedCursorWriteIsAnsweredOnlyOnceTheCursorIsWritten) {
  // Found by fault-run seed 43: the cursor write of an ack failed (an EIO there), the client
  // retried the ack, the retry was answered ok as a duplicate, and a restart lost the cursor.
  ASSERT_TRUE(OpenGroups());
  Publish({"a", "b", "c"});
  ASSERT_EQ(Poll("g", 3).size(), 3u);
  ASSERT_TRUE(Ack("g", Offset(0)));
  std::atomic<bool> writable{false};
  fence_.SetLeaseCheck([&writable] { return writable.load(); });
  EXPECT_FALSE(Ack("g", Offset(1)));  // the cursor write is refused
  EXPECT_FALSE(Ack("g", Offset(1)));  // its retry too: the log still lacks the cursor
  EXPECT_EQ(cursors_->TailOffset(), Offset(1));
  writable = true;
  ASSERT_TRUE(Ack("g", Offset(1)));  // the retry writes the cursor before its answer
  EXPECT_EQ(cursors_->TailOffset(), Offset(2));
  ASSERT_TRUE(Ack("g", Offset(1)));  // a plain duplicate now writes nothing
  EXPECT_EQ(cursors_->TailOffset(), Offset(2));

  Reopen();
  ASSERT_TRUE(OpenGroups());
  EXPECT_EQ(Describe("g").committed, Offset(2));
}

// Acks made in one executor task: the first ones' cursor writes are still in flight when the
// others come (completions need the executor), so the rest wait for the next write.
std::vector<GroupResult<void>> AcksInOneTask(Executor& executor, StreamGroups& groups,
                                             const std::string& group,
                                             const std::vector<uint64_t>& offsets,
                                             std::function<void(size_t)> on_answer = {}) {
  struct Answers {
    std::mutex mu;
    std::vector<std::optional<GroupResult<void>>> results;
    size_t left;
    std::promise<void> all;
  };
  auto answers = std::make_shared<Answers>();
  answers->results.resize(offsets.size());
  answers->left = offsets.size();
  executor.Post([&groups, group, offsets, answers, on_answer] {
    for (size_t i = 0; i < offsets.size(); ++i) {
      groups.Ack(group, Offset(offsets[i]), [answers, i, on_answer](GroupResult<void> r) {
        if (on_answer) on_answer(i);
        std::lock_guard<std::mutex> lock(answers->mu);
        answers->results[i] = std::move(r);
        if (--answers->left == 0) answers->all.set_value();
      });
    }
  });
  EXPECT_EQ(answers->all.get_future().wait_for(10s), std::future_status::ready);
  std::vector<GroupResult<void>> out;
  for (auto& r : answers->results) out.push_back(r.value_or(GroupResult<void>{}));
  return out;
}

constexpr uint64_t kInFlight = StreamGroups::kMaxCursorWritesInFlight;

std::vector<uint64_t> Range(uint64_t n) {
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < n; ++i) out.push_back(i);
  return out;
}

TEST_F(StreamGroupsTest, AcksWhileCursorWritesAreInFlightShareTheNextCursorRecord) {
  ASSERT_TRUE(OpenGroups());
  const uint64_t n = kInFlight + 6;
  ClaimBacklog(n);
  std::vector<Offset> tail_at_answer(n);
  auto results = AcksInOneTask(executor_, *groups_, "g", Range(n),
                               [&](size_t i) { tail_at_answer[i] = cursors_->TailOffset(); });
  for (const auto& r : results) EXPECT_TRUE(r);
  // A record for each ack up to the bound on writes in flight, then one for the six that came
  // while those were written, each of these answered only once that record was appended and
  // flushed.
  EXPECT_EQ(cursors_->TailOffset(), Offset(kInFlight + 1));
  for (size_t i = kInFlight; i < n; ++i) EXPECT_EQ(tail_at_answer[i], Offset(kInFlight + 1)) << i;
  EXPECT_EQ(metrics_.cursor_writes.Value(), kInFlight + 1);
  EXPECT_EQ(metrics_.acks_sharing_cursor_write.Value(), n - kInFlight);
  EXPECT_EQ(Describe("g").committed, Offset(n));
  EXPECT_EQ(CommittedAfterReopen(), Offset(n));
}

// The group's timer stays armed for the earliest deadline when that claim is acknowledged
// (performance.md change 70): firing early it finds nothing lapsed and arms the next, so the
// later claim still lapses and is delivered again — to a poll waiting for it, well within its
// wait.
TEST_F(StreamGroupsTest, AClaimLapsesAfterAnEarlierOneWasAcknowledged) {
  ASSERT_TRUE(OpenGroups());
  Publish({"first", "second"});
  auto poll = [&](std::chrono::milliseconds wait, std::chrono::milliseconds visibility) {
    auto r = Call<std::vector<GroupDelivery>>(executor_, [&, wait, visibility](auto done) {
      groups_->Poll("g", GroupPollRequest{1, wait, visibility}, done);
    });
    EXPECT_TRUE(r);
    return r ? *r : std::vector<GroupDelivery>{};
  };
  auto first = poll(0ms, 50ms);  // the earliest deadline: the timer is armed for it
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].offset, Offset(0));
  auto second = poll(0ms, 200ms);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].offset, Offset(1));
  ASSERT_TRUE(Ack("g", Offset(0)));
  auto again = poll(5s, 0ms);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].offset, Offset(1));
  EXPECT_EQ(again[0].attempts, 2u);
  EXPECT_EQ(Describe("g").committed, Offset(1));
}

TEST_F(StreamGroupsTest, AcksWaitingForAFailedCursorWriteGetTheOutcomeOfTheirOwnWrite) {
  ASSERT_TRUE(OpenGroups());
  const uint64_t n = kInFlight + 2;
  ClaimBacklog(n);
  std::atomic<bool> writable{false};
  fence_.SetLeaseCheck([&writable] { return writable.load(); });
  auto refused = AcksInOneTask(executor_, *groups_, "g", Range(n));
  for (const auto& r : refused) EXPECT_FALSE(r);  // the waiters' write came later, failed too
  EXPECT_EQ(cursors_->TailOffset(), Offset(0));
  writable = true;
  // The writes of the first acks (duplicates now, the cursor being behind) fail; the acks that
  // waited for them get a write of their own, which succeeds.
  std::atomic<uint64_t> calls{0};
  fence_.SetLeaseCheck([&calls] { return calls.fetch_add(1) >= kInFlight; });
  auto results = AcksInOneTask(executor_, *groups_, "g", Range(n));
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(static_cast<bool>(results[i]), i >= kInFlight) << i;
  EXPECT_EQ(cursors_->TailOffset(), Offset(1));
  EXPECT_EQ(CommittedAfterReopen(), Offset(n));
}

TEST_F(StreamGroupsTest, AcksWaitingForACursorWriteAreAnsweredWhenTheGroupIsDeleted) {
  ASSERT_TRUE(OpenGroups());
  const uint64_t n = kInFlight + 2;
  ClaimBacklog(n);
  auto answers = std::make_shared<std::vector<GroupResult<void>>>();
  auto deleted = std::make_shared<std::promise<GroupResult<bool>>>();
  executor_.Post([&, answers, deleted] {
    for (uint64_t o : Range(n)) {
      groups_->Ack("g", Offset(o), [answers](GroupResult<void> r) { answers->push_back(r); });
    }
    groups_->Delete("g", [deleted](GroupResult<bool> r) { deleted->set_value(r); });
  });
  auto future = deleted->get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  auto existed = future.get();
  ASSERT_TRUE(existed);
  EXPECT_TRUE(*existed);
  OnExecutor(executor_, [] { return 0; });  // the first acks' completions, if not yet run
  ASSERT_EQ(answers->size(), n);
  for (const auto& r : *answers) EXPECT_TRUE(r);
  EXPECT_EQ(Describe("g").committed, std::nullopt);
}

TEST_F(StreamGroupsTest, RetentionTrimmedRecordsAreSkipped) {
  ASSERT_TRUE(OpenGroups());
  Publish({"a", "b", "c"});
  log_->trimmed_below = Offset(2);
  auto got = Poll("g", 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].offset, Offset(2));
  EXPECT_EQ(got[0].skipped_before, 2u);  // offsets 0 and 1 settled without delivery
  ASSERT_TRUE(Ack("g", Offset(2)));
  EXPECT_EQ(Describe("g").committed, Offset(3));
}

// skipped_before counts only offsets the group never handed out, directly below the record.
TEST_F(StreamGroupsTest, SkippedBeforeCountsOnlyTheHoleBelowTheRecord) {
  ASSERT_TRUE(OpenGroups());
  Publish({"a", "b", "c", "d", "e"});
  auto first = Poll("g", 2);  // 0 and 1 handed out; 1 is handed back (owed)
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].skipped_before, 0u);
  ASSERT_TRUE(Ack("g", Offset(0)));
  auto nack =
      Call<void>(executor_, [&](auto done) { groups_->Nack("g", Offset(1), 0ms, 0, done); });
  ASSERT_TRUE(nack);
  log_->trimmed_below = Offset(3);  // retention removes 0..2: the owed 1 and the never-read 2
  auto got = Poll("g", 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].offset, Offset(3));
  EXPECT_EQ(got[0].skipped_before, 1u);  // only 2: 1 was delivered before
  auto late = Poll("late", 2);           // a group that starts now skips all three
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(late[0].offset, Offset(3));
  EXPECT_EQ(late[0].skipped_before, 3u);
  EXPECT_EQ(late[1].skipped_before, 0u);
  // The hole is reported with each delivery of its record until the cursor passes it.
  auto nack3 =
      Call<void>(executor_, [&](auto done) { groups_->Nack("g", Offset(3), 0ms, 0, done); });
  ASSERT_TRUE(nack3);
  auto again = Poll("g", 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].offset, Offset(3));
  EXPECT_EQ(again[0].attempts, 2u);
  EXPECT_EQ(again[0].skipped_before, 1u);
}

TEST_F(StreamGroupsTest, CorruptCursorRecordRefusesTheOpen) {
  std::string junk = "\x07garbage";
  storage::AppendRecord record{storage::AsBytes(junk), Generation(0), 0};
  ASSERT_TRUE(cursors_->Append(record));
  auto opened = OpenGroups();
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::kCorruption);
  EXPECT_NE(opened.error().message.find("offset 0"), std::string::npos) << opened.error().message;
}

TEST_F(StreamGroupsTest, WaitingPollIsServedByACommit) {
  ASSERT_TRUE(OpenGroups());
  auto promise = std::make_shared<std::promise<GroupResult<std::vector<GroupDelivery>>>>();
  auto future = promise->get_future();
  executor_.Post([&, promise] {
    groups_->Poll("g", GroupPollRequest{5, 10s, 0ms},
                  [promise](auto r) { promise->set_value(std::move(r)); });
  });
  // The poll is parked on the executor before the publish below is posted behind it.
  Publish({"late"});
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  auto got = future.get();
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].offset, Offset(0));
}

TEST_F(StreamGroupsTest, AQuorumShardsGroupsSeeOnlyWhatTheCommitGateReleased) {
  OnExecutor(executor_, [&] {
    shard_->InstallCommitGate(CommitGateOptions{std::chrono::hours(1)});
    return 0;
  });
  ASSERT_TRUE(OpenGroups());
  // A poll parked before anything is committed for readers.
  auto promise = std::make_shared<std::promise<GroupResult<std::vector<GroupDelivery>>>>();
  auto future = promise->get_future();
  auto answered = std::make_shared<std::atomic<int>>(0);
  OnExecutor(executor_, [&] {
    groups_->Poll("g", GroupPollRequest{10, 10s, 0ms},
                  [promise](auto r) { promise->set_value(std::move(r)); });
    for (auto batch : {std::vector<std::string>{"a", "b"}, std::vector<std::string>{"c"}}) {
      shard_->Publish(Batch(batch), [answered](Result<Offset>) { ++*answered; });
    }
    return 0;
  });
  OnExecutor(executor_, [] { return 0; });  // the local commits landed in the gate
  EXPECT_EQ(log_->next_offset(), Offset(3));
  EXPECT_EQ(answered->load(), 0);
  EXPECT_EQ(future.wait_for(0s), std::future_status::timeout);  // nothing to deliver yet
  EXPECT_EQ(Describe("g").tail, Offset(0));
  OnExecutor(executor_, [&] {
    shard_->AdvanceCommit(Offset(2));  // a majority holds the first batch
    return 0;
  });
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  auto got = future.get();
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 2u);  // never offset 2: it could still be lost by a failover
  EXPECT_EQ((*got)[1].offset, Offset(1));
  EXPECT_EQ(Poll("g", 10).size(), 0u);
  OnExecutor(executor_, [&] {
    shard_->AdvanceCommit(Offset(3));
    return 0;
  });
  auto rest = Poll("g", 10);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].offset, Offset(2));
  EXPECT_EQ(answered->load(), 2);
}

}  // namespace
}  // namespace felix::broker
