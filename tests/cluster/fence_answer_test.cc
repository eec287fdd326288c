// The replica side of the promotion fence (replication.md §10 replica table, §11 ballots) on
// real ShardStores in temp dirs, including across close and reopen.
#include "cluster/fence_answer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/child_process.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;
using storage::LogKind;

class FenceAnswerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("fence-answer");
    Open();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Open(Offset base = Offset(0)) {
    storage::LogOptions o;
    o.fsync_mode = storage::FsyncMode::kOnCommit;
    o.initial_base_offset = base;
    auto s = storage::ShardStore::Open(dir_, storage::ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    store_ = std::move(*s);
  }
  void Reopen() {
    ASSERT_TRUE(store_->Close().has_value());
    store_.reset();
    Open();
  }
  void Append(LogKind log, std::string payload, uint64_t generation) {
    storage::AppendRecord r{storage::AsBytes(payload), Generation(generation), 1000};
    ASSERT_TRUE(store_->log(log).Append(r).has_value());
  }
  // Accepted generation 1 from "old", three records of generation 1, commit offset 2.
  void OldLeaderWrote() {
    ASSERT_TRUE(store_->AcceptGeneration(Generation(1), "old", Offset(0)).has_value());
    Append(LogKind::kStream, "a", 1);
    Append(LogKind::kStream, "b", 1);
    Append(LogKind::kStream, "c", 1);
    ASSERT_TRUE(store_->SetCommitOffset(Offset(2)).has_value());
  }

  static flxi::Fence FenceAt(uint64_t g, flxi::ReplicaLog log = flxi::ReplicaLog::kStream) {
    return flxi::Fence{9, flxi::ShardRef{"t", "n", "s", 0, g}, log};
  }
  static flxi::Fetch FetchAt(uint64_t g, uint64_t from, uint32_t max_bytes = 1 << 20) {
    return flxi::Fetch{9, flxi::ShardRef{"t", "n", "s", 0, g}, flxi::ReplicaLog::kStream, from,
                       max_bytes};
  }
  FenceAnswer Fence(uint64_t g, std::string_view sender,
                    FollowerRole role = FollowerRole::kFollower) {
    return AnswerFence(store_.get(), false, FenceAt(g), role, sender);
  }
  static flxi::ErrorCode Code(const FenceAnswer& a) {
    EXPECT_FALSE(a.ok());
    return a.ok() ? flxi::ErrorCode::kMalformed : std::get<flxi::ReplicateError>(a.answer).code;
  }
  static flxi::FenceOk Ok(const FenceAnswer& a) {
    EXPECT_TRUE(a.ok()) << a.detail;
    return a.ok() ? std::get<flxi::FenceOk>(a.answer) : flxi::FenceOk{};
  }
  // The answer as the leader decodes it.
  static flxi::Frame RoundTrip(const flxi::Frame& f) {
    auto bytes = flxi::EncodeFrame(f);
    EXPECT_TRUE(bytes.has_value());
    if (!bytes) return {};
    encoded_.push_back(std::move(*bytes));
    auto decoded = flxi::DecodeFrame(encoded_.back());
    EXPECT_TRUE(decoded.has_value());
    return decoded ? *decoded : flxi::Frame{};
  }

  std::string dir_;
  std::unique_ptr<storage::ShardStore> store_;
  static inline std::vector<std::vector<uint8_t>> encoded_;
};

TEST_F(FenceAnswerTest, NewGenerationIsPersistedThenAnsweredWithThePositionReadAfter) {
  OldLeaderWrote();
  FenceAnswer a = Fence(2, "n2");
  EXPECT_STREQ(a.outcome, "accepted");
  EXPECT_EQ(Ok(a), (flxi::FenceOk{0, 3, 2, 1}));
  EXPECT_EQ(store_->replica_state().generation, Generation(2));
  ASSERT_TRUE(store_->ballot().has_value());
  EXPECT_EQ(store_->ballot()->leader, "n2");

  flxi::Frame f = RoundTrip(a.ToFrame(77));
  EXPECT_EQ(f.kind, flxi::Kind::kFenceOk);
  EXPECT_EQ(std::get<flxi::FenceOk>(f.body), (flxi::FenceOk{77, 3, 2, 1}));

  // Durable: after a reopen the old leader is still refused and the new one confirmed.
  Reopen();
  EXPECT_EQ(store_->replica_state().generation, Generation(2));
  EXPECT_EQ(Code(Fence(1, "old")), flxi::ErrorCode::kFencedEpoch);
  FenceAnswer again = Fence(2, "n2");
  EXPECT_STREQ(again.outcome, "confirmed");
  EXPECT_EQ(Ok(again), (flxi::FenceOk{0, 3, 2, 1}));
}

TEST_F(FenceAnswerTest, ConfirmingFenceAtTheSameGenerationAnswersFenceOkAgain) {
  OldLeaderWrote();
  ASSERT_TRUE(Fence(2, "n2").ok());
  Append(LogKind::kStream, "d", 2);  // the new leader's record arrived
  FenceAnswer a = Fence(2, "n2");
  EXPECT_STREQ(a.outcome, "confirmed");
  EXPECT_EQ(Ok(a), (flxi::FenceOk{0, 4, 2, 2}));
}

TEST_F(FenceAnswerTest, AnotherLeaderAtTheAcceptedGenerationIsRefusedByTheBallot) {
  OldLeaderWrote();
  ASSERT_TRUE(Fence(2, "n2").ok());
  FenceAnswer a = Fence(2, "n3");
  EXPECT_EQ(Code(a), flxi::ErrorCode::kFencedEpoch);
  EXPECT_NE(a.detail.find("n2"), std::string::npos) << a.detail;
  Reopen();
  EXPECT_EQ(Code(Fence(2, "n3")), flxi::ErrorCode::kFencedEpoch);
  EXPECT_EQ(store_->ballot()->leader, "n2");
  // A newer generation is a new ballot regardless of sender.
  EXPECT_TRUE(Fence(3, "n3").ok());
  EXPECT_EQ(store_->ballot()->leader, "n3");
}

TEST_F(FenceAnswerTest, OlderGenerationOrNewerRoutingViewIsFencedEpochAndPersistsNothing) {
  OldLeaderWrote();
  ASSERT_TRUE(Fence(4, "n4").ok());
  EXPECT_EQ(Code(Fence(3, "n3")), flxi::ErrorCode::kFencedEpoch);
  EXPECT_EQ(Code(Fence(5, "n5", FollowerRole::kViewNewer)), flxi::ErrorCode::kFencedEpoch);
  EXPECT_EQ(store_->replica_state().generation, Generation(4));
  EXPECT_EQ(store_->ballot()->leader, "n4");
}

TEST_F(FenceAnswerTest, RoutingViewBehindTheFenceIsNormal) {
  OldLeaderWrote();
  FenceAnswer a = Fence(2, "n2", FollowerRole::kViewOlder);
  EXPECT_EQ(Ok(a), (flxi::FenceOk{0, 3, 2, 1}));
  EXPECT_EQ(store_->replica_state().generation, Generation(2));
}

TEST_F(FenceAnswerTest, NotAReplicaOrNoLogIsUnauthorized) {
  OldLeaderWrote();
  EXPECT_EQ(Code(Fence(2, "n2", FollowerRole::kNotReplica)), flxi::ErrorCode::kUnauthorized);
  EXPECT_EQ(Code(AnswerFence(nullptr, false, FenceAt(2), FollowerRole::kFollower, "n2")),
            flxi::ErrorCode::kUnauthorized);
  EXPECT_EQ(store_->replica_state().generation, Generation(1));
}

TEST_F(FenceAnswerTest, ALogOtherThanTheShardsOwnIsMalformed) {
  OldLeaderWrote();
  for (auto log : {flxi::ReplicaLog::kCache, flxi::ReplicaLog::kGroupCursors,
                   flxi::ReplicaLog::kGroupDeadLetters, flxi::ReplicaLog::kCounters}) {
    FenceAnswer a =
        AnswerFence(store_.get(), false, FenceAt(2, log), FollowerRole::kFollower, "n2");
    EXPECT_EQ(Code(a), flxi::ErrorCode::kMalformed) << flxi::ReplicaLogName(log);
  }
  EXPECT_EQ(Code(AnswerFence(store_.get(), true, FenceAt(2, flxi::ReplicaLog::kStream),
                             FollowerRole::kFollower, "n2")),
            flxi::ErrorCode::kMalformed);
  EXPECT_EQ(store_->replica_state().generation, Generation(1));
}

TEST_F(FenceAnswerTest, CacheShardFencesItsCacheLogThenItsCounterLog) {
  Append(LogKind::kCache, "put", 1);
  Append(LogKind::kCounters, "add", 1);
  Append(LogKind::kCounters, "add", 1);
  auto cache = AnswerFence(store_.get(), true, FenceAt(2, flxi::ReplicaLog::kCache),
                           FollowerRole::kFollower, "n2");
  EXPECT_EQ(Ok(cache), (flxi::FenceOk{0, 1, 0, 1}));
  auto counters = AnswerFence(store_.get(), true, FenceAt(2, flxi::ReplicaLog::kCounters),
                              FollowerRole::kFollower, "n2");
  EXPECT_STREQ(counters.outcome, "confirmed");
  EXPECT_EQ(Ok(counters), (flxi::FenceOk{0, 2, 0, 1}));
  // A counter fence older than the generation the cache log accepted.
  EXPECT_EQ(Code(AnswerFence(store_.get(), true, FenceAt(1, flxi::ReplicaLog::kCounters),
                             FollowerRole::kFollower, "n1")),
            flxi::ErrorCode::kFencedEpoch);
}

TEST_F(FenceAnswerTest, EmptyLogAnswersEndZeroGenerationZero) {
  EXPECT_EQ(Ok(Fence(1, "n1")), (flxi::FenceOk{0, 0, 0, 0}));
}

// --- ReplicateFetch --------------------------------------------------------------------------

class FetchAnswerTest : public FenceAnswerTest {
 protected:
  // Generation 1 wrote a, b; generation 2 wrote c; fenced at 3 by n3.
  void Prepare() {
    ASSERT_TRUE(store_->AcceptGeneration(Generation(1), "old", Offset(0)).has_value());
    Append(LogKind::kStream, "a", 1);
    Append(LogKind::kStream, "b", 1);
    Append(LogKind::kStream, "c", 2);
    ASSERT_TRUE(Fence(3, "n3").ok());
  }
  FetchAnswer Fetch(uint64_t g, std::string_view sender, uint64_t from,
                    flxi::Kind kind = flxi::Kind::kReplicateLabelledFetch,
                    uint32_t max_bytes = 1 << 20) {
    return AnswerFetch(store_.get(), false, FetchAt(g, from, max_bytes), kind,
                       FollowerRole::kFollower, sender);
  }
  static flxi::Records RecordsOf(const flxi::Frame& f) {
    auto* r = std::get_if<flxi::Records>(&f.body);
    EXPECT_NE(r, nullptr) << flxi::KindName(f.kind);
    return r ? *r : flxi::Records{};
  }
  static flxi::ErrorCode CodeOf(const FetchAnswer& a) {
    flxi::Frame f = RoundTrip(a.ToFrame(1));
    auto* e = std::get_if<flxi::ReplicateError>(&f.body);
    EXPECT_NE(e, nullptr);
    return e ? e->code : flxi::ErrorCode::kMalformed;
  }
};

TEST_F(FetchAnswerTest, LabelledFetchCarriesTheRecordsOwnGenerations) {
  Prepare();
  FetchAnswer a = Fetch(3, "n3", 0);
  ASSERT_TRUE(a.ok) << a.detail;
  flxi::Frame f = RoundTrip(a.ToFrame(5));
  EXPECT_EQ(f.kind, flxi::Kind::kReplicateLabelledRecords);
  flxi::Records r = RecordsOf(f);
  EXPECT_EQ(r.correlation_id, 5u);
  EXPECT_EQ(r.first_offset, 0u);
  ASSERT_EQ(r.payloads.size(), 3u);
  EXPECT_EQ(r.payloads[2], "c");
  EXPECT_FALSE(r.commit_offset.has_value());
  EXPECT_EQ(r.generations, (std::vector<flxi::GenerationStart>{{1, 0}, {2, 2}}));
  EXPECT_EQ(r.checksum, flxi::BatchChecksum(r.payloads, r.marks));
  EXPECT_EQ(r.shard.generation, 3u);
}

TEST_F(FetchAnswerTest, PlainAndTimedKinds) {
  Prepare();
  flxi::Frame plain = RoundTrip(Fetch(3, "n3", 1, flxi::Kind::kReplicateFetch).ToFrame(1));
  EXPECT_EQ(plain.kind, flxi::Kind::kReplicateRecords);
  EXPECT_EQ(RecordsOf(plain).first_offset, 1u);
  EXPECT_EQ(RecordsOf(plain).payloads.size(), 2u);
  flxi::Frame timed = RoundTrip(Fetch(3, "n3", 1, flxi::Kind::kReplicateTimedFetch).ToFrame(1));
  EXPECT_EQ(timed.kind, flxi::Kind::kReplicateTimedRecords);
  EXPECT_EQ(RecordsOf(timed).times, (std::vector<uint64_t>{1000000, 1000000}));
  EXPECT_EQ(RecordsOf(timed).generations, (std::vector<flxi::GenerationStart>{{1, 1}, {2, 2}}));
}

TEST_F(FetchAnswerTest, OnlyTheFencedLeaderAtExactlyTheAcceptedGeneration) {
  Prepare();
  EXPECT_EQ(CodeOf(Fetch(2, "n2", 0)), flxi::ErrorCode::kFencedEpoch);
  EXPECT_EQ(CodeOf(Fetch(4, "n4", 0)), flxi::ErrorCode::kStaleRoute);
  EXPECT_EQ(CodeOf(Fetch(3, "n9", 0)), flxi::ErrorCode::kFencedEpoch);
  Reopen();
  EXPECT_EQ(CodeOf(Fetch(3, "n9", 0)), flxi::ErrorCode::kFencedEpoch);
  EXPECT_TRUE(Fetch(3, "n3", 0).ok);
  EXPECT_EQ(CodeOf(AnswerFetch(store_.get(), false, FetchAt(3, 0), flxi::Kind::kReplicateFetch,
                               FollowerRole::kNotReplica, "n3")),
            flxi::ErrorCode::kUnauthorized);
  EXPECT_EQ(CodeOf(AnswerFetch(store_.get(), false, FetchAt(3, 0), flxi::Kind::kReplicateFetch,
                               FollowerRole::kViewNewer, "n3")),
            flxi::ErrorCode::kFencedEpoch);
}

TEST_F(FetchAnswerTest, BoundedByBytesAndNeverPastTheEnd) {
  Prepare();
  FetchAnswer one = Fetch(3, "n3", 0, flxi::Kind::kReplicateLabelledFetch, 1);
  ASSERT_TRUE(one.ok);
  EXPECT_EQ(one.records.size(), 1u);
  FetchAnswer end = Fetch(3, "n3", 3);
  ASSERT_TRUE(end.ok);
  EXPECT_TRUE(end.records.empty());
  EXPECT_EQ(RecordsOf(RoundTrip(end.ToFrame(1))).first_offset, 3u);
  EXPECT_TRUE(Fetch(3, "n3", 10).records.empty());
}

TEST_F(FetchAnswerTest, BelowTheBaseIsALogGapToTheBase) {
  store_.reset();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  Open(/*base=*/Offset(5));
  Append(LogKind::kStream, "x", 1);
  ASSERT_TRUE(Fence(3, "n3").ok());
  FetchAnswer a = Fetch(3, "n3", 2);
  EXPECT_EQ(CodeOf(a), flxi::ErrorCode::kLogGap);
  EXPECT_EQ(a.expected_offset, Offset(5));
}

}  // namespace
}  // namespace felix::cluster
