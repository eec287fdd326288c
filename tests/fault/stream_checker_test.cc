// The checkers on hand-made histories: a clean history passes, and each rule is broken once and
// reported with its record, shard and offsets.
#include "fault/stream_checker.h"

#include <gtest/gtest.h>

namespace felix::fault {
namespace {

Op Publish(uint64_t id, uint32_t shard, std::string value, Outcome outcome,
           std::optional<uint64_t> offset = std::nullopt) {
  Op op;
  op.id = id;
  op.kind = OpKind::kPublish;
  op.shard = shard;
  op.value = std::move(value);
  op.outcome = outcome;
  op.offset = offset;
  return op;
}

Op Read(uint64_t id, uint32_t shard, std::vector<std::pair<uint64_t, std::string>> records) {
  Op op;
  op.id = id;
  op.kind = OpKind::kRead;
  op.outcome = Outcome::kOk;
  op.shard = shard;
  op.read = std::move(records);
  return op;
}

// Two shards: a (ok@0), b (ok@1), c (indeterminate, applied @2) on shard 0; d (ok@0),
// e (indeterminate, not applied), f (failed) on shard 1; a read of shard 0's prefix.
std::vector<Op> Clean() {
  return {Publish(1, 0, "a", Outcome::kOk, 0),
          Publish(2, 0, "b", Outcome::kOk, 1),
          Publish(3, 0, "c", Outcome::kIndeterminate),
          Publish(4, 1, "d", Outcome::kOk, 0),
          Publish(5, 1, "e", Outcome::kIndeterminate),
          Publish(6, 1, "f", Outcome::kFail),
          Read(7, 0, {{0, "a"}, {1, "b"}})};
}
FinalLogs CleanFinal() {
  return {{0, {{0, "a"}, {1, "b"}, {2, "c"}}}, {1, {{0, "d"}}}};
}

TEST(StreamChecker, ACleanHistoryPasses) {
  auto verdict = CheckStreams(Clean(), CleanFinal());
  EXPECT_TRUE(verdict.ok()) << verdict.Summary();
  EXPECT_EQ(verdict.acknowledged, 3u);
  EXPECT_EQ(verdict.failed, 1u);
  EXPECT_EQ(verdict.indeterminate, 2u);
  EXPECT_EQ(verdict.indeterminate_present, 1u);
  EXPECT_EQ(verdict.reads, 1u);
  EXPECT_EQ(verdict.final_records, 4u);
}

TEST(StreamChecker, Rule1ALostAcknowledgedRecord) {
  FinalLogs final = {{0, {{0, "a"}, {1, "c"}}}, {1, {{0, "d"}}}};  // b is gone, c took its place
  auto history = Clean();
  history.pop_back();  // the read of b would be flagged too; this test is about rule 1
  auto verdict = CheckStreams(history, final);
  ASSERT_EQ(verdict.Count(1), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  const Violation& v = verdict.violations[0];
  EXPECT_EQ(v.what, "lost");
  EXPECT_EQ(v.value, "b");
  EXPECT_EQ(v.shard, 0u);
  EXPECT_EQ(v.expected, 1u);
  EXPECT_EQ(v.op_id, 2u);
  EXPECT_NE(v.ToString().find("\"b\" expected at offset 1"), std::string::npos) << v.ToString();
}

TEST(StreamChecker, Rule1AnAcknowledgedRecordAtAnotherOffset) {
  FinalLogs final = {{0, {{0, "b"}, {1, "a"}, {2, "c"}}}, {1, {{0, "d"}}}};
  auto history = Clean();
  history.pop_back();
  auto verdict = CheckStreams(history, final);
  ASSERT_EQ(verdict.Count(1), 2u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].what, "wrong_offset");
  EXPECT_EQ(verdict.violations[0].value, "a");
  EXPECT_EQ(verdict.violations[0].expected, 0u);
  EXPECT_EQ(verdict.violations[0].found, std::vector<uint64_t>{1});
}

TEST(StreamChecker, Rule2DuplicatesAndGaps) {
  FinalLogs dup = {{0, {{0, "a"}, {1, "b"}, {2, "c"}, {3, "b"}}}, {1, {{0, "d"}}}};
  auto verdict = CheckStreams(Clean(), dup);
  ASSERT_EQ(verdict.Count(2), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].what, "duplicate");
  EXPECT_EQ(verdict.violations[0].value, "b");
  EXPECT_EQ(verdict.violations[0].found, (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(verdict.violations.size(), 1u) << verdict.Summary();

  FinalLogs gap = {{0, {{0, "a"}, {1, "b"}, {3, "c"}}}, {1, {{0, "d"}}}};
  verdict = CheckStreams(Clean(), gap);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 2);
  EXPECT_EQ(verdict.violations[0].what, "gap");
  EXPECT_EQ(verdict.violations[0].expected, 2u);
  EXPECT_EQ(verdict.violations[0].found, std::vector<uint64_t>{3});
}

TEST(StreamChecker, Rule3AReadThatIsNotAPrefixOfTheFinalLog) {
  auto history = Clean();
  history.push_back(Read(8, 0, {{0, "a"}, {1, "c"}}));  // saw c where the final log has b
  auto verdict = CheckStreams(history, CleanFinal());
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 3);
  EXPECT_EQ(verdict.violations[0].value, "c");
  EXPECT_EQ(verdict.violations[0].expected, 1u);
  EXPECT_EQ(verdict.violations[0].found, std::vector<uint64_t>{2});
  EXPECT_EQ(verdict.violations[0].op_id, 8u);

  // A read past the end of the final log is not a prefix either (the record vanished).
  history = Clean();
  history.push_back(Read(9, 1, {{0, "d"}, {1, "e"}}));
  verdict = CheckStreams(history, CleanFinal());
  ASSERT_EQ(verdict.Count(3), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].value, "e");
}

TEST(StreamChecker, Rule3AReadWithAGapADuplicateOrAWrongStart) {
  auto history = Clean();
  history.push_back(Read(8, 0, {{0, "a"}, {2, "c"}}));            // skipped b untold
  history.push_back(Read(9, 0, {{0, "a"}, {1, "b"}, {1, "b"}}));  // b twice
  Op resumed = Read(10, 0, {{2, "c"}});  // asked to resume at 1, began at 2
  resumed.offset = 1;
  history.push_back(resumed);
  Op from_earliest_late = Read(11, 0, {{1, "b"}});  // from earliest, but began past offset 0
  history.push_back(from_earliest_late);
  Op fine = Read(12, 0, {{1, "b"}, {2, "c"}});  // resumed at 1: consecutive from there
  fine.offset = 1;
  history.push_back(fine);
  auto verdict = CheckStreams(history, CleanFinal());
  ASSERT_EQ(verdict.Count(3), 4u) << verdict.Summary();
  std::vector<std::pair<std::string, uint64_t>> seen;
  for (const auto& v : verdict.violations) seen.emplace_back(v.what, v.op_id);
  EXPECT_EQ(seen,
            (std::vector<std::pair<std::string, uint64_t>>{
                {"read_gap", 8}, {"read_out_of_order", 9}, {"read_gap", 10}, {"read_gap", 11}}));
}

// An offset the broker told the reader holds no event (Event::skipped_before; a `Quorum`
// leader's generation-start record) is recorded as kNoEvent: it fills its place in the final log
// and in a read, and is no record (not a duplicate, not a phantom). A read that skips it
// without being told, or claims a hole the final log does not have, is still caught.
TEST(StreamChecker, HolesTheBrokerToldOfAreNoGaps) {
  const std::string none(kNoEvent);
  std::vector<std::pair<uint64_t, std::string>> told;
  AppendRead(told, 0, 0, "a");
  AppendRead(told, 3, 2, "b");
  EXPECT_EQ(told, (std::vector<std::pair<uint64_t, std::string>>{
                      {0, "a"}, {1, none}, {2, none}, {3, "b"}}));
  std::vector<Op> history = {Publish(1, 0, "a", Outcome::kOk, 0),
                             Publish(2, 0, "b", Outcome::kOk, 3), Read(3, 0, told)};
  FinalLogs final = {{0, {{0, "a"}, {1, none}, {2, none}, {3, "b"}}}};
  auto verdict = CheckStreams(history, final);
  EXPECT_TRUE(verdict.ok()) << verdict.Summary();
  EXPECT_EQ(verdict.final_records, 2u);

  history.push_back(Read(4, 0, {{0, "a"}, {3, "b"}}));
  verdict = CheckStreams(history, final);
  EXPECT_EQ(verdict.Count(3), 1u) << verdict.Summary();  // read_gap: nobody told it

  FinalLogs untold = {{0, {{0, "a"}, {3, "b"}}}};
  verdict = CheckStreams({history[0], history[1], history[2]}, untold);
  EXPECT_EQ(verdict.Count(2), 1u) << verdict.Summary();  // the final log's gap
  EXPECT_GE(verdict.Count(3), 1u) << verdict.Summary();  // holes the final log lacks
}

TEST(StreamChecker, Rule5PhantomsInTheFinalStateAndInReads) {
  FinalLogs final = {{0, {{0, "a"}, {1, "b"}, {2, "c"}}}, {1, {{0, "d"}, {1, "zz"}}}};
  auto verdict = CheckStreams(Clean(), final);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 5);
  EXPECT_EQ(verdict.violations[0].what, "phantom");
  EXPECT_EQ(verdict.violations[0].shard, 1u);
  EXPECT_EQ(verdict.violations[0].found, std::vector<uint64_t>{1});

  auto history = Clean();
  history.push_back(Read(8, 1, {{0, "d"}, {1, "ghost"}}));
  verdict = CheckStreams(history, CleanFinal());
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 5);
  EXPECT_EQ(verdict.violations[0].what, "phantom_read");
  EXPECT_EQ(verdict.violations[0].value, "ghost");
}

TEST(StreamChecker, Rule6ADefiniteFailureThatApplied) {
  FinalLogs final = {{0, {{0, "a"}, {1, "b"}, {2, "c"}}}, {1, {{0, "d"}, {1, "f"}}}};
  auto verdict = CheckStreams(Clean(), final);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 6);
  EXPECT_EQ(verdict.violations[0].value, "f");
  EXPECT_EQ(verdict.violations[0].op_id, 6u);
  // The same record with an unknown outcome is fine either way.
  auto history = Clean();
  history[5].outcome = Outcome::kIndeterminate;
  EXPECT_TRUE(CheckStreams(history, final).ok());
}

Op Timed(Op op, int64_t invoke_us, int64_t complete_us) {
  op.invoke_us = invoke_us;
  op.complete_us = complete_us;
  return op;
}

TEST(StreamChecker, Rule4RealTimeOrderOfAcknowledgementsAndReads) {
  // a acknowledged at offset 1 before b was sent; b acknowledged at offset 0: b was ordered
  // before a write that had finished before b began.
  std::vector<Op> history = {Timed(Publish(1, 0, "a", Outcome::kOk, 1), 0, 10),
                             Timed(Publish(2, 0, "b", Outcome::kOk, 0), 20, 30)};
  FinalLogs final = {{0, {{0, "b"}, {1, "a"}}}};
  auto verdict = CheckStreams(history, final);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 4);
  EXPECT_EQ(verdict.violations[0].what, "order");
  EXPECT_EQ(verdict.violations[0].value, "b");
  EXPECT_EQ(verdict.violations[0].found, std::vector<uint64_t>{1});
  // Overlapping in time, either order is fine.
  history[1] = Timed(Publish(2, 0, "b", Outcome::kOk, 0), 5, 30);
  EXPECT_TRUE(CheckStreams(history, final).ok()) << CheckStreams(history, final).Summary();

  // A read invoked after b's acknowledgement that stops before b: a stale tail.
  history = {Timed(Publish(1, 0, "a", Outcome::kOk, 0), 0, 10),
             Timed(Publish(2, 0, "b", Outcome::kOk, 1), 0, 20),
             Timed(Read(3, 0, {{0, "a"}}), 25, 30)};
  verdict = CheckStreams(history, final = {{0, {{0, "a"}, {1, "b"}}}});
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 4);
  EXPECT_EQ(verdict.violations[0].what, "stale_read");
  EXPECT_EQ(verdict.violations[0].value, "b");
  EXPECT_EQ(verdict.violations[0].op_id, 3u);
  // The same read invoked before b completed is fine.
  history[2] = Timed(Read(3, 0, {{0, "a"}}), 15, 30);
  EXPECT_TRUE(CheckStreams(history, final).ok());
}

Op Batch(uint64_t id, std::vector<std::string> values, Outcome outcome,
         std::optional<uint64_t> offset) {
  Op op = Publish(id, 0, values[0], outcome, offset);
  op.batch = std::move(values);
  return op;
}

TEST(StreamChecker, Rule8NoPartialBatch) {
  // A three-record batch acknowledged at 1: every record at its offset passes.
  std::vector<Op> history = {Publish(1, 0, "a", Outcome::kOk, 0),
                             Batch(2, {"x", "y", "z"}, Outcome::kOk, 1)};
  FinalLogs whole = {{0, {{0, "a"}, {1, "x"}, {2, "y"}, {3, "z"}}}};
  EXPECT_TRUE(CheckStreams(history, whole).ok()) << CheckStreams(history, whole).Summary();
  // An indeterminate batch of which only a part applied.
  history[1].outcome = Outcome::kIndeterminate;
  history[1].offset.reset();
  FinalLogs part = {{0, {{0, "a"}, {1, "x"}, {2, "y"}}}};
  auto verdict = CheckStreams(history, part);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].rule, 8);
  EXPECT_EQ(verdict.violations[0].what, "partial_batch");
  EXPECT_EQ(verdict.violations[0].value, "z");
  EXPECT_EQ(verdict.violations[0].op_id, 2u);
  // All of it, but split by another record.
  FinalLogs split = {{0, {{0, "x"}, {1, "a"}, {2, "y"}, {3, "z"}}}};
  history[0].offset = 1;
  verdict = CheckStreams(history, split);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].what, "batch_split");
  // None of it is fine for an indeterminate batch.
  EXPECT_TRUE(CheckStreams(history, {{0, {{0, "a"}}}}).Count(8) == 0);
}

Op Add(std::string key, int64_t delta, Outcome outcome) {
  Op op;
  op.kind = OpKind::kAdd;
  op.key = std::move(key);
  op.delta = delta;
  op.outcome = outcome;
  return op;
}

TEST(CounterChecker, TheFinalSumIsTheAcknowledgedAddsWithinTheIndeterminateOnes) {
  std::vector<Op> history = {Add("x", 5, Outcome::kOk), Add("x", 3, Outcome::kIndeterminate),
                             Add("x", -2, Outcome::kIndeterminate), Add("x", 100, Outcome::kFail),
                             Add("y", 1, Outcome::kOk)};
  for (int64_t x : {3, 5, 6, 8}) {
    EXPECT_TRUE(CheckCounters(history, {{"x", x}, {"y", 1}}).ok()) << x;
  }
  auto low = CheckCounters(history, {{"x", 2}, {"y", 1}});
  ASSERT_EQ(low.violations.size(), 1u);
  EXPECT_EQ(low.violations[0], "counter x: final 2 outside [3, 8] (acked 5)");
  // A failed add that applied; a lost acknowledged add (y absent reads as 0).
  auto failed = CheckCounters(history, {{"x", 105}});
  ASSERT_EQ(failed.violations.size(), 2u);
  EXPECT_EQ(failed.violations[1], "counter y: final 0 outside [1, 1] (acked 1)");
  // A counter nobody added to must stay 0.
  EXPECT_FALSE(CheckCounters(history, {{"x", 5}, {"y", 1}, {"z", 4}}).ok());
}

}  // namespace
}  // namespace felix::fault
