// The history file: every field survives a write and a read; malformed lines are typed errors;
// refusals count as definite failures only for the retry classes that say nothing applied.
#include "fault/history.h"

#include <gtest/gtest.h>

namespace felix::fault {
namespace {

TEST(History, OnlyRetryRetryAfterAndRedirectAreDefiniteFailures) {
  EXPECT_EQ(RefusalOutcome("retry"), Outcome::kFail);
  EXPECT_EQ(RefusalOutcome("retry_after"), Outcome::kFail);
  EXPECT_EQ(RefusalOutcome("redirect"), Outcome::kFail);
  EXPECT_EQ(RefusalOutcome("outcome_unknown"), Outcome::kIndeterminate);
  EXPECT_EQ(RefusalOutcome("fatal"), Outcome::kIndeterminate);
  EXPECT_EQ(RefusalOutcome(""), Outcome::kIndeterminate);
  EXPECT_EQ(RefusalOutcome("surprise"), Outcome::kIndeterminate);
}

TEST(History, RoundTripsThroughJsonLines) {
  History history;
  Op publish;
  publish.client = 3;
  publish.invoke_us = 10;
  publish.complete_us = 25;
  publish.outcome = Outcome::kOk;
  publish.shard = 2;
  publish.key = "k7";
  publish.value = "c3-1";
  publish.offset = 41;
  publish.node = 2;
  EXPECT_EQ(history.Add(publish), 1u);
  Op read;
  read.kind = OpKind::kRead;
  read.outcome = Outcome::kOk;
  read.shard = 2;
  read.read = {{40, "c1-9"}, {41, "c3-1"}};
  Op add;
  add.kind = OpKind::kAdd;
  add.outcome = Outcome::kIndeterminate;
  add.key = "hits";
  add.delta = -4;
  add.error = "timeout";
  history.Add(read);
  history.Add(add);

  auto back = History::FromJsonLines(history.ToJsonLines());
  ASSERT_TRUE(back) << back.error().message;
  auto ops = back->ops();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].id, 1u);
  EXPECT_EQ(ops[0].client, 3);
  EXPECT_EQ(ops[0].invoke_us, 10);
  EXPECT_EQ(ops[0].complete_us, 25);
  EXPECT_EQ(ops[0].outcome, Outcome::kOk);
  EXPECT_EQ(ops[0].shard, 2u);
  EXPECT_EQ(ops[0].key, "k7");
  EXPECT_EQ(ops[0].value, "c3-1");
  EXPECT_EQ(ops[0].offset, 41u);
  EXPECT_EQ(ops[0].node, 2);
  EXPECT_EQ(ops[1].kind, OpKind::kRead);
  EXPECT_EQ(ops[1].read, read.read);
  EXPECT_EQ(ops[2].id, 3u);
  EXPECT_EQ(ops[2].kind, OpKind::kAdd);
  EXPECT_EQ(ops[2].outcome, Outcome::kIndeterminate);
  EXPECT_EQ(ops[2].delta, -4);
  EXPECT_EQ(ops[2].error, "timeout");
  EXPECT_FALSE(ops[2].offset.has_value());
}

TEST(History, CacheOpsKeepWhetherAValueWasFound) {
  History history;
  Op put;
  put.kind = OpKind::kPut;
  put.outcome = Outcome::kOk;
  put.key = "r1";
  put.value = "p60-3";
  Op hit;
  hit.kind = OpKind::kGet;
  hit.outcome = Outcome::kOk;
  hit.key = "r1";
  hit.found = true;
  hit.value = "";  // a stored empty value is still a hit
  Op miss = hit;
  miss.kind = OpKind::kDelete;
  miss.found = false;
  history.Add(put);
  history.Add(hit);
  history.Add(miss);
  auto back = History::FromJsonLines(history.ToJsonLines());
  ASSERT_TRUE(back) << back.error().message;
  auto ops = back->ops();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].kind, OpKind::kPut);
  EXPECT_EQ(ops[0].value, "p60-3");
  EXPECT_EQ(ops[1].kind, OpKind::kGet);
  EXPECT_TRUE(ops[1].found);
  EXPECT_EQ(ops[1].value, "");
  EXPECT_EQ(ops[2].kind, OpKind::kDelete);
  EXPECT_FALSE(ops[2].found);
}

TEST(History, MalformedLinesAreErrorsNamingTheLine) {
  auto bad = History::FromJsonLines(
      "{\"id\":1,\"client\":0,\"kind\":\"publish\",\"invoke_us\":0,\"complete_us\":0,"
      "\"outcome\":\"ok\"}\nnot json\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;
  auto unknown = History::FromJsonLines(
      "{\"id\":1,\"client\":0,\"kind\":\"publish\",\"invoke_us\":0,\"complete_us\":0,"
      "\"outcome\":\"maybe\"}\n");
  EXPECT_FALSE(unknown);
  auto missing = History::FromJsonLines("{\"id\":1}\n");
  EXPECT_FALSE(missing);
}

}  // namespace
}  // namespace felix::fault
