// The owner's side of a forwarded cache operation (cluster/forward_cache_handler.h) on
// in-process parts: a real embedded catalog (tenant keys, a 4-shard durable cache), a real
// BrokerCore on a temp directory, and a router whose answer each test sets. The decision table
// (each row of the generation rule, the not-owner answer, the wrong-shard refusal, the
// credential checks for cache.read and cache.write, the legacy kind 11 refused, kind 34
// without a credential, malformed ops), then every op run through a real PeerServer over QUIC
// on loopback and answered in the request's shape (kinds 12, 35, 13, 4).
#include "cluster/forward_cache_handler.h"

#include <gtest/gtest.h>

#include "forward_owner_test_util.h"
#include "peer_test_util.h"
#include "wire/shard_hash.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;
using test::LocalRoute;
using test::RemoteRoute;

constexpr uint32_t kShards = 4;

class ForwardCacheHandlerTest : public test::OwnerFixture {
 protected:
  void SetUp() override {
    OpenCatalog("felix-forward-cache-handler");
    catalog::Cache c;
    c.tenant_id = "default";
    c.namespace_name = "default";
    c.name = "sessions";
    c.shards = kShards;
    c.durable = true;
    ASSERT_TRUE(catalog_->CreateCache(c));
    StartCore();
    handler_ = std::make_unique<ForwardCacheHandler>(test::OwnerOptions(), *resolver_, *catalog_,
                                                     metrics_);
  }
  void TearDown() override {
    if (caller_) caller_->pool->Shutdown();
    if (node_ep_) node_ep_->Stop();
    caller_.reset();
    handler_.reset();
    StopCore();
  }

  std::string ReadWriteToken() {
    return Token({"cache.read:cache:default/default/*", "cache.write:cache:default/default/*"});
  }
  static uint32_t ShardOf(const std::string& key) { return wire::ShardModulo(kShards, key); }

  // A kind 23 request for `key` naming the shard the key routes to, at `generation`.
  flxi::CacheOp Request(flxi::CacheOpKind op, const std::string& key, uint64_t generation,
                        const std::string& token) {
    keep_.push_back(key);
    keep_.push_back(token);
    flxi::CacheOp m;
    m.shard = flxi::ShardRef{"default", "default", "sessions", ShardOf(key), generation};
    m.op = op;
    m.key = keep_[keep_.size() - 2];
    if (!token.empty()) m.credential = keep_.back();
    return m;
  }
  ForwardAnswer Refused(const flxi::CacheOp& m,
                        flxi::Kind kind = flxi::Kind::kAuthorizedForwardCacheOp) {
    auto d = handler_->Decide(m, kind);
    const auto* a = std::get_if<ForwardAnswer>(&d);
    EXPECT_NE(a, nullptr) << "expected a refusal, got proceed";
    return a ? *a : ForwardAnswer{};
  }
  void ExpectError(const flxi::CacheOp& m, flxi::ErrorCode code,
                   flxi::Kind kind = flxi::Kind::kAuthorizedForwardCacheOp) {
    ForwardAnswer a = Refused(m, kind);
    EXPECT_EQ(a.type, ForwardAnswer::Type::kError);
    EXPECT_EQ(a.code, code) << flxi::ErrorCodeName(a.code) << ": " << a.detail;
  }

  // Serves the handler on a real internal endpoint and returns a caller for it.
  PeerAddress Serve() {
    server_ = std::make_unique<PeerServer>(PeerServerOptions{"n1", 0, false, "internal"}, metrics_);
    EXPECT_TRUE(handler_->RegisterOn(*server_));
    transport::EndpointOptions eo;
    eo.tls = test::MakeTls(test::UnauthenticatedInternal());
    eo.name = "internal";
    auto ep =
        transport::Endpoint::Create(test::Loopback(), eo, metrics_, server_->listen_handlers());
    EXPECT_TRUE(ep.has_value());
    node_ep_ = std::move(*ep);
    caller_ = std::make_unique<test::Caller>(test::Opts("n2"));
    return PeerAddress{"n1", node_ep_->local_address()};
  }
  flxi::Frame Call(const PeerAddress& to, flxi::Kind kind, const flxi::CacheOp& m) {
    auto out = caller_->Call(to, flxi::Frame{kind, m});
    EXPECT_TRUE(out.has_value()) << (out ? "" : out.error().message);
    if (!out) return {};
    answers_.push_back(std::move(*out));  // the frame's views point into it
    auto frame = answers_.back().Decode();
    EXPECT_TRUE(frame.has_value());
    return frame ? *frame : flxi::Frame{};
  }
  // Calls and expects ForwardCacheOk; its value.
  std::optional<std::string> CallOk(const PeerAddress& to, const flxi::CacheOp& m) {
    flxi::Frame f = Call(to, flxi::Kind::kAuthorizedForwardCacheOp, m);
    EXPECT_EQ(f.kind, flxi::Kind::kForwardCacheOk) << flxi::KindName(f.kind);
    const auto* ok = std::get_if<flxi::ForwardCacheOk>(&f.body);
    if (ok == nullptr || !ok->value) return std::nullopt;
    return std::string(*ok->value);
  }

  std::unique_ptr<ForwardCacheHandler> handler_;
  std::unique_ptr<PeerServer> server_;
  std::unique_ptr<transport::Endpoint> node_ep_;
  std::unique_ptr<test::Caller> caller_;
  std::deque<std::string> keep_;  // views in requests point here
  std::deque<PeerResponse> answers_;
};

TEST_F(ForwardCacheHandlerTest, EqualGenerationWithAValidCredentialProceedsOnTheKeysShard) {
  router_.Set(LocalRoute(5));
  auto d = handler_->Decide(Request(flxi::CacheOpKind::kGet, "user:1", 5, ReadWriteToken()),
                            flxi::Kind::kAuthorizedForwardCacheOp);
  const auto* go = std::get_if<ForwardCacheHandler::Proceed>(&d);
  ASSERT_NE(go, nullptr) << std::get<ForwardAnswer>(d).detail;
  EXPECT_EQ(go->local.shard, ShardOf("user:1"));
  EXPECT_EQ(go->command.op, broker::CacheCommand::Op::kGet);
  EXPECT_EQ(go->command.key, "user:1");
}

TEST_F(ForwardCacheHandlerTest, TheGenerationRuleAnswersEachRowInTheCacheShape) {
  router_.Set(LocalRoute(7));  // requester behind: NotLeader naming this node
  ForwardAnswer behind = Refused(Request(flxi::CacheOpKind::kPut, "a", 5, ReadWriteToken()));
  EXPECT_EQ(behind.type, ForwardAnswer::Type::kNotLeader);
  EXPECT_EQ(behind.node_id, "n1");
  EXPECT_EQ(behind.advertise_addr, "127.0.0.1:6001");
  EXPECT_EQ(behind.generation, 7u);
  EXPECT_EQ(behind.ToFrame(1).kind, flxi::Kind::kNotLeader);
  router_.Set(LocalRoute(3));  // requester ahead: StaleRoute, in kind 13
  ForwardAnswer ahead = Refused(Request(flxi::CacheOpKind::kPut, "a", 4, ReadWriteToken()));
  EXPECT_EQ(ahead.code, flxi::ErrorCode::kStaleRoute);
  EXPECT_EQ(ahead.ToFrame(1).kind, flxi::Kind::kForwardCacheError);
  router_.Set(RemoteRoute("n2", 3));  // lagging and not the owner: still StaleRoute
  ExpectError(Request(flxi::CacheOpKind::kPut, "a", 4, ReadWriteToken()),
              flxi::ErrorCode::kStaleRoute);
  for (uint64_t requester : {2u, 3u}) {  // not the owner: names it, never relays
    ForwardAnswer moved =
        Refused(Request(flxi::CacheOpKind::kGet, "a", requester, ReadWriteToken()));
    EXPECT_EQ(moved.type, ForwardAnswer::Type::kNotLeader);
    EXPECT_EQ(moved.node_id, "n2");
    EXPECT_EQ(moved.advertise_addr, "127.0.0.1:6002");
    EXPECT_EQ(moved.generation, 3u);
  }
}

TEST_F(ForwardCacheHandlerTest, AShardTheKeyDoesNotRouteToIsRefusedAsWrongShard) {
  router_.Set(LocalRoute(1));
  auto m = Request(flxi::CacheOpKind::kPut, "user:1", 1, ReadWriteToken());
  m.shard.shard = (ShardOf("user:1") + 1) % kShards;
  ExpectError(m, flxi::ErrorCode::kMalformed);
  EXPECT_NE(Refused(m).detail.find("wrong shard"), std::string::npos);
  m.shard.stream = "nope";  // an unknown cache: not synced yet
  ExpectError(m, flxi::ErrorCode::kUnavailable);
}

TEST_F(ForwardCacheHandlerTest, TheCredentialIsCheckedForTheOpsPermissionAsForADirectRequest) {
  router_.Set(LocalRoute(1));
  std::string read_only = Token({"cache.read:cache:default/default/*"});
  std::string write_only = Token({"cache.write:cache:default/default/*"});
  // Writes need cache.write ...
  for (auto op :
       {flxi::CacheOpKind::kPut, flxi::CacheOpKind::kDelete, flxi::CacheOpKind::kCounterAdd}) {
    auto m = Request(op, "k", 1, read_only);
    if (op == flxi::CacheOpKind::kCounterAdd) {
      keep_.push_back(flxi::EncodeCounterValue(1));
      m.value = keep_.back();
    }
    ExpectError(m, flxi::ErrorCode::kUnauthorized);
    auto allowed = Request(op, "k", 1, write_only);
    allowed.value = m.value;
    EXPECT_TRUE(std::holds_alternative<ForwardCacheHandler::Proceed>(
        handler_->Decide(allowed, flxi::Kind::kAuthorizedForwardCacheOp)));
  }
  // ... reads cache.read.
  for (auto op : {flxi::CacheOpKind::kGet, flxi::CacheOpKind::kCounterGet}) {
    ExpectError(Request(op, "k", 1, write_only), flxi::ErrorCode::kUnauthorized);
    EXPECT_TRUE(std::holds_alternative<ForwardCacheHandler::Proceed>(
        handler_->Decide(Request(op, "k", 1, read_only), flxi::Kind::kAuthorizedForwardCacheOp)));
  }
  // A grant on other keys only, a token that does not verify, another tenant's token.
  ExpectError(
      Request(flxi::CacheOpKind::kGet, "k", 1, Token({"cache.read:cache:default/default/other"})),
      flxi::ErrorCode::kUnauthorized);
  std::string bad = ReadWriteToken();
  bad.resize(bad.size() - 4);
  ExpectError(Request(flxi::CacheOpKind::kGet, "k", 1, bad), flxi::ErrorCode::kUnauthorized);
  ExpectError(Request(flxi::CacheOpKind::kGet, "k", 1,
                      Token({"cache.read:cache:default/default/*"}, "other")),
              flxi::ErrorCode::kUnauthorized);
}

TEST_F(ForwardCacheHandlerTest, TheLegacyKindAndAnEmptyConditionalCredentialAreRefused) {
  router_.Set(LocalRoute(1));
  // Kind 11 carries no credential: refused as the publish handler refuses kind 1.
  ExpectError(Request(flxi::CacheOpKind::kGet, "k", 1, ""), flxi::ErrorCode::kUnauthorized,
              flxi::Kind::kForwardCacheOp);
  // Even if a credential were decoded with it, the legacy kind is refused.
  ExpectError(Request(flxi::CacheOpKind::kGet, "k", 1, ReadWriteToken()),
              flxi::ErrorCode::kUnauthorized, flxi::Kind::kForwardCacheOp);
  // Kind 34 with an empty credential ("no auth"): this broker always authenticates.
  auto m = Request(flxi::CacheOpKind::kGet, "k", 1, "");
  m.credential = std::string_view();
  m.condition = flxi::Condition{flxi::CacheCondition::kNone, 0};
  ForwardAnswer a = Refused(m, flxi::Kind::kConditionalForwardCacheOp);
  EXPECT_EQ(a.code, flxi::ErrorCode::kUnauthorized);
  EXPECT_EQ(a.ToFrame(1).kind, flxi::Kind::kForwardCacheError);
}

TEST_F(ForwardCacheHandlerTest, OpsThatMakeNoSenseAreMalformed) {
  router_.Set(LocalRoute(1));
  auto add = Request(flxi::CacheOpKind::kCounterAdd, "k", 1, ReadWriteToken());
  add.value = "1234";  // a delta is exactly 8 bytes
  ExpectError(add, flxi::ErrorCode::kMalformed);
  auto cond = Request(flxi::CacheOpKind::kCounterAdd, "k", 1, ReadWriteToken());
  keep_.push_back(flxi::EncodeCounterValue(1));
  cond.value = keep_.back();
  cond.condition = flxi::Condition{flxi::CacheCondition::kAbsent, 0};
  ExpectError(cond, flxi::ErrorCode::kMalformed, flxi::Kind::kConditionalForwardCacheOp);
  auto get_if = Request(flxi::CacheOpKind::kGet, "k", 1, ReadWriteToken());
  get_if.condition = flxi::Condition{flxi::CacheCondition::kVersion, 3};
  ExpectError(get_if, flxi::ErrorCode::kMalformed, flxi::Kind::kConditionalForwardCacheOp);
}

TEST_F(ForwardCacheHandlerTest, EveryOpRunsOnTheOwnersShardAndIsAnsweredAfterward) {
  router_.Set(LocalRoute(2));
  PeerAddress to = Serve();
  std::string token = ReadWriteToken();
  // Put (present=0), Get finds it, an empty value stays distinct from a miss.
  auto put = Request(flxi::CacheOpKind::kPut, "user:1", 2, token);
  put.value = "v1";
  put.ttl_ms = 60000;
  EXPECT_EQ(CallOk(to, put), std::nullopt);
  EXPECT_EQ(CallOk(to, Request(flxi::CacheOpKind::kGet, "user:1", 2, token)), "v1");
  auto empty = Request(flxi::CacheOpKind::kPut, "user:2", 2, token);
  EXPECT_EQ(CallOk(to, empty), std::nullopt);
  EXPECT_EQ(CallOk(to, Request(flxi::CacheOpKind::kGet, "user:2", 2, token)), "");
  EXPECT_EQ(CallOk(to, Request(flxi::CacheOpKind::kGet, "user:3", 2, token)), std::nullopt);
  // Delete answers the removed value, then the key is a miss.
  EXPECT_EQ(CallOk(to, Request(flxi::CacheOpKind::kDelete, "user:1", 2, token)), "v1");
  EXPECT_EQ(CallOk(to, Request(flxi::CacheOpKind::kGet, "user:1", 2, token)), std::nullopt);
  // Counters: never written is absent; adds answer the sum as 8 big-endian bytes.
  EXPECT_EQ(CallOk(to, Request(flxi::CacheOpKind::kCounterGet, "hits", 2, token)), std::nullopt);
  for (int64_t delta : {5, -2}) {
    auto add = Request(flxi::CacheOpKind::kCounterAdd, "hits", 2, token);
    keep_.push_back(flxi::EncodeCounterValue(delta));
    add.value = keep_.back();
    (void)CallOk(to, add);
  }
  auto sum = CallOk(to, Request(flxi::CacheOpKind::kCounterGet, "hits", 2, token));
  ASSERT_TRUE(sum);
  EXPECT_EQ(*flxi::DecodeCounterValue(*sum), 3);
  // A refusal comes back as kind 13; the legacy kind as Unauthorized.
  flxi::Frame stale = Call(to, flxi::Kind::kAuthorizedForwardCacheOp,
                           Request(flxi::CacheOpKind::kGet, "user:1", 3, token));
  ASSERT_EQ(stale.kind, flxi::Kind::kForwardCacheError);
  EXPECT_EQ(std::get<flxi::ErrorAnswer>(stale.body).code, flxi::ErrorCode::kStaleRoute);
  flxi::Frame legacy =
      Call(to, flxi::Kind::kForwardCacheOp, Request(flxi::CacheOpKind::kGet, "user:1", 2, ""));
  ASSERT_EQ(legacy.kind, flxi::Kind::kForwardCacheError);
  EXPECT_EQ(std::get<flxi::ErrorAnswer>(legacy.body).code, flxi::ErrorCode::kUnauthorized);
  // The owner counted what it answered.
  test::OnLoop(*node_ep_, [] {});
  EXPECT_EQ(metrics_
                .AddCounter("felix_forward_received_total", "",
                            "kind=\"ForwardCacheOp\",outcome=\"unauthorized\"")
                .Value(),
            1u);
}

TEST_F(ForwardCacheHandlerTest, ConditionalOpsAreAnsweredWithAppliedAndVersion) {
  router_.Set(LocalRoute(2));
  PeerAddress to = Serve();
  std::string token = ReadWriteToken();
  auto conditional = [&](flxi::CacheOpKind op, const std::string& value,
                         flxi::Condition condition) {
    auto m = Request(op, "doc", 2, token);
    keep_.push_back(value);
    m.value = keep_.back();
    m.condition = condition;
    flxi::Frame f = Call(to, flxi::Kind::kConditionalForwardCacheOp, m);
    EXPECT_EQ(f.kind, flxi::Kind::kConditionalForwardCacheOk) << flxi::KindName(f.kind);
    auto* ok = std::get_if<flxi::ConditionalCacheOk>(&f.body);
    return ok ? *ok : flxi::ConditionalCacheOk{};
  };
  using C = flxi::CacheCondition;
  auto first = conditional(flxi::CacheOpKind::kPut, "a", {C::kAbsent, 0});
  EXPECT_TRUE(first.applied);
  ASSERT_TRUE(first.version);
  auto again = conditional(flxi::CacheOpKind::kPut, "b", {C::kAbsent, 0});
  EXPECT_FALSE(again.applied);  // not absent any more; the current version is told
  EXPECT_EQ(again.version, first.version);
  auto get = conditional(flxi::CacheOpKind::kGet, "", {C::kNone, 0});
  EXPECT_TRUE(get.applied);
  EXPECT_EQ(get.version, first.version);
  EXPECT_EQ(get.value, std::optional<flxi::Bytes>("a"));
  auto wrong = conditional(flxi::CacheOpKind::kDelete, "", {C::kVersion, *first.version + 1});
  EXPECT_FALSE(wrong.applied);
  auto right = conditional(flxi::CacheOpKind::kDelete, "", {C::kVersion, *first.version});
  EXPECT_TRUE(right.applied);
  EXPECT_FALSE(right.version);  // no live entry after the delete
  EXPECT_EQ(CallOk(to, Request(flxi::CacheOpKind::kGet, "doc", 2, token)), std::nullopt);
}

}  // namespace
}  // namespace felix::cluster
