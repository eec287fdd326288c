#include "broker/stream_shard.h"

#include <future>
#include <tuple>

#include <gtest/gtest.h>

#include "broker/fake_record_log.h"
#include "broker/protocol_codes.h"
#include "broker/shard_producers.h"
#include "common/metrics.h"

namespace felix::broker {
namespace {

using testing::FakeRecordLog;
using namespace std::chrono_literals;

// Runs `fn` on the executor and waits for it (tests drive the shard from its own thread).
template <typename F>
auto OnExecutor(Executor& executor, F fn) -> decltype(fn()) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto future = task.get_future();
  executor.Post([&task] { task(); });
  EXPECT_EQ(future.wait_for(10s), std::future_status::ready);
  return future.get();
}

// Waits until every task posted so far (including ones they post now) has run.
void Drain(Executor& executor) {
  for (int i = 0; i < 4; ++i) OnExecutor(executor, [] { return 0; });
}

PayloadBatch Batch(std::initializer_list<std::string> payloads) {
  auto owner = std::make_shared<std::vector<std::string>>(payloads);
  PayloadBatch batch;
  for (const auto& p : *owner) {
    batch.payloads.emplace_back(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  }
  batch.owner = owner;
  batch.timestamp_micros = 1234;
  return batch;
}

std::string Text(const RecordView& r) {
  return std::string(r.payload.begin(), r.payload.end());
}

// Pops everything and returns the offsets and payload texts in delivery order.
std::vector<std::pair<Offset, std::string>> PopAll(SubscriberQueue& q) {
  std::vector<std::pair<Offset, std::string>> out;
  while (auto batch = q.Pop()) {
    for (const auto& r : (*batch)->records) out.emplace_back(r.offset, Text(r));
  }
  return out;
}

struct ShardFixture : ::testing::Test {
  Executor executor{"shard-test"};
  FakeRecordLog* log = nullptr;
  std::unique_ptr<StreamShard> shard;

  void Open(StreamShardOptions options = {}) {
    auto owned = std::make_unique<FakeRecordLog>();
    log = owned.get();
    shard = std::make_unique<StreamShard>(ShardId{"t", "ns", "s", ShardKind::kStream, 0}, executor,
                                          std::move(owned), options);
  }
  Offset Publish(std::initializer_list<std::string> payloads) {
    std::promise<Result<Offset>> acked;
    auto future = acked.get_future();
    executor.Post([&, batch = Batch(payloads)]() mutable {
      shard->Publish(std::move(batch), [&](Result<Offset> r) { acked.set_value(r); });
    });
    EXPECT_EQ(future.wait_for(10s), std::future_status::ready);
    auto r = future.get();
    EXPECT_TRUE(r);
    return r ? *r : Offset(UINT64_MAX);
  }
  Subscription Subscribe(StartPosition start, uint32_t capacity = 0) {
    auto result = OnExecutor(executor, [&] { return shard->Subscribe(start, capacity, [] {}); });
    EXPECT_TRUE(std::holds_alternative<Subscription>(result));
    return std::get<Subscription>(result);
  }
  ~ShardFixture() override { executor.Stop(); }
};

TEST_F(ShardFixture, PublishAssignsConsecutiveOffsetsAndFansOutWithoutCopying) {
  Open();
  Subscription sub = Subscribe({});
  EXPECT_EQ(sub.start_offset, Offset(0));
  EXPECT_EQ(sub.live_offset, Offset(0));
  EXPECT_EQ(Publish({"a", "b"}), Offset(0));
  EXPECT_EQ(Publish({"c"}), Offset(2));
  auto batch = sub.queue->Pop();
  ASSERT_TRUE(batch);
  EXPECT_EQ((*batch)->base_offset, Offset(0));
  ASSERT_EQ((*batch)->records.size(), 2u);
  EXPECT_EQ(Text((*batch)->records[1]), "b");
  EXPECT_EQ((*batch)->records[1].offset, Offset(1));
  EXPECT_EQ((*batch)->records[0].timestamp_micros, 1234u);
  EXPECT_EQ(PopAll(*sub.queue), (std::vector<std::pair<Offset, std::string>>{{Offset(2), "c"}}));
}

TEST_F(ShardFixture, LatestStartsAtTheCommittedTail) {
  Open();
  Publish({"old1", "old2"});
  Subscription sub = Subscribe({});
  EXPECT_EQ(sub.start_offset, Offset(2));
  EXPECT_EQ(sub.live_offset, Offset(2));
  Publish({"new"});
  EXPECT_EQ(PopAll(*sub.queue), (std::vector<std::pair<Offset, std::string>>{{Offset(2), "new"}}));
}

TEST_F(ShardFixture, EarliestReplaysHistoryThenJoinsLiveWithNoGapNoDuplicate) {
  StreamShardOptions options;
  options.event_batch_max_records = 2;
  options.replay_batches_per_step = 1;  // force many interleavings with live publishes
  Open(options);
  for (int i = 0; i < 10; ++i) Publish({"h" + std::to_string(i)});
  Subscription sub = Subscribe({StartPosition::Kind::kEarliest}, 4096);
  EXPECT_EQ(sub.start_offset, Offset(0));
  EXPECT_EQ(sub.live_offset, Offset(10));
  // Publishes racing the replay.
  for (int i = 0; i < 10; ++i) Publish({"l" + std::to_string(i)});
  Drain(executor);
  auto got = PopAll(*sub.queue);
  ASSERT_EQ(got.size(), 20u);
  for (uint64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(got[i].first, Offset(i));
    EXPECT_EQ(got[i].second, (i < 10 ? "h" : "l") + std::to_string(i % 10));
  }
}

// Retention removing records while a subscriber replays: the gap is passed over and the
// next batch says how many offsets it skipped (client-protocol.md §5.3 `skipped_before`).
TEST_F(ShardFixture, ReplayOverRetainedGapReportsSkippedBefore) {
  StreamShardOptions options;
  options.event_batch_max_records = 2;
  Open(options);
  for (int i = 0; i < 10; ++i) Publish({"r" + std::to_string(i)});
  // Retention removes 0..3 after the subscription started at 0, before its replay reads them.
  Subscription sub = OnExecutor(executor, [&] {
    auto result = shard->Subscribe({StartPosition::Kind::kEarliest}, 0, [] {});
    log->trimmed_below = Offset(4);
    return std::get<Subscription>(result);
  });
  EXPECT_EQ(sub.start_offset, Offset(0));
  Drain(executor);
  using B = std::tuple<Offset, size_t, uint64_t>;  // base, count, skipped_before
  std::vector<B> batches;
  while (auto batch = sub.queue->Pop()) {
    batches.emplace_back((*batch)->base_offset, (*batch)->records.size(), (*batch)->skipped_before);
  }
  EXPECT_EQ(batches, (std::vector<B>{B{Offset(4), 2, 4}, B{Offset(6), 2, 0}, B{Offset(8), 2, 0}}));
}

// replication.md §17: a generation-start record holds no event. Replay passes over it and says
// so in the next batch's skipped_before; when the log ends with one, live_offset stops short of
// it (a reader waiting for live_offset - 1 would wait for nothing) until a write follows.
TEST_F(ShardFixture, GenerationStartRecordsHoldNoEventAndTheLiveOffsetStopsShortOfThem) {
  auto owned = std::make_unique<FakeRecordLog>();
  log = owned.get();
  log->Append(Batch({"a", "b"}), [](Result<Offset>) {});
  log->AppendStartRecord();  // offset 2, written by the fence before the shard opens
  shard = std::make_unique<StreamShard>(ShardId{"t", "ns", "s", ShardKind::kStream, 0}, executor,
                                        std::move(owned), StreamShardOptions{});
  Subscription earliest = Subscribe({StartPosition::Kind::kEarliest});
  EXPECT_EQ(earliest.start_offset, Offset(0));
  EXPECT_EQ(earliest.live_offset, Offset(2)) << "short of the trailing start record";
  Subscription latest = Subscribe({StartPosition::Kind::kLatest});
  EXPECT_EQ(latest.start_offset, Offset(3));
  EXPECT_EQ(latest.live_offset, Offset(3));

  EXPECT_EQ(Publish({"c"}), Offset(3));
  Subscription after = Subscribe({StartPosition::Kind::kEarliest});
  EXPECT_EQ(after.live_offset, Offset(4)) << "nothing trails once a write followed";
  Drain(executor);
  using B = std::tuple<Offset, size_t, uint64_t>;  // base, count, skipped_before
  std::vector<B> batches;
  while (auto batch = after.queue->Pop()) {
    batches.emplace_back((*batch)->base_offset, (*batch)->records.size(), (*batch)->skipped_before);
  }
  EXPECT_EQ(batches, (std::vector<B>{B{Offset(0), 2, 0}, B{Offset(3), 1, 1}}));
  std::vector<Offset> live;
  while (auto batch = latest.queue->Pop()) live.push_back((*batch)->base_offset);
  EXPECT_EQ(live, (std::vector<Offset>{Offset(3)}));
}

TEST_F(ShardFixture, ExplicitOffsetResumesExactlyThere) {
  Open();
  for (int i = 0; i < 5; ++i) Publish({"r" + std::to_string(i)});
  Subscription sub = Subscribe({StartPosition::Kind::kOffset, Offset(3)});
  EXPECT_EQ(sub.start_offset, Offset(3));
  Drain(executor);
  EXPECT_EQ(PopAll(*sub.queue),
            (std::vector<std::pair<Offset, std::string>>{{Offset(3), "r3"}, {Offset(4), "r4"}}));
}

TEST_F(ShardFixture, UnservableOffsetsAreCursorErrorsNeverSilentRestarts) {
  Open();
  for (int i = 0; i < 5; ++i) Publish({"x"});
  log->trimmed_below = Offset(2);
  auto too_old = OnExecutor(executor, [&] {
    return shard->Subscribe({StartPosition::Kind::kOffset, Offset(1)}, 0, [] {});
  });
  ASSERT_TRUE(std::holds_alternative<CursorError>(too_old));
  EXPECT_EQ(std::get<CursorError>(too_old).reason, CursorError::Reason::kTooOld);
  EXPECT_EQ(std::get<CursorError>(too_old).available, Offset(2));
  auto in_future = OnExecutor(executor, [&] {
    return shard->Subscribe({StartPosition::Kind::kOffset, Offset(6)}, 0, [] {});
  });
  ASSERT_TRUE(std::holds_alternative<CursorError>(in_future));
  EXPECT_EQ(std::get<CursorError>(in_future).reason, CursorError::Reason::kInFuture);
  EXPECT_EQ(std::get<CursorError>(in_future).requested, Offset(6));
  EXPECT_EQ(std::get<CursorError>(in_future).available, Offset(5));
  // The tail itself is fine (nothing to replay).
  Subscribe({StartPosition::Kind::kOffset, Offset(5)});
}

TEST_F(ShardFixture, InMemorySlowSubscriberDropsWhileFastOneGetsEverything) {
  Open();
  log->is_durable = false;
  Subscription slow = Subscribe({}, 2);
  Subscription fast = Subscribe({}, 4096);
  for (int i = 0; i < 50; ++i) Publish({"m" + std::to_string(i)});  // every ack arrived
  EXPECT_EQ(PopAll(*fast.queue).size(), 50u);
  auto slow_got = PopAll(*slow.queue);
  ASSERT_EQ(slow_got.size(), 2u);  // the first two; the rest dropped for this one only
  EXPECT_EQ(slow_got[1].first, Offset(1));
  EXPECT_EQ(slow.queue->dropped_batches(), 48u);
  EXPECT_EQ(slow.queue->first_dropped_offset(), Offset(2));
  EXPECT_EQ(OnExecutor(executor, [&] { return shard->live_drops(); }), 48u);
  Publish({"after"});
  EXPECT_EQ(PopAll(*slow.queue),
            (std::vector<std::pair<Offset, std::string>>{{Offset(50), "after"}}));  // gap visible
}

// Issue 12 item 2: a durable stream never drops for a slow subscriber; it replays from the log.
TEST_F(ShardFixture, DurableSlowSubscriberFallsBackToReplayAndLosesNothing) {
  Open();
  Subscription slow = Subscribe({}, 2);
  for (int i = 0; i < 50; ++i) Publish({"m" + std::to_string(i)});  // publisher never waits
  std::vector<Offset> offsets;
  while (offsets.size() < 50) {
    Drain(executor);  // replay refills the queue as room appears
    auto got = PopAll(*slow.queue);
    ASSERT_FALSE(got.empty()) << "stalled at " << offsets.size();
    for (auto& [offset, text] : got) offsets.push_back(offset);
  }
  for (uint64_t i = 0; i < 50; ++i) ASSERT_EQ(offsets[i], Offset(i));
  EXPECT_EQ(OnExecutor(executor, [&] { return shard->live_drops(); }), 0u);
  EXPECT_GE(OnExecutor(executor, [&] { return shard->replay_fallbacks(); }), 1u);
  Drain(executor);
  Publish({"live"});  // live again after catching up
  EXPECT_EQ(PopAll(*slow.queue),
            (std::vector<std::pair<Offset, std::string>>{{Offset(50), "live"}}));
}

TEST_F(ShardFixture, DurableSubscriberThatAskedIsEndedLaggedWithResumeFrom) {
  Open();
  auto result = OnExecutor(executor, [&] {
    return shard->Subscribe(
        {}, 2, [] {}, true);
  });
  Subscription sub = std::get<Subscription>(result);
  for (int i = 0; i < 5; ++i) Publish({"m" + std::to_string(i)});
  EXPECT_EQ(PopAll(*sub.queue).size(), 2u);
  auto end = sub.queue->TakeEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->kind, QueueEnd::Kind::kLagged);
  EXPECT_EQ(end->resume_from, Offset(2));
  EXPECT_EQ(OnExecutor(executor, [&] { return shard->subscriber_count(); }), 0u);
}

// Issue 12 item 1: unreadable history ends the subscription, never a jump to the tail.
TEST_F(ShardFixture, UnreadableHistoryEndsTheSubscriptionNamingTheOffset) {
  Open();
  for (int i = 0; i < 10; ++i) Publish({"h" + std::to_string(i)});
  log->corrupt_at = Offset(4);
  Subscription sub = Subscribe({StartPosition::Kind::kEarliest});
  Drain(executor);
  Publish({"live"});
  auto got = PopAll(*sub.queue);
  ASSERT_EQ(got.size(), 4u);  // 0..3, then nothing: no live record after the damage
  EXPECT_EQ(got.back().first, Offset(3));
  auto end = sub.queue->TakeEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->kind, QueueEnd::Kind::kError);
  EXPECT_NE(end->message.find("offset 4"), std::string::npos) << end->message;
  EXPECT_NE(end->message.find("f.log"), std::string::npos) << end->message;
}

TEST_F(ShardFixture, ReplayWaitsForRoomAndNeverDrops) {
  StreamShardOptions options;
  options.event_batch_max_records = 1;
  Open(options);
  for (int i = 0; i < 30; ++i) Publish({"h" + std::to_string(i)});
  Subscription sub = Subscribe({StartPosition::Kind::kEarliest}, 1);
  std::vector<Offset> offsets;
  while (offsets.size() < 30) {
    Drain(executor);  // let replay refill the single slot
    auto batch = sub.queue->Pop();
    ASSERT_TRUE(batch) << "replay stalled at " << offsets.size();
    offsets.push_back((*batch)->base_offset);
  }
  for (uint64_t i = 0; i < 30; ++i) EXPECT_EQ(offsets[i], Offset(i));
  EXPECT_EQ(sub.queue->dropped_batches(), 0u);
}

TEST_F(ShardFixture, UncommittedRecordsAreNeitherFannedOutNorReplayed) {
  Open();
  Publish({"c0"});
  log->hold_completions = true;
  std::promise<Result<Offset>> acked;
  executor.Post(
      [&] { shard->Publish(Batch({"pending"}), [&](Result<Offset> r) { acked.set_value(r); }); });
  Drain(executor);
  EXPECT_EQ(OnExecutor(executor, [&] { return shard->committed_next(); }), Offset(1));
  Subscription sub = Subscribe({StartPosition::Kind::kEarliest});
  EXPECT_EQ(sub.live_offset, Offset(1));
  Drain(executor);
  EXPECT_EQ(PopAll(*sub.queue), (std::vector<std::pair<Offset, std::string>>{{Offset(0), "c0"}}));
  OnExecutor(executor, [&] {
    log->CompleteHeld();
    return 0;
  });
  ASSERT_EQ(acked.get_future().get().value(), Offset(1));
  EXPECT_EQ(PopAll(*sub.queue),
            (std::vector<std::pair<Offset, std::string>>{{Offset(1), "pending"}}));
}

TEST_F(ShardFixture, FailedAppendIsReportedAndNotFannedOut) {
  Open();
  Subscription sub = Subscribe({});
  log->fail_appends = true;
  std::promise<Result<Offset>> acked;
  executor.Post(
      [&] { shard->Publish(Batch({"x"}), [&](Result<Offset> r) { acked.set_value(r); }); });
  auto r = acked.get_future().get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_FALSE(sub.queue->Pop());
}

TEST_F(ShardFixture, UnsubscribedQueuesGetNothingMore) {
  Open();
  Subscription sub = Subscribe({});
  OnExecutor(executor, [&] {
    shard->Unsubscribe(sub.id);
    return 0;
  });
  Publish({"x"});
  EXPECT_FALSE(sub.queue->Pop());
  EXPECT_EQ(OnExecutor(executor, [&] { return shard->subscriber_count(); }), 0u);
}

// ---- The commit gate of a `Quorum` shard (commit_gate.h) ------------------------------------

// A gated shard on the fake log; publishes are answered into `answers` (executor only) in the
// order the shard answers them.
struct GatedShard : ShardFixture {
  MetricsRegistry metrics;
  Counter& timed_out = metrics.AddCounter("timed_out", "");
  Counter& not_leading = metrics.AddCounter("not_leading", "");
  std::vector<std::pair<uint64_t, Result<Offset>>> answers;  // (publish number, answer)
  uint64_t published = 0;
  // The executor stops before the counters and answers the shard's callbacks use go.
  ~GatedShard() override { executor.Stop(); }

  void OpenGated(std::chrono::milliseconds timeout = std::chrono::hours(1)) {
    Open();
    CommitGateOptions options;
    options.timeout = timeout;
    options.timed_out = &timed_out;
    options.not_leading = &not_leading;
    shard->InstallCommitGate(options);  // before the shard is shared, as BrokerCore does
  }
  // Publishes without waiting for the answer; returns once the log committed it locally.
  void PublishHeld(std::initializer_list<std::string> payloads) {
    OnExecutor(executor, [&, n = published++, batch = Batch(payloads)]() mutable {
      shard->Publish(std::move(batch), [this, n](Result<Offset> r) { answers.emplace_back(n, r); });
      return 0;
    });
    Drain(executor);
  }
  void Advance(Offset offset) {
    OnExecutor(executor, [&] {
      shard->AdvanceCommit(offset);
      return 0;
    });
  }
  size_t AnswerCount() {
    return OnExecutor(executor, [&] { return answers.size(); });
  }
  Offset Committed() {
    return OnExecutor(executor, [&] { return shard->committed_next(); });
  }
  size_t Readable(Offset from) {
    return OnExecutor(executor, [&] {
      auto read = shard->Read(from, 100, 1 << 20);
      return std::get<RecordRead>(read).records.size();
    });
  }
};

// HoldInheritedAbove (replica sets of 5 or more): records the leader inherited above its
// persisted commit offset are hidden from every reader until the quorum commit offset covers
// them; a live subscriber then gets them from the log, in order, before newer batches.
TEST_F(GatedShard, InheritedRecordsAboveTheFloorAreShownOnlyOnceTheMarkCoversThem) {
  auto owned = std::make_unique<FakeRecordLog>();
  log = owned.get();
  log->Append(Batch({"i0", "i1", "i2", "i3"}), [](Result<Offset>) {});
  log->AppendStartRecord();  // offset 4
  shard = std::make_unique<StreamShard>(ShardId{"t", "ns", "s", ShardKind::kStream, 0}, executor,
                                        std::move(owned), StreamShardOptions{});
  CommitGateOptions options;
  options.timeout = std::chrono::hours(1);
  options.timed_out = &timed_out;
  options.not_leading = &not_leading;
  shard->InstallCommitGate(options);
  shard->HoldInheritedAbove(Offset(2));
  EXPECT_EQ(Committed(), Offset(2));
  EXPECT_EQ(Readable(Offset(0)), 2u);
  Subscription live = Subscribe({});
  EXPECT_EQ(live.start_offset, Offset(2));
  auto far = OnExecutor(executor, [&] {
    return shard->Subscribe({StartPosition::Kind::kOffset, Offset(4)}, 0, [] {});
  });
  ASSERT_TRUE(std::holds_alternative<CursorError>(far)) << "not shown yet";

  PublishHeld({"n5"});  // offset 5, above the start record
  Advance(Offset(3));   // covers i2 only
  EXPECT_EQ(Committed(), Offset(3));
  Advance(Offset(6));  // covers the rest, the start record and n5
  EXPECT_EQ(Committed(), Offset(6));
  EXPECT_EQ(AnswerCount(), 1u);
  Drain(executor);
  std::vector<std::pair<Offset, std::string>> got;
  while (auto batch = live.queue->Pop()) {
    for (const auto& r : (*batch)->records) {
      got.emplace_back(r.offset, std::string(r.payload.begin(), r.payload.end()));
    }
  }
  EXPECT_EQ(got, (std::vector<std::pair<Offset, std::string>>{
                     {Offset(2), "i2"}, {Offset(3), "i3"}, {Offset(5), "n5"}}));
}

TEST_F(GatedShard, HoldsALocallyCommittedBatchFromReadersAndPublisherUntilCovered) {
  OpenGated();
  Subscription sub = Subscribe({});
  std::atomic<int> commits{0};
  OnExecutor(executor, [&] {
    shard->SetCommitListener([&] { ++commits; });
    return 0;
  });
  PublishHeld({"a", "b"});
  PublishHeld({"c"});
  EXPECT_EQ(log->next_offset(), Offset(3));  // written locally...
  EXPECT_EQ(AnswerCount(), 0u);              // ...but neither answered
  EXPECT_FALSE(sub.queue->Pop());            // nor delivered
  EXPECT_EQ(Committed(), Offset(0));
  EXPECT_EQ(Readable(Offset(0)), 0u);  // consumer groups read through here
  EXPECT_EQ(commits.load(), 0);
  // A subscriber joining now sees the commit offset, not the log's tail.
  Subscription late = Subscribe({StartPosition::Kind::kEarliest});
  EXPECT_EQ(late.live_offset, Offset(0));
  EXPECT_FALSE(std::holds_alternative<Subscription>(OnExecutor(executor, [&] {
    return shard->Subscribe({StartPosition::Kind::kOffset, Offset(2)}, 0, [] {});
  })));  // offset 2 is in the future for readers

  Advance(Offset(2));  // covers the first batch only
  ASSERT_EQ(AnswerCount(), 1u);
  EXPECT_EQ(answers[0].first, 0u);
  EXPECT_EQ(answers[0].second.value_or(Offset(UINT64_MAX)), Offset(0));
  EXPECT_EQ(Committed(), Offset(2));
  EXPECT_EQ(Readable(Offset(0)), 2u);
  EXPECT_EQ(commits.load(), 1);
  EXPECT_EQ(PopAll(*sub.queue),
            (std::vector<std::pair<Offset, std::string>>{{Offset(0), "a"}, {Offset(1), "b"}}));
  Drain(executor);
  EXPECT_EQ(PopAll(*late.queue),
            (std::vector<std::pair<Offset, std::string>>{{Offset(0), "a"}, {Offset(1), "b"}}));

  Advance(Offset(3));
  ASSERT_EQ(AnswerCount(), 2u);
  EXPECT_EQ(answers[1].second.value_or(Offset(UINT64_MAX)), Offset(2));
  EXPECT_EQ(PopAll(*sub.queue), (std::vector<std::pair<Offset, std::string>>{{Offset(2), "c"}}));
  Drain(executor);
  EXPECT_EQ(PopAll(*late.queue), (std::vector<std::pair<Offset, std::string>>{{Offset(2), "c"}}));
  EXPECT_EQ(timed_out.Value(), 0u);
}

TEST_F(GatedShard, ReleasesInOffsetOrderAndWaitsForTheLocalCommitToo) {
  OpenGated();
  Subscription sub = Subscribe({});
  PublishHeld({"a"});
  PublishHeld({"b", "c"});
  PublishHeld({"d"});
  Advance(Offset(10));  // ahead of everything: all three at once, in order
  ASSERT_EQ(AnswerCount(), 3u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(answers[i].first, i);
  EXPECT_EQ(answers[2].second.value_or(Offset(UINT64_MAX)), Offset(3));
  EXPECT_EQ(PopAll(*sub.queue),
            (std::vector<std::pair<Offset, std::string>>{
                {Offset(0), "a"}, {Offset(1), "b"}, {Offset(2), "c"}, {Offset(3), "d"}}));
  // The mark may run ahead of the shard's own commit (a majority of followers): the batch
  // still waits for the local commit, then goes at once.
  log->hold_completions = true;
  PublishHeld({"e"});
  EXPECT_EQ(AnswerCount(), 3u);
  OnExecutor(executor, [&] {
    log->CompleteHeld();
    return 0;
  });
  Drain(executor);
  ASSERT_EQ(AnswerCount(), 4u);
  EXPECT_EQ(answers[3].second.value_or(Offset(UINT64_MAX)), Offset(4));
  EXPECT_EQ(PopAll(*sub.queue), (std::vector<std::pair<Offset, std::string>>{{Offset(4), "e"}}));
}

TEST_F(GatedShard, AnUncoveredBatchIsAnsweredQuorumTimeoutOnceAndStillReleasedLater) {
  OpenGated(std::chrono::milliseconds(1));
  Subscription sub = Subscribe({});
  PublishHeld({"a"});
  // Wait for the event (the timeout's answer), not for a duration.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (AnswerCount() == 0 && std::chrono::steady_clock::now() < deadline) Drain(executor);
  ASSERT_EQ(AnswerCount(), 1u);
  ASSERT_FALSE(answers[0].second);
  EXPECT_EQ(answers[0].second.error().code, ErrorCode::kTimeout);
  EXPECT_NE(answers[0].second.error().message.find("quorum_timeout"), std::string::npos);
  // Sent as quorum_timeout, whose class is outcome_unknown: never "failed".
  uint16_t code = ProtocolCodeFor(answers[0].second.error());
  EXPECT_EQ(code, Code(wire::flx1::ProtocolErrorCode::kQuorumTimeout));
  EXPECT_EQ(wire::flx1::DefaultRetryClass(code), wire::flx1::RetryClass::kOutcomeUnknown);
  EXPECT_EQ(timed_out.Value(), 1u);
  EXPECT_FALSE(sub.queue->Pop());  // still not vouched for: no reader sees it
  EXPECT_EQ(Committed(), Offset(0));

  // A majority holds it after all: readers get it, the publisher no second answer.
  Advance(Offset(1));
  Drain(executor);
  EXPECT_EQ(AnswerCount(), 1u);
  EXPECT_EQ(PopAll(*sub.queue), (std::vector<std::pair<Offset, std::string>>{{Offset(0), "a"}}));
  EXPECT_EQ(Committed(), Offset(1));
  EXPECT_EQ(timed_out.Value(), 1u);
}

TEST_F(GatedShard, ClosingAnswersHeldBatchesOutcomeUnknownAndLaterOnesAtOnce) {
  OpenGated();
  PublishHeld({"a"});
  OnExecutor(executor, [&] {
    shard->CloseLog();
    return 0;
  });
  ASSERT_EQ(AnswerCount(), 1u);
  ASSERT_FALSE(answers[0].second);
  EXPECT_EQ(answers[0].second.error().code, ErrorCode::kInternal);
  EXPECT_EQ(wire::flx1::DefaultRetryClass(ProtocolCodeFor(answers[0].second.error())),
            wire::flx1::RetryClass::kOutcomeUnknown);
  EXPECT_EQ(not_leading.Value(), 1u);
  Advance(Offset(1));  // nothing is released after the close
  EXPECT_EQ(Committed(), Offset(0));
  EXPECT_EQ(AnswerCount(), 1u);
}

TEST_F(GatedShard, AnIdempotentBatchThatTimedOutKeepsItsSequenceAndIsNeverWrittenTwice) {
  OpenGated(std::chrono::milliseconds(1));
  ShardProducers producers(executor, *shard, nullptr);
  std::vector<IdempotentOutcome> outcomes;  // executor only
  auto publish = [&] {
    OnExecutor(executor, [&] {
      producers.Publish(Batch({"once"}), 7, 0,
                        [&](IdempotentOutcome o) { outcomes.push_back(std::move(o)); });
      return 0;
    });
  };
  auto outcome_count = [&] { return OnExecutor(executor, [&] { return outcomes.size(); }); };
  publish();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (outcome_count() == 0 && std::chrono::steady_clock::now() < deadline) Drain(executor);
  ASSERT_EQ(outcome_count(), 1u);
  EXPECT_EQ(outcomes[0].kind, IdempotentOutcome::Kind::kFailed);
  EXPECT_EQ(outcomes[0].error.code, ErrorCode::kTimeout);
  // The client may resend an outcome-unknown idempotent batch: it waits for the original...
  publish();
  Drain(executor);
  EXPECT_EQ(outcome_count(), 1u);
  EXPECT_EQ(log->next_offset(), Offset(1));  // ...and is not appended again
  Advance(Offset(1));                        // a majority holds the original after all
  Drain(executor);
  ASSERT_EQ(outcome_count(), 2u);
  EXPECT_EQ(outcomes[1].kind, IdempotentOutcome::Kind::kDuplicate);
  EXPECT_EQ(outcomes[1].first_offset, std::optional<uint64_t>(0));
  EXPECT_EQ(log->next_offset(), Offset(1));
}

}  // namespace
}  // namespace felix::broker

namespace felix::broker {
namespace {

// offset_for_time: the lowest committed, retained offset whose append time is at or after
// the asked time; none past the newest; retention moves the answer up to the oldest record.
TEST_F(ShardFixture, OffsetForTimeFindsTheFirstRecordAtOrAfterTheTime) {
  Open();
  const std::vector<uint64_t> times = {100, 200, 200, 200, 300, 450, 900};
  for (uint64_t t : times) {
    std::promise<Result<Offset>> acked;
    auto future = acked.get_future();
    executor.Post([&, t] {
      PayloadBatch batch = Batch({"x"});
      batch.timestamp_micros = t;
      shard->Publish(std::move(batch), [&](Result<Offset> r) { acked.set_value(r); });
    });
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
    ASSERT_TRUE(future.get());
  }
  auto at = [&](uint64_t micros) {
    auto found = OnExecutor(executor, [&] { return shard->OffsetForTime(micros); });
    EXPECT_TRUE(found);
    return found ? *found : std::optional<Offset>(Offset(UINT64_MAX));
  };
  // Against a linear scan of the same times, for every time around each stored one.
  for (uint64_t t = 0; t <= 1000; t += 25) {
    std::optional<Offset> expected;
    for (size_t i = 0; i < times.size(); ++i) {
      if (times[i] >= t) {
        expected = Offset(i);
        break;
      }
    }
    EXPECT_EQ(at(t), expected) << "at " << t;
  }
  EXPECT_EQ(at(200), std::optional(Offset(1)));  // the first of equal times
  EXPECT_EQ(at(901), std::nullopt);              // nothing that recent
  log->trimmed_below = Offset(3);                // retention removed offsets 0..2
  EXPECT_EQ(at(0), std::optional(Offset(3)));
  EXPECT_EQ(at(250), std::optional(Offset(4)));
  log->corrupt_at = Offset(5);
  auto failed = OnExecutor(executor, [&] { return shard->OffsetForTime(450); });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kCorruption);
}

TEST_F(ShardFixture, OffsetForTimeOnAnEmptyShardFindsNothing) {
  Open();
  auto found = OnExecutor(executor, [&] { return shard->OffsetForTime(0); });
  ASSERT_TRUE(found);
  EXPECT_EQ(*found, std::nullopt);
}

}  // namespace
}  // namespace felix::broker
