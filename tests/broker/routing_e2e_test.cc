// Every client request path asks the one ShardResolver, and a shard another broker serves is
// never touched here: the real broker runs with a static routing table
// (FELIX_TEST_REMOTE_SHARDS, a fault-seam build setting) that names some shards as served by
// "n2"/"n3", and each request kind must answer with the owner — `not_leader` to clients that
// offered FEATURE_REDIRECT, `error`/`publish_error` code not_leader (class redirect) otherwise —
// while no shard directory is created for them and the local shards keep working.
#include <filesystem>

#include <gtest/gtest.h>

#include "e2e_broker.h"
#include "support/child_process.h"
#include "wire/flx1/constants.h"
#include "wire/shard_hash.h"

namespace felix::broker {
namespace {

namespace flx1 = felix::wire::flx1;
using e2e::Broker;
using testing::TestStream;

// "orders" has 2 shards: 1 is served by n2. The cache "sessions" (1 shard) and the stream
// "jobs" (groups) are served by n3, whose client address is unknown.
constexpr const char* kTable =
    "default/default/orders#1=n2@127.0.0.1:7001@7;"
    "cache:default/default/sessions#0=n3@@9;"
    "default/default/jobs#0=n3@@9";

// A key of `orders` that routes to `shard` (the frozen modulo hash).
std::string KeyForShard(uint32_t shard) {
  for (int i = 0;; ++i) {
    std::string key = "k" + std::to_string(i);
    if (wire::ShardModulo(2, key) == shard) return key;
  }
}

class RoutingE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<Broker>(
        felix::testing::MakeTempDir("routing-e2e"),
        std::map<std::string, std::string>{{"FELIX_TEST_REMOTE_SHARDS", kTable}});
    broker_->CreateStream("default", "orders", /*durable=*/true, /*shards=*/2);
    broker_->CreateStream("default", "jobs", /*durable=*/true);
    broker_->CreateCache("default", "sessions", /*durable=*/true);
    token_ = broker_->FullToken();
    client_ = broker_->Connect();
    ASSERT_TRUE(client_);
  }
  void TearDown() override { EXPECT_EQ(broker_->Stop(), 0); }

  std::shared_ptr<TestStream> Authed(uint32_t features) {
    return e2e::Authed(*client_, token_, "default", features);
  }

  // No shard directory exists for a shard that is served elsewhere.
  bool ShardDirectoryExists(const std::string& relative) {
    return std::filesystem::exists(broker_->data_dir() + "/" + relative);
  }

  std::unique_ptr<Broker> broker_;
  std::string token_;
  std::unique_ptr<testing::Flx1TestClient> client_;
};

void ExpectNotLeader(const std::optional<flx1::NotLeader>& answer, const std::string& node,
                     std::optional<std::string> addr, uint64_t generation) {
  ASSERT_TRUE(answer.has_value()) << "expected not_leader";
  EXPECT_EQ(answer->node_id, node);
  EXPECT_EQ(answer->addr, addr);
  EXPECT_EQ(answer->generation, generation);
}

TEST_F(RoutingE2E, PublishToARemoteShardNamesTheOwnerAndLocalShardsStillServe) {
  // Acks after the write, so the local shard's directory exists once it is answered.
  auto stream =
      Authed(flx1::kFeatureErrorCodes | flx1::kFeatureRedirect | flx1::kFeatureAckOnCommit);
  std::string remote_key = KeyForShard(1), local_key = KeyForShard(0);

  // Binary, keyed to shard 1: refused with code not_leader, class redirect, owner in prose.
  flx1::BinaryPublishBatch batch;
  batch.acked = flx1::BinaryPublishBatch::Acked{1, flx1::AckMode::kPerBatch};
  batch.tenant_id = "default";
  batch.namespace_ = "default";
  batch.stream = "orders";
  batch.key = remote_key;
  batch.payloads.push_back("x");
  std::vector<uint8_t> frame;
  ASSERT_TRUE(flx1::AppendFrame(flx1::Flx1Frame{batch}, frame));
  stream->Send(frame);
  auto answer = stream->ReadFrame();
  ASSERT_TRUE(answer);
  auto* ack = std::get_if<flx1::BinaryPublishAck>(&*answer);
  ASSERT_NE(ack, nullptr);
  EXPECT_EQ(ack->status, flx1::BinaryPublishAck::Status::kError);
  EXPECT_EQ(ack->request_id, 1u);
  ASSERT_TRUE(ack->code.has_value());
  EXPECT_EQ(ack->code->code, static_cast<uint16_t>(flx1::ProtocolErrorCode::kNotLeader));
  EXPECT_EQ(ack->code->retry, static_cast<uint8_t>(flx1::RetryClass::kRedirect));
  EXPECT_NE(ack->message.find("n2"), std::string::npos) << ack->message;
  EXPECT_NE(ack->message.find("127.0.0.1:7001"), std::string::npos) << ack->message;

  // JSON, keyed to shard 1: publish_error code not_leader (a publish is never redirected).
  flx1::Publish json;
  json.tenant_id = "default";
  json.namespace_ = "default";
  json.stream = "orders";
  json.payload = flx1::Bytes{'y'};
  json.key = flx1::Bytes(remote_key.begin(), remote_key.end());
  json.request_id = 2;
  stream->SendMessage(json);
  auto refused = stream->Read<flx1::PublishError>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->request_id, 2u);
  EXPECT_EQ(refused->code, "not_leader");
  EXPECT_EQ(refused->retry, "redirect");

  // The same stream keyed to the local shard is served, on the same request stream.
  json.key = flx1::Bytes(local_key.begin(), local_key.end());
  json.request_id = 3;
  stream->SendMessage(json);
  auto ok = stream->Read<flx1::PublishOk>();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->request_id, 3u);

  EXPECT_TRUE(ShardDirectoryExists("shards/default/default/orders/0"));
  EXPECT_FALSE(ShardDirectoryExists("shards/default/default/orders/1"));
  EXPECT_EQ(broker_->Metric("felix_client_redirects_total"), 2);
}

TEST_F(RoutingE2E, SubscribeToARemoteShardIsRedirectedAndTheStreamEnds) {
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = "orders";
  subscribe.shard = 1;

  auto redirected = Authed(flx1::kFeatureErrorCodes | flx1::kFeatureRedirect);
  redirected->SendMessage(subscribe);
  ExpectNotLeader(redirected->Read<flx1::NotLeader>(), "n2", "127.0.0.1:7001", 7);
  EXPECT_TRUE(redirected->WaitEnded());

  // A client that did not offer REDIRECT gets an error with the owner in prose.
  auto plain = Authed(flx1::kFeatureErrorCodes);
  plain->SendMessage(subscribe);
  auto error = plain->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "not_leader");
  EXPECT_EQ(error->retry, "redirect");
  EXPECT_NE(error->message.find("'n2' at 127.0.0.1:7001"), std::string::npos) << error->message;
  EXPECT_TRUE(plain->WaitEnded());

  // Shard 0 is local and subscribes.
  auto local = Authed(flx1::kFeatureErrorCodes | flx1::kFeatureRedirect);
  subscribe.shard = 0;
  local->SendMessage(subscribe);
  EXPECT_TRUE(local->Read<flx1::Subscribed>().has_value());
  EXPECT_FALSE(ShardDirectoryExists("shards/default/default/orders/1"));
}

TEST_F(RoutingE2E, EveryCacheAndCounterRequestOnARemoteShardIsRedirected) {
  auto stream = Authed(flx1::kFeatureErrorCodes | flx1::kFeatureRedirect);
  stream->SendMessage(
      flx1::CachePut{"default", "default", "sessions", "u1", flx1::Bytes{'v'}, 1, std::nullopt});
  stream->SendMessage(flx1::CacheGet{"default", "default", "sessions", "u1", 2});
  stream->SendMessage(flx1::CacheDelete{"default", "default", "sessions", "u1", 3});
  stream->SendMessage(flx1::CounterAdd{"default", "default", "sessions", "n", 5, 4});
  stream->SendMessage(flx1::CounterGet{"default", "default", "sessions", "n", 5});
  for (int i = 0; i < 5; ++i) {
    // The owner's client address is unknown, so the redirect carries none.
    ExpectNotLeader(stream->Read<flx1::NotLeader>(), "n3", std::nullopt, 9);
  }
  // A best-effort (request_id-less) get gets its one answer, then its stream ends.
  auto single = Authed(flx1::kFeatureErrorCodes);
  single->SendMessage(flx1::CacheGet{"default", "default", "sessions", "u1", std::nullopt});
  auto error = single->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "not_leader");
  EXPECT_TRUE(single->WaitEnded());
  EXPECT_FALSE(ShardDirectoryExists("shards/_caches/default/default/sessions/0"));
  EXPECT_EQ(broker_->Metric("felix_client_redirects_total"), 6);
}

TEST_F(RoutingE2E, GroupRequestsOnARemoteShardAreRedirected) {
  flx1::GroupPoll poll;
  poll.tenant_id = "default";
  poll.namespace_ = "default";
  poll.stream = "jobs";
  poll.group = "workers";
  poll.max_records = 10;
  poll.request_id = 1;
  auto polled =
      Authed(flx1::kFeatureErrorCodes | flx1::kFeatureRedirect | flx1::kFeatureConsumerGroup);
  polled->SendMessage(poll);
  ExpectNotLeader(polled->Read<flx1::NotLeader>(), "n3", std::nullopt, 9);

  flx1::GroupAck ack;
  ack.tenant_id = "default";
  ack.namespace_ = "default";
  ack.stream = "jobs";
  ack.group = "workers";
  ack.offset = 0;
  ack.request_id = 2;
  auto acked = Authed(flx1::kFeatureErrorCodes | flx1::kFeatureConsumerGroup);
  acked->SendMessage(ack);
  auto error = acked->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "not_leader");
  EXPECT_FALSE(ShardDirectoryExists("shards/default/default/jobs/0"));
}

TEST(StaticRouterTable, ABadEntryRefusesTheStart) {
  felix::testing::ChildProcess broker(
      felix::testing::BuiltProgram("src/server/felix-broker"), {},
      {{"FELIX_DATA_DIR", felix::testing::MakeTempDir("routing-bad")},
       {"FELIX_QUIC_BIND", "127.0.0.1:0"},
       {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
       {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"},
       {"FELIX_TEST_REMOTE_SHARDS", "default/default/orders#1=n2"}});
  EXPECT_EQ(broker.Wait(), 2);
  EXPECT_NE(broker.stderr_text().find("default/default/orders#1=n2"), std::string::npos);
}

}  // namespace
}  // namespace felix::broker
