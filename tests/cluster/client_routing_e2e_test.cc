// Issue 15, client side, on real processes: one real etcd and three real `felix-broker`
// processes in cluster mode (ClusterHarness) and the C++ client library / the `felix` CLI.
// A client given only broker 1's address publishes keyed records to all 6 shards of a stream:
// each batch goes straight to its shard's owner (no broker forwards anything:
// felix_forward_sent_total stays 0 everywhere) and lands there at the acknowledged offset; the
// same client told to use one ingress (route_to_owners = false, felix-bench --via) makes that
// ingress forward. Cache operations on keys of every shard go straight to their owners too. A
// subscribe to a shard the client has no owner for (the stream was created after it
// connected) reaches broker 1, which is not the owner: the client follows `not_leader` and
// remembers the owner. The CLI publishes and reads through a broker that owns nothing of the
// shard.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster_e2e_util.h"
#include "felix/client.h"
#include "support/child_process.h"
#include "support/cluster_harness.h"
#include "wire/shard_hash.h"

namespace felix::cluster {
namespace {

using felix::testing::ClusterHarness;
using Json = nlohmann::json;
using namespace std::chrono_literals;

using e2e::Eventually;

class ClientRoutingE2E : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.StartAll()) << cluster_.error(); }

  std::pair<int, Json> Admin(int n, const std::string& method, const std::string& path,
                             const Json& body = nullptr) {
    return e2e::Admin(cluster_, n, method, path, body);
  }
  // shard → leader node id, from node n's /v1/cluster.
  std::map<uint32_t, std::string> Leaders(int n, const std::string& name) {
    std::map<uint32_t, std::string> out;
    Json status = Admin(n, "GET", "/v1/cluster").second;
    if (!status.is_object()) return out;
    for (const auto& s : status["shards"]) {
      if (s["name"] == name && !s["leader"].get<std::string>().empty())
        out[s["shard"].get<uint32_t>()] = s["leader"];
    }
    return out;
  }
  // Creates a stream (or cache) of `shards` shards on node 1 and waits until every node sees
  // every shard assigned alike; shard → leader.
  std::map<uint32_t, std::string> CreateAssigned(const std::string& kind, const std::string& name,
                                                 uint32_t shards) {
    Json body = kind == "streams" ? Json{{"stream", name}, {"durable", true}, {"shards", shards}}
                                  : Json{{"cache", name}, {"durable", true}, {"shards", shards}};
    auto [status, answer] =
        Admin(1, "POST", "/v1/tenants/default/namespaces/default/" + kind, body);
    EXPECT_EQ(status, 201) << answer.dump();
    std::map<uint32_t, std::string> leaders;
    EXPECT_TRUE(Eventually([&] { return (leaders = Leaders(1, name)).size() == shards; }));
    for (int n : {2, 3}) EXPECT_TRUE(Eventually([&] { return Leaders(n, name) == leaders; }));
    return leaders;
  }
  std::string Token() {
    auto [status, body] =
        Admin(1, "POST", "/v1/tenants/default/tokens",
              Json{{"subject", "tester"},
                   {"permissions",
                    {"stream.publish:stream:default/*/*", "stream.subscribe:stream:default/*/*",
                     "cache.read:cache:default/*/*", "cache.write:cache:default/*/*"}}});
    EXPECT_EQ(status, 200) << body.dump();
    return body.value("felix_token", "");
  }
  ClientOptions Options(const std::string& brokers, const std::string& token) {
    ClientOptions o;
    o.broker = brokers;
    o.ca_file = cluster_.ca_file();
    o.tenant_id = "default";
    o.token = token;
    return o;
  }
  // Sum of every sample of a metric family on node n (labelled or not); -1 if unreachable.
  double MetricSum(int n, const std::string& family) {
    auto text = cluster_.AdminGet(n, "/metrics");
    if (!text) return -1;
    double sum = 0;
    size_t at = 0;
    while ((at = text->find("\n" + family, at)) != std::string::npos) {
      size_t line_end = text->find('\n', at + 1);
      std::string line = text->substr(at + 1, line_end - at - 1);
      at = line_end;
      char next = line.size() > family.size() ? line[family.size()] : '\0';
      if (next != ' ' && next != '{') continue;  // another family with this prefix
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }
  std::string AddrOf(const std::string& node_id) {
    return cluster_.client_addr(std::stoi(node_id.substr(1)));
  }
  static std::string KeyForShard(uint32_t shards, uint32_t shard) {
    for (int i = 0;; ++i) {
      std::string key = "k" + std::to_string(i);
      if (wire::ShardModulo(shards, key) == shard) return key;
    }
  }
  // The first event of a subscription (waits up to 10 s).
  static std::optional<Event> First(Subscription& sub) {
    auto next = sub.Next(10s);
    if (!next || !*next) return std::nullopt;
    return **next;
  }

  ClusterHarness cluster_;
};

TEST_F(ClientRoutingE2E, KeyedPublishesGoStraightToEachOwnerAndLandAtTheAckedOffset) {
  auto leaders = CreateAssigned("streams", "direct", 6);
  ASSERT_EQ(leaders.size(), 6u);
  int remote = 0;
  for (const auto& [shard, leader] : leaders) remote += leader != "n1";
  ASSERT_GT(remote, 0);  // the controller spreads leaders over the three brokers
  std::string token = Token();
  ASSERT_FALSE(token.empty());

  auto client = Client::Connect(Options(cluster_.client_addr(1), token));
  ASSERT_TRUE(client) << client.error().ToString();
  StreamRef stream{"default", "direct"};
  std::map<uint32_t, uint64_t> offsets;
  for (uint32_t shard = 0; shard < 6; ++shard) {
    for (int i = 0; i < 2; ++i) {
      auto receipt =
          (*client)->Publish(stream, {"s" + std::to_string(shard) + "-" + std::to_string(i)},
                             {.key = KeyForShard(6, shard)});
      ASSERT_TRUE(receipt) << "shard " << shard << ": " << receipt.error().ToString();
      ASSERT_TRUE(receipt->offset);
      if (i == 0) offsets[shard] = *receipt->offset;
      EXPECT_EQ(*receipt->offset, offsets[shard] + i);
    }
    EXPECT_EQ((*client)->CachedOwner(stream, shard), AddrOf(leaders[shard])) << shard;
  }
  // Nothing was forwarded: every batch went to its owner's client listener.
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(MetricSum(n, "felix_forward_sent_total"), 0) << n;

  // Each record is on its owner's log at the acknowledged offset (the subscription goes to
  // the owner the client knows).
  for (uint32_t shard = 0; shard < 6; ++shard) {
    auto sub = (*client)->Subscribe(stream, {.shard = shard, .start = StartPosition::Earliest()});
    ASSERT_TRUE(sub) << sub.error().ToString();
    for (int i = 0; i < 2; ++i) {
      auto event = First(**sub);
      ASSERT_TRUE(event) << "shard " << shard;
      EXPECT_EQ(event->payload, "s" + std::to_string(shard) + "-" + std::to_string(i));
      EXPECT_EQ(event->offset, offsets[shard] + i);
    }
  }

  // The same publishes through one ingress (felix-bench --via): broker 1 forwards the shards
  // it does not own, and they land on their owners all the same.
  ClientOptions via = Options(cluster_.client_addr(1), token);
  via.route_to_owners = false;
  auto ingress = Client::Connect(via);
  ASSERT_TRUE(ingress) << ingress.error().ToString();
  for (uint32_t shard = 0; shard < 6; ++shard) {
    auto receipt = (*ingress)->Publish(stream, {"via"}, {.key = KeyForShard(6, shard)});
    ASSERT_TRUE(receipt) << receipt.error().ToString();
    EXPECT_EQ(receipt->offset, offsets[shard] + 2);
  }
  EXPECT_EQ(MetricSum(1, "felix_forward_sent_total"), remote);
  // The forwarded acks named the owners: the ingress client knows them now.
  for (const auto& [shard, leader] : leaders) {
    if (leader != "n1") {
      EXPECT_EQ((*ingress)->CachedOwner(stream, shard), AddrOf(leader)) << shard;
    }
  }
}

TEST_F(ClientRoutingE2E, CacheOpsGoStraightToEachKeysOwner) {
  auto leaders = CreateAssigned("caches", "direct-cache", 6);
  ASSERT_EQ(leaders.size(), 6u);
  std::string token = Token();
  auto client = Client::Connect(Options(cluster_.client_addr(1), token));
  ASSERT_TRUE(client) << client.error().ToString();
  CacheRef cache{"default", "direct-cache"};
  for (uint32_t shard = 0; shard < 6; ++shard) {
    std::string key = KeyForShard(6, shard);
    ASSERT_TRUE((*client)->CachePut(cache, key, "v" + std::to_string(shard)));
    auto got = (*client)->CacheGet(cache, key);
    ASSERT_TRUE(got) << got.error().ToString();
    EXPECT_EQ(*got, "v" + std::to_string(shard));
    auto sum = (*client)->CounterAdd(cache, key + "-n", 3);
    ASSERT_TRUE(sum) << sum.error().ToString();
    EXPECT_EQ(*sum, 3);
    auto removed = (*client)->CacheDelete(cache, key);
    ASSERT_TRUE(removed) << removed.error().ToString();
    EXPECT_EQ(*removed, "v" + std::to_string(shard));
  }
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(MetricSum(n, "felix_forward_sent_total"), 0) << n;
}

TEST_F(ClientRoutingE2E, ASubscribeToANonOwnerFollowsNotLeaderAndTheOwnerIsRemembered) {
  std::string token = Token();
  // Connected (and the cluster's brokers learned) before the stream exists: the client has
  // no owner for any of its shards.
  auto client = Client::Connect(Options(cluster_.client_addr(1), token));
  ASSERT_TRUE(client) << client.error().ToString();
  auto leaders = CreateAssigned("streams", "late", 6);
  ASSERT_EQ(leaders.size(), 6u);
  std::optional<uint32_t> remote;
  for (const auto& [shard, leader] : leaders) {
    if (leader != "n1" && !remote) remote = shard;
  }
  ASSERT_TRUE(remote);
  StreamRef stream{"default", "late"};
  EXPECT_FALSE((*client)->CachedOwner(stream, *remote));

  auto sub = (*client)->Subscribe(stream, {.shard = *remote, .start = StartPosition::Earliest()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  EXPECT_EQ((*client)->CachedOwner(stream, *remote), AddrOf(leaders[*remote]));
  auto receipt = (*client)->Publish(stream, {"hello"}, {.key = KeyForShard(6, *remote)});
  ASSERT_TRUE(receipt) << receipt.error().ToString();
  auto event = First(**sub);
  ASSERT_TRUE(event);
  EXPECT_EQ(event->payload, "hello");
  EXPECT_EQ(event->offset, receipt->offset);
  // The publish went to the owner the redirect named, not through broker 1.
  EXPECT_EQ(MetricSum(1, "felix_forward_sent_total"), 0);
}

TEST_F(ClientRoutingE2E, TheCliPublishesAndReadsThroughANonOwner) {
  auto leaders = CreateAssigned("streams", "cli", 6);
  ASSERT_EQ(leaders.size(), 6u);
  // A shard broker 1 does not own: `felix` is given broker 1 first.
  std::optional<uint32_t> remote;
  for (const auto& [shard, leader] : leaders) {
    if (leader != "n1" && !remote) remote = shard;
  }
  ASSERT_TRUE(remote);
  std::string token = Token();
  std::vector<std::string> common = {"--broker", cluster_.client_addr(1),
                                     "--ca",     cluster_.ca_file(),
                                     "--tenant", "default",
                                     "--token",  token};
  std::vector<std::string> pub = {"pub", "cli", "one", "two", "--key", KeyForShard(6, *remote)};
  pub.insert(pub.end(), common.begin(), common.end());
  auto [pub_rc, pub_out] =
      felix::testing::RunProgram(felix::testing::BuiltProgram("src/cli/felix"), pub);
  ASSERT_EQ(pub_rc, 0) << pub_out;
  EXPECT_NE(pub_out.find("0\n1\n"), std::string::npos) << pub_out;  // the owner's offsets
  // Subscribing through $FELIX_BROKERS, broker 1 first: redirected to the owner.
  std::vector<std::string> sub = {
      "sub",     "cli", "--shard", std::to_string(*remote), "--from",   "earliest",
      "--count", "2",   "--ca",    cluster_.ca_file(),      "--tenant", "default",
      "--token", token};
  auto [sub_rc, sub_out] = felix::testing::RunProgram(
      felix::testing::BuiltProgram("src/cli/felix"), sub,
      {{"FELIX_BROKERS", cluster_.client_addr(1) + "," + cluster_.client_addr(2)}});
  ASSERT_EQ(sub_rc, 0) << sub_out;
  EXPECT_NE(sub_out.find("0\tone\n1\ttwo\n"), std::string::npos) << sub_out;
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(MetricSum(n, "felix_forward_sent_total"), 0) << n;
}

}  // namespace
}  // namespace felix::cluster
