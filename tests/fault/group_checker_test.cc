// The group checker on hand-made histories: a clean one passes; a redelivery after an ack (from
// the same leader, nothing in between), a nack never redelivered, a record never delivered and a
// delivery that is not the log's record are each reported; a redelivery after an ack across a
// leader change is counted, not reported.
#include "fault/group_checker.h"

#include <gtest/gtest.h>

namespace felix::fault {
namespace {

Op Poll(uint64_t id, int64_t at, std::vector<std::pair<uint64_t, std::string>> records,
        int node = 1) {
  Op op;
  op.node = node;
  op.id = id;
  op.kind = OpKind::kPoll;
  op.key = "g";
  op.outcome = Outcome::kOk;
  op.invoke_us = at;
  op.complete_us = at + 1;
  op.read = std::move(records);
  return op;
}

Op Settle(uint64_t id, OpKind kind, int64_t at, uint64_t offset) {
  Op op;
  op.node = 1;
  op.id = id;
  op.kind = kind;
  op.key = "g";
  op.outcome = Outcome::kOk;
  op.invoke_us = at;
  op.complete_us = at + 1;
  op.offset = offset;
  return op;
}

// Records 0 and 1 delivered; 0 acked, 1 nacked, redelivered and acked.
std::vector<Op> Clean() {
  return {Poll(1, 0, {{0, "a"}, {1, "b"}}), Settle(2, OpKind::kAck, 10, 0),
          Settle(3, OpKind::kNack, 10, 1), Poll(4, 20, {{1, "b"}}), Settle(5, OpKind::kAck, 30, 1)};
}
const FinalLogs kFinal = {{0, {{0, "a"}, {1, "b"}}}};

TEST(GroupChecker, ACleanHistoryPasses) {
  auto verdict = CheckGroups(Clean(), kFinal);
  EXPECT_TRUE(verdict.ok()) << verdict.Summary();
  EXPECT_EQ(verdict.deliveries, 3u);
  EXPECT_EQ(verdict.redeliveries, 1u);
  EXPECT_EQ(verdict.acks, 2u);
  EXPECT_EQ(verdict.nacks, 1u);
}

TEST(GroupChecker, ARecordRedeliveredAfterItsAck) {
  auto history = Clean();
  history.push_back(Poll(6, 40, {{0, "a"}}));  // 0 was acked at 10..11
  auto verdict = CheckGroups(history, kFinal);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].what, "redelivered_after_ack");
  EXPECT_EQ(verdict.violations[0].expected, 0u);
  EXPECT_EQ(verdict.violations[0].op_id, 6u);
  EXPECT_NE(verdict.violations[0].ToString().find("group redelivered_after_ack"),
            std::string::npos);
  // A poll that overlapped the ack may still see it.
  history.back() = Poll(6, 5, {{0, "a"}});
  EXPECT_TRUE(CheckGroups(history, kFinal).ok());
}

TEST(GroupChecker, ARedeliveryAfterAnAckAcrossALeaderChangeIsCountedNotReported) {
  auto history = Clean();
  history.push_back(Poll(6, 40, {{0, "a"}}, 2));  // 0 was acked by node 1; node 2 leads now
  auto verdict = CheckGroups(history, kFinal);
  EXPECT_TRUE(verdict.ok()) << verdict.Summary();
  EXPECT_EQ(verdict.redelivered_after_rebuild, 1u);

  // Same broker, but a request between the ack and the poll was refused (not_leader, ...).
  history = Clean();
  Op refused = Poll(6, 35, {});
  refused.outcome = Outcome::kFail;
  history.push_back(refused);
  history.push_back(Poll(7, 40, {{0, "a"}}));
  verdict = CheckGroups(history, kFinal);
  EXPECT_TRUE(verdict.ok()) << verdict.Summary();
  EXPECT_EQ(verdict.redelivered_after_rebuild, 1u);

  // Same broker, every request ok, but a fault hit that broker (or every broker) in between.
  history = Clean();
  history.push_back(Poll(6, 40, {{0, "a"}}));
  for (int node : {1, 0}) {
    verdict = CheckGroups(history, kFinal, {Disruption{node, 20, 25}});
    EXPECT_TRUE(verdict.ok()) << verdict.Summary();
  }
  // A fault on another broker, or one healed before the ack, excuses nothing.
  for (const Disruption& other : {Disruption{2, 20, 25}, Disruption{1, 0, 9}}) {
    verdict = CheckGroups(history, kFinal, {other});
    ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
    EXPECT_EQ(verdict.violations[0].what, "redelivered_after_ack");
  }
}

TEST(GroupChecker, LostToTheGroupNackedOrMismatched) {
  auto history = Clean();
  history.erase(history.begin() + 3, history.end());  // 1 nacked, never delivered again
  auto verdict = CheckGroups(history, {{0, {{0, "a"}, {1, "b"}, {2, "c"}}}});
  ASSERT_EQ(verdict.violations.size(), 2u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].what, "nack_not_redelivered");
  EXPECT_EQ(verdict.violations[0].expected, 1u);
  EXPECT_EQ(verdict.violations[1].what, "undelivered");
  EXPECT_EQ(verdict.violations[1].value, "c");

  verdict = CheckGroups(Clean(), {{0, {{0, "a"}, {1, "x"}}}});
  ASSERT_EQ(verdict.violations.size(), 2u) << verdict.Summary();  // both deliveries of 1
  EXPECT_EQ(verdict.violations[0].what, "delivery_mismatch");
  EXPECT_EQ(verdict.violations[0].value, "b");
}

// An offset the broker said holds no event (a generation-start record) is no record the group
// owed anyone; a delivery there would still be a mismatch.
TEST(GroupChecker, AnOffsetThatHoldsNoEventIsOwedToNoOne) {
  const std::string none(kNoEvent);
  FinalLogs final = {{0, {{0, "a"}, {1, "b"}, {2, none}}}};
  auto verdict = CheckGroups(Clean(), final);
  EXPECT_TRUE(verdict.ok()) << verdict.Summary();
  auto history = Clean();
  history.push_back(Poll(6, 40, {{2, "start"}}));
  verdict = CheckGroups(history, final);
  ASSERT_EQ(verdict.violations.size(), 1u) << verdict.Summary();
  EXPECT_EQ(verdict.violations[0].what, "delivery_mismatch");
}

}  // namespace
}  // namespace felix::fault
