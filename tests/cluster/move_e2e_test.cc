// Issue 16, planned moves on real processes: one real etcd and three real `felix-broker`
// processes (ClusterHarness), publishers on the C++ client library. While a publisher keeps
// publishing to an RF 3 stream, an operator moves the shard's leadership (POST /v1/shard-moves,
// what `felix cluster move` sends) and then the new leader is stopped gracefully (SIGTERM: it
// hands its leadership over before it exits). The publisher sees no failed publish beyond
// definite, retryable refusals (retried with the same payload) — and, rarely, an unknown
// outcome for a publish that raced the stopping broker's final close (close code 0, "broker
// shutting down", with the request unanswered: honest, as the client cannot tell whether it was
// admitted; see docs/cluster.md "SIGTERM handoff"); the final log holds every acknowledged
// record once, at its acknowledged offset, any such unknown one at most once, and nothing
// else. Run for
// both consistencies (`Quorum` shards reopen behind the promotion fence; `Leader` ones do not),
// and through a rolling restart of all three brokers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_e2e_util.h"
#include "felix/client.h"
#include "support/cluster_harness.h"

namespace felix::cluster {
namespace {

using felix::testing::ClusterHarness;
using Json = nlohmann::json;
using namespace std::chrono_literals;

using e2e::Eventually;

struct Acked {
  uint64_t offset = 0;
  std::string payload;
};

// Publishes "p-0", "p-1", ... one at a time until Stop(). A refusal whose retry class says
// nothing was written is sent again with the same payload (the publisher may retry); an unknown
// outcome is counted and not resent.
class Publisher {
 public:
  Publisher(ClientOptions options, StreamRef stream)
      : options_(std::move(options)), stream_(std::move(stream)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Publisher() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  size_t acked() {
    std::lock_guard lock(mu_);
    return acked_.size();
  }
  std::vector<Acked> acked_records() {
    std::lock_guard lock(mu_);
    return acked_;
  }
  int unknown() const { return unknown_.load(); }
  // Payloads whose publish ended unknown, and whether every one of them ended with the
  // stopping broker closing the connection (nothing else may end unknown here).
  std::vector<std::string> unknown_payloads() {
    std::lock_guard lock(mu_);
    return unknown_payloads_;
  }
  bool unknown_only_at_close() {
    std::lock_guard lock(mu_);
    return unknown_only_at_close_;
  }
  int refused() const { return refused_.load(); }
  std::string last_error() {
    std::lock_guard lock(mu_);
    return last_error_;
  }

 private:
  void Run() {
    auto client = Client::Connect(options_);
    if (!client) {
      std::lock_guard lock(mu_);
      last_error_ = "connect: " + client.error().ToString();
      unknown_.fetch_add(1);
      return;
    }
    for (size_t i = 0; !stop_.load(); ++i) {
      const std::string payload = "p-" + std::to_string(i);
      while (true) {
        auto receipt = (*client)->Publish(stream_, {payload});
        if (receipt && receipt->offset) {
          std::lock_guard lock(mu_);
          acked_.push_back({*receipt->offset, payload});
          break;
        }
        std::lock_guard lock(mu_);
        if (!receipt) last_error_ = receipt.error().ToString();
        if (!receipt && (receipt.error().retry == RetryClass::kRetry ||
                         receipt.error().retry == RetryClass::kRetryAfter ||
                         receipt.error().retry == RetryClass::kRedirect)) {
          refused_.fetch_add(1);  // nothing was written: the same payload again
          continue;
        }
        unknown_.fetch_add(1);  // no offset, or an outcome the broker cannot vouch for
        unknown_payloads_.push_back(payload);
        if (receipt || last_error_.find("endpoint stopping") == std::string::npos) {
          unknown_only_at_close_ = false;
        }
        break;
      }
    }
  }

  const ClientOptions options_;
  const StreamRef stream_;
  std::atomic<bool> stop_{false};
  std::atomic<int> unknown_{0};
  std::atomic<int> refused_{0};
  std::mutex mu_;
  std::vector<Acked> acked_;
  std::vector<std::string> unknown_payloads_;
  bool unknown_only_at_close_ = true;
  std::string last_error_;
  std::thread thread_;
};

class MoveE2E : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.StartAll()) << cluster_.error(); }

  std::pair<int, Json> Admin(int n, const std::string& method, const std::string& path,
                             const Json& body = nullptr) {
    return e2e::Admin(cluster_, n, method, path, body);
  }
  // The shard's assignment as node n sees it (null when unknown).
  Json Shard(int n, const std::string& stream) {
    Json status = Admin(n, "GET", "/v1/cluster").second;
    if (!status.is_object()) return nullptr;
    for (const auto& s : status["shards"]) {
      if (s["name"] == stream && s["shard"] == 0) return s;
    }
    return nullptr;
  }
  std::string Token() { return e2e::StreamToken(cluster_); }
  ClientOptions Options(const std::string& token) {
    ClientOptions o;
    o.broker = cluster_.brokers();
    o.ca_file = cluster_.ca_file();
    o.tenant_id = "default";
    o.token = token;
    return o;
  }
  // Node n leads the stream's shard, active, as every running node sees it.
  bool Leads(const std::string& stream, int n, std::vector<int> observers) {
    for (int o : observers) {
      Json s = Shard(o, stream);
      if (!s.is_object() || s["leader"] != cluster_.node_id(n) || s["state"] != "active") {
        return false;
      }
    }
    return true;
  }
  // Every record of the stream's shard, read from offset 0 through the client library.
  std::vector<Acked> ReadAll(const std::string& token, const StreamRef& stream, size_t count) {
    std::vector<Acked> out;
    auto client = Client::Connect(Options(token));
    EXPECT_TRUE(client) << (client ? "" : client.error().ToString());
    if (!client) return out;
    auto sub = (*client)->Subscribe(stream, {.start = StartPosition::Offset(0)});
    EXPECT_TRUE(sub) << (sub ? "" : sub.error().ToString());
    if (!sub) return out;
    while (out.size() < count) {
      auto next = (*sub)->Next(10s);
      if (!next || !*next) break;
      out.push_back({(*next)->offset.value_or(UINT64_MAX), (*next)->payload});
    }
    return out;
  }

  // The final log holds every record `publisher` got acknowledged, once, at its offset, each
  // write of unknown outcome at most once, and nothing else. Unknown outcomes are allowed only
  // from the stopping broker's final close, at most one per stop.
  void ExpectExactlyTheAcknowledged(const std::string& token, const StreamRef& stream,
                                    Publisher& publisher, int stops) {
    EXPECT_LE(publisher.unknown(), stops) << publisher.last_error();
    EXPECT_TRUE(publisher.unknown_only_at_close()) << publisher.last_error();
    std::vector<Acked> acked = publisher.acked_records();
    const std::vector<std::string> unknown = publisher.unknown_payloads();
    std::vector<Acked> log = ReadAll(token, stream, acked.size() + unknown.size());
    ASSERT_GE(log.size(), acked.size());
    ASSERT_LE(log.size(), acked.size() + unknown.size());
    std::set<std::string> allowed(unknown.begin(), unknown.end());
    for (const auto& a : acked) allowed.insert(a.payload);
    for (const auto& r : log)
      EXPECT_TRUE(allowed.count(r.payload)) << "never published: " << r.payload;
    std::map<uint64_t, std::string> by_offset;
    std::set<std::string> payloads;
    for (size_t i = 0; i < log.size(); ++i) {
      // Ascending; a `Quorum` leader's generation-start record (replication.md §17) takes an
      // offset that holds no event, so the offsets a reader sees may skip one per move.
      if (i > 0) {
        EXPECT_GT(log[i].offset, log[i - 1].offset);
      }
      by_offset[log[i].offset] = log[i].payload;
      EXPECT_TRUE(payloads.insert(log[i].payload).second) << "duplicate " << log[i].payload;
    }
    for (const auto& a : acked) {
      auto it = by_offset.find(a.offset);
      ASSERT_NE(it, by_offset.end()) << a.payload << " acknowledged at " << a.offset;
      EXPECT_EQ(it->second, a.payload) << "offset " << a.offset;
    }
  }
  // Creates an RF 3 durable stream and waits until node 1 sees its three replicas placed.
  Json CreateStream(const std::string& name, const std::string& consistency) {
    auto [created, answer] = Admin(1, "POST", "/v1/tenants/default/namespaces/default/streams",
                                   Json{{"stream", name},
                                        {"durable", true},
                                        {"replication_factor", 3},
                                        {"consistency", consistency}});
    EXPECT_EQ(created, 201) << answer.dump();
    Json placed;
    EXPECT_TRUE(Eventually([&] {
      placed = Shard(1, name);
      return placed.is_object() && placed["replicas"].size() == 3;
    }));
    return placed;
  }

  void MoveThenHandOver(const std::string& consistency);

  ClusterHarness cluster_;
};

void MoveE2E::MoveThenHandOver(const std::string& consistency) {
  const std::string name = "mv-" + consistency;
  const Json placed = CreateStream(name, consistency);
  ASSERT_TRUE(placed.is_object());
  const int first = std::stoi(placed["leader"].get<std::string>().substr(1));
  const int target = first % 3 + 1;
  const int third = 6 - first - target;
  const std::string token = Token();
  const StreamRef stream{"default", name};

  Publisher publisher(Options(token), stream);
  ASSERT_TRUE(Eventually([&] { return publisher.acked() >= 50; })) << publisher.last_error();

  // A subscriber on the leader (the client library offers FEATURE_SHARD_MOVED): the move ends
  // its subscription with `shard_moved` naming where to resume, and resuming there loses and
  // repeats nothing.
  auto sub_client = Client::Connect(Options(token));
  ASSERT_TRUE(sub_client) << sub_client.error().ToString();
  auto sub = (*sub_client)->Subscribe(stream, {.start = StartPosition::Offset(0)});
  ASSERT_TRUE(sub) << sub.error().ToString();
  std::optional<uint64_t> last_seen;
  std::optional<ClientError> sub_end;
  std::thread reader([&] {
    for (;;) {
      auto next = (*sub)->Next(200ms);
      if (!next) {
        sub_end = next.error();
        return;
      }
      if (*next && (*next)->offset) last_seen = (*next)->offset;
    }
  });

  // The operator's move (what `felix cluster move --stream NAME --to nT` sends).
  auto [status, move] = Admin(third, "POST", "/v1/shard-moves",
                              Json{{"name", name}, {"to", cluster_.node_id(target)}});
  ASSERT_EQ(status, 202) << move.dump();
  EXPECT_EQ(move["status"], "requested");
  EXPECT_EQ(move["from"], cluster_.node_id(first));
  ASSERT_TRUE(Eventually([&] { return Leads(name, target, {1, 2, 3}); })) << Shard(1, name).dump();
  reader.join();
  ASSERT_TRUE(sub_end);
  EXPECT_EQ(sub_end->code, ClientErrorCode::kShardMoved) << sub_end->ToString();
  ASSERT_TRUE(last_seen);
  ASSERT_TRUE(sub_end->resume_from) << sub_end->ToString();
  EXPECT_EQ(*sub_end->resume_from, *last_seen + 1);
  auto resumed =
      (*sub_client)->Subscribe(stream, {.start = StartPosition::Offset(*sub_end->resume_from)});
  ASSERT_TRUE(resumed) << resumed.error().ToString();
  auto first_again = (*resumed)->Next(10s);
  ASSERT_TRUE(first_again && *first_again) << "the new leader serves the rest";
  // A `Quorum` destination begins its generation with a generation-start record at
  // resume_from (replication.md §17), an offset that holds no event: the first one follows it.
  const uint64_t start_records = consistency == "Quorum" ? 1 : 0;
  EXPECT_EQ((*first_again)->offset, *sub_end->resume_from + start_records);
  const uint64_t moved_generation = Shard(target, name)["generation"].get<uint64_t>();
  EXPECT_EQ(moved_generation, placed["generation"].get<uint64_t>() + 2);  // fence, cut over
  size_t before = publisher.acked();
  ASSERT_TRUE(Eventually([&] { return publisher.acked() >= before + 50; }))
      << publisher.last_error();

  // A graceful stop of the new leader hands its leadership over before the broker exits.
  EXPECT_EQ(cluster_.Stop(target), 0);
  EXPECT_NE(cluster_.LogTail(target, 20000).find("shutdown handoff completed"), std::string::npos)
      << cluster_.LogTail(target);
  Json after = Shard(first, name);
  ASSERT_TRUE(after.is_object());
  EXPECT_NE(after["leader"], cluster_.node_id(target));
  before = publisher.acked();
  ASSERT_TRUE(Eventually([&] { return publisher.acked() >= before + 50; }))
      << publisher.last_error();
  publisher.Stop();
  if (publisher.unknown() != 0) {
    // Rare under a loaded ctest -j2 (1 in ~5 runs; a publish racing the final close): keep
    // what the stopped broker said.
    std::printf("unknown outcome (%s); n%d's log:\n%s\n", publisher.last_error().c_str(), target,
                cluster_.LogTail(target, 30000).c_str());
  }

  std::printf(
      "%s: %zu acknowledged, %d definite refusals retried across the move and the handoff\n",
      consistency.c_str(), publisher.acked(), publisher.refused());

  ExpectExactlyTheAcknowledged(token, stream, publisher, 1);
  // The broker that stopped comes back (as a follower).
  ASSERT_TRUE(cluster_.StartReady(target)) << cluster_.error();
}

// A rolling restart: each broker in turn is stopped gracefully (handing over what it leads)
// and started again while a publisher keeps publishing to a `Quorum` stream, which stays
// writable throughout and ends with exactly what was acknowledged.
TEST_F(MoveE2E, ARollingRestartKeepsAQuorumStreamWritable) {
  ASSERT_TRUE(CreateStream("rolling", "Quorum").is_object());
  const std::string token = Token();
  const StreamRef stream{"default", "rolling"};
  Publisher publisher(Options(token), stream);
  ASSERT_TRUE(Eventually([&] { return publisher.acked() >= 30; })) << publisher.last_error();
  for (int n = 1; n <= 3; ++n) {
    EXPECT_EQ(cluster_.Stop(n), 0) << n;
    ASSERT_TRUE(cluster_.StartReady(n)) << n << ": " << cluster_.error();
    const size_t before = publisher.acked();
    ASSERT_TRUE(Eventually([&] { return publisher.acked() >= before + 30; }))
        << "after restarting n" << n << ": " << publisher.last_error();
  }
  publisher.Stop();
  ExpectExactlyTheAcknowledged(token, stream, publisher, 3);
}

TEST_F(MoveE2E, AQuorumShardMovesAndHandsOverWithoutLosingOrDuplicatingAPublish) {
  MoveThenHandOver("Quorum");
}

TEST_F(MoveE2E, ALeaderShardMovesAndHandsOverWithoutLosingOrDuplicatingAPublish) {
  MoveThenHandOver("Leader");
}

// A move to a broker outside the replica set copies it in first (stage), then fences and cuts
// over; the old leader leaves the set (the replication factor is 2). Bad requests are refused.
TEST_F(MoveE2E, AMoveToANodeOutsideTheReplicaSetCopiesItInFirst) {
  auto [created, answer] =
      Admin(1, "POST", "/v1/tenants/default/namespaces/default/streams",
            Json{{"stream", "rf2"}, {"durable", true}, {"replication_factor", 2}});
  ASSERT_EQ(created, 201) << answer.dump();
  Json placed;
  ASSERT_TRUE(Eventually([&] {
    placed = Shard(1, "rf2");
    return placed.is_object() && placed["replicas"].size() == 2;
  }));
  int outsider = 0;
  const auto replicas = placed["replicas"].get<std::vector<std::string>>();
  for (int n = 1; n <= 3; ++n) {
    if (std::find(replicas.begin(), replicas.end(), cluster_.node_id(n)) == replicas.end())
      outsider = n;
  }
  ASSERT_NE(outsider, 0);
  const std::string token = Token();
  const StreamRef stream{"default", "rf2"};
  Publisher publisher(Options(token), stream);
  ASSERT_TRUE(Eventually([&] { return publisher.acked() >= 50; })) << publisher.last_error();

  auto [status, body] = Admin(1, "POST", "/v1/shard-moves",
                              Json{{"name", "rf2"}, {"to", cluster_.node_id(outsider)}});
  ASSERT_EQ(status, 202) << body.dump();
  EXPECT_EQ(body["copy_first"], true);
  ASSERT_TRUE(Eventually([&] { return Leads("rf2", outsider, {1, 2, 3}); })) << Shard(1, "rf2");
  Json moved = Shard(outsider, "rf2");
  EXPECT_EQ(moved["replicas"].size(), 2u) << moved.dump();
  for (const auto& r : moved["replicas"]) EXPECT_NE(r, placed["leader"]) << moved.dump();
  EXPECT_EQ(moved["generation"].get<uint64_t>(), placed["generation"].get<uint64_t>() + 3);
  const size_t before = publisher.acked();
  ASSERT_TRUE(Eventually([&] { return publisher.acked() >= before + 50; }))
      << publisher.last_error();
  publisher.Stop();
  ExpectExactlyTheAcknowledged(token, stream, publisher, 0);

  auto [missing, why] = Admin(1, "POST", "/v1/shard-moves", Json{{"name", "none"}, {"to", "n1"}});
  EXPECT_EQ(missing, 404) << why.dump();
  auto [bad, reason] = Admin(1, "POST", "/v1/shard-moves", Json{{"name", "rf2"}});
  EXPECT_EQ(bad, 400) << reason.dump();
  auto [unknown, which] = Admin(1, "POST", "/v1/shard-moves", Json{{"name", "rf2"}, {"to", "n9"}});
  EXPECT_EQ(unknown, 400) << which.dump();
}

}  // namespace
}  // namespace felix::cluster
