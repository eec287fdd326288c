// PromotionFence (replication.md §10 leader side) on a real leader ShardStore against a scripted
// ReplicaTransport whose replicas answer with the real replica side (AnswerFence, AnswerFetch)
// on real ShardStores in temp dirs. The test chooses which replica answers, fails or stays
// silent; waits are for events (sends, on_open) with deadlines, never sleeps.
#include "cluster/promotion_fence.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>

#include "broker/shard_storage.h"
#include "cluster/fence_answer.h"
#include "storage/record_format.h"
#include "support/child_process.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;
using namespace std::chrono_literals;
using storage::LogKind;

TEST(FenceRetryDelayTest, TwoHundredMillisecondsDoublingToTwoSeconds) {
  const auto base = 200ms, max = 2000ms;
  EXPECT_EQ(FenceRetryDelay(1, base, max), 200ms);
  EXPECT_EQ(FenceRetryDelay(2, base, max), 400ms);
  EXPECT_EQ(FenceRetryDelay(3, base, max), 800ms);
  EXPECT_EQ(FenceRetryDelay(4, base, max), 1600ms);
  EXPECT_EQ(FenceRetryDelay(5, base, max), 2000ms);
  EXPECT_EQ(FenceRetryDelay(1000, base, max), 2000ms);
}

enum class Mode { kAnswer, kSilent, kFail };

struct Replica {
  std::unique_ptr<storage::ShardStore> store;
  std::atomic<Mode> mode{Mode::kAnswer};
  bool knows_labelled_fetch = true;  // false: an older replica that knows only kind 31
};

// Answers on the caller's thread (the fence's executor) with the real replica side.
class ScriptedTransport final : public ReplicaTransport {
 public:
  std::map<std::string, Replica*> replicas;
  bool cache_shard = false;  // the replicas hold a cache shard (cache and counter logs)

  Result<void> Send(const PeerAddress& peer, const flxi::Frame& request,
                    PeerCallback done) override {
    auto bytes = flxi::EncodeFrame(request);
    EXPECT_TRUE(bytes.has_value());
    auto frame = flxi::DecodeFrame(*bytes);
    EXPECT_TRUE(frame.has_value());
    Replica& r = *replicas.at(peer.node_id);
    {
      std::lock_guard<std::mutex> lock(mu_);
      sent_.push_back({peer.node_id, frame->kind});
      if (auto* fence = std::get_if<flxi::Fence>(&frame->body)) fenced_logs_.push_back(fence->log);
    }
    cv_.notify_all();
    switch (r.mode.load()) {
      case Mode::kSilent: {
        std::lock_guard<std::mutex> lock(mu_);
        held_.push_back(std::move(done));
        return {};
      }
      case Mode::kFail:
        done(tl::unexpected(PeerError{PeerErrorKind::kDisconnected, true, "down"}));
        return {};
      case Mode::kAnswer:
        break;
    }
    std::vector<uint8_t> answer;
    const bool unknown =
        !r.knows_labelled_fetch && (frame->kind == flxi::Kind::kReplicateLabelledFetch ||
                                    frame->kind == flxi::Kind::kReplicateTimedFetch);
    if (unknown) {
      answer = flxi::EncodeUnsupportedKindAnswer(
          uint16_t(frame->kind), std::span<const uint8_t>(*bytes).subspan(flxi::kHeaderBytes));
    } else if (auto* fence = std::get_if<flxi::Fence>(&frame->body)) {
      FenceAnswer a =
          AnswerFence(r.store.get(), cache_shard, *fence, FollowerRole::kViewOlder, "leader");
      answer = *flxi::EncodeFrame(a.ToFrame(fence->correlation_id));
    } else if (auto* fetch = std::get_if<flxi::Fetch>(&frame->body)) {
      FetchAnswer a = AnswerFetch(r.store.get(), cache_shard, *fetch, frame->kind,
                                  FollowerRole::kViewOlder, "leader");
      answer = *flxi::EncodeFrame(a.ToFrame(fetch->correlation_id));
    } else {
      ADD_FAILURE() << "unexpected " << flxi::KindName(frame->kind);
    }
    PeerResponse resp;
    auto env = flxi::DecodeEnvelope(answer);
    resp.kind = env->kind;
    resp.body.assign(answer.begin() + flxi::kHeaderBytes, answer.end());
    done(std::move(resp));
    return {};
  }

  // Waits until `n` frames were sent (deadline 10 s).
  bool WaitForSends(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return sent_.size() >= n; });
  }
  std::vector<std::pair<std::string, flxi::Kind>> sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }
  std::vector<flxi::ReplicaLog> fenced_logs() {
    std::lock_guard<std::mutex> lock(mu_);
    return fenced_logs_;
  }
  std::vector<PeerCallback> TakeHeld() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(held_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, flxi::Kind>> sent_;
  std::vector<flxi::ReplicaLog> fenced_logs_;
  std::vector<PeerCallback> held_;
};

class PromotionFenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("promotion-fence");
    leader_ = OpenStore("leader");
    for (const char* name : {"r1", "r2"}) {
      replicas_[name].store = OpenStore(name);
      transport_.replicas[name] = &replicas_[name];
    }
  }
  void TearDown() override {
    if (fence_) fence_->Stop();
    fence_.reset();
    executor_.Stop();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<storage::ShardStore> OpenStore(
      const std::string& name, std::shared_ptr<storage::FaultInjector> faults = nullptr) {
    storage::LogOptions o;
    o.fsync_mode = storage::FsyncMode::kOnCommit;
    o.faults = std::move(faults);
    auto s = storage::ShardStore::Open(dir_ + "/" + name, storage::ShardStoreOptions::Uniform(o));
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    return std::move(*s);
  }
  static void Write(storage::ShardStore& store, std::vector<std::pair<std::string, uint64_t>> recs,
                    LogKind log = LogKind::kStream) {
    for (auto& [payload, g] : recs) {
      if (store.replica_state().generation < Generation(g)) {
        ASSERT_TRUE(store.AcceptGeneration(Generation(g), "old" + std::to_string(g),
                                           store.log(log).TailOffset()));
      }
      storage::AppendRecord r{storage::AsBytes(payload), Generation(g), 0};
      ASSERT_TRUE(store.log(log).Append(r).has_value());
    }
  }
  static std::vector<std::pair<std::string, uint64_t>> Contents(storage::ShardStore& store,
                                                                LogKind kind = LogKind::kStream) {
    std::vector<std::pair<std::string, uint64_t>> out;
    auto& log = store.log(kind);
    auto batch = log.Read(log.BaseOffset(), storage::ReadLimits{1000, 1 << 20});
    if (!batch) return out;
    for (auto& r : batch->records) {
      // A generation-start record shows as "<start G>" (G from its payload).
      if (storage::IsGenerationStart(r.flags)) {
        auto g = storage::GenerationStartOf(storage::AsBytes(r.payload));
        out.emplace_back("<start " + (g ? std::to_string(*g) : "?") + ">", r.generation.value());
      } else {
        out.emplace_back(r.payload, r.generation.value());
      }
    }
    return out;
  }

  void StartFence(uint64_t generation, PromotionFenceOptions tweak = {}) {
    PromotionFenceOptions o = tweak;
    o.tenant = "t";
    o.ns = "n";
    o.name = "s";
    o.generation = Generation(generation);
    o.self_node_id = "leader";
    if (o.replicas.empty()) o.replicas = {{"r1", {}}, {"r2", {}}};
    fence_ = std::make_unique<PromotionFence>(*leader_, o, transport_, executor_,
                                              [p = opened_](Offset start) { p->set_value(start); });
    fence_->Start();
  }
  // The start offset on_open was called with, or nullopt after 10 s.
  std::optional<Offset> WaitOpen() {
    auto f = opened_->get_future();
    if (f.wait_for(10s) != std::future_status::ready) return std::nullopt;
    return f.get();
  }

  // A cache shard whose cache log holds "a" (generation 1) on the leader and r1, fenced at
  // `generation` with r2 down; returns where it opened (the fence is stopped).
  std::optional<Offset> FenceCacheShardWithR2Down(uint64_t generation) {
    transport_.cache_shard = true;
    Write(*leader_, {{"a", 1}}, LogKind::kCache);
    Write(*replicas_["r1"].store, {{"a", 1}}, LogKind::kCache);
    replicas_["r2"].mode = Mode::kFail;
    PromotionFenceOptions o;
    o.cache_shard = true;
    StartFence(generation, o);
    auto opened = WaitOpen();
    fence_->Stop();
    return opened;
  }

  std::string dir_;
  std::unique_ptr<storage::ShardStore> leader_;
  std::map<std::string, Replica> replicas_;
  ScriptedTransport transport_;
  broker::Executor executor_{"fence-test"};
  std::shared_ptr<std::promise<Offset>> opened_ = std::make_shared<std::promise<Offset>>();
  std::unique_ptr<PromotionFence> fence_;
};

TEST_F(PromotionFenceTest, MajorityWithOneReplicaSilentOpensAtTheOwnTail) {
  Write(*leader_, {{"a", 1}, {"b", 1}});
  Write(*replicas_["r1"].store, {{"a", 1}, {"b", 1}});
  replicas_["r2"].mode = Mode::kSilent;
  StartFence(2);
  EXPECT_EQ(WaitOpen(), Offset(2));
  fence_->Stop();
  EXPECT_TRUE(fence_->opened());
  // Own generation and ballot, and the fenced replica's, are durable.
  EXPECT_EQ(leader_->replica_state().generation, Generation(2));
  EXPECT_EQ(leader_->ballot()->leader, "leader");
  EXPECT_EQ(replicas_["r1"].store->replica_state().generation, Generation(2));
  EXPECT_EQ(replicas_["r1"].store->ballot()->leader, "leader");
  EXPECT_EQ(leader_->generation_history().entries().back(),
            (storage::EpochEntry{Generation(2), Offset(2)}));
  // No fetch: nobody was ahead.
  for (auto& [node, kind] : transport_.sent()) EXPECT_EQ(kind, flxi::Kind::kFence) << node;
  // The silent replica's late answer after Stop reaches nothing.
  for (auto& cb : transport_.TakeHeld()) cb(tl::unexpected(PeerError{PeerErrorKind::kStopped}));
}

TEST_F(PromotionFenceTest, ReplicaAheadIsFetchedAndAppendedWithItsGenerations) {
  Write(*leader_, {{"a", 1}, {"b", 1}});
  Write(*replicas_["r1"].store, {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 2}, {"e", 2}});
  replicas_["r2"].mode = Mode::kFail;
  PromotionFenceOptions o;
  o.fetch_max_bytes = 1;  // one record per fetch: the fetch loop runs several rounds
  StartFence(3, o);
  EXPECT_EQ(WaitOpen(), Offset(5));
  fence_->Stop();
  using C = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(Contents(*leader_),
            (C{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 2}, {"e", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(fence_->truncated(), 0u);
  EXPECT_EQ(
      leader_->generation_history().entries(),
      (std::vector<storage::EpochEntry>{
          {Generation(1), Offset(0)}, {Generation(2), Offset(3)}, {Generation(3), Offset(5)}}));
  size_t fetches = 0;
  for (auto& [node, kind] : transport_.sent()) {
    if (kind == flxi::Kind::kReplicateTimedFetch) {
      EXPECT_EQ(node, "r1");
      ++fetches;
    }
  }
  EXPECT_EQ(fetches, 5u);  // from offset 0 (no commit, own last generation began at 0)
}

// Step 6: a cache shard's counter log is fenced and taken like its cache log. A majority
// (leader + r1) acknowledged counter adds the leader lacks; it must take them, and cut a
// counter record of its own that no one in the majority holds past that log's end.
TEST_F(PromotionFenceTest, ACacheShardTakesItsCounterLogToo) {
  transport_.cache_shard = true;
  Write(*leader_, {{"a", 1}}, LogKind::kCache);
  Write(*replicas_["r1"].store, {{"a", 1}, {"b", 2}}, LogKind::kCache);
  Write(*leader_, {{"n1", 1}}, LogKind::kCounters);
  Write(*replicas_["r1"].store, {{"n1", 1}, {"n2", 2}, {"n3", 2}}, LogKind::kCounters);
  replicas_["r2"].mode = Mode::kFail;
  PromotionFenceOptions o;
  o.cache_shard = true;
  StartFence(3, o);
  EXPECT_EQ(WaitOpen(), Offset(2)) << "the leadership begins at the cache log's tail";
  fence_->Stop();
  using C = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(Contents(*leader_, LogKind::kCache), (C{{"a", 1}, {"b", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(Contents(*leader_, LogKind::kCounters),
            (C{{"n1", 1}, {"n2", 2}, {"n3", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(
      transport_.fenced_logs(),
      (std::vector<flxi::ReplicaLog>{flxi::ReplicaLog::kCache, flxi::ReplicaLog::kCache,
                                     flxi::ReplicaLog::kCounters, flxi::ReplicaLog::kCounters}));
  // The history describes the cache log alone.
  EXPECT_EQ(leader_->generation_history().entries().back(),
            (storage::EpochEntry{Generation(3), Offset(2)}));
}

TEST_F(PromotionFenceTest, ACacheLeaderAheadOnCountersCutsWhatTheMajorityLacks) {
  transport_.cache_shard = true;
  Write(*leader_, {{"a", 1}}, LogKind::kCache);
  Write(*replicas_["r1"].store, {{"a", 1}}, LogKind::kCache);
  // The leader's counter record at 1 came from generation 1; r1 holds generation 2's there.
  Write(*leader_, {{"n1", 1}, {"old", 1}}, LogKind::kCounters);
  Write(*replicas_["r1"].store, {{"n1", 1}, {"new", 2}}, LogKind::kCounters);
  replicas_["r2"].mode = Mode::kFail;
  PromotionFenceOptions o;
  o.cache_shard = true;
  StartFence(3, o);
  EXPECT_EQ(WaitOpen(), Offset(1));
  fence_->Stop();
  using C = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(Contents(*leader_, LogKind::kCounters), (C{{"n1", 1}, {"new", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(fence_->truncated(), 1u);
}

// Found by a Quorum fault run (seed 1717): a cache leader that fell behind while paused was
// promoted; its replicas had compacted their counter logs past its tail, and fetching from its
// own base was refused LogGap on every attempt, so the shard never opened. The own log is
// placed at the replica's base and the replica's log taken from there.
TEST_F(PromotionFenceTest, ACounterLogCompactedPastTheOwnTailIsTakenFromItsBase) {
  Write(*leader_, {{"n1", 1}, {"n2", 1}}, LogKind::kCounters);
  ASSERT_TRUE(replicas_["r1"].store->log(LogKind::kCounters).Reset(Offset(4)).has_value());
  Write(*replicas_["r1"].store, {{"checkpoint1", 2}, {"checkpoint2", 2}}, LogKind::kCounters);
  EXPECT_EQ(FenceCacheShardWithR2Down(3), Offset(1));
  using C = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(leader_->log(LogKind::kCounters).BaseOffset(), Offset(4));
  EXPECT_EQ(Contents(*leader_, LogKind::kCounters),
            (C{{"checkpoint1", 2}, {"checkpoint2", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(Contents(*leader_, LogKind::kCache), (C{{"a", 1}, {"<start 3>", 3}}));
  EXPECT_EQ(fence_->truncated(), 2u) << "both own counter records were discarded";
}

// The same on the shard's own log (a stream trimmed by retention on the replica), with the
// generation history following the records taken.
TEST_F(PromotionFenceTest, AStreamLogTrimmedPastTheOwnTailIsTakenFromItsBase) {
  Write(*leader_, {{"a", 1}, {"b", 1}});
  ASSERT_TRUE(replicas_["r1"].store->log(LogKind::kStream).Reset(Offset(5)).has_value());
  Write(*replicas_["r1"].store, {{"f", 2}, {"g", 2}});
  replicas_["r2"].mode = Mode::kFail;
  StartFence(3);
  EXPECT_EQ(WaitOpen(), Offset(7));
  fence_->Stop();
  using C = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(leader_->log(LogKind::kStream).BaseOffset(), Offset(5));
  EXPECT_EQ(Contents(*leader_), (C{{"f", 2}, {"g", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(
      leader_->generation_history().entries(),
      (std::vector<storage::EpochEntry>{{Generation(2), Offset(5)}, {Generation(3), Offset(7)}}));
}

// Records below the own log's commit offset agree: a replica whose log begins among them is
// compared from its base, and nothing committed is discarded.
TEST_F(PromotionFenceTest, AReplicaBaseBelowTheOwnCommitOffsetIsComparedFromThere) {
  Write(*leader_, {{"n0", 1}, {"n1", 1}, {"n2", 1}, {"n3", 1}, {"n4", 1}, {"n5", 1}},
        LogKind::kCounters);
  leader_->log(LogKind::kCounters).SetCommitOffset(Offset(6));
  ASSERT_TRUE(replicas_["r1"].store->log(LogKind::kCounters).Reset(Offset(4)).has_value());
  Write(*replicas_["r1"].store, {{"n4", 1}, {"n5", 1}, {"n6", 2}, {"n7", 2}}, LogKind::kCounters);
  EXPECT_EQ(FenceCacheShardWithR2Down(3), Offset(1));
  using C = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(leader_->log(LogKind::kCounters).BaseOffset(), Offset(0));
  EXPECT_EQ(Contents(*leader_, LogKind::kCounters), (C{{"n0", 1},
                                                       {"n1", 1},
                                                       {"n2", 1},
                                                       {"n3", 1},
                                                       {"n4", 1},
                                                       {"n5", 1},
                                                       {"n6", 2},
                                                       {"n7", 2},
                                                       {"<start 3>", 3}}));
  EXPECT_EQ(fence_->truncated(), 0u);
}

TEST_F(PromotionFenceTest, OlderReplicaIsFetchedWithTheOlderKinds) {
  Write(*leader_, {{"a", 1}});
  Write(*replicas_["r1"].store, {{"a", 1}, {"b", 2}, {"c", 2}});
  replicas_["r1"].knows_labelled_fetch = false;
  replicas_["r2"].mode = Mode::kFail;
  StartFence(3);
  EXPECT_EQ(WaitOpen(), Offset(3));
  fence_->Stop();
  using C = std::vector<std::pair<std::string, uint64_t>>;
  // Unlabelled records are compared by payload (a keeps its own generation) and appended ones
  // take the replica's last generation from its FenceOk.
  EXPECT_EQ(Contents(*leader_), (C{{"a", 1}, {"b", 2}, {"c", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(fence_->truncated(), 0u);
  EXPECT_EQ(
      leader_->generation_history().entries(),
      (std::vector<storage::EpochEntry>{
          {Generation(1), Offset(0)}, {Generation(2), Offset(1)}, {Generation(3), Offset(3)}}));
  std::vector<flxi::Kind> fetches;
  for (auto& [node, kind] : transport_.sent()) {
    if (kind != flxi::Kind::kFence) fetches.push_back(kind);
  }
  EXPECT_EQ(fetches, (std::vector<flxi::Kind>{flxi::Kind::kReplicateTimedFetch,
                                              flxi::Kind::kReplicateLabelledFetch,
                                              flxi::Kind::kReplicateFetch}));
}

TEST_F(PromotionFenceTest, OwnDivergentSuffixIsTruncatedAndReplaced) {
  // The leader holds a generation-2 suffix nobody else took; generation 3 wrote over it.
  Write(*leader_, {{"a", 1}, {"b", 1}, {"x", 2}, {"y", 2}});
  ASSERT_TRUE(leader_->SetCommitOffset(Offset(2)).has_value());
  leader_->log(LogKind::kStream).SetCommitOffset(Offset(2));
  Write(*replicas_["r1"].store, {{"a", 1}, {"b", 1}, {"c", 3}});
  Write(*replicas_["r2"].store, {{"a", 1}, {"b", 1}});
  StartFence(4);
  EXPECT_EQ(WaitOpen(), Offset(3));
  fence_->Stop();
  using C = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(Contents(*leader_), (C{{"a", 1}, {"b", 1}, {"c", 3}, {"<start 4>", 4}}));
  EXPECT_EQ(fence_->truncated(), 2u);
  EXPECT_EQ(
      leader_->generation_history().entries(),
      (std::vector<storage::EpochEntry>{
          {Generation(1), Offset(0)}, {Generation(3), Offset(2)}, {Generation(4), Offset(3)}}));
}

TEST_F(PromotionFenceTest, ReplicaThatAnswersFencedEpochDoesNotCount) {
  Write(*replicas_["r1"].store, {{"a", 5}});  // r1 accepted generation 5
  replicas_["r2"].mode = Mode::kAnswer;
  StartFence(3);
  // Leader + r2 are a majority of 3.
  EXPECT_EQ(WaitOpen(), Offset(0));
  fence_->Stop();
  EXPECT_EQ(replicas_["r1"].store->replica_state().generation, Generation(5));
  EXPECT_EQ(replicas_["r2"].store->replica_state().generation, Generation(3));
  EXPECT_TRUE(Contents(*leader_).empty());  // nothing taken from the refusing replica
}

TEST_F(PromotionFenceTest, NoMajorityRetriesWithBackoffUntilOneIsReachable) {
  Write(*replicas_["r1"].store, {{"a", 5}});  // refuses: FencedEpoch
  replicas_["r2"].mode = Mode::kFail;
  PromotionFenceOptions o;
  o.retry = 1ms;
  o.retry_max = 4ms;
  StartFence(3, o);
  ASSERT_TRUE(transport_.WaitForSends(8));  // four attempts, two fences each
  EXPECT_FALSE(fence_->opened());
  replicas_["r2"].mode = Mode::kAnswer;  // a majority becomes reachable: it never gave up
  EXPECT_EQ(WaitOpen(), Offset(0));
  fence_->Stop();
  EXPECT_GE(fence_->failures(), 3u);
  EXPECT_EQ(fence_->attempts(), fence_->failures() + 1);
  // Bounded: each attempt sent exactly one fence to each replica.
  EXPECT_EQ(transport_.sent().size(), 2u * fence_->attempts());
}

TEST_F(PromotionFenceTest, StopWithFencesInFlightIsClean) {
  replicas_["r1"].mode = Mode::kSilent;
  replicas_["r2"].mode = Mode::kSilent;
  PromotionFenceOptions o;
  o.attempt_timeout = 60s;
  StartFence(2, o);
  ASSERT_TRUE(transport_.WaitForSends(2));
  fence_->Stop();
  EXPECT_FALSE(fence_->opened());
  // Answers after Stop (a real pool fails them with kStopped or delivers late) do nothing.
  auto held = transport_.TakeHeld();
  ASSERT_EQ(held.size(), 2u);
  PeerResponse late;
  late.kind = uint16_t(flxi::Kind::kFenceOk);
  late.body = std::vector<uint8_t>(32, 0);
  held[0](late);
  held[1](tl::unexpected(PeerError{PeerErrorKind::kStopped}));
  fence_.reset();
  EXPECT_EQ(opened_->get_future().wait_for(0s), std::future_status::timeout);
}

TEST_F(PromotionFenceTest, SilentReplicaWithoutMajorityTimesOutAndRetries) {
  replicas_["r1"].mode = Mode::kSilent;
  replicas_["r2"].mode = Mode::kFail;
  PromotionFenceOptions o;
  o.attempt_timeout = 5ms;
  o.retry = 1ms;
  o.retry_max = 1ms;
  StartFence(2, o);
  ASSERT_TRUE(transport_.WaitForSends(4));  // a second attempt started
  fence_->Stop();
  EXPECT_FALSE(fence_->opened());
  EXPECT_GE(fence_->failures(), 1u);
}

TEST_F(PromotionFenceTest, ALeaderWithoutReplicasOpensAtOnce) {
  Write(*leader_, {{"a", 1}});
  PromotionFenceOptions alone;
  alone.generation = Generation(2);
  alone.self_node_id = "leader";
  fence_ = std::make_unique<PromotionFence>(*leader_, alone, transport_, executor_,
                                            [p = opened_](Offset s) { p->set_value(s); });
  fence_->Start();
  EXPECT_EQ(WaitOpen(), Offset(1));
  EXPECT_TRUE(transport_.sent().empty());
}

// --- generation-start record (replication.md §17) ----------------------------------------------

using C = std::vector<std::pair<std::string, uint64_t>>;

// The first record of the new generation is written at the own tail, flagged, durable, before
// on_open: the leadership begins at its offset, where the mark's own-generation rule counts.
TEST_F(PromotionFenceTest, AGenerationStartRecordIsWrittenAtTheOwnTailBeforeTheShardOpens) {
  Write(*leader_, {{"a", 1}, {"b", 1}});
  Write(*replicas_["r1"].store, {{"a", 1}, {"b", 1}});
  replicas_["r2"].mode = Mode::kFail;
  StartFence(2);
  EXPECT_EQ(WaitOpen(), Offset(2));
  fence_->Stop();
  EXPECT_EQ(fence_->start_records_written(), 1u);
  EXPECT_EQ(Contents(*leader_), (C{{"a", 1}, {"b", 1}, {"<start 2>", 2}}));
  EXPECT_EQ(leader_->generation_history().entries().back(),
            (storage::EpochEntry{Generation(2), Offset(2)}));
  EXPECT_EQ(leader_->log(LogKind::kStream).DurableOffset(), Offset(3)) << "fsynced before opening";
}

// None over an empty log (nothing inherited to fence off), and none when the generation
// already holds records (the same leader reopening at its generation).
TEST_F(PromotionFenceTest, NoGenerationStartRecordOverAnEmptyLogOrAtAGenerationWithRecords) {
  StartFence(2);
  EXPECT_EQ(WaitOpen(), Offset(0));
  fence_->Stop();
  EXPECT_EQ(fence_->start_records_written(), 0u);
  EXPECT_TRUE(Contents(*leader_).empty());

  Write(*leader_, {{"a", 2}});
  opened_ = std::make_shared<std::promise<Offset>>();
  StartFence(2);
  EXPECT_EQ(WaitOpen(), Offset(1));
  fence_->Stop();
  EXPECT_EQ(fence_->start_records_written(), 0u);
  EXPECT_EQ(Contents(*leader_), (C{{"a", 2}}));
}

// A generation-start record the disk refuses (ENOSPC) counts in felix_storage_full_total of
// its log, as a refused append does, and the shard does not open; once writes succeed again an
// attempt writes it and the shard opens after it.
TEST_F(PromotionFenceTest,
       AGenerationStartRecordRefusedForSpaceIsCountedAndWrittenOnceThereIsSpace) {
  auto faults = std::make_shared<storage::FaultInjector>();
  leader_ = OpenStore("leader-full", faults);
  Write(*leader_, {{"a", 1}});
  Write(*replicas_["r1"].store, {{"a", 1}});
  replicas_["r2"].mode = Mode::kFail;
  MetricsRegistry metrics;
  PromotionFenceOptions o;
  o.retry = 5ms;
  o.retry_max = 10ms;
  o.own_log_full = &broker::ShardStorage::FullCounter(metrics, "stream");
  o.counter_log_full = &broker::ShardStorage::FullCounter(metrics, "counters");
  faults->FailWrites(1 << 30, ENOSPC);
  StartFence(2, o);
  // An attempt sends at most three frames (a fence to each replica, a fetch): the fourth is a
  // later attempt's, started after the one before it failed writing the record.
  ASSERT_TRUE(transport_.WaitForSends(4));
  EXPECT_GE(o.own_log_full->Value(), 1u);
  EXPECT_EQ(o.counter_log_full->Value(), 0u);
  EXPECT_NE(metrics.RenderPrometheus().find("felix_storage_full_total{log=\"stream\"}"),
            std::string::npos);
  EXPECT_EQ(fence_->start_records_written(), 0u);
  faults->FailWrites(0, 0);
  EXPECT_EQ(WaitOpen(), Offset(1));
  fence_->Stop();
  EXPECT_EQ(fence_->start_records_written(), 1u);
  EXPECT_EQ(Contents(*leader_), (C{{"a", 1}, {"<start 2>", 2}}));
}

// A start record a replica holds is fetched as one (FLXI mark 3) and stored with the flag; the
// next generation's start record follows it.
TEST_F(PromotionFenceTest, AReplicasGenerationStartRecordIsFetchedAsOne) {
  Write(*leader_, {{"a", 1}});
  Write(*replicas_["r1"].store, {{"a", 1}});
  {
    auto payload = storage::GenerationStartPayload(2);
    ASSERT_TRUE(replicas_["r1"].store->AcceptGeneration(Generation(2), "old2", Offset(1)));
    storage::AppendRecord start{payload, Generation(2), 0, storage::kRecordFlagGenerationStart};
    ASSERT_TRUE(replicas_["r1"].store->log(LogKind::kStream).Append(start).has_value());
  }
  Write(*replicas_["r1"].store, {{"c", 2}});
  replicas_["r2"].mode = Mode::kFail;
  StartFence(3);
  EXPECT_EQ(WaitOpen(), Offset(3));
  fence_->Stop();
  EXPECT_EQ(Contents(*leader_), (C{{"a", 1}, {"<start 2>", 2}, {"c", 2}, {"<start 3>", 3}}));
  EXPECT_EQ(
      leader_->generation_history().entries(),
      (std::vector<storage::EpochEntry>{
          {Generation(1), Offset(0)}, {Generation(2), Offset(1)}, {Generation(3), Offset(3)}}));
}

// A cache shard writes one on each of its two logs (§17), the counter log's once that log is
// fenced too.
TEST_F(PromotionFenceTest, ACacheShardWritesAStartRecordOnItsCacheAndCounterLogs) {
  transport_.cache_shard = true;
  Write(*leader_, {{"a", 1}}, LogKind::kCache);
  Write(*replicas_["r1"].store, {{"a", 1}}, LogKind::kCache);
  Write(*leader_, {{"n1", 1}}, LogKind::kCounters);
  Write(*replicas_["r1"].store, {{"n1", 1}}, LogKind::kCounters);
  replicas_["r2"].mode = Mode::kFail;
  PromotionFenceOptions o;
  o.cache_shard = true;
  StartFence(2, o);
  EXPECT_EQ(WaitOpen(), Offset(1));
  fence_->Stop();
  EXPECT_EQ(Contents(*leader_, LogKind::kCache), (C{{"a", 1}, {"<start 2>", 2}}));
  EXPECT_EQ(Contents(*leader_, LogKind::kCounters), (C{{"n1", 1}, {"<start 2>", 2}}));
  EXPECT_EQ(fence_->start_records_written(), 2u);
}

}  // namespace
}  // namespace felix::cluster
