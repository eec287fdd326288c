// The owner's decision table for a forwarded publish (cluster/forward_publish_handler.h) on
// in-process parts: a real embedded catalog (tenant keys, a stream), a real BrokerCore on a
// temp directory, and a router whose answer each test sets. Each row of the generation rule,
// the not-owner (no relay) answer, the wrong-shard refusal, the credential checks (missing,
// legacy kind, bad signature, another tenant, no stream.publish) and the proceed case.
#include "cluster/forward_publish_handler.h"

#include <gtest/gtest.h>

#include <future>

#include "broker/publish_path.h"
#include "forward_owner_test_util.h"
#include "wire/flx1/constants.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;
using broker::Route;

using test::LocalRoute;
using test::RemoteRoute;

class ForwardPublishHandlerTest : public test::OwnerFixture {
 protected:
  void SetUp() override {
    OpenCatalog("felix-forward-handler");
    catalog::Stream s;
    s.tenant_id = "default";
    s.namespace_name = "default";
    s.name = "orders";
    s.shards = 4;
    s.durable = true;
    ASSERT_TRUE(catalog_->CreateStream(s));
    // A `Quorum` stream whose shards are gated and never see a majority (no replicator).
    s.name = "gated";
    s.shards = 1;
    s.consistency = catalog::Consistency::kQuorum;
    ASSERT_TRUE(catalog_->CreateStream(s));
    StartCore([](broker::BrokerCoreOptions& o) {
      o.commit_gate.timeout = std::chrono::milliseconds(1);
      o.gate_quorum_shard = [](const broker::ShardId&, broker::BrokerCoreOptions::CommitAdvance) {
        return true;
      };
    });
    handler_ = std::make_unique<ForwardPublishHandler>(test::OwnerOptions(), *resolver_, *catalog_,
                                                       metrics_);
  }
  void TearDown() override {
    handler_.reset();
    StopCore();
  }

  std::string PublishToken() { return Token({"stream.publish:stream:default/*/*"}); }

  flxi::ForwardPublish Request(uint32_t shard, uint64_t generation, const std::string& token) {
    flxi::ForwardPublish fp;
    fp.shard = flxi::ShardRef{"default", "default", "orders", shard, generation};
    fp.payloads = {"a", "b"};
    if (!token.empty()) fp.credential = token_ = token;
    return fp;
  }
  std::variant<broker::LocalStreamShard, ForwardAnswer> Decide(
      const flxi::ForwardPublish& fp, flxi::Kind kind = flxi::Kind::kAuthorizedForwardPublish) {
    return handler_->Decide(fp, kind);
  }
  static ForwardAnswer AnswerOf(const std::variant<broker::LocalStreamShard, ForwardAnswer>& d) {
    const auto* a = std::get_if<ForwardAnswer>(&d);
    EXPECT_NE(a, nullptr) << "expected a refusal, got proceed";
    return a ? *a : ForwardAnswer{};
  }
  static void ExpectError(const std::variant<broker::LocalStreamShard, ForwardAnswer>& d,
                          flxi::ErrorCode code) {
    ForwardAnswer a = AnswerOf(d);
    EXPECT_EQ(a.type, ForwardAnswer::Type::kError);
    EXPECT_EQ(a.code, code) << flxi::ErrorCodeName(a.code) << ": " << a.detail;
  }

  std::unique_ptr<ForwardPublishHandler> handler_;
  std::string token_;
};

TEST_F(ForwardPublishHandlerTest, EqualGenerationWithAValidCredentialProceedsOnTheNamedShard) {
  router_.Set(LocalRoute(5));
  auto d = Decide(Request(2, 5, PublishToken()));
  const auto* local = std::get_if<broker::LocalStreamShard>(&d);
  ASSERT_NE(local, nullptr) << AnswerOf(d).detail;
  EXPECT_EQ(local->shard, 2u);
  EXPECT_EQ(local->generation, Generation(5));
  EXPECT_EQ(local->stream->name, "orders");
}

TEST_F(ForwardPublishHandlerTest, RequesterBehindGetsNotLeaderWithOwnerAddressAndGeneration) {
  router_.Set(LocalRoute(7));
  ForwardAnswer a = AnswerOf(Decide(Request(0, 5, PublishToken())));
  EXPECT_EQ(a.type, ForwardAnswer::Type::kNotLeader);
  EXPECT_EQ(a.node_id, "n1");
  EXPECT_EQ(a.advertise_addr, "127.0.0.1:6001");
  EXPECT_EQ(a.generation, 7u);
  auto frame = a.ToFrame(42);
  EXPECT_EQ(frame.kind, flxi::Kind::kNotLeader);
  EXPECT_EQ(std::get<flxi::NotLeader>(frame.body).correlation_id, 42u);
}

TEST_F(ForwardPublishHandlerTest, RequesterAheadGetsStaleRouteAndNothingIsOpened) {
  router_.Set(LocalRoute(3));
  ExpectError(Decide(Request(0, 4, PublishToken())), flxi::ErrorCode::kStaleRoute);
  router_.Set(RemoteRoute("n2", 3));  // a broker whose view lags must not claim either way
  ExpectError(Decide(Request(0, 4, PublishToken())), flxi::ErrorCode::kStaleRoute);
}

TEST_F(ForwardPublishHandlerTest, ANonOwnerNamesTheOwnerAndNeverRelays) {
  for (uint64_t requester : {2u, 3u}) {
    router_.Set(RemoteRoute("n2", 3));
    ForwardAnswer a = AnswerOf(Decide(Request(1, requester, PublishToken())));
    EXPECT_EQ(a.type, ForwardAnswer::Type::kNotLeader);
    EXPECT_EQ(a.node_id, "n2");
    EXPECT_EQ(a.advertise_addr, "127.0.0.1:6002");  // the owner's internal address
    EXPECT_EQ(a.generation, 3u);
  }
}

TEST_F(ForwardPublishHandlerTest, AShardOutsideTheStreamIsRefusedAsWrongShard) {
  router_.Set(LocalRoute(1));
  auto d = Decide(Request(4, 1, PublishToken()));  // orders has shards 0..3
  ExpectError(d, flxi::ErrorCode::kMalformed);
  EXPECT_NE(AnswerOf(d).detail.find("wrong shard"), std::string::npos);
}

TEST_F(ForwardPublishHandlerTest, AnUnknownStreamOrUnservableShardIsUnavailable) {
  router_.Set(LocalRoute(1));
  auto fp = Request(0, 1, PublishToken());
  fp.shard.stream = "nope";
  ExpectError(Decide(fp), flxi::ErrorCode::kUnavailable);
  Route unavailable;
  unavailable.where = Route::Where::kUnavailable;
  unavailable.unavailable_reason = "not assigned";
  router_.Set(unavailable);
  ExpectError(Decide(Request(0, 1, PublishToken())), flxi::ErrorCode::kUnavailable);
}

TEST_F(ForwardPublishHandlerTest, TheCredentialIsCheckedAsForADirectPublish) {
  router_.Set(LocalRoute(1));
  // No stream.publish (subscribe only).
  ExpectError(Decide(Request(0, 1, Token({"stream.subscribe:stream:default/*/*"}))),
              flxi::ErrorCode::kUnauthorized);
  // Publish on another stream only.
  ExpectError(Decide(Request(0, 1, Token({"stream.publish:stream:default/default/audit"}))),
              flxi::ErrorCode::kUnauthorized);
  // A token that does not verify (signature cut).
  std::string bad = PublishToken();
  bad.resize(bad.size() - 4);
  ExpectError(Decide(Request(0, 1, bad)), flxi::ErrorCode::kUnauthorized);
  // A token of another tenant (tid mismatch: refused at verification).
  ExpectError(Decide(Request(0, 1, Token({"stream.publish:stream:default/*/*"}, "other"))),
              flxi::ErrorCode::kUnauthorized);
  // The legacy kind (no credential), and kind 22 decoded without one.
  ExpectError(Decide(Request(0, 1, ""), flxi::Kind::kForwardPublish),
              flxi::ErrorCode::kUnauthorized);
  ExpectError(Decide(Request(0, 1, "")), flxi::ErrorCode::kUnauthorized);
}

TEST_F(ForwardPublishHandlerTest, AnEmptyBatchIsMalformed) {
  router_.Set(LocalRoute(1));
  auto fp = Request(0, 1, PublishToken());
  fp.payloads.clear();
  ExpectError(Decide(fp), flxi::ErrorCode::kMalformed);
}

TEST_F(ForwardPublishHandlerTest, AnswersCarryOutcomeLabelsAndEncode) {
  ForwardAnswer ok;
  ok.type = ForwardAnswer::Type::kOk;
  ok.first_offset = 10;
  ok.last_offset = 11;
  EXPECT_EQ(ok.Outcome(), "ok");
  EXPECT_TRUE(flxi::EncodeFrame(ok.ToFrame(1)));
  auto stale = ForwardAnswer::Error(flxi::ErrorCode::kStaleRoute, std::string(600, 'x'));
  EXPECT_EQ(stale.Outcome(), "stale_route");
  EXPECT_TRUE(flxi::EncodeFrame(stale.ToFrame(1)));  // detail cut to 512 bytes
}

// A forwarded batch takes the owner's commit gate like a direct publish; one no majority
// confirmed in time may still be applied, so it is answered StorageFailed — never retried by
// the ingress, reported `storage` (outcome_unknown) — and never Unavailable (retried as if
// nothing had been written).
TEST_F(ForwardPublishHandlerTest, AQuorumBatchWithoutAMajorityIsAnsweredAsPossiblyApplied) {
  router_.Set(LocalRoute(1));
  flxi::ForwardPublish fp = Request(0, 1, PublishToken());
  fp.shard.stream = "gated";
  auto d = Decide(fp);
  auto* local = std::get_if<broker::LocalStreamShard>(&d);
  ASSERT_NE(local, nullptr) << AnswerOf(d).detail;
  auto written = std::make_shared<std::promise<Result<Offset>>>();
  auto future = written->get_future();
  ASSERT_TRUE(local->handle.executor->Post([cell = local->handle.cell, written] {
    auto owner = std::make_shared<std::string>("ab");
    broker::PayloadBatch batch{owner, {{reinterpret_cast<const uint8_t*>(owner->data()), 2}}, 0};
    broker::PublishWhenOpen(*cell, std::move(batch),
                            [written](Result<Offset> r) { written->set_value(r); });
  }));
  ASSERT_EQ(future.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  auto result = future.get();
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::kTimeout) << result.error().message;
  ForwardAnswer a = WrittenAnswer(result, 1, true);
  EXPECT_EQ(a.type, ForwardAnswer::Type::kError);
  EXPECT_EQ(a.code, flxi::ErrorCode::kStorageFailed);
  EXPECT_FALSE(flxi::IsRetryable(a.code));
  EXPECT_EQ(
      wire::flx1::DefaultRetryClass(static_cast<uint16_t>(wire::flx1::ProtocolErrorCode::kStorage)),
      wire::flx1::RetryClass::kOutcomeUnknown);
  // A refusal before the write stays retryable.
  EXPECT_EQ(WrittenAnswer(Fail(ErrorCode::kUnavailable, "opening"), 1, true).code,
            flxi::ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace felix::cluster
