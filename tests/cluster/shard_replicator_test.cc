// ShardReplicator on real leader logs (a ShardStore in a temp dir) against a scripted
// in-process ReplicaTransport: every answer (or its loss, delay, reordering, transport failure)
// is chosen by the test. Plus the pure mark and backoff tables.
#include "cluster/shard_replicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include "cluster/quorum_mark.h"
#include "cluster/rebuild_policy.h"
#include "storage/record_format.h"
#include "support/child_process.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;
using namespace std::chrono_literals;
using storage::LogKind;

// --- the pure mark table ------------------------------------------------------------------------

FollowerPosition At(Offset confirmed) {
  return {confirmed, true, false};
}
FollowerPosition Unanswered(Offset guess) {
  return {guess, false, false};
}
FollowerPosition Halted(Offset confirmed) {
  return {confirmed, true, true};
}

Offset Mark(Offset tail, size_t replicas, std::vector<FollowerPosition> f,
            bool leader_counts = true, std::optional<Offset> own_start = std::nullopt) {
  MarkInputs in;
  in.leader_tail = tail;
  in.replicas = replicas;
  in.leader_counts = leader_counts;
  in.own_start = own_start;
  return QuorumMark(in, f);
}

TEST(QuorumMarkTest, MajorityOfTheReplicaSetLeaderIncluded) {
  EXPECT_EQ(Majority(1), 1u);
  EXPECT_EQ(Majority(3), 2u);
  EXPECT_EQ(Majority(4), 3u);
  EXPECT_EQ(Majority(5), 3u);
}

TEST(QuorumMarkTest, Table) {
  // RF 1: the leader alone.
  EXPECT_EQ(Mark(Offset(10), 1, {}), Offset(10));
  // RF 3: leader + the better follower.
  EXPECT_EQ(Mark(Offset(10), 3, {At(Offset(7)), At(Offset(4))}), Offset(7));
  EXPECT_EQ(Mark(Offset(10), 3, {At(Offset(10)), At(Offset(0))}), Offset(10));
  // A follower never counts past the leader's tail.
  EXPECT_EQ(Mark(Offset(10), 3, {At(Offset(50)), At(Offset(0))}), Offset(10));
  // RF 3, nobody answered: the leader alone is no majority; a starting guess never counts.
  EXPECT_EQ(Mark(Offset(10), 3, {Unanswered(Offset(9)), Unanswered(Offset(9))}), Offset(0));
  EXPECT_EQ(Mark(Offset(10), 3, {Unanswered(Offset(9)), At(Offset(3))}), Offset(3));
  // Halted followers count for nothing.
  EXPECT_EQ(Mark(Offset(10), 3, {Halted(Offset(10)), At(Offset(2))}), Offset(2));
  EXPECT_EQ(Mark(Offset(10), 3, {Halted(Offset(10)), Halted(Offset(10))}), Offset(0));
  // RF 4: majority 3 (leader + two followers).
  EXPECT_EQ(Mark(Offset(10), 4, {At(Offset(8)), At(Offset(6)), At(Offset(1))}), Offset(6));
  EXPECT_EQ(Mark(Offset(10), 4, {At(Offset(8)), Unanswered(Offset(9)), Halted(Offset(9))}),
            Offset(0));
  // RF 5: majority 3.
  EXPECT_EQ(
      Mark(Offset(10), 5, {At(Offset(9)), At(Offset(5)), At(Offset(2)), Unanswered(Offset(9))}),
      Offset(5));
  EXPECT_EQ(Mark(Offset(10), 5,
                 {At(Offset(9)), Halted(Offset(9)), Halted(Offset(9)), Unanswered(Offset(9))}),
            Offset(0));
  // A leader whose log accepted a newer generation counts nothing.
  EXPECT_EQ(Mark(Offset(10), 3, {At(Offset(8)), At(Offset(6))}, /*leader_counts=*/false),
            Offset(6));
  EXPECT_EQ(Mark(Offset(10), 1, {}, /*leader_counts=*/false), Offset(0));
  // §8.3: a majority not past the leader's own generation start counts 0.
  EXPECT_EQ(Mark(Offset(10), 3, {At(Offset(5)), At(Offset(0))}, true, /*own_start=*/Offset(5)),
            Offset(0));
  EXPECT_EQ(Mark(Offset(10), 3, {At(Offset(6)), At(Offset(0))}, true, /*own_start=*/Offset(5)),
            Offset(6));
}

TEST(RebuildBackoffTest, FiveSecondsDoublingToFiveMinutes) {
  const auto base = 5000ms, max = 300000ms;
  EXPECT_EQ(RebuildBackoff(0, base, max), 0ms);
  EXPECT_EQ(RebuildBackoff(1, base, max), 5000ms);
  EXPECT_EQ(RebuildBackoff(2, base, max), 10000ms);
  EXPECT_EQ(RebuildBackoff(3, base, max), 20000ms);
  EXPECT_EQ(RebuildBackoff(6, base, max), 160000ms);
  EXPECT_EQ(RebuildBackoff(7, base, max), 300000ms);
  EXPECT_EQ(RebuildBackoff(1000, base, max), 300000ms);
}

// --- the scripted transport ---------------------------------------------------------------------

struct SentFrame {
  std::string node;
  std::vector<uint8_t> bytes;  // the encoded frame as the pool would send it
  PeerCallback done;

  flxi::Frame frame() const {
    auto f = flxi::DecodeFrame(bytes);
    EXPECT_TRUE(f.has_value());
    return f ? *f : flxi::Frame{};
  }
  flxi::Kind kind() const { return frame().kind; }
  flxi::Records records() const {
    flxi::Frame f = frame();
    auto* r = std::get_if<flxi::Records>(&f.body);
    EXPECT_NE(r, nullptr) << flxi::KindName(f.kind);
    return r ? *r : flxi::Records{};
  }
  uint64_t first() const { return records().first_offset; }
  uint64_t end() const {
    auto r = records();
    return r.first_offset + r.payloads.size();
  }
};
using SentPtr = std::shared_ptr<SentFrame>;

Result<PeerResponse, PeerError> Answer(const flxi::Frame& f, std::optional<uint64_t> caps) {
  auto enc = flxi::EncodeFrame(f);
  EXPECT_TRUE(enc.has_value());
  PeerResponse r;
  r.kind = uint16_t(f.kind);
  r.body.assign(enc->begin() + 12, enc->end());
  r.peer_capabilities = caps;
  return r;
}
Result<PeerResponse, PeerError> OkAnswer(uint64_t durable, std::optional<uint64_t> caps = {}) {
  return Answer({flxi::Kind::kReplicateOk, flxi::ReplicateOk{0, durable}}, caps);
}
Result<PeerResponse, PeerError> ErrAnswer(flxi::ErrorCode code, uint64_t expected = 0) {
  return Answer({flxi::Kind::kReplicateError, flxi::ReplicateError{0, code, expected, "scripted"}},
                std::nullopt);
}
Result<PeerResponse, PeerError> TransportFailure(PeerErrorKind kind) {
  return tl::unexpected(PeerError{kind, false, "scripted"});
}

class ScriptedTransport final : public ReplicaTransport {
 public:
  Result<void> Send(const PeerAddress& peer, const flxi::Frame& request,
                    PeerCallback done) override {
    auto bytes = flxi::EncodeFrame(request);
    if (!bytes) return tl::unexpected(bytes.error());
    std::unique_lock<std::mutex> lock(mu_);
    total_++;
    if (refuse_) return Fail(ErrorCode::kUnavailable, "scripted: cannot send");
    auto sent = std::make_shared<SentFrame>(SentFrame{peer.node_id, std::move(*bytes), done});
    if (fail_all_) {
      lock.unlock();
      done(TransportFailure(PeerErrorKind::kConnectFailed));
      return Ok();
    }
    queue_.push_back(sent);
    cv_.notify_all();
    return Ok();
  }

  // The next frame sent to `node` (any node when empty), in send order; nullptr on timeout.
  SentPtr Next(const std::string& node = {}, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lock(mu_);
    SentPtr out;
    cv_.wait_for(lock, timeout, [&] {
      for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (node.empty() || (*it)->node == node) {
          out = *it;
          queue_.erase(it);
          return true;
        }
      }
      return false;
    });
    return out;
  }
  size_t Unread(const std::string& node = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (auto& s : queue_) n += node.empty() || s->node == node;
    return n;
  }
  size_t total() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  void set_refuse(bool v) {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_ = v;
  }
  void set_fail_all(bool v) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_all_ = v;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<SentPtr> queue_;
  size_t total_ = 0;
  bool refuse_ = false;
  bool fail_all_ = false;
};

// --- fixture ------------------------------------------------------------------------------------

class ShardReplicatorTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = felix::testing::MakeTempDir("shard-replicator"); }
  void TearDown() override {
#if FELIX_FAULT_INJECTION
    faults_->HoldSyncs(false);  // a failed test must not leave a flush blocked
#endif
    rep_.reset();
    ex_.Stop();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  void OpenStore(Offset initial_base = Offset(0),
                 storage::FsyncMode fsync_mode = storage::FsyncMode::kNone,
                 uint64_t segment_bytes = 0, uint64_t retention_bytes = 0) {
    storage::LogOptions lo;
    lo.fsync_mode = fsync_mode;
    lo.initial_base_offset = initial_base;
    if (segment_bytes != 0) lo.segment_bytes = segment_bytes;
    lo.retention_bytes = retention_bytes;
#if FELIX_FAULT_INJECTION
    lo.faults = faults_;
#endif
    auto s = storage::ShardStore::Open(dir_, storage::ShardStoreOptions::Uniform(lo));
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    store_ = std::move(*s);
  }

  // A fresh store whose `log` holds offsets 0..11 in six sealed-or-active segments of two
  // records (4 KiB segments, 1,500-byte payloads): what retention and compaction cut whole.
  void OpenTwelveInSixSegments(LogKind log, uint64_t retention_bytes) {
    OpenStore(Offset(0), storage::FsyncMode::kNone, /*segment_bytes=*/4096, retention_bytes);
    const std::string payload(1500, 'p');
    for (int i = 0; i < 12; ++i) {
      const storage::AppendRecord record{storage::AsBytes(payload), Generation(1),
                                         1700000000000ull + i};
      ASSERT_TRUE(store_->log(log).Append({&record, 1}).has_value());
    }
  }

  // With such a log: `cut` (a retention pass, or a compaction's drop, run on the executor)
  // removes nothing at mark 0; once the follower confirmed `first` — a batch held to a few
  // records (max_batch_records), so it confirms fewer than 12 — only the segments wholly below
  // the new mark go. Returns what the follower confirmed.
  uint64_t ExpectCutsStopAtTheMark(LogKind log, const SentPtr& first,
                                   const std::function<Offset()>& cut) {
    EXPECT_EQ(cut(), Offset(0));
    const uint64_t confirmed = first->end();
    EXPECT_GT(confirmed, 0u);
    EXPECT_LT(confirmed, 12u);
    Deliver(first, OkAnswer(confirmed));
    EXPECT_TRUE(WaitMark(log, Offset(confirmed)));
    const Offset base = cut();
    EXPECT_GT(base, Offset(0));
    EXPECT_LE(base, Offset(confirmed));
    return confirmed;
  }

  // One write, so a tail watcher sees the whole batch at once.
  void Append(LogKind log, int n, uint64_t generation = 1) {
    std::vector<std::string> payloads;
    for (int i = 0; i < n; ++i) {
      payloads.push_back(std::string(storage::LogKindName(log)) + "-" + std::to_string(i));
    }
    std::vector<storage::AppendRecord> records;
    for (int i = 0; i < n; ++i) {
      records.push_back(
          {storage::AsBytes(payloads[i]), Generation(generation), 1700000000000ull + i});
    }
    ASSERT_TRUE(store_->log(log).Append(records).has_value());
  }

  ShardReplicatorOptions Options(int followers) {
    ShardReplicatorOptions o;
    o.tenant = "t";
    o.ns = "ns";
    o.name = "orders";
    o.shard = 0;
    o.generation = Generation(1);
    for (int i = 0; i < followers; ++i) {
      o.followers.push_back({"f" + std::to_string(i), HostPort{"127.0.0.1", uint16_t(7000 + i)}});
    }
    o.retry_delay = 20ms;
    return o;
  }

  // The common shape: `records` stream records, `followers` followers, small batches.
  ShardReplicatorOptions StreamOptions(int records, int followers, size_t batch, size_t in_flight) {
    OpenStore();
    Append(LogKind::kStream, records);
    auto o = Options(followers);
    o.max_batch_records = batch;
    o.max_in_flight = in_flight;
    return o;
  }
  // The next `n` frames sent to `node`.
  std::vector<SentPtr> NextN(const std::string& node, int n) {
    std::vector<SentPtr> out;
    for (int i = 0; i < n; ++i) out.push_back(transport_.Next(node));
    for (auto& s : out) EXPECT_NE(s, nullptr);
    return out;
  }

  void Start(ShardReplicatorOptions o) {
    rep_ = std::make_unique<ShardReplicator>(
        *store_, std::move(o), transport_, ex_, &metrics_,
        [this](LogKind log, Offset mark) {
          std::function<void()> hook;
          {
            std::lock_guard<std::mutex> lock(mu_);
            marks_.push_back({log, mark});
            mark_threads_.push_back(std::this_thread::get_id());
            hook = std::exchange(mark_hook_, nullptr);  // runs once
          }
          if (hook) hook();
          std::lock_guard<std::mutex> lock(mu_);
          cv_.notify_all();
        },
        [this] {
          std::lock_guard<std::mutex> lock(mu_);
          fenced_++;
        });
    rep_->Start();
  }

  template <class F>
  auto OnExec(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto future = task.get_future();
    EXPECT_TRUE(ex_.Post([&task] { task(); }));
    return future.get();
  }
  void Barrier() {
    OnExec([] {});
  }
  // Returns once the executor is idle: a RunOrPost from this thread ran inline (it hands the
  // executor back before returning; the executor's own thread may still be finishing a task
  // right after a Barrier, so that one is retried).
  void WaitIdle() {
    const auto me = std::this_thread::get_id();
    for (int attempt = 0; attempt < 10000; ++attempt) {
      bool here = false;
      ASSERT_TRUE(ex_.RunOrPost([&] { here = std::this_thread::get_id() == me; }));
      if (here) return;
      Barrier();
    }
    FAIL() << "the executor never went idle";
  }
  // Delivers an answer as the pool would (any thread), then waits until it was handled.
  void Deliver(const SentPtr& s, Result<PeerResponse, PeerError> answer) {
    ASSERT_NE(s, nullptr);
    s->done(std::move(answer));
    Barrier();
  }

  Offset MarkOf(LogKind log) {
    return OnExec([&] { return rep_->mark(log); });
  }
  ReplicaCursorStatus StatusOf(const std::string& node, LogKind log) {
    auto all = OnExec([&] { return rep_->status(); });
    for (auto& s : all) {
      if (s.node_id == node && s.log == log) return s;
    }
    ADD_FAILURE() << "no cursor " << node;
    return {};
  }
  bool WaitMark(LogKind log, Offset mark) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 5s, [&] {
      for (auto& [l, m] : marks_) {
        if (l == log && m >= mark) return true;
      }
      return false;
    });
  }
  std::vector<std::pair<LogKind, Offset>> Marks() {
    std::lock_guard<std::mutex> lock(mu_);
    return marks_;
  }
  std::vector<std::thread::id> MarkThreads() {
    std::lock_guard<std::mutex> lock(mu_);
    return mark_threads_;
  }
  int fenced() {
    std::lock_guard<std::mutex> lock(mu_);
    return fenced_;
  }
  uint64_t Shipped(const std::string& outcome) {
    std::string text = metrics_.RenderPrometheus();
    std::string key = "felix_broker_replication_shipped_total{outcome=\"" + outcome + "\"} ";
    auto pos = text.find(key);
    return pos == std::string::npos ? 0 : std::stoull(text.substr(pos + key.size()));
  }

#if FELIX_FAULT_INJECTION
  std::shared_ptr<storage::FaultInjector> faults_ = std::make_shared<storage::FaultInjector>();
#endif
  broker::Executor ex_{"repl-test"};
  std::string dir_;
  std::unique_ptr<storage::ShardStore> store_;
  ScriptedTransport transport_;
  MetricsRegistry metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<LogKind, Offset>> marks_;
  std::vector<std::thread::id> mark_threads_;  // the thread each mark was reported on
  std::function<void()> mark_hook_;            // run once, on the next mark, outside mu_
  int fenced_ = 0;
  std::unique_ptr<ShardReplicator> rep_;
};

// --- starts and kinds ---------------------------------------------------------------------------

TEST_F(ShardReplicatorTest, StreamStartsOneRecordBelowOwnGenerationAuxLogsAtZero) {
  OpenStore();
  Append(LogKind::kStream, 10, /*generation=*/1);
  ASSERT_TRUE(store_->AcceptGeneration(Generation(1), "leader", Offset(0)).has_value());
  ASSERT_TRUE(store_->AcceptGeneration(Generation(2), "leader", Offset(10)).has_value());
  Append(LogKind::kStream, 5, 2);
  Append(LogKind::kCursors, 3, 2);
  Append(LogKind::kDeadLetters, 2, 2);
  auto o = Options(1);
  o.generation = Generation(2);
  Start(o);

  auto stream = transport_.Next();
  auto cursors = transport_.Next();
  auto dead = transport_.Next();
  ASSERT_TRUE(stream && cursors && dead);
  // Before the follower said what it offers: the stream ships kind 36 (labels and the
  // leader's times, as every broker of this build takes) with the commit offset (the mark, 0
  // so far); auxiliary logs their own kinds, no commit offset.
  EXPECT_EQ(stream->kind(), flxi::Kind::kReplicateTimedRecords);
  EXPECT_EQ(stream->first(), 9u);
  EXPECT_EQ(stream->records().commit_offset, std::optional<uint64_t>(0));
  EXPECT_EQ(stream->records().shard.generation, 2u);
  EXPECT_EQ(cursors->kind(), flxi::Kind::kReplicateGroupRecords);
  EXPECT_EQ(cursors->first(), 0u);
  EXPECT_EQ(dead->kind(), flxi::Kind::kReplicateDeadLetterRecords);
  EXPECT_EQ(dead->first(), 0u);
  auto rec = stream->records();
  EXPECT_EQ(rec.checksum, flxi::BatchChecksum(rec.payloads, {}));
  ASSERT_EQ(rec.payloads.size(), 6u);
  EXPECT_EQ(rec.payloads[0], "stream-9");

  // The starting guess is never counted.
  auto st = StatusOf("f0", LogKind::kStream);
  EXPECT_EQ(st.next_offset, Offset(9));
  EXPECT_EQ(st.confirmed, Offset(0));
  EXPECT_FALSE(st.in_sync);
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(0));
}

TEST_F(ShardReplicatorTest, LabelledTimedKindOnceTheFollowerOfferedLabelsAndTimes) {
  OpenStore();
  ASSERT_TRUE(store_->AcceptGeneration(Generation(1), "leader", Offset(0)).has_value());
  Append(LogKind::kStream, 2);
  auto o = Options(1);
  o.max_in_flight = 1;
  Start(o);
  auto first = transport_.Next("f0");
  ASSERT_TRUE(first);
  Deliver(first, OkAnswer(2, flxi::kCapGenerationLabels | flxi::kCapRecordTimes));
  EXPECT_TRUE(WaitMark(LogKind::kStream, Offset(2)));
  Append(LogKind::kStream, 3);
  SentPtr next;
  while ((next = transport_.Next("f0")) && next->kind() != flxi::Kind::kReplicateTimedRecords &&
         next->first() < 2) {
    Deliver(next, OkAnswer(next->end()));
  }
  ASSERT_TRUE(next);
  EXPECT_EQ(next->kind(), flxi::Kind::kReplicateTimedRecords);
  auto rec = next->records();
  EXPECT_EQ(rec.first_offset, 2u);
  ASSERT_EQ(rec.generations.size(), 1u);
  EXPECT_EQ(rec.generations[0], (flxi::GenerationStart{1, 0}));
  ASSERT_EQ(rec.times.size(), 3u);
  EXPECT_EQ(rec.times[0], 1700000000000ull * 1000);
  EXPECT_EQ(rec.commit_offset, std::optional<uint64_t>(2));  // the stream log's mark
}

// The pool refuses a kind the follower did not offer (nothing reaches it) and names what it
// did offer: the batch goes again at once in the richest kind the follower takes, and every
// later batch too; records keep the leader's times only where the follower took them.
TEST_F(ShardReplicatorTest, AKindTheFollowerDidNotOfferIsResentAtOnceInOneItTakes) {
  OpenStore();
  ASSERT_TRUE(store_->AcceptGeneration(Generation(1), "leader", Offset(0)).has_value());
  Append(LogKind::kStream, 2);
  auto o = Options(1);
  o.max_in_flight = 1;
  o.retry_delay = 60s;  // a delayed retry would not come within the test
  Start(o);
  auto first = transport_.Next("f0");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind(), flxi::Kind::kReplicateTimedRecords);
  PeerError refused{PeerErrorKind::kNotOffered, false, "scripted"};
  refused.peer_capabilities = flxi::kCapGenerationLabels;  // labels, no times
  Deliver(first, tl::unexpected(refused));
  auto labelled = transport_.Next("f0");
  ASSERT_TRUE(labelled);
  EXPECT_EQ(labelled->kind(), flxi::Kind::kReplicateLabelledRecords);
  EXPECT_EQ(labelled->records().payloads, first->records().payloads);
  EXPECT_TRUE(labelled->records().times.empty());
  Deliver(labelled, OkAnswer(2, flxi::kCapGenerationLabels));
  EXPECT_TRUE(WaitMark(LogKind::kStream, Offset(2)));
  Append(LogKind::kStream, 1);
  auto next = transport_.Next("f0");
  ASSERT_TRUE(next);
  EXPECT_EQ(next->kind(), flxi::Kind::kReplicateLabelledRecords);
  EXPECT_EQ(next->first(), 2u);

  // A peer that answered a plain HelloOk (no capabilities at all) gets the plain kinds.
  Deliver(next, tl::unexpected(PeerError{PeerErrorKind::kNotOffered, false, "scripted"}));
  auto plain = transport_.Next("f0");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->kind(), flxi::Kind::kReplicateCommittedRecords);
  EXPECT_EQ(plain->first(), 2u);
}

TEST_F(ShardReplicatorTest, CacheShardShipsCountersBeforeCache) {
  OpenStore();
  Append(LogKind::kCache, 2);
  Append(LogKind::kCounters, 2);
  auto o = Options(1);
  o.cache_shard = true;
  o.name = "sessions";
  Start(o);
  auto a = transport_.Next();
  auto b = transport_.Next();
  ASSERT_TRUE(a && b);
  // Before the follower said what it offers, both go as kind 36 (labels and times).
  EXPECT_EQ(a->kind(), flxi::Kind::kReplicateTimedRecords);
  EXPECT_EQ(flxi::TargetLog(a->frame()), flxi::ReplicaLog::kCounters);
  EXPECT_EQ(flxi::TargetLog(b->frame()), flxi::ReplicaLog::kCache);
  EXPECT_EQ(b->records().commit_offset, std::optional<uint64_t>(0));  // the cache log's mark
}

// --- pipelining and the answer table ------------------------------------------------------------

TEST_F(ShardReplicatorTest, PipelinesUpToMaxInFlightBatches) {
  auto o = StreamOptions(20, 1, 2, 3);
  Start(o);
  std::vector<SentPtr> sent;
  for (int i = 0; i < 3; ++i) sent.push_back(transport_.Next("f0"));
  ASSERT_TRUE(sent[0] && sent[1] && sent[2]);
  EXPECT_EQ(sent[0]->first(), 0u);
  EXPECT_EQ(sent[1]->first(), 2u);
  EXPECT_EQ(sent[2]->first(), 4u);
  EXPECT_EQ(sent[2]->records().payloads.size(), 2u);
  Barrier();
  rep_->Wake();
  Barrier();
  EXPECT_EQ(transport_.Unread("f0"), 0u) << "more than max_in_flight batches in flight";

  // One answer frees one slot: exactly one more batch.
  Deliver(sent[0], OkAnswer(2));
  auto fourth = transport_.Next("f0");
  ASSERT_TRUE(fourth);
  EXPECT_EQ(fourth->first(), 6u);
  EXPECT_EQ(transport_.Unread("f0"), 0u);
}

TEST_F(ShardReplicatorTest, OkIsClampedToTheBatchEnd) {
  auto o = StreamOptions(4, 1, 2, 1);
  Start(o);
  auto s = transport_.Next("f0");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->end(), 2u);
  // A follower (older code) answering its tail far beyond the batch is not believed.
  Deliver(s, OkAnswer(1000));
  auto st = StatusOf("f0", LogKind::kStream);
  EXPECT_EQ(st.confirmed, Offset(2));
  EXPECT_EQ(st.next_offset, Offset(2));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(2));  // RF 2: leader + the follower's answered 2
  auto next = transport_.Next("f0");
  ASSERT_TRUE(next);
  EXPECT_EQ(next->first(), 2u);
}

TEST_F(ShardReplicatorTest, OutOfOrderAnswersCountWhatWasAnswered) {
  auto o = StreamOptions(6, 1, 2, 3);
  Start(o);
  auto a = transport_.Next("f0"), b = transport_.Next("f0"), c = transport_.Next("f0");
  ASSERT_TRUE(a && b && c);
  Deliver(b, OkAnswer(4));
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(4));
  Deliver(a, OkAnswer(2));  // a late answer for an earlier batch does not lower it
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(4));
  Deliver(c, OkAnswer(6));
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(6));
  EXPECT_TRUE(StatusOf("f0", LogKind::kStream).in_sync);
}

TEST_F(ShardReplicatorTest, LogGapResumesFromExpectedAndDropsLaterBatches) {
  auto o = StreamOptions(20, 1, 2, 3);
  Start(o);
  auto a = transport_.Next("f0"), b = transport_.Next("f0"), c = transport_.Next("f0");
  ASSERT_TRUE(a && b && c);
  // The follower stands at 7: the first batch is past nothing, but it says where to resume.
  Deliver(a, ErrAnswer(flxi::ErrorCode::kLogGap, 7));
  auto st = StatusOf("f0", LogKind::kStream);
  EXPECT_EQ(st.next_offset, Offset(7));
  EXPECT_EQ(st.confirmed, Offset(0));
  auto resumed = transport_.Next("f0");
  ASSERT_TRUE(resumed);
  EXPECT_EQ(resumed->first(), 7u);
  // Answers to the dropped batches are stale: they must not count.
  Deliver(b, OkAnswer(4));
  Deliver(c, OkAnswer(6));
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(0));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(0));
  EXPECT_EQ(Shipped("resumed"), 1u);
}

TEST_F(ShardReplicatorTest, MalformedResendsTheSameBytes) {
  OpenStore();
  Append(LogKind::kStream, 3);
  auto o = Options(1);
  o.max_in_flight = 1;
  o.retry_delay = 10s;  // a resend must not wait for it
  Start(o);
  auto first = transport_.Next("f0");
  ASSERT_TRUE(first);
  Deliver(first, ErrAnswer(flxi::ErrorCode::kMalformed));
  auto again = transport_.Next("f0", 2000ms);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->bytes, first->bytes);
  Deliver(again, OkAnswer(3));
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(3));
}

TEST_F(ShardReplicatorTest, UnsupportedKindFallsBackToTheOwnKind) {
  OpenStore();
  Append(LogKind::kStream, 2);
  auto o = Options(1);
  o.max_in_flight = 1;
  Start(o);
  auto first = transport_.Next("f0");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind(), flxi::Kind::kReplicateTimedRecords);
  Deliver(first, Answer({flxi::Kind::kForwardPublishError,
                         flxi::ErrorAnswer{0, flxi::ErrorCode::kUnsupportedKind, "old"}},
                        std::nullopt));
  auto legacy = transport_.Next("f0");
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->kind(), flxi::Kind::kReplicateRecords);
  EXPECT_EQ(legacy->records().payloads, first->records().payloads);
}

// --- halts, rebuilds, fencing -------------------------------------------------------------------

TEST_F(ShardReplicatorTest, LogConflictHaltsAndRebuildsWithinThePolicy) {
  OpenStore();
  Append(LogKind::kStream, 4);
  auto o = Options(2);
  o.max_in_flight = 1;
  o.rebuild_max_concurrent = 1;
  Start(o);
  auto a = transport_.Next("f0"), b = transport_.Next("f1");
  ASSERT_TRUE(a && b);
  Deliver(a, ErrAnswer(flxi::ErrorCode::kLogConflict, 2));
  Deliver(b, ErrAnswer(flxi::ErrorCode::kLogConflict, 2));

  // One slot: exactly one rebuild goes out; the other follower waits, halted.
  auto r0 = transport_.Next();
  ASSERT_TRUE(r0);
  ASSERT_EQ(r0->kind(), flxi::Kind::kReplicateRebuild);
  const std::string first_node = r0->node, other = first_node == "f0" ? "f1" : "f0";
  auto body = std::get<flxi::Rebuild>(r0->frame().body);
  EXPECT_EQ(body.log, flxi::ReplicaLog::kStream);
  EXPECT_EQ(body.base_offset, 0u);
  EXPECT_EQ(StatusOf(other, LogKind::kStream).halt, ReplicaHalt::kDiverged);
  rep_->Wake();
  Barrier();
  EXPECT_EQ(transport_.Unread(), 0u);

  // Accepted: halt cleared, shipping from the base, nothing counted until answered.
  Deliver(r0, OkAnswer(0));
  auto st = StatusOf(first_node, LogKind::kStream);
  EXPECT_EQ(st.halt, ReplicaHalt::kNone);
  EXPECT_TRUE(st.rebuilding);
  EXPECT_EQ(st.confirmed, Offset(0));
  auto ship = transport_.Next(first_node);
  ASSERT_TRUE(ship);
  EXPECT_EQ(ship->first(), 0u);
  EXPECT_EQ(transport_.Unread(other), 0u) << "second rebuild beyond the policy";

  // Level: the rebuild completes, the slot frees, the other follower's rebuild starts.
  Deliver(ship, OkAnswer(4));
  EXPECT_FALSE(StatusOf(first_node, LogKind::kStream).rebuilding);
  auto r1 = transport_.Next(other);
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->kind(), flxi::Kind::kReplicateRebuild);
  EXPECT_NE(metrics_.RenderPrometheus().find(
                "felix_broker_replication_rebuilds_total{outcome=\"completed\"} 1"),
            std::string::npos);
}

// FELIX_REPLICATION_REBUILD_BYTES_PER_SEC paces only a rebuilding follower: ordinary
// shipping fills the pipeline; after a rebuild the bucket (a second's worth, at least one
// batch) pays for one 8-byte batch and, at 1 byte/s, the next waits (8 s, beyond the test).
TEST_F(ShardReplicatorTest, RebuildBatchesArePaced) {
  auto o = StreamOptions(4, 1, /*batch=*/1, /*in_flight=*/4);
  o.max_batch_bytes = 8;  // "stream-N": one record per batch
  o.rebuild_bytes_per_sec = 1;
  Start(o);
  auto first = NextN("f0", 4);
  ASSERT_EQ(first.size(), 4u) << "catch-up is never paced";
  Deliver(first[0], ErrAnswer(flxi::ErrorCode::kLogConflict, 0));
  auto rebuild = transport_.Next("f0");
  ASSERT_TRUE(rebuild);
  ASSERT_EQ(rebuild->kind(), flxi::Kind::kReplicateRebuild);
  Deliver(rebuild, OkAnswer(0));
  ASSERT_TRUE(StatusOf("f0", LogKind::kStream).rebuilding);
  auto paid = transport_.Next("f0");
  ASSERT_TRUE(paid);
  EXPECT_EQ(paid->first(), 0u);
  rep_->Wake();
  Barrier();
  EXPECT_EQ(transport_.Unread("f0"), 0u) << "the bucket is empty: the next batch waits";
  EXPECT_NE(metrics_.RenderPrometheus().find("felix_broker_replication_rebuild_paced_total 1"),
            std::string::npos)
      << metrics_.RenderPrometheus();
}

TEST_F(ShardReplicatorTest, NoRebuildWhenThePolicySaysZero) {
  OpenStore();
  Append(LogKind::kStream, 2);
  auto o = Options(1);
  o.rebuild_max_concurrent = 0;
  Start(o);
  auto a = transport_.Next("f0");
  ASSERT_TRUE(a);
  Deliver(a, ErrAnswer(flxi::ErrorCode::kLogConflict));
  rep_->Wake();
  Barrier();
  EXPECT_EQ(transport_.Unread(), 0u);
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).halt, ReplicaHalt::kDiverged);
  EXPECT_NE(metrics_.RenderPrometheus().find("felix_broker_replication_halted 1"),
            std::string::npos);
}

TEST_F(ShardReplicatorTest, RefusedRebuildBacksOff) {
  OpenStore();
  Append(LogKind::kStream, 2);
  auto o = Options(1);
  o.rebuild_backoff = 200ms;
  Start(o);
  auto a = transport_.Next("f0");
  ASSERT_TRUE(a);
  Deliver(a, ErrAnswer(flxi::ErrorCode::kLogConflict));
  auto r0 = transport_.Next("f0");
  ASSERT_TRUE(r0);
  ASSERT_EQ(r0->kind(), flxi::Kind::kReplicateRebuild);
  const auto refused_at = std::chrono::steady_clock::now();
  Deliver(r0, ErrAnswer(flxi::ErrorCode::kLogConflict));  // below_commit refusal
  // A wake does not bypass the backoff.
  rep_->Wake();
  Barrier();
  EXPECT_EQ(transport_.Unread(), 0u);
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).halt, ReplicaHalt::kDiverged);
  auto r1 = transport_.Next("f0");
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->kind(), flxi::Kind::kReplicateRebuild);
  EXPECT_GE(std::chrono::steady_clock::now() - refused_at, 200ms);
  // A second refusal doubles the wait.
  const auto second_at = std::chrono::steady_clock::now();
  Deliver(r1, ErrAnswer(flxi::ErrorCode::kUnavailable));
  auto r2 = transport_.Next("f0");
  ASSERT_TRUE(r2);
  EXPECT_GE(std::chrono::steady_clock::now() - second_at, 400ms);
}

TEST_F(ShardReplicatorTest, FencedEpochStopsTheFollowerAndReportsOnce) {
  OpenStore();
  Append(LogKind::kStream, 4);
  Append(LogKind::kCursors, 1);
  auto o = Options(2);
  o.max_batch_records = 2;
  o.max_in_flight = 2;
  Start(o);
  std::vector<SentPtr> f0;
  for (int i = 0; i < 3; ++i) f0.push_back(transport_.Next("f0"));  // stream ×2, cursors
  ASSERT_TRUE(f0[0] && f0[1] && f0[2]);
  Deliver(f0[0], ErrAnswer(flxi::ErrorCode::kFencedEpoch));
  Deliver(f0[2], ErrAnswer(flxi::ErrorCode::kFencedEpoch));
  EXPECT_EQ(fenced(), 1);
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).halt, ReplicaHalt::kFenced);
  EXPECT_EQ(StatusOf("f0", LogKind::kCursors).halt, ReplicaHalt::kFenced);
  EXPECT_EQ(StatusOf("f0", LogKind::kDeadLetters).halt, ReplicaHalt::kFenced);
  // An answer to a batch still out counts for nothing; nothing more goes to f0, no rebuild.
  Deliver(f0[1], OkAnswer(4));
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(0));
  Append(LogKind::kStream, 2);
  rep_->Wake();
  Barrier();
  EXPECT_EQ(transport_.Unread("f0"), 0u);
  // The other follower fencing too does not run on_fenced again.
  auto f1 = transport_.Next("f1");
  ASSERT_TRUE(f1);
  Deliver(f1, ErrAnswer(flxi::ErrorCode::kFencedEpoch));
  EXPECT_EQ(fenced(), 1);
}

// --- bootstrap ----------------------------------------------------------------------------------

TEST_F(ShardReplicatorTest, TrimmedOffersBootstrapNeverAboveMarkAndCommit) {
  OpenStore(/*initial_base=*/Offset(100));
  Append(LogKind::kStream, 5);  // offsets 100..104
  auto o = Options(1);
  o.max_in_flight = 1;
  o.acks_wait_for_mark = true;  // `Quorum`
  Start(o);
  // The cursor starts at the base (never below it): the first batch probes the follower.
  auto probe = transport_.Next("f0");
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->first(), 100u);
  // It holds nothing: below the base, so a bootstrap; but the base (100) is above the mark (0)
  // and the commit offset (0): no offer.
  Deliver(probe, ErrAnswer(flxi::ErrorCode::kLogGap, 0));
  Barrier();
  rep_->Wake();
  Barrier();
  EXPECT_EQ(transport_.Unread(), 0u);
  EXPECT_TRUE(StatusOf("f0", LogKind::kStream).stalled);

  OnExec([&] { ASSERT_TRUE(store_->SetCommitOffset(Offset(100)).has_value()); });
  auto offer = transport_.Next("f0");
  ASSERT_TRUE(offer);
  ASSERT_EQ(offer->kind(), flxi::Kind::kReplicateBootstrap);
  EXPECT_EQ(std::get<flxi::Bootstrap>(offer->frame().body).base_offset, 100u);
  Deliver(offer, OkAnswer(100));
  EXPECT_EQ(Shipped("bootstrapped"), 1u);
  auto ship = transport_.Next("f0");
  ASSERT_TRUE(ship);
  EXPECT_EQ(ship->first(), 100u);
  Deliver(ship, OkAnswer(105));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(105));
}

// A `Leader` shard's acknowledgements never wait for the mark, so nothing is gained by holding a
// bootstrap back when compaction or retention passed every follower: the base is offered at once,
// and a follower whose records end below it is halted and rebuilt. (Found by the 100k-record
// replication e2e: a cache's counter log compacted a few records past both lagging followers
// never replicated again.)
TEST_F(ShardReplicatorTest, ALeaderShardOffersItsBaseAboveTheMarkAtOnce) {
  OpenStore(/*initial_base=*/Offset(100));
  Append(LogKind::kStream, 5);  // offsets 100..104
  auto o = Options(1);
  o.max_in_flight = 1;
  Start(o);
  auto probe = transport_.Next("f0");
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe->first(), 100u);
  // The follower holds 0..94: below the base, above the mark (0) and the commit offset (0).
  Deliver(probe, ErrAnswer(flxi::ErrorCode::kLogGap, 95));
  auto offer = transport_.Next("f0");
  ASSERT_TRUE(offer);
  ASSERT_EQ(offer->kind(), flxi::Kind::kReplicateBootstrap);
  EXPECT_EQ(std::get<flxi::Bootstrap>(offer->frame().body).base_offset, 100u);
  // Its records end before the base: it cannot take it, so it is halted and rebuilt.
  Deliver(offer, ErrAnswer(flxi::ErrorCode::kLogConflict, 95));
  EXPECT_EQ(Shipped("needs_bootstrap"), 1u);
  SentPtr rebuild;
  while ((rebuild = transport_.Next("f0")) && rebuild->kind() != flxi::Kind::kReplicateRebuild) {
  }
  ASSERT_TRUE(rebuild);
  EXPECT_EQ(std::get<flxi::Rebuild>(rebuild->frame().body).base_offset, 100u);
  Deliver(rebuild, OkAnswer(100));
  auto ship = transport_.Next("f0");
  ASSERT_TRUE(ship);
  EXPECT_EQ(ship->first(), 100u);
  Deliver(ship, OkAnswer(105));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(105));
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).halt, ReplicaHalt::kNone);
}

// A restarted leader of a compacted log: followers that hold it all are shipped to from the base
// (their answers raise the mark), never sent to a bootstrap.
TEST_F(ShardReplicatorTest, AFollowerHoldingACompactedLogIsProbedAtTheBase) {
  OpenStore(/*initial_base=*/Offset(100));
  Append(LogKind::kStream, 5);  // offsets 100..104
  Start(Options(1));
  auto ship = transport_.Next("f0");
  ASSERT_TRUE(ship);
  EXPECT_EQ(ship->kind(), flxi::Kind::kReplicateTimedRecords);
  EXPECT_EQ(ship->first(), 100u);
  Deliver(ship, OkAnswer(105));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(105));
  EXPECT_EQ(Shipped("bootstrapped"), 0u);
  EXPECT_FALSE(StatusOf("f0", LogKind::kStream).stalled);
}

TEST_F(ShardReplicatorTest, RefusedBootstrapHaltsNeedsBootstrapThenRebuilds) {
  OpenStore(/*initial_base=*/Offset(50));
  Append(LogKind::kCursors, 2);  // the cursor log: kind 17
  Append(LogKind::kStream, 1);
  auto o = Options(1);
  Start(o);
  OnExec([&] { store_->log(LogKind::kCursors).SetCommitOffset(Offset(52)); });
  SentPtr offer;
  while ((offer = transport_.Next("f0")) && offer->kind() != flxi::Kind::kReplicateGroupBootstrap) {
    // The cursor log's probe from its base: the follower holds less (LogGap at 0), so a
    // bootstrap follows.
    if (offer->kind() == flxi::Kind::kReplicateGroupRecords) {
      Deliver(offer, ErrAnswer(flxi::ErrorCode::kLogGap, 0));
    }
  }
  ASSERT_TRUE(offer);
  Deliver(offer, ErrAnswer(flxi::ErrorCode::kLogConflict, 10));
  SentPtr rebuild;
  while ((rebuild = transport_.Next("f0")) && rebuild->kind() != flxi::Kind::kReplicateRebuild) {
  }
  ASSERT_TRUE(rebuild);
  EXPECT_EQ(std::get<flxi::Rebuild>(rebuild->frame().body).log, flxi::ReplicaLog::kGroupCursors);
  EXPECT_EQ(Shipped("needs_bootstrap"), 1u);
}

// --- transport failures -------------------------------------------------------------------------

TEST_F(ShardReplicatorTest, TransportFailureRetriesWithoutATightLoop) {
  auto o = StreamOptions(10, 1, 2, 4);
  o.retry_delay = 50ms;
  transport_.set_fail_all(true);
  const auto started = std::chrono::steady_clock::now();
  Start(o);
  // The first pass fills the pipeline (4 sends); after that a failing follower gets one
  // exchange per retry_delay: nine sends take at least five delays.
  while (transport_.total() < 9) {
    ASSERT_LT(std::chrono::steady_clock::now() - started, 10s);
    Barrier();
    std::this_thread::yield();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - started, 5 * 50ms);
  EXPECT_TRUE(StatusOf("f0", LogKind::kStream).stalled);
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(0));

  // Send refused at once is the same; then the follower comes back and catches up.
  transport_.set_fail_all(false);
  transport_.set_refuse(true);
  const size_t before = transport_.total();
  while (transport_.total() < before + 2) Barrier();
  transport_.set_refuse(false);
  auto s = transport_.Next("f0");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first(), 0u);
  Deliver(s, OkAnswer(2));
  EXPECT_FALSE(StatusOf("f0", LogKind::kStream).stalled);
  EXPECT_GE(Shipped("unreachable"), 6u);
}

TEST_F(ShardReplicatorTest, TimeoutRetriesFromTheFailedBatch) {
  auto o = StreamOptions(6, 1, 2, 3);
  Start(o);
  auto a = transport_.Next("f0"), b = transport_.Next("f0"), c = transport_.Next("f0");
  ASSERT_TRUE(a && b && c);
  Deliver(a, OkAnswer(2));
  Deliver(b, TransportFailure(PeerErrorKind::kTimeout));
  auto retry = transport_.Next("f0");
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->first(), 2u);
  Deliver(c, OkAnswer(6));  // dropped with the failed batch: stale
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(2));
  EXPECT_EQ(Shipped("timeout"), 1u);
}

// --- the mark -----------------------------------------------------------------------------------

// replication.md §20: a `Quorum` leader's retention never deletes a segment holding an offset at
// or above its mark (kept as each log's commit offset as it rises); a `Leader` shard's is never
// held. Segments of two records, retention down to one byte: everything sealed may go.
TEST_F(ShardReplicatorTest, AQuorumLeadersRetentionStopsAtTheMarkALeaderShardsDoesNot) {
  for (bool quorum : {true, false}) {
    SCOPED_TRACE(quorum ? "Quorum" : "Leader");
    rep_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
    ASSERT_NO_FATAL_FAILURE(OpenTwelveInSixSegments(LogKind::kStream, /*retention_bytes=*/1));
    auto retain = [&] {
      return OnExec([&] {
        EXPECT_TRUE(store_->log(LogKind::kStream).EnforceRetention().has_value());
        return store_->log(LogKind::kStream).BaseOffset();
      });
    };
    auto o = Options(1);  // RF 2: the mark needs f0
    o.max_batch_records = 4;
    o.max_in_flight = 1;
    o.acks_wait_for_mark = quorum;
    Start(o);
    auto first = transport_.Next("f0");
    ASSERT_TRUE(first);
    ASSERT_EQ(first->first(), 0u);
    if (quorum) {
      const uint64_t confirmed = ExpectCutsStopAtTheMark(LogKind::kStream, first, retain);
      for (uint64_t next = confirmed; next < 12;) {
        auto batch = transport_.Next("f0");
        ASSERT_TRUE(batch);
        next = batch->end();
        Deliver(batch, OkAnswer(next));
      }
      ASSERT_TRUE(WaitMark(LogKind::kStream, Offset(12)));
      EXPECT_GT(retain(), Offset(confirmed));
    } else {
      // No follower answered; the mark is 0, and retention goes on regardless.
      EXPECT_GT(retain(), Offset(4));
    }
  }
}

// A `Leader` cache's compaction is held at the mark as well: dropping the segments below a cut
// its followers have not reached would halt and rebuild them after every compaction.
TEST_F(ShardReplicatorTest, ALeaderCachesCompactionStopsAtTheMark) {
  ASSERT_NO_FATAL_FAILURE(OpenTwelveInSixSegments(LogKind::kCache, /*retention_bytes=*/0));
  auto drop_all = [&] {
    return OnExec([&] {
      EXPECT_TRUE(store_->log(LogKind::kCache).DropSegmentsBelow(Offset(12)).has_value());
      return store_->log(LogKind::kCache).BaseOffset();
    });
  };
  auto o = Options(1);
  o.cache_shard = true;
  o.max_batch_records = 4;
  o.max_in_flight = 1;
  Start(o);  // `Leader`: acks_wait_for_mark unset
  SentPtr first;
  // Kind 36 until the follower says what it offers; the cache log's first batch.
  while ((first = transport_.Next("f0")) &&
         flxi::TargetLog(first->frame()) != flxi::ReplicaLog::kCache) {
  }
  ASSERT_TRUE(first);
  ExpectCutsStopAtTheMark(LogKind::kCache, first, drop_all);
}

TEST_F(ShardReplicatorTest, MarkRisesWithAMajorityOnly) {
  OpenStore();
  Append(LogKind::kStream, 10);
  auto o = Options(2);  // RF 3
  Start(o);
  auto a = transport_.Next("f0"), b = transport_.Next("f1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(0));  // the leader alone is no majority
  Deliver(a, OkAnswer(10));
  EXPECT_TRUE(WaitMark(LogKind::kStream, Offset(10)));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(10));
  // f1 never answered: new records do not move the mark until someone confirms them.
  Append(LogKind::kStream, 5);
  auto a2 = transport_.Next("f0");
  ASSERT_TRUE(a2);
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(10));
  Deliver(a2, OkAnswer(15));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(15));
  // on_mark saw only rises.
  Offset last(0);
  for (auto& [log, mark] : Marks()) {
    if (log != LogKind::kStream) continue;
    EXPECT_GT(mark, last);
    last = mark;
  }
}

// replication.md §17 + §8.3: the generation-start record ships as FLXI mark 3 (in the
// checksum), and once a majority holds it the mark moves over every inherited record below
// it at once, without waiting for a client write.
TEST_F(ShardReplicatorTest,
       AGenerationStartRecordShipsMarkedAndCarriesTheMarkOverInheritedRecords) {
  OpenStore();
  ASSERT_TRUE(store_->AcceptGeneration(Generation(1), "old", Offset(0)).has_value());
  Append(LogKind::kStream, 4, 1);
  ASSERT_TRUE(store_->AcceptGeneration(Generation(2), "leader", Offset(4)).has_value());
  const auto payload = storage::GenerationStartPayload(2);
  ASSERT_TRUE(store_->log(LogKind::kStream)
                  .Append(storage::AppendRecord{payload, Generation(2), 0,
                                                storage::kRecordFlagGenerationStart})
                  .has_value());
  auto o = Options(2);  // RF 3
  o.generation = Generation(2);
  Start(o);
  auto a = transport_.Next("f0");
  ASSERT_TRUE(a);
  auto rec = a->records();
  EXPECT_EQ(rec.first_offset, 3u) << "one record below where generation 2 begins";
  ASSERT_EQ(rec.payloads.size(), 2u);
  ASSERT_EQ(rec.marks.size(), 2u);
  EXPECT_EQ(rec.marks[0].type, flxi::MarkType::kNone);
  EXPECT_EQ(rec.marks[1].type, flxi::MarkType::kGenerationStart);
  EXPECT_EQ(rec.checksum, flxi::BatchChecksum(rec.payloads, rec.marks));
  EXPECT_NE(rec.checksum, flxi::BatchChecksum(rec.payloads, {}));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(0));
  Deliver(a, OkAnswer(5));
  EXPECT_TRUE(WaitMark(LogKind::kStream, Offset(5)));
}

// A cache shard's counter log counts a majority only past its own start record too (§8.3):
// confirmations of inherited counter records alone move no mark.
TEST_F(ShardReplicatorTest, ACacheShardsCounterMarkCountsOnlyPastItsStartRecord) {
  OpenStore();
  ASSERT_TRUE(store_->AcceptGeneration(Generation(1), "old", Offset(0)).has_value());
  Append(LogKind::kCache, 2, 1);
  Append(LogKind::kCounters, 3, 1);
  ASSERT_TRUE(store_->AcceptGeneration(Generation(2), "leader", Offset(2)).has_value());
  const auto payload = storage::GenerationStartPayload(2);
  for (LogKind log : {LogKind::kCache, LogKind::kCounters}) {
    ASSERT_TRUE(store_->log(log)
                    .Append(storage::AppendRecord{payload, Generation(2), 0,
                                                  storage::kRecordFlagGenerationStart})
                    .has_value());
  }
  auto o = Options(2);  // RF 3
  o.cache_shard = true;
  o.name = "sessions";
  o.generation = Generation(2);
  o.max_in_flight = 1;
  o.max_batch_records = 3;  // the inherited counter records, then the start record
  Start(o);
  // A follower of this build: labels (which carry a counter batch's marks) and CACHE_FENCE.
  const uint64_t caps = flxi::kCapGenerationLabels | flxi::kCapRecordTimes | flxi::kCapCacheFence;
  auto next_counters = [&] {
    SentPtr sent;
    while ((sent = transport_.Next("f0")) &&
           flxi::TargetLog(sent->frame()) != flxi::ReplicaLog::kCounters) {
      Deliver(sent, OkAnswer(sent->end(), caps));
    }
    return sent;
  };
  auto first = next_counters();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->first(), 0u);
  ASSERT_EQ(first->end(), 3u);
  Deliver(first, OkAnswer(3, caps));  // holds the inherited records, not the start record
  EXPECT_EQ(MarkOf(LogKind::kCounters), Offset(0));
  auto rest = next_counters();
  ASSERT_TRUE(rest);
  ASSERT_EQ(rest->first(), 3u);
  ASSERT_EQ(rest->records().marks.size(), 1u);
  EXPECT_EQ(rest->records().marks[0].type, flxi::MarkType::kGenerationStart);
  Deliver(rest, OkAnswer(4, caps));
  EXPECT_TRUE(WaitMark(LogKind::kCounters, Offset(4)));
}

TEST_F(ShardReplicatorTest, LostAnswersAreNeverCounted) {
  auto o = StreamOptions(8, 2, 2, 4);
  Start(o);
  std::vector<SentPtr> f0;
  for (int i = 0; i < 4; ++i) f0.push_back(transport_.Next("f0"));
  ASSERT_TRUE(f0[3]);
  // f1's answers are all lost; f0 answers only its second batch.
  Deliver(f0[1], OkAnswer(4));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(4));
  EXPECT_EQ(StatusOf("f1", LogKind::kStream).confirmed, Offset(0));
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(4));
}

TEST_F(ShardReplicatorTest, SingleReplicaMarkFollowsTheTailOnAppend) {
  OpenStore();
  Start(Options(0));
  Barrier();
  Append(LogKind::kStream, 3);  // noticed through NotifyWhen, no Wake()
  EXPECT_TRUE(WaitMark(LogKind::kStream, Offset(3)));
}

TEST_F(ShardReplicatorTest, AppendWakesShippingWithoutWake) {
  OpenStore();
  Start(Options(1));
  Barrier();
  EXPECT_EQ(transport_.Unread(), 0u);
  Append(LogKind::kStream, 1);
  auto s = transport_.Next("f0");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first(), 0u);
  Deliver(s, OkAnswer(1));
  Append(LogKind::kStream, 1);  // re-armed
  auto t = transport_.Next("f0");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->first(), 1u);
}

// commit_carry_interval: the commit offset the stream's batches carry rises at most once per
// interval (each rise costs every follower a flush of its replica file); in between, batches
// carry the last value carried, which is at or below the mark and so still true.
TEST_F(ShardReplicatorTest, TheCarriedCommitOffsetRisesAtMostOncePerInterval) {
  OpenStore();
  Append(LogKind::kStream, 2);
  auto o = Options(1);  // RF 2: the leader and f0 are the majority
  o.commit_carry_interval = std::chrono::hours(1);
  Start(o);
  auto a = transport_.Next("f0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->records().commit_offset, std::optional<uint64_t>(0));
  Deliver(a, OkAnswer(2));
  ASSERT_EQ(MarkOf(LogKind::kStream), Offset(2));
  Append(LogKind::kStream, 1);
  auto b = transport_.Next("f0");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->records().commit_offset, std::optional<uint64_t>(2)) << "the first rise is carried";
  Deliver(b, OkAnswer(3));
  ASSERT_EQ(MarkOf(LogKind::kStream), Offset(3));
  Append(LogKind::kStream, 1);
  auto c = transport_.Next("f0");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->records().commit_offset, std::optional<uint64_t>(2))
      << "the mark rose to 3 within the interval: the batch carries the last value carried";
}

#if FELIX_FAULT_INJECTION
// ship_unflushed (Quorum shards): a batch the leader has written ships while the leader's own
// fdatasync is still running, so the flushes overlap; the mark still counts the leader only up
// to its durable tail, so the followers' confirmations alone acknowledge nothing.
TEST_F(ShardReplicatorTest, UnflushedRecordsShipBeforeTheLeadersFlushAndCountOnceItIsDurable) {
  OpenStore(Offset(0), storage::FsyncMode::kOnCommit);
  auto o = Options(2);  // RF 3
  o.ship_unflushed = true;
  Start(o);
  Barrier();
  storage::DurableLog& log = store_->log(LogKind::kStream);
  faults_->HoldSyncs(true);
  std::promise<storage::StorageResult<void>> flushed;
  const std::string p0 = "a", p1 = "b", p2 = "c";
  const storage::AppendRecord batch[] = {{storage::AsBytes(p0), Generation(1), 1},
                                         {storage::AsBytes(p1), Generation(1), 2},
                                         {storage::AsBytes(p2), Generation(1), 3}};
  ASSERT_TRUE(
      log.AppendAsync(batch, [&](const storage::StorageResult<void>& r) { flushed.set_value(r); }));
  auto a = transport_.Next("f0"), b = transport_.Next("f1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->first(), 0u);
  EXPECT_EQ(a->end(), 3u);
  EXPECT_EQ(log.DurableOffset(), Offset(0)) << "shipped while the leader's flush is held";
  Deliver(a, OkAnswer(3));
  Deliver(b, OkAnswer(3));
  EXPECT_EQ(MarkOf(LogKind::kStream), Offset(0)) << "two followers hold it, the leader not yet";
  EXPECT_EQ(StatusOf("f0", LogKind::kStream).confirmed, Offset(3));
  faults_->HoldSyncs(false);
  ASSERT_TRUE(flushed.get_future().get());
  EXPECT_TRUE(WaitMark(LogKind::kStream, Offset(3)));
}

// Without it (Leader shards) nothing ships until the leader's own flush covered it.
TEST_F(ShardReplicatorTest, WithoutShipUnflushedOnlyDurableRecordsShip) {
  OpenStore(Offset(0), storage::FsyncMode::kOnCommit);
  Start(Options(1));
  Barrier();
  storage::DurableLog& log = store_->log(LogKind::kStream);
  faults_->HoldSyncs(true);
  std::promise<storage::StorageResult<void>> flushed;
  const std::string p0 = "a";
  const storage::AppendRecord rec{storage::AsBytes(p0), Generation(1), 1};
  ASSERT_TRUE(log.AppendAsync(
      {&rec, 1}, [&](const storage::StorageResult<void>& r) { flushed.set_value(r); }));
  Barrier();  // a written-tail watch would have posted its pass before AppendAsync returned
  EXPECT_EQ(transport_.Unread(), 0u);
  EXPECT_EQ(log.WrittenOffset(), Offset(1));
  faults_->HoldSyncs(false);
  ASSERT_TRUE(flushed.get_future().get());
  auto s = transport_.Next("f0");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first(), 0u);
}
#endif

// --- threads ------------------------------------------------------------------------------------

// A records answer arrives on the transport's thread. With the executor idle it is handled
// right there (Executor::RunOrPost): the mark, and what waits for it, skip a thread wakeup.
// With the executor busy it waits its turn on the executor's thread.
TEST_F(ShardReplicatorTest, ARecordsAnswerRunsOnTheDeliveringThreadWhenTheExecutorIsIdle) {
  OpenStore();
  Append(LogKind::kStream, 4);
  Start(Options(1));  // RF 2: the follower's answer makes the majority
  auto a = transport_.Next("f0");
  ASSERT_TRUE(a);
  WaitIdle();
  a->done(OkAnswer(4));
  ASSERT_TRUE(WaitMark(LogKind::kStream, Offset(4)));
  EXPECT_EQ(MarkThreads().back(), std::this_thread::get_id());

  Append(LogKind::kStream, 2);
  auto b = transport_.Next("f0");
  ASSERT_TRUE(b);
  std::promise<void> release;
  std::promise<std::thread::id> executor_thread;
  ASSERT_TRUE(ex_.Post([&] {
    executor_thread.set_value(std::this_thread::get_id());
    release.get_future().wait();
  }));
  const std::thread::id busy = executor_thread.get_future().get();
  b->done(OkAnswer(6));  // queued behind the blocked task, not run here
  for (auto& [log, mark] : Marks())
    EXPECT_LT(mark, Offset(6)) << "handled before the executor was free";
  release.set_value();
  ASSERT_TRUE(WaitMark(LogKind::kStream, Offset(6)));
  EXPECT_EQ(MarkThreads().back(), busy);
}

// ship_unflushed: a written batch ships from the appending thread when the executor is idle
// (the send is made before the append returns); with the executor busy it waits its turn.
TEST_F(ShardReplicatorTest, AWrittenBatchShipsFromTheAppendingThreadWhenTheExecutorIsIdle) {
  OpenStore(Offset(0), storage::FsyncMode::kOnCommit);
  auto o = Options(2);
  o.ship_unflushed = true;
  Start(o);
  WaitIdle();
  Append(LogKind::kStream, 3);
  EXPECT_EQ(transport_.Unread("f0"), 1u) << "not shipped before the append returned";
  EXPECT_EQ(transport_.Unread("f1"), 1u);
  auto a = transport_.Next("f0"), b = transport_.Next("f1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->end(), 3u);
  Deliver(a, OkAnswer(3));
  Deliver(b, OkAnswer(3));
  ASSERT_TRUE(WaitMark(LogKind::kStream, Offset(3)));

  std::promise<void> release;
  ASSERT_TRUE(ex_.Post([&] { release.get_future().wait(); }));
  Append(LogKind::kStream, 2);
  EXPECT_EQ(transport_.Unread(), 0u) << "shipped while the executor was busy";
  release.set_value();
  auto c = transport_.Next("f0");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->first(), 3u);
  EXPECT_EQ(c->end(), 5u);
}

// Stop() waits for an answer being handled on another thread, as it waits for the executor.
TEST_F(ShardReplicatorTest, StopWaitsForAnAnswerBeingHandledOnTheTransportsThread) {
  OpenStore();
  Append(LogKind::kStream, 4);
  Start(Options(1));
  auto a = transport_.Next("f0");
  ASSERT_TRUE(a);
  WaitIdle();
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> handled{false};
  mark_hook_ = [&] {
    entered.set_value();
    released.wait();
    handled = true;
  };
  std::thread transport_thread([&] { a->done(OkAnswer(4)); });
  entered.get_future().wait();  // the answer holds the executor on transport_thread
  auto stopped = std::async(std::launch::async, [&] {
    rep_->Stop();
    return handled.load();
  });
  // Only a Stop() that does not wait can return here; the check cannot fail spuriously.
  EXPECT_EQ(stopped.wait_for(100ms), std::future_status::timeout);
  release.set_value();
  EXPECT_TRUE(stopped.get()) << "Stop() returned while the answer was still being handled";
  transport_thread.join();
}

// --- lifetime -----------------------------------------------------------------------------------

TEST_F(ShardReplicatorTest, StopWithAnswersStillInFlight) {
  OpenStore();
  Append(LogKind::kStream, 10);
  auto o = Options(2);
  o.max_batch_records = 2;
  Start(o);
  std::vector<SentPtr> out;
  for (int i = 0; i < 6; ++i) out.push_back(transport_.Next());
  ASSERT_TRUE(out.back());
  rep_->Stop();
  rep_.reset();
  const size_t marks_before = Marks().size();
  const size_t sent_before = transport_.total();
  // Answers arriving after the replicator is gone touch nothing.
  for (auto& s : out) s->done(OkAnswer(10));
  Append(LogKind::kStream, 3);
  Barrier();
  EXPECT_EQ(Marks().size(), marks_before);
  EXPECT_EQ(transport_.total(), sent_before);
  EXPECT_NE(metrics_.RenderPrometheus().find("felix_broker_replication_lag_records 0"),
            std::string::npos);
}

}  // namespace
}  // namespace felix::cluster
