// ShardReplicator through the real peer stack: a PeerPool (PeerPoolTransport) dialling two peer
// brokers over QUIC on loopback whose PeerServers offer every capability bit and answer the
// records kinds from a minimal follower kept in the test (stores a batch at its tail, answers
// LogGap past it, the batch end below it). The leader's logs are real; the mark must reach the
// tail on a majority and every follower must hold the leader's bytes at the leader's offsets.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "cluster/peer_test_util.h"
#include "cluster/shard_replicator.h"
#include "support/child_process.h"

namespace felix::cluster {
namespace {

using namespace felix::cluster::test;
using namespace std::chrono_literals;
using storage::LogKind;

// A follower just good enough to be shipped to: one map per FLXI log id.
struct MiniFollower {
  explicit MiniFollower(const std::string& node_id)
      : server(std::make_unique<PeerServer>(PeerServerOptions{node_id, 0xFF, false, "internal"},
                                            metrics)) {
    for (flxi::Kind kind :
         {flxi::Kind::kReplicateRecords, flxi::Kind::kReplicateCommittedRecords,
          flxi::Kind::kReplicateLabelledRecords, flxi::Kind::kReplicateTimedRecords,
          flxi::Kind::kReplicateGroupRecords, flxi::Kind::kReplicateDeadLetterRecords}) {
      EXPECT_TRUE(server
                      ->Handle(kind, [this](const PeerRequest& req,
                                            PeerReply reply) { reply(Apply(req.frame)); })
                      .has_value());
    }
    EndpointOptions eo;
    eo.tls = MakeTls(UnauthenticatedInternal());
    eo.name = "internal";
    auto r = Endpoint::Create(Loopback(), eo, metrics, server->listen_handlers());
    EXPECT_TRUE(r.has_value());
    ep = std::move(*r);
  }
  ~MiniFollower() {
    if (ep) ep->Stop();
  }

  flxi::Frame Apply(const flxi::Frame& frame) {
    const auto& rec = std::get<flxi::Records>(frame.body);
    std::lock_guard<std::mutex> lock(mu);
    kinds.push_back(frame.kind);
    if (rec.checksum != flxi::BatchChecksum(rec.payloads, rec.marks)) {
      return {flxi::Kind::kReplicateError,
              flxi::ReplicateError{0, flxi::ErrorCode::kMalformed, 0, "checksum"}};
    }
    auto& log = logs[uint8_t(*flxi::TargetLog(frame))];
    const uint64_t tail = log.size();  // every test log starts at offset 0
    if (rec.first_offset > tail) {
      return {flxi::Kind::kReplicateError,
              flxi::ReplicateError{0, flxi::ErrorCode::kLogGap, tail, ""}};
    }
    for (size_t i = 0; i < rec.payloads.size(); ++i) {
      const uint64_t offset = rec.first_offset + i;
      if (offset < tail) {
        if (log[offset] != rec.payloads[i]) {
          return {flxi::Kind::kReplicateError,
                  flxi::ReplicateError{0, flxi::ErrorCode::kLogConflict, tail, "bytes differ"}};
        }
        continue;
      }
      log.emplace(offset, std::string(rec.payloads[i]));
    }
    if (rec.commit_offset) commit = std::max(commit, *rec.commit_offset);
    return {flxi::Kind::kReplicateOk, flxi::ReplicateOk{0, rec.first_offset + rec.payloads.size()}};
  }

  std::map<uint64_t, std::string> Log(flxi::ReplicaLog id) {
    std::lock_guard<std::mutex> lock(mu);
    return logs[uint8_t(id)];
  }
  std::vector<flxi::Kind> Kinds() {
    std::lock_guard<std::mutex> lock(mu);
    return kinds;
  }

  MetricsRegistry metrics;
  std::unique_ptr<PeerServer> server;
  std::unique_ptr<Endpoint> ep;
  std::mutex mu;
  std::map<uint8_t, std::map<uint64_t, std::string>> logs;
  std::vector<flxi::Kind> kinds;
  uint64_t commit = 0;
};

TEST(ShardReplicatorQuicTest, ShipsEveryLogToTwoFollowersOverThePeerPool) {
  const std::string dir = felix::testing::MakeTempDir("shard-replicator-quic");
  storage::LogOptions lo;
  lo.fsync_mode = storage::FsyncMode::kNone;
  auto store = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform(lo));
  ASSERT_TRUE(store.has_value());
  ASSERT_TRUE((*store)->AcceptGeneration(Generation(1), "leader", Offset(0)).has_value());

  MiniFollower f1("node-b"), f2("node-c");
  Caller caller(Opts("node-a"));
  PeerPoolTransport transport(*caller.pool);
  broker::Executor ex("repl-quic");
  std::mutex mu;
  std::condition_variable cv;
  Offset stream_mark(0);

  ShardReplicatorOptions o;
  o.tenant = "t";
  o.ns = "ns";
  o.name = "orders";
  o.generation = Generation(1);
  o.followers = {f1.ep ? PeerAddress{"node-b", f1.ep->local_address()} : PeerAddress{},
                 f2.ep ? PeerAddress{"node-c", f2.ep->local_address()} : PeerAddress{}};
  o.max_batch_records = 16;
  MetricsRegistry metrics;
  auto rep = std::make_unique<ShardReplicator>(**store, o, transport, ex, &metrics,
                                               [&](LogKind log, Offset mark) {
                                                 if (log != LogKind::kStream) return;
                                                 std::lock_guard<std::mutex> lock(mu);
                                                 stream_mark = mark;
                                                 cv.notify_all();
                                               });
  rep->Start();

  // Appends in several writes while shipping runs; every one is noticed without Wake().
  std::vector<std::string> payloads;
  for (int i = 0; i < 100; ++i) payloads.push_back("record-" + std::to_string(i));
  for (int batch = 0; batch < 10; ++batch) {
    std::vector<storage::AppendRecord> records;
    for (int i = 0; i < 10; ++i) {
      records.push_back({storage::AsBytes(payloads[batch * 10 + i]), Generation(1), 0});
    }
    ASSERT_TRUE((*store)->log(LogKind::kStream).Append(records).has_value());
  }
  std::string cursor = "cursor-0";
  ASSERT_TRUE((*store)
                  ->log(LogKind::kCursors)
                  .Append(storage::AppendRecord{storage::AsBytes(cursor), Generation(1), 0})
                  .has_value());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return stream_mark == Offset(100); }));
  }
  // Both followers end up with the leader's bytes at the leader's offsets (the mark needs only
  // one of them; wait for the other through the replicator's own status).
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::promise<bool> level;
    ex.Post([&] {
      bool all = true;
      for (auto& s : rep->status()) {
        all = all && (s.log == LogKind::kDeadLetters || s.in_sync);
      }
      level.set_value(all);
    });
    if (level.get_future().get()) break;
    std::this_thread::yield();
  }
  for (MiniFollower* f : {&f1, &f2}) {
    auto log = f->Log(flxi::ReplicaLog::kStream);
    ASSERT_EQ(log.size(), 100u);
    for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(log[i], payloads[i]);
    auto cursors = f->Log(flxi::ReplicaLog::kGroupCursors);
    ASSERT_EQ(cursors.size(), 1u);
    EXPECT_EQ(cursors[0], cursor);
    // The first stream batch went as kind 26 (capabilities not yet known); once the pool's
    // handshake told them, the stream shipped labelled and timed (kind 36), which the pool
    // lets through only because the peer offered RECORD_TIMES.
    auto kinds = f->Kinds();
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), flxi::Kind::kReplicateTimedRecords),
              kinds.end());
  }
  rep->Stop();
  rep.reset();
  ex.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace felix::cluster
