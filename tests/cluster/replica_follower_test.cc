// ReplicaFollower on real logs in a temp directory: the answer table of replication.md §5 row
// by row, the self-repair rule of §9.1 (each condition with a must-repair and a must-halt
// case), labels and times (§9.2), the commit offset, auxiliary logs, the bootstrap table
// (cluster-etcd.md §7 item 3), the rebuild table (§7 item 4), metrics, and seeded random
// batches that must never place a record off the leader's offsets.
#include "cluster/replica_follower.h"

#include <deque>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "storage/record_format.h"
#include "support/child_process.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;
using storage::FsyncMode;
using storage::LogKind;

class FollowerTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = felix::testing::MakeTempDir("felix-follower"); }
  void TearDown() override {
    follower_.reset();
    store_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  void Open(bool cache_shard = false, FsyncMode mode = FsyncMode::kOnCommit) {
    follower_.reset();
    store_.reset();
    storage::LogOptions o;
    o.fsync_mode = mode;
    auto store = storage::ShardStore::Open(dir_, storage::ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store) << store.error().ToString();
    store_ = std::move(*store);
    cache_shard_ = cache_shard;
    follower_ = std::make_unique<ReplicaFollower>(*store_, cache_shard, &metrics_);
  }
  void Reopen() { Open(cache_shard_); }

  // A records batch at generation `g` from `first`, with a correct checksum.
  flxi::Records Batch(uint64_t g, uint64_t first, std::vector<std::string> payloads) {
    flxi::Records r;
    r.shard = flxi::ShardRef{"t", "ns", "s", 0, g};
    r.first_offset = first;
    for (auto& p : payloads) r.payloads.push_back(Keep(std::move(p)));
    r.checksum = flxi::BatchChecksum(r.payloads, r.marks);
    return r;
  }
  std::string_view Keep(std::string s) { return arena_.emplace_back(std::move(s)); }

  FollowerAnswer Send(const flxi::Records& batch, LogKind log = LogKind::kStream,
                      FollowerRole role = FollowerRole::kFollower, std::string_view sender = "n1") {
    return follower_->ApplyRecords(batch, log, role, sender);
  }

  std::vector<std::string> Payloads(LogKind log = LogKind::kStream) {
    std::vector<std::string> out;
    for (const auto& r : Stored(log)) out.push_back(r.payload);
    return out;
  }
  std::vector<storage::Record> Stored(LogKind log = LogKind::kStream) {
    auto& l = store_->log(log);
    auto batch = l.Read(l.BaseOffset(), storage::ReadLimits{100000, 1u << 30});
    EXPECT_TRUE(batch) << batch.error().ToString();
    return batch ? batch->records : std::vector<storage::Record>{};
  }
  Offset Tail(LogKind log = LogKind::kStream) { return store_->log(log).TailOffset(); }
  std::vector<storage::EpochEntry> History() { return store_->generation_history().entries(); }
  uint64_t Count(const std::string& outcome) {
    return metrics_.AddCounter("felix_broker_replicated_total", "", "outcome=\"" + outcome + "\"")
        .Value();
  }

  std::string dir_;
  bool cache_shard_ = false;
  MetricsRegistry metrics_;
  std::deque<std::string> arena_;
  std::unique_ptr<storage::ShardStore> store_;
  std::unique_ptr<ReplicaFollower> follower_;
};

// The durable offset of a ReplicateOk, or nullopt (with the error printed) for an error.
std::optional<uint64_t> OkAt(const FollowerAnswer& a) {
  if (const auto* ok = std::get_if<flxi::ReplicateOk>(&a.answer)) return ok->durable_offset;
  return std::nullopt;
}
std::optional<flxi::ErrorCode> Code(const FollowerAnswer& a) {
  if (const auto* e = std::get_if<flxi::ReplicateError>(&a.answer)) return e->code;
  return std::nullopt;
}
uint64_t Expected(const FollowerAnswer& a) {
  return std::get<flxi::ReplicateError>(a.answer).expected_offset;
}

using Strings = std::vector<std::string>;

// --- §5 answer table -------------------------------------------------------------------------

TEST_F(FollowerTest, BeginsAtTailIsOkAtTailPlusCount) {
  Open();
  auto a = Send(Batch(1, 0, {"a", "b"}));
  EXPECT_EQ(OkAt(a), 2u) << a.detail;
  a = Send(Batch(1, 2, {"c"}));
  EXPECT_EQ(OkAt(a), 3u) << a.detail;
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c"}));
  for (const auto& r : Stored()) EXPECT_EQ(r.generation, Generation(1));
  EXPECT_EQ(follower_->status(LogKind::kStream).durable_offset, Offset(3));
}

TEST_F(FollowerTest, BeginsPastTailIsLogGapAtTail) {
  Open();
  ASSERT_TRUE(OkAt(Send(Batch(1, 0, {"a", "b"}))));
  auto a = Send(Batch(1, 5, {"f"}));
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogGap);
  EXPECT_EQ(Expected(a), 2u);
  EXPECT_EQ(Payloads(), (Strings{"a", "b"}));
}

TEST_F(FollowerTest, NewerGenerationPastUncomparedOlderRecordsIsLogGapAtFirstSuchRecord) {
  Open();
  auto first = Batch(1, 0, {"a", "b", "c", "d", "e"});
  first.commit_offset = 2;  // kind 26: records below 2 are committed
  ASSERT_EQ(OkAt(Send(first)), 5u);
  ASSERT_EQ(store_->replica_state().commit_offset, Offset(2));
  // Generation 2 resumes at the tail, but [2, 5) were written under generation 1 and are not
  // committed: they must be compared first.
  auto a = Send(Batch(2, 5, {"f"}));
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogGap) << a.detail;
  EXPECT_EQ(Expected(a), 2u);
  EXPECT_EQ(Tail(), Offset(5));
  // Shipping from there compares them and appends after.
  EXPECT_EQ(OkAt(Send(Batch(2, 2, {"c", "d", "e", "f"}))), 6u);
  EXPECT_EQ(OkAt(Send(Batch(2, 6, {"g"}))), 7u) << "verified through the tail: no gap any more";
}

TEST_F(FollowerTest, WhollyBelowTailIsOkAtBatchEndNotTail) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c", "d", "e"}))), 5u);
  auto a = Send(Batch(1, 1, {"b", "c"}));
  EXPECT_EQ(OkAt(a), 3u) << a.detail;
  EXPECT_EQ(Tail(), Offset(5));
}

TEST_F(FollowerTest, StraddlingTailStoresOnlyTheSuffix) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c"}))), 3u);
  EXPECT_EQ(OkAt(Send(Batch(1, 1, {"b", "c", "d", "e"}))), 5u);
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "d", "e"}));
}

TEST_F(FollowerTest, DisagreeingBytesAreLogConflict) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c"}))), 3u);
  auto a = Send(Batch(1, 1, {"X", "c", "d"}));
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(Expected(a), 3u) << "expected_offset is the tail";
  EXPECT_NE(a.detail.find("at 1"), std::string::npos) << a.detail;
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c"}));
  EXPECT_EQ(Count("conflict"), 1u);
}

TEST_F(FollowerTest, ChecksumMismatchIsMalformedAndStoresNothing) {
  Open();
  auto bad = Batch(1, 0, {"a", "b"});
  bad.checksum ^= 1;
  auto a = Send(bad);
  ASSERT_EQ(Code(a), flxi::ErrorCode::kMalformed);
  EXPECT_EQ(Tail(), Offset(0));
  EXPECT_EQ(Count("corrupt"), 1u);
  // The leader resends the same records: stored once.
  EXPECT_EQ(OkAt(Send(Batch(1, 0, {"a", "b"}))), 2u);
}

TEST_F(FollowerTest, ResplitBatchIsCaughtByTheChecksum) {
  Open();
  auto original = Batch(1, 0, {"a", "bc"});
  auto resplit = Batch(1, 0, {"ab", "c"});
  resplit.checksum = original.checksum;  // same bytes, different records
  auto a = Send(resplit);
  ASSERT_EQ(Code(a), flxi::ErrorCode::kMalformed) << a.detail;
  EXPECT_EQ(Tail(), Offset(0));
}

TEST_F(FollowerTest, OlderEpochIsFencedByViewAndByPersistedGenerationAcrossRestart) {
  Open();
  auto a = Send(Batch(3, 0, {"a"}), LogKind::kStream, FollowerRole::kViewNewer);
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
  ASSERT_EQ(OkAt(Send(Batch(3, 0, {"a"}), LogKind::kStream, FollowerRole::kFollower, "n3")), 1u);
  a = Send(Batch(2, 1, {"b"}), LogKind::kStream, FollowerRole::kFollower, "n2");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
  Reopen();
  a = Send(Batch(2, 1, {"b"}), LogKind::kStream, FollowerRole::kFollower, "n2");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch) << "the accepted generation survives";
  EXPECT_EQ(Tail(), Offset(1));
  // At the accepted generation only the leader the ballot names is answered.
  a = Send(Batch(3, 1, {"b"}), LogKind::kStream, FollowerRole::kFollower, "n9");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
  EXPECT_EQ(OkAt(Send(Batch(3, 1, {"b"}), LogKind::kStream, FollowerRole::kFollower, "n3")), 2u);
}

TEST_F(FollowerTest, NewerEpochThanTheViewIsStaleRouteAndPersistsNothing) {
  Open();
  auto a = Send(Batch(4, 0, {"a"}), LogKind::kStream, FollowerRole::kViewOlder);
  EXPECT_EQ(Code(a), flxi::ErrorCode::kStaleRoute);
  EXPECT_EQ(store_->replica_state().generation, Generation(0));
  EXPECT_EQ(Tail(), Offset(0));
  EXPECT_EQ(Count("behind"), 1u);
}

TEST_F(FollowerTest, NotAReplicaOrNoSuchLogIsUnauthorized) {
  Open();
  auto a = Send(Batch(1, 0, {"a"}), LogKind::kStream, FollowerRole::kNotReplica);
  EXPECT_EQ(Code(a), flxi::ErrorCode::kUnauthorized);
  a = Send(Batch(1, 0, {"a"}), LogKind::kCache);  // a stream shard has no cache log
  EXPECT_EQ(Code(a), flxi::ErrorCode::kUnauthorized);
  EXPECT_EQ(store_->replica_state().generation, Generation(0));
  EXPECT_EQ(Tail(LogKind::kCache), Offset(0));
}

TEST_F(FollowerTest, EmptyBatchIsAProbeAnsweredWithTheTail) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c"}))), 3u);
  EXPECT_EQ(OkAt(Send(Batch(1, 0, {}))), 3u);
  EXPECT_EQ(OkAt(Send(Batch(1, 9, {}))), 3u);
}

TEST_F(FollowerTest, NewerGenerationIsPersistedBeforeTheAnswer) {
  Open();
  ASSERT_TRUE(OkAt(Send(Batch(4, 0, {"a"}), LogKind::kStream, FollowerRole::kFollower, "n4")));
  EXPECT_EQ(store_->replica_state().generation, Generation(4));
  EXPECT_EQ(store_->ballot(), (storage::Ballot{Generation(4), "n4"}));
  // Even an answer that stores nothing persists it first.
  auto gap = Send(Batch(5, 7, {"x"}), LogKind::kStream, FollowerRole::kFollower, "n5");
  ASSERT_EQ(Code(gap), flxi::ErrorCode::kLogGap);
  Reopen();
  EXPECT_EQ(store_->replica_state().generation, Generation(5));
  EXPECT_EQ(store_->ballot(), (storage::Ballot{Generation(5), "n5"}));
}

TEST_F(FollowerTest, ResendAfterLostOkStoresNothingTwice) {
  Open();
  auto batch = Batch(1, 0, {"a", "b", "c"});
  ASSERT_EQ(OkAt(Send(batch)), 3u);
  ASSERT_EQ(OkAt(Send(batch)), 3u);  // the first ReplicateOk was lost
  Reopen();
  ASSERT_EQ(OkAt(Send(batch)), 3u);  // and again after a restart
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c"}));
}

TEST_F(FollowerTest, OkOnlyOnceDurableUnderOnCommit) {
  Open();
  auto& log = store_->log(LogKind::kStream);
  // Records written by someone else and not yet flushed: an answer covering them waits.
  std::string p = "a";
  ASSERT_TRUE(log.AppendAsync(
      std::span<const storage::AppendRecord>(
          std::vector<storage::AppendRecord>{{storage::AsBytes(p), Generation(1), 0}}),
      [](const storage::StorageResult<void>&) {}));
  auto a = Send(Batch(1, 0, {"a", "b"}));
  ASSERT_EQ(OkAt(a), 2u) << a.detail;
  EXPECT_GE(log.DurableOffset(), Offset(2));
  a = Send(Batch(1, 2, {"c"}));
  ASSERT_EQ(OkAt(a), 3u);
  EXPECT_GE(log.DurableOffset(), Offset(3));
  // A resend wholly below unflushed records is answered only once they are durable too.
  std::string q = "d";
  ASSERT_TRUE(log.AppendAsync(
      std::span<const storage::AppendRecord>(
          std::vector<storage::AppendRecord>{{storage::AsBytes(q), Generation(1), 0}}),
      [](const storage::StorageResult<void>&) {}));
  a = Send(Batch(1, 3, {"d"}));
  ASSERT_EQ(OkAt(a), 4u) << a.detail;
  EXPECT_GE(log.DurableOffset(), Offset(4));
}

// --- §9.1 self-repair ------------------------------------------------------------------------

TEST_F(FollowerTest, RepairsConflictFromNewerGenerationInsideTheOlderOne) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c", "d", "e"}))), 5u);
  EXPECT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(1), Offset(0)}}));
  auto a = Send(Batch(2, 0, {"a", "b", "c", "X", "Y", "Z"}), LogKind::kStream,
                FollowerRole::kFollower, "n2");
  EXPECT_EQ(OkAt(a), 6u) << a.detail;
  EXPECT_EQ(a.outcome, std::string("truncated"));
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "X", "Y", "Z"}));
  EXPECT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(1), Offset(0)},
                                                         {Generation(2), Offset(3)}}));
  EXPECT_EQ(Count("truncated"), 1u);
  EXPECT_EQ(follower_->status(LogKind::kStream).halt, FollowerHalt::kNone);
}

TEST_F(FollowerTest, HaltsWhenALeaderDisagreesWithItself) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c"}))), 3u);
  auto a = Send(Batch(1, 0, {"a", "X"}));  // same generation as the newest in the history
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(follower_->status(LogKind::kStream).halt, FollowerHalt::kDiverged);
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c"}));
  // Halted: even agreeing batches are LogConflict until a rebuild.
  a = Send(Batch(1, 3, {"d"}));
  EXPECT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(Tail(), Offset(3));
}

TEST_F(FollowerTest, RepairsAConflictAtOrAfterWhereTheOlderGenerationBegan) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c", "d", "e"}))), 5u);
  ASSERT_EQ(OkAt(Send(Batch(2, 0, {"a", "b", "c", "d", "e", "f", "g", "h"}))), 8u);
  ASSERT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(1), Offset(0)},
                                                         {Generation(2), Offset(5)}}));
  auto a = Send(Batch(3, 5, {"f", "Q"}));  // differs at 6 ≥ 5, where generation 2 began
  EXPECT_EQ(OkAt(a), 7u) << a.detail;
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "d", "e", "f", "Q"}));
  EXPECT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(1), Offset(0)},
                                                         {Generation(2), Offset(5)},
                                                         {Generation(3), Offset(6)}}));
}

TEST_F(FollowerTest, HaltsOnAConflictBeforeTheOlderGenerationBegan) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c", "d", "e"}))), 5u);
  ASSERT_EQ(OkAt(Send(Batch(2, 0, {"a", "b", "c", "d", "e", "f", "g", "h"}))), 8u);
  auto a = Send(Batch(3, 0, {"a", "b", "c", "Z"}));  // differs at 3 < 5: not generation 2's
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict) << a.detail;
  EXPECT_EQ(Expected(a), 8u);
  EXPECT_EQ(follower_->status(LogKind::kStream).halt, FollowerHalt::kDiverged);
  EXPECT_NE(follower_->status(LogKind::kStream).halt_detail.find("began at 5"), std::string::npos);
  EXPECT_EQ(Tail(), Offset(8));
}

TEST_F(FollowerTest, HaltsBelowWhatThisLeaderAlreadyVerified) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c", "d"}))), 4u);
  ASSERT_EQ(OkAt(Send(Batch(2, 0, {"a", "b"}))), 2u);  // generation 2 compared [0, 2)
  auto a = Send(Batch(2, 1, {"X"}));                   // and now disagrees with what it compared
  EXPECT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(Tail(), Offset(4));
}

TEST_F(FollowerTest, NeverTruncatesBelowTheCommitOffset) {
  Open();
  auto committed = Batch(1, 0, {"a", "b", "c", "d", "e"});
  committed.commit_offset = 4;
  ASSERT_EQ(OkAt(Send(committed)), 5u);
  auto a = Send(Batch(2, 0, {"a", "b", "c", "X", "Y"}));  // 3 < commit 4
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(a.outcome, std::string("below_commit"));
  EXPECT_EQ(follower_->status(LogKind::kStream).halt, FollowerHalt::kBelowCommit);
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(Count("below_commit"), 1u);
}

// --- §9.2 labels and times, commit offset ---------------------------------------------------

TEST_F(FollowerTest, LabelsGiveEachAppendedRecordItsWritersGeneration) {
  Open();
  auto b = Batch(3, 0, {"a", "b", "c", "d", "e"});
  b.generations = {{1, 0}, {3, 3}};  // kind 32
  b.commit_offset = 0;
  ASSERT_EQ(OkAt(Send(b)), 5u);
  std::vector<uint64_t> gens;
  for (const auto& r : Stored()) gens.push_back(r.generation.value());
  EXPECT_EQ(gens, (std::vector<uint64_t>{1, 1, 1, 3, 3}));
  EXPECT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(1), Offset(0)},
                                                         {Generation(3), Offset(3)}}));
  // A straddling labelled batch labels only what it appended.
  auto c = Batch(3, 4, {"e", "f"});
  c.generations = {{3, 3}};
  ASSERT_EQ(OkAt(Send(c)), 6u);
  EXPECT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(1), Offset(0)},
                                                         {Generation(3), Offset(3)}}));
}

TEST_F(FollowerTest, UnlabelledRecordsTakeTheSendersGenerationAndTimesBecomeMilliseconds) {
  Open();
  auto b = Batch(2, 0, {"a", "b"});
  b.generations = {{2, 0}};
  b.times = {1700000000000001, 1700000000999999};  // kind 36, µs
  ASSERT_EQ(OkAt(Send(b)), 2u);
  auto stored = Stored();
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].timestamp_ms, 1700000000000u);
  EXPECT_EQ(stored[1].timestamp_ms, 1700000000999u);
  ASSERT_EQ(OkAt(Send(Batch(3, 0, {"a", "b", "c"}))), 3u);  // kind 7: no labels
  EXPECT_EQ(Stored().back().generation, Generation(3));
  EXPECT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(2), Offset(0)},
                                                         {Generation(3), Offset(2)}}));
}

TEST_F(FollowerTest, CommitOffsetIsWhatTheBatchLeftLevelNeverLowered) {
  Open();
  auto b = Batch(1, 0, {"a", "b", "c", "d", "e"});
  b.commit_offset = 10;  // the leader's mark is past what this batch carried
  ASSERT_EQ(OkAt(Send(b)), 5u);
  EXPECT_EQ(store_->replica_state().commit_offset, Offset(5));
  auto below = Batch(1, 0, {"a", "b"});
  below.commit_offset = 9;
  ASSERT_EQ(OkAt(Send(below)), 2u);
  EXPECT_EQ(store_->replica_state().commit_offset, Offset(5)) << "never lowered";
  Reopen();
  EXPECT_EQ(store_->replica_state().commit_offset, Offset(5));
  EXPECT_EQ(store_->log(LogKind::kStream).CommitOffset(), Offset(5))
      << "the storage guard is armed";
}

TEST_F(FollowerTest, ACachesCounterLogKeepsItsCarriedCommitOffsetInMemoryOnly) {
  // The floor of the follower's compaction (follower_compaction.h): what the batch left level,
  // never lowered; the shard's `replica` file keeps the cache log's alone.
  Open(/*cache_shard=*/true);
  auto b = Batch(1, 0, {"a", "b", "c", "d"});
  b.commit_offset = 9;
  ASSERT_EQ(OkAt(Send(b, LogKind::kCounters)), 4u);
  EXPECT_EQ(store_->log(LogKind::kCounters).CommitOffset(), Offset(4));
  auto below = Batch(1, 0, {"a"});
  below.commit_offset = 1;
  ASSERT_EQ(OkAt(Send(below, LogKind::kCounters)), 1u);
  EXPECT_EQ(store_->log(LogKind::kCounters).CommitOffset(), Offset(4)) << "never lowered";
  EXPECT_EQ(store_->replica_state().commit_offset, Offset(0)) << "not the cache log's";
  EXPECT_EQ(store_->log(LogKind::kCache).CommitOffset(), Offset(0));
  // A stream shard's auxiliary logs carry none: a commit offset there is ignored.
  follower_.reset();
  store_.reset();
  std::filesystem::remove_all(dir_);
  Open();
  auto cursors = Batch(1, 0, {"a", "b"});
  cursors.commit_offset = 2;
  ASSERT_EQ(OkAt(Send(cursors, LogKind::kCursors)), 2u);
  EXPECT_EQ(store_->log(LogKind::kCursors).CommitOffset(), Offset(0));
}

TEST_F(FollowerTest, ACommitOffsetBelowTheDurableTailIsWrittenWhileTheBatchFlushes) {
  // The common case: the leader's mark covers earlier batches only. It is written through
  // beside the flush of this batch's records (docs/performance.md change 9) and is durable
  // when the answer comes, exactly as when written after it.
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c"}))), 3u);
  auto next = Batch(1, 3, {"d", "e"});
  next.commit_offset = 3;
  ASSERT_EQ(OkAt(Send(next)), 5u);
  EXPECT_EQ(store_->replica_state().commit_offset, Offset(3));
  EXPECT_EQ(store_->log(LogKind::kStream).CommitOffset(), Offset(3));
  auto last = Batch(1, 5, {"f"});
  last.commit_offset = 5;
  ASSERT_EQ(OkAt(Send(last)), 6u);
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "d", "e", "f"}));
  Reopen();
  EXPECT_EQ(store_->replica_state().commit_offset, Offset(5));
  EXPECT_EQ(store_->log(LogKind::kStream).CommitOffset(), Offset(5));
  EXPECT_EQ(Tail(), Offset(6));
}

// --- auxiliary logs --------------------------------------------------------------------------

TEST_F(FollowerTest, AuxiliaryLogIsFencedOnceTheShardsOwnLogAcceptedANewerGeneration) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(2, 0, {"cursor"}), LogKind::kCursors)), 1u);
  ASSERT_EQ(OkAt(Send(Batch(3, 0, {"a"}), LogKind::kStream, FollowerRole::kFollower, "n3")), 1u);
  auto a = Send(Batch(2, 1, {"dl"}), LogKind::kDeadLetters, FollowerRole::kFollower, "n1");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
  EXPECT_EQ(Tail(LogKind::kDeadLetters), Offset(0));
  // A conflict there is never repaired: it halts.
  a = Send(Batch(4, 0, {"other"}), LogKind::kCursors, FollowerRole::kFollower, "n4");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(follower_->status(LogKind::kCursors).halt, FollowerHalt::kDiverged);
  EXPECT_TRUE(History().size() == 1u) << "auxiliary logs keep no history";
}

TEST_F(FollowerTest, CacheShardReplicatesCacheAndCounterLogs) {
  Open(/*cache_shard=*/true);
  EXPECT_EQ(OkAt(Send(Batch(1, 0, {"counter"}), LogKind::kCounters)), 1u);
  EXPECT_EQ(OkAt(Send(Batch(1, 0, {"put"}), LogKind::kCache)), 1u);
  EXPECT_EQ(Code(Send(Batch(1, 0, {"x"}), LogKind::kStream)), flxi::ErrorCode::kUnauthorized);
  EXPECT_EQ(History(), (std::vector<storage::EpochEntry>{{Generation(1), Offset(0)}}));
}

// --- bootstrap table (cluster-etcd.md §7 item 3) ---------------------------------------------

flxi::Bootstrap BootstrapAt(uint64_t g, uint64_t base) {
  return flxi::Bootstrap{0, flxi::ShardRef{"t", "ns", "s", 0, g}, base};
}
flxi::Rebuild RebuildAt(uint64_t g, uint64_t base,
                        flxi::ReplicaLog log = flxi::ReplicaLog::kStream) {
  return flxi::Rebuild{0, flxi::ShardRef{"t", "ns", "s", 0, g}, log, base};
}

TEST_F(FollowerTest, BootstrapPlacesAnEmptyLogAtTheBase) {
  Open();
  auto a = follower_->ApplyBootstrap(BootstrapAt(1, 5000), LogKind::kStream,
                                     FollowerRole::kFollower, "n1");
  EXPECT_EQ(OkAt(a), 5000u) << a.detail;
  EXPECT_EQ(store_->log(LogKind::kStream).BaseOffset(), Offset(5000));
  EXPECT_EQ(OkAt(Send(Batch(1, 5000, {"a"}))), 5001u);
  Reopen();
  EXPECT_EQ(store_->log(LogKind::kStream).BaseOffset(), Offset(5000));
  EXPECT_EQ(Count("bootstrapped"), 1u);
}

TEST_F(FollowerTest, BootstrapOfALogSpanningTheBaseIsAnsweredWithTheTail) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c", "d"}))), 4u);
  auto a =
      follower_->ApplyBootstrap(BootstrapAt(1, 2), LogKind::kStream, FollowerRole::kFollower, "n1");
  EXPECT_EQ(OkAt(a), 4u) << a.detail;
  a = follower_->ApplyBootstrap(BootstrapAt(1, 4), LogKind::kStream, FollowerRole::kFollower, "n1");
  EXPECT_EQ(OkAt(a), 4u) << "the base at the tail still spans";
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "d"}));
}

TEST_F(FollowerTest, BootstrapAboveRecordsAnOlderGenerationLeftUncomparedIsRefusedThenRebuilt) {
  // A new leader whose log begins past records an older generation wrote here above the commit
  // offset cannot show them for comparison (§5 step 5). Answered with the tail, it would be
  // sent back below its base by the next batch, forever; refused, a rebuild places the log at
  // its base.
  Open();
  auto b = Batch(1, 0, {"a", "b", "c", "d", "e", "f"});
  b.commit_offset = 2;
  ASSERT_EQ(OkAt(Send(b)), 6u);
  auto gap = Send(Batch(2, 6, {"g"}), LogKind::kStream, FollowerRole::kFollower, "n2");
  ASSERT_EQ(Code(gap), flxi::ErrorCode::kLogGap);
  EXPECT_EQ(Expected(gap), 2u) << "generation 1's records from the commit offset first";
  auto a =
      follower_->ApplyBootstrap(BootstrapAt(2, 4), LogKind::kStream, FollowerRole::kFollower, "n2");
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict) << a.detail;
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "d", "e", "f"})) << "nothing placed or cut";
  // Offered at or below where the uncompared records begin, the log spans it as before.
  EXPECT_EQ(OkAt(follower_->ApplyBootstrap(BootstrapAt(2, 2), LogKind::kStream,
                                           FollowerRole::kFollower, "n2")),
            6u);
  auto r = follower_->ApplyRebuild(RebuildAt(2, 4), FollowerRole::kFollower, "n2");
  EXPECT_EQ(OkAt(r), 4u) << r.detail;
  EXPECT_EQ(store_->log(LogKind::kStream).BaseOffset(), Offset(4));
  EXPECT_EQ(
      OkAt(Send(Batch(2, 4, {"e", "f", "g"}), LogKind::kStream, FollowerRole::kFollower, "n2")),
      7u);
}

TEST_F(FollowerTest, BootstrapNeverPlacesALogOverRecordsThatDoNotReachTheBase) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c"}))), 3u);
  auto a = follower_->ApplyBootstrap(BootstrapAt(1, 10), LogKind::kStream, FollowerRole::kFollower,
                                     "n1");
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(Expected(a), 3u);
  EXPECT_EQ(store_->log(LogKind::kStream).BaseOffset(), Offset(0));
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c"}));
  // A log beginning after the offered base is refused the same way.
  ASSERT_EQ(OkAt(follower_->ApplyBootstrap(BootstrapAt(1, 100), LogKind::kCursors,
                                           FollowerRole::kFollower, "n1")),
            100u);
  a = follower_->ApplyBootstrap(BootstrapAt(1, 50), LogKind::kCursors, FollowerRole::kFollower,
                                "n1");
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict);
  EXPECT_EQ(Expected(a), 100u);
  // And a superseded leader cannot place a log at all.
  (void)Send(Batch(2, 3, {"d"}));  // a gap answer, but generation 2 is accepted
  ASSERT_EQ(store_->replica_state().generation, Generation(2));
  a = follower_->ApplyBootstrap(BootstrapAt(1, 0), LogKind::kDeadLetters, FollowerRole::kFollower,
                                "n1");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
}

// --- rebuild table (cluster-etcd.md §7 item 4) -----------------------------------------------

TEST_F(FollowerTest, RebuildDiscardsTheLogWhenNothingCommittedIsCut) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(1, 0, {"a", "b", "c"}))), 3u);
  ASSERT_EQ(Code(Send(Batch(1, 0, {"X"}))), flxi::ErrorCode::kLogConflict);  // halts
  auto a = follower_->ApplyRebuild(RebuildAt(2, 10), FollowerRole::kFollower, "n2");
  EXPECT_EQ(OkAt(a), 10u) << a.detail;
  EXPECT_EQ(store_->log(LogKind::kStream).BaseOffset(), Offset(10));
  EXPECT_EQ(Tail(), Offset(10));
  EXPECT_TRUE(History().empty()) << "the generation history goes with the log";
  EXPECT_EQ(follower_->status(LogKind::kStream).halt, FollowerHalt::kNone);
  EXPECT_EQ(OkAt(Send(Batch(2, 10, {"k"}), LogKind::kStream, FollowerRole::kFollower, "n2")), 11u);
  EXPECT_EQ(Count("rebuilt"), 1u);
}

TEST_F(FollowerTest, RebuildKeepsRecordsBelowTheCommitOffset) {
  Open();
  auto b = Batch(1, 0, {"a", "b", "c", "d", "e", "f"});
  b.commit_offset = 4;
  ASSERT_EQ(OkAt(Send(b)), 6u);
  ASSERT_EQ(Code(Send(Batch(1, 5, {"X"}))), flxi::ErrorCode::kLogConflict);  // halts
  auto a = follower_->ApplyRebuild(RebuildAt(2, 1), FollowerRole::kFollower, "n2");
  EXPECT_EQ(OkAt(a), 1u) << "answers max(own base, base_offset)";
  EXPECT_EQ(Payloads(), (Strings{"a", "b", "c", "d"})) << "kept min(commit, tail)";
  EXPECT_EQ(follower_->status(LogKind::kStream).halt, FollowerHalt::kNone);
  // The leader re-ships from 1: kept records are compared, the rest appended.
  EXPECT_EQ(OkAt(Send(Batch(2, 1, {"b", "c", "d", "Y"}), LogKind::kStream, FollowerRole::kFollower,
                      "n2")),
            5u);
}

TEST_F(FollowerTest, RebuildByALeaderThatDisagreedWithACommittedRecordIsRefused) {
  Open();
  auto b = Batch(1, 0, {"a", "b", "c", "d", "e"});
  b.commit_offset = 4;
  ASSERT_EQ(OkAt(Send(b)), 5u);
  ASSERT_EQ(Send(Batch(2, 0, {"a", "X"}), LogKind::kStream, FollowerRole::kFollower, "n2").outcome,
            std::string("below_commit"));
  auto a = follower_->ApplyRebuild(RebuildAt(2, 0), FollowerRole::kFollower, "n2");
  ASSERT_EQ(Code(a), flxi::ErrorCode::kLogConflict) << a.detail;
  EXPECT_EQ(a.outcome, std::string("below_commit"));
  EXPECT_EQ(follower_->status(LogKind::kStream).halt, FollowerHalt::kBelowCommit);
  EXPECT_EQ(Tail(), Offset(5));
}

TEST_F(FollowerTest, RebuildFromASupersededLeaderOrAStrangerIsRefused) {
  Open();
  ASSERT_EQ(OkAt(Send(Batch(3, 0, {"a", "b"}), LogKind::kStream, FollowerRole::kFollower, "n3")),
            2u);
  auto a = follower_->ApplyRebuild(RebuildAt(2, 0), FollowerRole::kFollower, "n2");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
  a = follower_->ApplyRebuild(RebuildAt(3, 0), FollowerRole::kViewNewer, "n3");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
  a = follower_->ApplyRebuild(RebuildAt(3, 0), FollowerRole::kNotReplica, "n3");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kUnauthorized);
  EXPECT_EQ(Payloads(), (Strings{"a", "b"}));
}

// --- answers, metrics ------------------------------------------------------------------------

TEST_F(FollowerTest, AnswersBecomeFramesAndCountOutcomesWithoutShardLabels) {
  Open();
  auto ok = Send(Batch(1, 0, {"a"}));
  auto frame = ok.ToFrame(77);
  EXPECT_EQ(frame.kind, flxi::Kind::kReplicateOk);
  EXPECT_EQ(std::get<flxi::ReplicateOk>(frame.body), (flxi::ReplicateOk{77, 1}));
  auto gap = Send(Batch(1, 9, {"z"}));
  frame = gap.ToFrame(78);
  ASSERT_EQ(frame.kind, flxi::Kind::kReplicateError);
  const auto& err = std::get<flxi::ReplicateError>(frame.body);
  EXPECT_EQ(err.correlation_id, 78u);
  EXPECT_EQ(err.code, flxi::ErrorCode::kLogGap);
  EXPECT_EQ(err.expected_offset, 1u);
  EXPECT_EQ(err.detail, gap.detail);
  EXPECT_TRUE(flxi::EncodeFrame(frame)) << "the detail fits its Str";
  std::string text = metrics_.RenderPrometheus();
  EXPECT_NE(text.find("felix_broker_replicated_total{outcome=\"ok\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("felix_broker_replicated_total{outcome=\"gap\"} 1"), std::string::npos);
  EXPECT_EQ(text.find("shard="), std::string::npos);
}

// --- adversarial: seeded random batches ------------------------------------------------------

// Random batches (right and wrong offsets, generations, roles, corrupt checksums, conflicting
// bytes) against one follower: it never crashes, and every record it holds is one some batch
// carried at exactly that offset.
TEST_F(FollowerTest, RandomBatchesNeverStoreRecordsOffTheLeadersOffsets) {
  Open(false, FsyncMode::kNone);
  std::mt19937_64 rng(20);  // fixed seed: reproducible (seeds 1–12 were also run by hand)
  auto pick = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  uint64_t generation = 1;
  std::map<Offset, std::set<std::string>> sent;  // offset → payloads carried there
  for (int i = 0; i < 600; ++i) {
    if (pick(20) == 0) ++generation;
    uint64_t g = generation - std::min<uint64_t>(generation - 1, pick(3) == 0 ? pick(2) : 0);
    Offset tail = Tail();
    uint64_t first = pick(tail.value() + 4);
    uint64_t count = pick(6);
    Strings payloads;
    for (uint64_t k = 0; k < count; ++k) {
      // Offset-tagged payloads; a few variants per offset so overlaps sometimes disagree.
      payloads.push_back("o" + std::to_string(first + k) + "v" + std::to_string(pick(3)));
    }
    auto batch = Batch(g, first, payloads);
    bool corrupt = pick(8) == 0;
    if (corrupt) batch.checksum ^= 0x10;
    if (pick(6) == 0) batch.commit_offset = pick(tail.value() + 2);
    if (pick(5) == 0) batch.generations = {{g, first}};
    FollowerRole role = pick(10) == 0 ? FollowerRole(pick(4)) : FollowerRole::kFollower;
    if (!corrupt) {
      for (uint64_t k = 0; k < count; ++k) sent[Offset(first + k)].insert(payloads[k]);
    }
    auto a = Send(batch, LogKind::kStream, role, "n" + std::to_string(g));
    Offset after = Tail();
    if (auto d = OkAt(a)) {
      EXPECT_LE(Offset(*d), after) << "an Ok never claims past the tail";
    } else if (Code(a) == flxi::ErrorCode::kLogGap) {
      EXPECT_LE(Offset(Expected(a)), after);
    }
    if (corrupt) {
      EXPECT_EQ(after, tail) << "a corrupt batch stores nothing";
    }
    if (follower_->status(LogKind::kStream).halt != FollowerHalt::kNone) {
      auto r = follower_->ApplyRebuild(RebuildAt(generation, pick(after.value() + 1)),
                                       FollowerRole::kFollower, "n" + std::to_string(generation));
      if (!OkAt(r)) {
        ASSERT_EQ(Code(r), flxi::ErrorCode::kLogConflict) << r.detail;
      }
    }
    for (const auto& r : Stored()) {
      ASSERT_TRUE(sent[r.offset].count(r.payload))
          << "offset " << r.offset << " holds " << r.payload << " (iteration " << i << ")";
    }
  }
  EXPECT_GT(Count("ok"), 0u);
  EXPECT_GT(Count("truncated") + Count("conflict"), 0u);
}

// --- generation-start records (replication.md §17) ---------------------------------------------

std::string StartPayload(uint64_t g) {
  auto p = storage::GenerationStartPayload(g);
  return std::string(p.begin(), p.end());
}

// A record marked GenerationStart is stored at the leader's offset with the storage flag, and
// a later batch that carries the same record unmarked disagrees with it (a conflict, not a
// silent match on the bytes).
TEST_F(FollowerTest, AGenerationStartMarkIsStoredAsTheFlagAndComparedWithIt) {
  Open();
  auto b = Batch(2, 0, {"a", StartPayload(2), "c"});
  b.marks.resize(3);
  b.marks[1].type = flxi::MarkType::kGenerationStart;
  b.checksum = flxi::BatchChecksum(b.payloads, b.marks);
  ASSERT_EQ(OkAt(Send(b)), 3u);
  auto stored = Stored();
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_EQ(stored[0].flags, 0u);
  EXPECT_EQ(stored[1].flags, storage::kRecordFlagGenerationStart);
  EXPECT_EQ(storage::GenerationStartOf(storage::AsBytes(stored[1].payload)), 2u);
  EXPECT_EQ(stored[2].flags, 0u);

  auto unmarked = Send(Batch(2, 1, {StartPayload(2), "c", "d"}));
  ASSERT_EQ(Code(unmarked), flxi::ErrorCode::kLogConflict) << unmarked.detail;
  EXPECT_NE(unmarked.detail.find("at 1"), std::string::npos) << unmarked.detail;
  EXPECT_EQ(Tail(), Offset(3));
}

TEST_F(FollowerTest, AGenerationStartMarkOnAPayloadThatIsNotAGenerationIsMalformed) {
  Open();
  auto b = Batch(2, 0, {"a", "five!"});
  b.marks.resize(2);
  b.marks[1].type = flxi::MarkType::kGenerationStart;
  b.checksum = flxi::BatchChecksum(b.payloads, b.marks);
  auto a = Send(b);
  ASSERT_EQ(Code(a), flxi::ErrorCode::kMalformed);
  EXPECT_NE(a.detail.find("generation-start record of 5 bytes"), std::string::npos) << a.detail;
  EXPECT_EQ(Tail(), Offset(0)) << "nothing stored";
}

}  // namespace
}  // namespace felix::cluster
