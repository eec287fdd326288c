// Cache and counter requests on the wire, against the real felix-broker process: exact FLX1
// messages from Flx1TestClient. Covers the answers' correlation by request id on one stream,
// best-effort (request_id-less) requests, which refusals end the stream (§8.3), cache_shards,
// the advertised features and the felix_cache_* / felix_counter_* metrics.
#include <signal.h>

#include <map>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "catalog/credentials.h"
#include "common/net_address.h"
#include "e2e_broker.h"
#include "flx1_test_client.h"
#include "support/child_process.h"

namespace felix::broker {
namespace {

namespace flx1 = felix::wire::flx1;
using felix::testing::MakeTempDir;
using testing::Flx1TestClient;
using testing::TestStream;
using Json = nlohmann::json;
using namespace std::chrono_literals;

class CacheProtocolE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<e2e::Broker>(MakeTempDir("cache-protocol-e2e"));
    tenant_ = broker_->creds().tenant_id;
  }
  void TearDown() override {
    if (broker_) {
      EXPECT_EQ(broker_->Stop(SIGTERM), 0);
    }
  }

  void CreateCache(const std::string& name, uint32_t shards = 1, bool durable = true) {
    broker_->CreateCache(tenant_, name, durable, shards);
  }
  std::string Token(std::vector<std::string> permissions) {
    return broker_->Token(tenant_, std::move(permissions));
  }
  std::string AllToken() {
    std::string scope = "cache:" + tenant_ + "/*/*";
    return Token({"cache.read:" + scope, "cache.write:" + scope});
  }
  std::string Metrics() { return broker_->Metrics(); }
  double Metric(const std::string& name) { return broker_->Metric(name); }

  std::shared_ptr<TestStream> Authed(Flx1TestClient& client, const std::string& token,
                                     uint32_t* server_features = nullptr) {
    auto stream = client.OpenStream();
    flx1::Auth auth;
    auth.tenant_id = tenant_;
    auth.token = token;
    auth.client_flags = flx1::kKnownFlags & ~flx1::kFlagBinaryPublishIdempotent;
    auth.client_features = flx1::kFeatureErrorCodes;
    stream->SendMessage(auth);
    auto ok = stream->Read<flx1::AuthOk>();
    EXPECT_TRUE(ok.has_value());
    if (ok && server_features) *server_features = ok->server_features.value_or(0);
    return stream;
  }

  flx1::CachePut PutMessage(const std::string& cache, const std::string& key,
                            const std::string& value, std::optional<uint64_t> request_id) {
    return flx1::CachePut{
        tenant_,    "default",   cache, key, flx1::Bytes(value.begin(), value.end()),
        request_id, std::nullopt};
  }
  flx1::CacheGet GetMessage(const std::string& cache, const std::string& key,
                            std::optional<uint64_t> request_id) {
    return flx1::CacheGet{tenant_, "default", cache, key, request_id};
  }

  std::unique_ptr<e2e::Broker> broker_;
  std::string tenant_;
};

std::optional<flx1::Message> ReadMessage(TestStream& stream) {
  auto frame = stream.ReadFrame();
  if (!frame) return std::nullopt;
  auto* message = std::get_if<flx1::Message>(&*frame);
  if (!message) return std::nullopt;
  return *message;
}

TEST_F(CacheProtocolE2E, AnswersOnOneStreamAreMatchedByRequestId) {
  CreateCache("c");
  auto client = broker_->Connect();
  ASSERT_TRUE(client);
  uint32_t features = 0;
  auto stream = Authed(*client, AllToken(), &features);
  EXPECT_NE(features & flx1::kFeatureCacheDelete, 0u);
  EXPECT_NE(features & flx1::kFeatureCacheShards, 0u);
  EXPECT_NE(features & flx1::kFeatureCounters, 0u);

  // Pipelined without waiting: puts wait for their fsync, gets do not, so answers may come
  // in any order; each must carry its own request id.
  stream->SendMessage(PutMessage("c", "a", "alpha", 11));
  stream->SendMessage(GetMessage("c", "missing", 12));
  stream->SendMessage(PutMessage("c", "e", "", 13));
  stream->SendMessage(flx1::CounterAdd{tenant_, "default", "c", "n", 7, 14});
  stream->SendMessage(flx1::CounterGet{tenant_, "default", "c", "never", 15});
  std::map<uint64_t, flx1::Message> answers;
  for (int i = 0; i < 5; ++i) {
    auto message = ReadMessage(*stream);
    ASSERT_TRUE(message) << "answer " << i;
    std::optional<uint64_t> id;
    if (auto* ok = std::get_if<flx1::CacheOk>(&*message)) id = ok->request_id;
    if (auto* value = std::get_if<flx1::CacheValue>(&*message)) id = value->request_id;
    if (auto* counter = std::get_if<flx1::CounterValue>(&*message)) id = counter->request_id;
    ASSERT_TRUE(id) << "answer " << i << " carries no request id";
    EXPECT_TRUE(answers.emplace(*id, *message).second) << "request " << *id << " answered twice";
  }
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_TRUE(std::holds_alternative<flx1::CacheOk>(answers[11]));
  auto& miss = std::get<flx1::CacheValue>(answers[12]);
  EXPECT_EQ(miss.key, "missing");
  EXPECT_FALSE(miss.value.has_value());
  EXPECT_TRUE(std::holds_alternative<flx1::CacheOk>(answers[13]));
  EXPECT_EQ(std::get<flx1::CounterValue>(answers[14]).value, 7);
  EXPECT_EQ(std::get<flx1::CounterValue>(answers[15]).value, std::nullopt);

  // After the puts were answered their values are visible; "" is a value, not a miss.
  stream->SendMessage(GetMessage("c", "e", 16));
  auto empty = stream->Read<flx1::CacheValue>();
  ASSERT_TRUE(empty);
  ASSERT_TRUE(empty->value.has_value());
  EXPECT_TRUE(empty->value->empty());
  EXPECT_EQ(empty->request_id, 16u);
  stream->SendMessage(flx1::CacheDelete{tenant_, "default", "c", "a", 17});
  auto removed = stream->Read<flx1::CacheValue>();
  ASSERT_TRUE(removed && removed->value);
  EXPECT_EQ(std::string(removed->value->begin(), removed->value->end()), "alpha");
}

TEST_F(CacheProtocolE2E, RequestsWithoutRequestIdGetOneAnswerThenTheStreamEnds) {
  CreateCache("c");
  auto client = broker_->Connect();
  ASSERT_TRUE(client);
  std::string token = AllToken();
  auto put = Authed(*client, token);
  put->SendMessage(PutMessage("c", "k", "v", std::nullopt));
  EXPECT_TRUE(put->Read<flx1::Ok>().has_value()) << "a best-effort put is answered `ok`";
  EXPECT_TRUE(put->WaitEnded());

  auto get = Authed(*client, token);
  get->SendMessage(GetMessage("c", "k", std::nullopt));
  auto value = get->Read<flx1::CacheValue>();
  ASSERT_TRUE(value && value->value);
  EXPECT_EQ(std::string(value->value->begin(), value->value->end()), "v");
  EXPECT_FALSE(value->request_id.has_value());
  EXPECT_TRUE(get->WaitEnded());

  auto unknown = Authed(*client, token);
  unknown->SendMessage(GetMessage("nope", "k", std::nullopt));
  auto error = unknown->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "not_found");
  EXPECT_TRUE(unknown->WaitEnded());
}

TEST_F(CacheProtocolE2E, NotFoundKeepsTheStreamAndForbiddenEndsIt) {
  CreateCache("c");
  auto client = broker_->Connect();
  ASSERT_TRUE(client);
  auto stream = Authed(*client, AllToken());
  stream->SendMessage(GetMessage("nope", "k", 1));
  auto error = stream->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, "not_found");
  EXPECT_EQ(error->retry, "retry_after");
  EXPECT_EQ(error->message, "cache scope not found: " + tenant_ + "/default/nope");
  stream->SendMessage(GetMessage("c", "k", 2));
  auto value = stream->Read<flx1::CacheValue>();
  ASSERT_TRUE(value) << "the stream goes on after not_found";
  EXPECT_EQ(value->request_id, 2u);

  std::string scope = "cache:" + tenant_ + "/default/c";
  auto reader = Authed(*client, Token({"cache.read:" + scope}));
  reader->SendMessage(PutMessage("c", "k", "v", 3));
  auto refused = reader->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, "forbidden");
  EXPECT_EQ(refused->message, "forbidden");
  EXPECT_TRUE(reader->WaitEnded()) << "a refused cache request ends its stream";

  auto mismatch = Authed(*client, AllToken());
  flx1::CacheGet other = GetMessage("c", "k", 4);
  other.tenant_id = "someone-else";
  mismatch->SendMessage(other);
  auto tenant_error = mismatch->Read<flx1::Error>();
  ASSERT_TRUE(tenant_error);
  EXPECT_EQ(tenant_error->message, "tenant mismatch");
  EXPECT_TRUE(mismatch->WaitEnded());

  auto unauthenticated = client->OpenStream();
  unauthenticated->SendMessage(GetMessage("c", "k", 5));
  auto auth_error = unauthenticated->Read<flx1::Error>();
  ASSERT_TRUE(auth_error);
  EXPECT_EQ(auth_error->message, "auth required");
  EXPECT_TRUE(unauthenticated->WaitEnded());
}

TEST_F(CacheProtocolE2E, CacheShardsCountsShardsAndZeroMeansUnknown) {
  CreateCache("three", 3);
  auto client = broker_->Connect();
  ASSERT_TRUE(client);
  auto stream = Authed(*client, AllToken());
  stream->SendMessage(flx1::CacheShards{tenant_, "default", "three", 1});
  auto three = stream->Read<flx1::CacheShardsView>();
  ASSERT_TRUE(three);
  EXPECT_EQ(three->shards, 3u);
  EXPECT_EQ(three->request_id, 1u);
  stream->SendMessage(flx1::CacheShards{tenant_, "default", "nope", 2});
  auto none = stream->Read<flx1::CacheShardsView>();
  ASSERT_TRUE(none);
  EXPECT_EQ(none->shards, 0u);
}

TEST_F(CacheProtocolE2E, MetricsCountHitsMissesExpiriesAndCounterOps) {
  CreateCache("c");
  auto client = broker_->Connect();
  ASSERT_TRUE(client);
  auto stream = Authed(*client, AllToken());
  auto put = PutMessage("c", "short", "v", 1);
  put.ttl_ms = 1;
  stream->SendMessage(put);
  ASSERT_TRUE(stream->Read<flx1::CacheOk>());
  stream->SendMessage(PutMessage("c", "k", "v", 2));
  ASSERT_TRUE(stream->Read<flx1::CacheOk>());
  stream->SendMessage(GetMessage("c", "k", 3));
  ASSERT_TRUE(stream->Read<flx1::CacheValue>());
  stream->SendMessage(GetMessage("c", "absent", 4));
  ASSERT_TRUE(stream->Read<flx1::CacheValue>());
  stream->SendMessage(flx1::CounterAdd{tenant_, "default", "c", "n", 1, 5});
  ASSERT_TRUE(stream->Read<flx1::CounterValue>());
  stream->SendMessage(flx1::CounterGet{tenant_, "default", "c", "n", 6});
  ASSERT_TRUE(stream->Read<flx1::CounterValue>());
  EXPECT_EQ(Metric("felix_cache_hits_total"), 1);
  EXPECT_EQ(Metric("felix_cache_misses_total"), 1);
  EXPECT_EQ(Metric("felix_counter_ops_total"), 2);
  // The expiry sweep (once a second) writes the delete for "short" and counts it.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (Metric("felix_cache_expiries_total") < 1 && std::chrono::steady_clock::now() < deadline) {
    stream->SendMessage(GetMessage("c", "k", 7));  // a round trip between polls
    ASSERT_TRUE(stream->Read<flx1::CacheValue>());
  }
  EXPECT_EQ(Metric("felix_cache_expiries_total"), 1);
}

}  // namespace
}  // namespace felix::broker
