// Issue 15 (first slice) on real processes: one real etcd and three real `felix-broker`
// processes in cluster mode with peer mTLS (ClusterHarness). A client connected only to broker
// 1 publishes keyed records to every shard of a 6-shard stream: every publish is acknowledged
// with the offset its owner gave (forwarded ones too, even without commit acks), and reading
// each shard from its owner shows each record exactly once at that offset. The owner's own
// credential check holds against a forwarder that skips the ingress check (a raw
// AuthorizedForwardPublish with a token lacking stream.publish is refused Unauthorized), and
// a forward naming a stale generation or a broker that is not the owner is answered with the
// typed routing answer, never relayed. The same for cache operations: every op from one ingress
// lands on its key's owner, is readable through any broker, and the owner refuses a token
// without cache.write itself. Forwarded acks carry the owner hint (0x0080) to clients that
// offered it.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "broker/e2e_broker.h"
#include "broker/flx1_test_client.h"
#include "cluster_e2e_util.h"
#include "peer_test_util.h"
#include "support/cluster_harness.h"
#include "wire/flx1/constants.h"
#include "wire/shard_hash.h"

namespace felix::cluster {
namespace {

namespace flx1 = felix::wire::flx1;
using broker::testing::Flx1TestClient;
using broker::testing::TestStream;
using felix::testing::ClusterHarness;
using Json = nlohmann::json;
using namespace std::chrono_literals;

using e2e::Addr;
using e2e::Eventually;

struct ShardInfo {
  std::string leader;
  uint64_t generation = 0;
  bool operator==(const ShardInfo&) const = default;
};

class ForwardE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int n = 1; n <= cluster_.size(); ++n) {
      cluster_.SetNodeEnv(n, "FELIX_QUIC_LOOPS", std::to_string(QuicLoops()));
      if (PollMicros() >= 0)
        cluster_.SetNodeEnv(n, "FELIX_FORWARD_POLL_US", std::to_string(PollMicros()));
    }
    ASSERT_TRUE(cluster_.StartAll()) << cluster_.error();
  }
  // 1 (the default): each broker's client and internal endpoints share one loop thread.
  virtual int QuicLoops() const { return 1; }
  // FELIX_FORWARD_POLL_US; −1: the default (the ingress polls for the owner's answer).
  virtual int PollMicros() const { return -1; }
  void PublishToEveryShardThroughOneIngress();

  std::pair<int, Json> Admin(int n, const std::string& method, const std::string& path,
                             const Json& body = nullptr) {
    return e2e::Admin(cluster_, n, method, path, body);
  }
  std::map<uint32_t, ShardInfo> Shards(int n, const std::string& stream) {
    std::map<uint32_t, ShardInfo> out;
    Json status = Admin(n, "GET", "/v1/cluster").second;
    if (!status.is_object()) return out;
    for (const auto& s : status["shards"]) {
      if (s["name"] == stream && !s["leader"].get<std::string>().empty()) {
        out[s["shard"].get<uint32_t>()] = {s["leader"], s["generation"].get<uint64_t>()};
      }
    }
    return out;
  }
  std::string Token(std::vector<std::string> perms) {
    auto [status, body] = Admin(1, "POST", "/v1/tenants/default/tokens",
                                Json{{"subject", "tester"}, {"permissions", perms}});
    EXPECT_EQ(status, 200) << body.dump();
    return body.value("felix_token", "");
  }
  std::unique_ptr<Flx1TestClient> Connect(int n) {
    return Flx1TestClient::Connect(Addr(cluster_.client_addr(n)), cluster_.ca_file());
  }
  static int NodeNumber(const std::string& node_id) { return std::stoi(node_id.substr(1)); }
  static std::string KeyForShard(uint32_t shards, uint32_t shard, int skip = 0) {
    for (int i = 0;; ++i) {
      std::string key = "k" + std::to_string(i);
      if (wire::ShardModulo(shards, key) == shard && skip-- == 0) return key;
    }
  }
  // A stream of `shards` shards created on node 1, assigned, with the same view on every node.
  std::map<uint32_t, ShardInfo> CreateAssigned(const std::string& name, uint32_t shards) {
    auto [status, body] = Admin(1, "POST", "/v1/tenants/default/namespaces/default/streams",
                                Json{{"stream", name}, {"durable", true}, {"shards", shards}});
    EXPECT_EQ(status, 201) << body.dump();
    std::map<uint32_t, ShardInfo> shards_of;
    EXPECT_TRUE(Eventually([&] { return (shards_of = Shards(1, name)).size() == shards; }));
    for (int n : {2, 3}) EXPECT_TRUE(Eventually([&] { return Shards(n, name) == shards_of; }));
    return shards_of;
  }
  // Subscribes to `shard` of `stream` on node n from the earliest offset; the events up to the
  // shard's live offset at subscribe time (every record it holds), as {offset, payload}.
  std::vector<std::pair<uint64_t, std::string>> ReadShard(int n, const std::string& token,
                                                          const std::string& stream,
                                                          uint32_t shard) {
    auto client = Connect(n);
    EXPECT_TRUE(client);
    if (!client) return {};
    auto sub = broker::e2e::Authed(*client, token);
    flx1::Subscribe subscribe;
    subscribe.tenant_id = "default";
    subscribe.namespace_ = "default";
    subscribe.stream = stream;
    subscribe.shard = shard;
    subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kEarliest, 0};
    sub->SendMessage(subscribe);
    auto events = client->AcceptEventStream();
    EXPECT_TRUE(events);
    if (!events) return {};
    EXPECT_TRUE(events->Read<flx1::EventStreamHello>());
    auto subscribed = sub->Read<flx1::Subscribed>();
    EXPECT_TRUE(subscribed) << "node " << n << " shard " << shard;
    if (!subscribed) return {};
    EXPECT_EQ(subscribed->start_offset, 0u);
    EXPECT_TRUE(subscribed->live_offset);
    return broker::e2e::ReadEvents(*events, subscribed->live_offset.value_or(0));
  }

  ClusterHarness cluster_;
};

// The same forwarding with a loop thread per port (FELIX_QUIC_LOOPS=2): the ingress then hands
// each forward to another thread and takes the owner's answer back from it.
class ForwardE2EWithALoopPerPort : public ForwardE2E {
 protected:
  int QuicLoops() const override { return 2; }
};

// And with the ingress's loop sleeping while the owners' answers are awaited
// (FELIX_FORWARD_POLL_US=0) instead of polling.
class ForwardE2ESleepingForAnswers : public ForwardE2E {
 protected:
  int PollMicros() const override { return 0; }
};

TEST_F(ForwardE2E, OneIngressPublishesToEveryShardAndEachRecordLandsOnceOnItsOwner) {
  PublishToEveryShardThroughOneIngress();
}

TEST_F(ForwardE2ESleepingForAnswers,
       OneIngressPublishesToEveryShardAndEachRecordLandsOnceOnItsOwner) {
  PublishToEveryShardThroughOneIngress();
}

TEST_F(ForwardE2EWithALoopPerPort,
       OneIngressPublishesToEveryShardAndEachRecordLandsOnceOnItsOwner) {
  PublishToEveryShardThroughOneIngress();
}

void ForwardE2E::PublishToEveryShardThroughOneIngress() {
  auto shards = CreateAssigned("fwd", 6);
  ASSERT_EQ(shards.size(), 6u);
  std::string token =
      Token({"stream.publish:stream:default/*/*", "stream.subscribe:stream:default/*/*"});
  ASSERT_FALSE(token.empty());
  int remote_shards = 0;
  for (const auto& [shard, info] : shards) remote_shards += info.leader != "n1";
  ASSERT_GT(remote_shards, 0);  // the controller spreads leaders over the three brokers

  auto client = Connect(1);
  ASSERT_TRUE(client);
  // JSON publishes with commit acks, then binary publishes without them: a forwarded publish
  // is answered from the owner's answer either way, with the owner's offset.
  auto json = broker::e2e::Authed(*client, token, "default",
                                  flx1::kFeatureErrorCodes | flx1::kFeatureAckOnCommit);
  auto binary = broker::e2e::Authed(*client, token, "default", flx1::kFeatureErrorCodes);
  std::map<uint32_t, std::vector<std::pair<uint64_t, std::string>>> acked;
  uint64_t request_id = 0;
  for (uint32_t shard = 0; shard < 6; ++shard) {
    for (int i = 0; i < 2; ++i) {
      flx1::Publish p;
      p.tenant_id = "default";
      p.namespace_ = "default";
      p.stream = "fwd";
      std::string payload = "s" + std::to_string(shard) + "-json-" + std::to_string(i);
      p.payload = flx1::Bytes(payload.begin(), payload.end());
      std::string key = KeyForShard(6, shard, i);
      p.key = flx1::Bytes(key.begin(), key.end());
      p.request_id = ++request_id;
      json->SendMessage(p);
      auto ok = json->Read<flx1::PublishOk>();
      ASSERT_TRUE(ok) << "shard " << shard << " owner " << shards[shard].leader;
      EXPECT_EQ(ok->request_id, request_id);
      ASSERT_TRUE(ok->offset) << "shard " << shard;
      acked[shard].emplace_back(*ok->offset, payload);
    }
    if (shards[shard].leader == "n1") continue;  // binary round: forwarded shards only
    flx1::BinaryPublishBatch batch;
    batch.acked = flx1::BinaryPublishBatch::Acked{++request_id, flx1::AckMode::kPerBatch};
    batch.tenant_id = "default";
    batch.namespace_ = "default";
    batch.stream = "fwd";
    std::string key = KeyForShard(6, shard, 2);
    batch.key = key;
    std::string a = "s" + std::to_string(shard) + "-bin-a";
    std::string b = "s" + std::to_string(shard) + "-bin-b";
    batch.payloads = {a, b};
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(flx1::AppendFrame(flx1::Flx1Frame{batch}, bytes));
    binary->Send(bytes);
    auto ack = broker::e2e::ReadAck(*binary);
    ASSERT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk) << "shard " << shard;
    EXPECT_EQ(ack.request_id, request_id);
    ASSERT_TRUE(ack.offset) << "shard " << shard;
    // The client offered 0x0080: the ack of a forwarded batch names the owner (its client
    // address and the generation the hint holds for).
    ASSERT_TRUE(ack.owner) << "shard " << shard;
    EXPECT_EQ(ack.owner->node_id, shards[shard].leader);
    EXPECT_EQ(ack.owner->addr, std::optional<std::string_view>(
                                   cluster_.client_addr(NodeNumber(shards[shard].leader))));
    EXPECT_EQ(ack.owner->generation, shards[shard].generation);
    acked[shard].emplace_back(*ack.offset, a);
    acked[shard].emplace_back(*ack.offset + 1, b);
  }

  // No owner hint on a batch this broker wrote itself, nor to a client that did not offer it.
  auto no_hint = client->OpenStream();
  no_hint->SendMessage(broker::e2e::AuthMessage(
      "default", token, broker::e2e::kAllClientFlags & ~flx1::kFlagBinaryPublishAckOwner,
      flx1::kFeatureErrorCodes));
  ASSERT_TRUE(no_hint->Read<flx1::AuthOk>());
  auto committed = broker::e2e::Authed(*client, token);  // offers 0x0080, acks after the write
  for (uint32_t shard = 0; shard < 6; ++shard) {
    flx1::BinaryPublishBatch batch;
    batch.acked = flx1::BinaryPublishBatch::Acked{++request_id, flx1::AckMode::kPerBatch};
    batch.tenant_id = "default";
    batch.namespace_ = "default";
    batch.stream = "fwd";
    std::string key = KeyForShard(6, shard, 4);
    batch.key = key;
    std::string payload = "s" + std::to_string(shard) + "-hint";
    batch.payloads = {payload};
    bool local = shards[shard].leader == "n1";
    auto& on = local ? *committed : *no_hint;  // local: offered but not forwarded
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(flx1::AppendFrame(flx1::Flx1Frame{batch}, bytes));
    on.Send(bytes);
    auto ack = broker::e2e::ReadAck(on);
    ASSERT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk) << "shard " << shard;
    EXPECT_FALSE(ack.owner) << "shard " << shard;
    ASSERT_TRUE(ack.offset) << "shard " << shard;
    acked[shard].emplace_back(*ack.offset, payload);
  }

  // Each shard read from its owner holds exactly the acknowledged records at their offsets.
  for (const auto& [shard, info] : shards) {
    auto records = ReadShard(NodeNumber(info.leader), token, "fwd", shard);
    EXPECT_EQ(records, acked[shard]) << "shard " << shard << " on " << info.leader;
  }
  // A fire-and-forget publish is forwarded too (nobody waits for it): it shows up on its
  // owner right after the acknowledged ones.
  uint32_t remote = 0;
  while (shards[remote].leader == "n1") ++remote;
  flx1::Publish unacked;
  unacked.tenant_id = "default";
  unacked.namespace_ = "default";
  unacked.stream = "fwd";
  unacked.payload = flx1::Bytes{'f', 'f'};
  std::string key = KeyForShard(6, remote, 3);
  unacked.key = flx1::Bytes(key.begin(), key.end());
  unacked.ack = flx1::AckMode::kNone;
  json->SendMessage(unacked);
  auto expected = acked[remote];
  expected.emplace_back(expected.size(), "ff");
  EXPECT_TRUE(Eventually([&] {
    return ReadShard(NodeNumber(shards[remote].leader), token, "fwd", remote) == expected;
  })) << "shard "
      << remote;
  // Broker 1 forwarded and the owners served them: the counters say so.
  auto m1 = cluster_.AdminGet(1, "/metrics");
  ASSERT_TRUE(m1);
  EXPECT_NE(m1->find("felix_forward_sent_total{kind=\"AuthorizedForwardPublish\",outcome=\"ok\"}"),
            std::string::npos);
}

TEST_F(ForwardE2E, TheOwnerChecksTheClientsCredentialAndTheGenerationItself) {
  auto shards = CreateAssigned("guarded", 3);
  ASSERT_EQ(shards.size(), 3u);
  // A forwarder that skips the ingress check: a PeerPool holding broker 1's own certificate
  // (so the owner accepts it as peer n1) sends AuthorizedForwardPublish directly.
  using namespace felix::cluster::test;
  std::string certs = cluster_.dir() + "/certs/";
  Caller forwarder(Opts("n1"),
                   InternalTls(certs + "n1.pem", certs + "n1-key.pem", cluster_.ca_file()));
  std::string subscribe_only = Token({"stream.subscribe:stream:default/*/*"});
  std::string publisher = Token({"stream.publish:stream:default/*/*"});
  for (const auto& entry : shards) {
    // Named, not structured bindings: the lambda below captures them (clang 14).
    const auto& shard = entry.first;
    const auto& info = entry.second;
    int owner = NodeNumber(info.leader);
    PeerAddress to{info.leader, Addr(cluster_.internal_addr(owner))};
    auto send = [&](const std::string& token, uint64_t generation) {
      flxi::ForwardPublish fp;
      fp.shard = flxi::ShardRef{"default", "default", "guarded", shard, generation};
      fp.payloads = {"raw"};
      fp.credential = token;
      return forwarder.Call(to, flxi::Frame{flxi::Kind::kAuthorizedForwardPublish, fp});
    };
    // Every broker's view has the shard (CreateAssigned), but the owner may not have learnt
    // the stream itself yet: kUnavailable ("not known to this broker (yet)") until it has.
    decltype(send(subscribe_only, info.generation)) refused;
    EXPECT_TRUE(Eventually([&] {
      refused = send(subscribe_only, info.generation);
      return !refused || RefusalOf(*refused).code != flxi::ErrorCode::kUnavailable;
    })) << "shard "
        << shard;
    ASSERT_TRUE(refused.has_value()) << refused.error().message;
    EXPECT_EQ(RefusalOf(*refused).code, flxi::ErrorCode::kUnauthorized);
    auto ahead = send(publisher, info.generation + 1);
    ASSERT_TRUE(ahead.has_value()) << ahead.error().message;
    EXPECT_EQ(RefusalOf(*ahead).code, flxi::ErrorCode::kStaleRoute);
    auto ok = send(publisher, info.generation);
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
    auto frame = ok->Decode();
    ASSERT_TRUE(frame) << frame.error().ToString();
    ASSERT_EQ(frame->kind, flxi::Kind::kForwardPublishOk);
    const auto& range = std::get<flxi::ForwardPublishOk>(frame->body);
    EXPECT_EQ(range.first_offset, 0u);  // the refusals wrote nothing
    EXPECT_EQ(range.last_offset, 0u);
    // A broker that does not own the shard names the owner and does not relay.
    int other = owner % 3 + 1;
    auto moved = forwarder.Call(
        PeerAddress{cluster_.node_id(other), Addr(cluster_.internal_addr(other))},
        flxi::Frame{
            flxi::Kind::kAuthorizedForwardPublish, [&] {
              flxi::ForwardPublish fp;
              fp.shard = flxi::ShardRef{"default", "default", "guarded", shard, info.generation};
              fp.payloads = {"raw"};
              fp.credential = publisher;
              return fp;
            }()});
    ASSERT_TRUE(moved.has_value()) << moved.error().message;
    auto nl = moved->Decode();
    ASSERT_TRUE(nl);
    ASSERT_EQ(nl->kind, flxi::Kind::kNotLeader) << "shard " << shard;
    const auto& answer = std::get<flxi::NotLeader>(nl->body);
    EXPECT_EQ(answer.node_id, info.leader);
    EXPECT_EQ(answer.advertise_addr, cluster_.internal_addr(owner));
    EXPECT_EQ(answer.generation, info.generation);
  }
  // Through the client path the ingress refuses it first (forbidden, fatal class).
  auto client = Connect(1);
  ASSERT_TRUE(client);
  auto stream = broker::e2e::Authed(*client, subscribe_only);
  flx1::Publish p;
  p.tenant_id = "default";
  p.namespace_ = "default";
  p.stream = "guarded";
  p.payload = flx1::Bytes{'x'};
  p.request_id = 1;
  stream->SendMessage(p);
  auto error = stream->Read<flx1::PublishError>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "forbidden");
}

// Cache operations from one ingress to every shard of a 6-shard cache: each is applied on the
// key's owner (a direct FLXI read of the owner finds it, any other broker answers NotLeader
// and holds nothing to serve), and every value and sum is readable through every broker.
TEST_F(ForwardE2E, CacheOpsFromOneIngressAreAppliedOnEachKeysOwner) {
  constexpr uint32_t kShards = 6;
  auto [status, body] = Admin(1, "POST", "/v1/tenants/default/namespaces/default/caches",
                              Json{{"cache", "fwdcache"}, {"shards", kShards}, {"durable", true}});
  ASSERT_EQ(status, 201) << body.dump();
  std::map<uint32_t, ShardInfo> shards;
  ASSERT_TRUE(Eventually([&] { return (shards = Shards(1, "fwdcache")).size() == kShards; }));
  for (int n : {2, 3}) ASSERT_TRUE(Eventually([&] { return Shards(n, "fwdcache") == shards; }));
  int remote_shards = 0;
  for (const auto& [shard, info] : shards) remote_shards += info.leader != "n1";
  ASSERT_GT(remote_shards, 0);
  std::string token =
      Token({"cache.read:cache:default/default/*", "cache.write:cache:default/default/*"});
  ASSERT_FALSE(token.empty());

  auto ingress = Connect(1);
  ASSERT_TRUE(ingress);
  auto one = broker::e2e::Authed(*ingress, token);
  uint64_t request_id = 0;
  auto key_of = [](uint32_t shard) { return KeyForShard(kShards, shard); };
  auto counter_of = [](uint32_t shard) { return KeyForShard(kShards, shard, 1); };
  auto value_of = [](uint32_t shard) { return "value-" + std::to_string(shard); };
  auto get = [&](TestStream& on, const std::string& key) {
    flx1::CacheGet g{"default", "default", "fwdcache", key, ++request_id};
    on.SendMessage(g);
    auto v = on.Read<flx1::CacheValue>();
    EXPECT_TRUE(v) << key;
    if (v) {
      EXPECT_EQ(v->request_id, request_id);
    }
    return v ? v->value : std::optional<flx1::Bytes>(flx1::Bytes{'?'});
  };
  auto counter_get = [&](TestStream& on, const std::string& key) {
    on.SendMessage(flx1::CounterGet{"default", "default", "fwdcache", key, ++request_id});
    auto v = on.Read<flx1::CounterValue>();
    EXPECT_TRUE(v) << key;
    return v ? v->value : std::optional<int64_t>(-999);
  };
  auto bytes = [](const std::string& s) {
    return std::optional<flx1::Bytes>(flx1::Bytes(s.begin(), s.end()));
  };
  for (uint32_t shard = 0; shard < kShards; ++shard) {
    std::string v = value_of(shard);
    one->SendMessage(flx1::CachePut{"default", "default", "fwdcache", key_of(shard),
                                    flx1::Bytes(v.begin(), v.end()), ++request_id, 600000});
    auto ok = one->Read<flx1::CacheOk>();
    ASSERT_TRUE(ok) << "shard " << shard << " owner " << shards[shard].leader;
    EXPECT_EQ(ok->request_id, request_id);
    EXPECT_EQ(get(*one, key_of(shard)), bytes(v));
    for (int64_t delta : {int64_t(shard) + 1, int64_t(10)}) {
      one->SendMessage(flx1::CounterAdd{"default", "default", "fwdcache", counter_of(shard), delta,
                                        ++request_id});
      auto sum = one->Read<flx1::CounterValue>();
      ASSERT_TRUE(sum) << "shard " << shard;
      EXPECT_EQ(sum->request_id, request_id);
    }
  }
  // Readable through every broker, values and sums alike.
  for (int n = 1; n <= 3; ++n) {
    auto client = Connect(n);
    ASSERT_TRUE(client);
    auto on = broker::e2e::Authed(*client, token);
    for (uint32_t shard = 0; shard < kShards; ++shard) {
      EXPECT_EQ(get(*on, key_of(shard)), bytes(value_of(shard))) << "node " << n;
      EXPECT_EQ(counter_get(*on, counter_of(shard)), std::optional<int64_t>(shard + 11))
          << "node " << n << " shard " << shard;
    }
  }
  // On its owner, and only there: a direct FLXI get (as broker n1 would send it) finds the
  // value on the owner; every other broker names the owner instead of answering.
  using namespace felix::cluster::test;
  std::string certs = cluster_.dir() + "/certs/";
  Caller forwarder(Opts("n1"),
                   InternalTls(certs + "n1.pem", certs + "n1-key.pem", cluster_.ca_file()));
  std::string read_only = Token({"cache.read:cache:default/default/*"});
  std::deque<PeerResponse> answers;
  for (const auto& entry : shards) {
    const auto& shard = entry.first;  // not structured bindings: `op` captures them (clang 14)
    const auto& info = entry.second;
    std::string key = key_of(shard);
    auto op = [&](int n, flxi::CacheOpKind kind, const std::string& credential) {
      flxi::CacheOp m;
      m.shard = flxi::ShardRef{"default", "default", "fwdcache", shard, info.generation};
      m.op = kind;
      m.key = key;
      if (kind == flxi::CacheOpKind::kPut) m.value = "forged";
      m.credential = credential;
      auto out = forwarder.Call(PeerAddress{cluster_.node_id(n), Addr(cluster_.internal_addr(n))},
                                flxi::Frame{flxi::Kind::kAuthorizedForwardCacheOp, m});
      EXPECT_TRUE(out.has_value()) << (out ? "" : out.error().message);
      if (!out) return flxi::Frame{};
      answers.push_back(std::move(*out));  // the frame's views point into it
      auto frame = answers.back().Decode();
      EXPECT_TRUE(frame);
      return frame ? *frame : flxi::Frame{};
    };
    int owner = NodeNumber(info.leader);
    flxi::Frame found = op(owner, flxi::CacheOpKind::kGet, token);
    ASSERT_EQ(found.kind, flxi::Kind::kForwardCacheOk) << "shard " << shard;
    EXPECT_EQ(std::get<flxi::ForwardCacheOk>(found.body).value,
              std::optional<flxi::Bytes>(value_of(shard)));
    int other = owner % 3 + 1;
    flxi::Frame moved = op(other, flxi::CacheOpKind::kGet, token);
    ASSERT_EQ(moved.kind, flxi::Kind::kNotLeader) << "shard " << shard;
    EXPECT_EQ(std::get<flxi::NotLeader>(moved.body).node_id, info.leader);
    // A token without cache.write is refused by the owner itself, whatever the forwarder did.
    flxi::Frame refused = op(owner, flxi::CacheOpKind::kPut, read_only);
    ASSERT_EQ(refused.kind, flxi::Kind::kForwardCacheError) << "shard " << shard;
    EXPECT_EQ(std::get<flxi::ErrorAnswer>(refused.body).code, flxi::ErrorCode::kUnauthorized);
  }
  // A conditional op on a key another broker owns travels as kind 34 and is decided by the
  // owner: put if absent, a versioned get, a stale version refused, delete at the version.
  {
    uint32_t remote = kShards;
    for (const auto& [shard, info] : shards) {
      if (info.leader != "n1") remote = shard;
    }
    ASSERT_LT(remote, kShards);
    const std::string cas = KeyForShard(kShards, remote, 2);
    auto conditional = broker::e2e::Authed(
        *ingress, token, "default", broker::e2e::kDefaultFeatures | flx1::kFeatureCacheConditional);
    flx1::CachePutIf put_if;
    put_if.tenant_id = "default";
    put_if.namespace_ = "default";
    put_if.cache = "fwdcache";
    put_if.key = cas;
    put_if.value = flx1::Bytes{'c'};
    put_if.request_id = ++request_id;
    conditional->SendMessage(put_if);
    auto applied = conditional->Read<flx1::CacheConditionResult>();
    ASSERT_TRUE(applied && applied->version) << "owner " << shards[remote].leader;
    EXPECT_TRUE(applied->applied);
    EXPECT_EQ(applied->request_id, request_id);
    conditional->SendMessage(flx1::CacheGet{"default", "default", "fwdcache", cas, ++request_id});
    auto versioned = conditional->Read<flx1::CacheValue>();
    ASSERT_TRUE(versioned);
    EXPECT_EQ(versioned->value, bytes("c"));
    EXPECT_EQ(versioned->version, applied->version) << "the owner's version, forwarded";
    put_if.condition =
        flx1::CacheCondition{flx1::CacheCondition::Kind::kVersion, *applied->version + 1};
    put_if.request_id = ++request_id;
    conditional->SendMessage(put_if);
    auto stale = conditional->Read<flx1::CacheConditionResult>();
    ASSERT_TRUE(stale);
    EXPECT_FALSE(stale->applied);
    EXPECT_EQ(stale->version, applied->version);
    conditional->SendMessage(flx1::CacheDeleteIf{"default", "default", "fwdcache", cas,
                                                 *applied->version, ++request_id});
    auto deleted = conditional->Read<flx1::CacheConditionResult>();
    ASSERT_TRUE(deleted);
    EXPECT_TRUE(deleted->applied);
    EXPECT_FALSE(deleted->version);
    EXPECT_EQ(get(*one, cas), std::nullopt);
  }
  // Deletes through the ingress answer the removed value; afterwards no broker finds it.
  for (uint32_t shard = 0; shard < kShards; ++shard) {
    one->SendMessage(
        flx1::CacheDelete{"default", "default", "fwdcache", key_of(shard), ++request_id});
    auto removed = one->Read<flx1::CacheValue>();
    ASSERT_TRUE(removed) << "shard " << shard;
    EXPECT_EQ(removed->value, bytes(value_of(shard)));  // the forged put never landed
  }
  auto client2 = Connect(2);
  ASSERT_TRUE(client2);
  auto two = broker::e2e::Authed(*client2, token);
  for (uint32_t shard = 0; shard < kShards; ++shard) {
    EXPECT_EQ(get(*two, key_of(shard)), std::nullopt) << "shard " << shard;
  }
  // Through the client path a read-only token is refused at the ingress first (forbidden).
  auto reader = broker::e2e::Authed(*ingress, read_only);
  std::string v = "x";
  reader->SendMessage(flx1::CachePut{"default", "default", "fwdcache", key_of(0),
                                     flx1::Bytes(v.begin(), v.end()), 1, std::nullopt});
  auto error = reader->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "forbidden");
  auto m1 = cluster_.AdminGet(1, "/metrics");
  ASSERT_TRUE(m1);
  EXPECT_NE(m1->find("felix_forward_sent_total{kind=\"AuthorizedForwardCacheOp\",outcome=\"ok\"}"),
            std::string::npos);
  EXPECT_NE(m1->find("felix_forward_sent_total{kind=\"ConditionalForwardCacheOp\",outcome=\"ok\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace felix::cluster
