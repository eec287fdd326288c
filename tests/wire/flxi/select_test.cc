// Kind selection by the sender (§6.1, §6.5, §6.9, §7.1) and the receiver's target log (§7.2).
#include <gtest/gtest.h>

#include "generator.h"
#include "golden_frames.h"
#include "wire/flxi/flxi.h"

namespace felix::wire::flxi {
namespace {

const ShardRef kShard{"t1", "ns", "orders", 3, 7};

TEST(FlxiSelect, CredentialConditionAndCapabilitiesDecideTheKind) {
  ForwardPublish p{42, kShard, AckMode::kOnCommit, {"a"}, std::nullopt};
  EXPECT_EQ(ForwardPublishKind(p), Kind::kForwardPublish);
  p.credential = "tok";
  EXPECT_EQ(ForwardPublishKind(p), Kind::kAuthorizedForwardPublish);

  CacheOp op{42, kShard, CacheOpKind::kPut, "k", 0, "v", std::nullopt, std::nullopt};
  EXPECT_EQ(CacheOpFrameKind(op), Kind::kForwardCacheOp);
  op.credential = "tok";
  EXPECT_EQ(CacheOpFrameKind(op), Kind::kAuthorizedForwardCacheOp);
  op.condition = Condition{CacheCondition::kAbsent, 0};
  EXPECT_EQ(CacheOpFrameKind(op), Kind::kConditionalForwardCacheOp);
  op.credential.reset();
  EXPECT_EQ(CacheOpFrameKind(op), Kind::kConditionalForwardCacheOp);

  Hello h{1, "a", std::nullopt};
  EXPECT_EQ(HelloKind(h, false), Kind::kHello);
  EXPECT_EQ(HelloKind(h, true), Kind::kHelloOk);
  h.capabilities = 0;  // zero bits stay distinguishable from a plain HelloOk
  EXPECT_EQ(HelloKind(h, false), Kind::kHelloCapable);
  EXPECT_EQ(HelloKind(h, true), Kind::kHelloCapableOk);
}

Records Batch(std::vector<Bytes> payloads) {
  Records r;
  r.correlation_id = 42;
  r.shard = kShard;
  r.first_offset = 10;
  r.payloads = std::move(payloads);
  return r;
}

TEST(FlxiSelect, RecordsKindFollowsTheSpecOrder) {
  const std::pair<ReplicaLog, Kind> own[] = {
      {ReplicaLog::kStream, Kind::kReplicateRecords},
      {ReplicaLog::kCache, Kind::kReplicateCacheRecords},
      {ReplicaLog::kGroupCursors, Kind::kReplicateGroupRecords},
      {ReplicaLog::kGroupDeadLetters, Kind::kReplicateDeadLetterRecords},
      {ReplicaLog::kCounters, Kind::kReplicateCounterRecords},
  };
  for (auto [log, kind] : own) {
    auto f = MakeRecordsFrame(log, Batch({"x"}), false, false);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->kind, kind);
    EXPECT_EQ(TargetLog(*f), log);
    EXPECT_TRUE(EncodeFrame(*f));
    // A commit offset → 26, carrying the log byte.
    auto committed = Batch({"x"});
    committed.commit_offset = 8;
    auto c = MakeRecordsFrame(log, committed, false, false);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->kind, Kind::kReplicateCommittedRecords);
    EXPECT_EQ(TargetLog(*c), log);
    EXPECT_TRUE(EncodeFrame(*c));
  }
  // The §11 kind 26 frame is exactly what the selection builds.
  auto committed = Batch({"x"});
  committed.checksum = BatchChecksum(committed.payloads, {});
  committed.commit_offset = 8;
  auto f = MakeRecordsFrame(ReplicaLog::kStream, committed, false, false);
  ASSERT_TRUE(f);
  std::vector<uint8_t> golden;
  for (const auto& g : testing::kGoldenFrames) {
    if (g.kind == 26) golden = testing::FromHex(g.hex);
  }
  EXPECT_EQ(*EncodeFrame(*f), golden);

  // Marks on a stream batch → 25; labels → 32; labels and times → 36.
  auto marked = Batch({"x", "y"});
  marked.marks = {RecordMark{MarkType::kOpens, 7, 1, 2, std::nullopt},
                  RecordMark{MarkType::kContinues, 0, 0, 0, std::nullopt}};
  auto m = MakeRecordsFrame(ReplicaLog::kStream, marked, false, false);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, Kind::kReplicateMarkedRecords);
  EXPECT_FALSE(MakeRecordsFrame(ReplicaLog::kCache, marked, false, false));
  auto labelled = Batch({"x"});
  labelled.generations = {{3, 4}};
  auto l = MakeRecordsFrame(ReplicaLog::kStream, labelled, true, false);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->kind, Kind::kReplicateLabelledRecords);
  EXPECT_EQ(std::get<Records>(l->body).marks.size(), 1u);  // padded with none
  labelled.times = {1700000000000001ull};
  auto t = MakeRecordsFrame(ReplicaLog::kCounters, labelled, true, true);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind, Kind::kReplicateTimedRecords);
  EXPECT_EQ(TargetLog(*t), ReplicaLog::kCounters);
  EXPECT_TRUE(EncodeFrame(*t));
  // Times without labels are dropped, not sent.
  auto dropped = MakeRecordsFrame(ReplicaLog::kStream, labelled, false, true);
  ASSERT_TRUE(dropped);
  EXPECT_EQ(dropped->kind, Kind::kReplicateRecords);
  EXPECT_TRUE(std::get<Records>(dropped->body).times.empty());
  EXPECT_TRUE(std::get<Records>(dropped->body).generations.empty());
}

TEST(FlxiSelect, FetchSizeIsClampedToFourMebibytes) {
  EXPECT_EQ(ClampFetchBytes(0), 1u);
  EXPECT_EQ(ClampFetchBytes(1u << 20), 1u << 20);
  EXPECT_EQ(ClampFetchBytes(4u << 20), 4u << 20);
  EXPECT_EQ(ClampFetchBytes((4u << 20) + 1), 4u << 20);
  EXPECT_EQ(ClampFetchBytes(UINT32_MAX), 4u << 20);
}

TEST(FlxiSelect, TargetLogOfBootstrapAndControlKinds) {
  EXPECT_EQ(TargetLog(Frame{Kind::kReplicateDeadLetterBootstrap, Bootstrap{}}),
            ReplicaLog::kGroupDeadLetters);
  EXPECT_EQ(
      TargetLog(Frame{Kind::kReplicateRebuild, Rebuild{1, kShard, ReplicaLog::kCounters, 5000}}),
      ReplicaLog::kCounters);
  EXPECT_EQ(TargetLog(Frame{Kind::kFence, Fence{1, kShard, ReplicaLog::kCache}}),
            ReplicaLog::kCache);
  EXPECT_EQ(TargetLog(Frame{Kind::kPing, PingPong{1}}), std::nullopt);
}

}  // namespace
}  // namespace felix::wire::flxi
