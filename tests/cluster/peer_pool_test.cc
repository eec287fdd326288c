// PeerPool (the dialling side) against a PeerServer over real QUIC on loopback: the outcome
// contract, the handshake and its fallback, capabilities.
#include "cluster/peer_pool.h"

#include "peer_test_util.h"

namespace felix::cluster {
namespace {

using namespace felix::cluster::test;

TEST(PeerPoolTest, RequestsShareOneConnectionAcrossStreams) {
  PeerNode b("node-b");
  Caller a(Opts());
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) keys.push_back("p" + std::to_string(i));
  std::vector<std::future<Outcome>> fs;
  for (const auto& k : keys) fs.push_back(a.Send(b.address("node-b"), EchoRequest(k)));
  for (size_t i = 0; i < keys.size(); ++i) {
    auto r = Await(fs[i]);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(EchoText(*r), keys[i]);
  }
  auto again = a.Call(b.address("node-b"), EchoRequest("again"));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 1u);
}

TEST(PeerPoolTest, UnknownAndUnservedKindsAreAnsweredAndTheStreamContinues) {
  PeerNode b("node-b");
  PeerPoolOptions o = Opts();
  o.streams_per_conn = 1;  // everything on one request stream
  Caller a(o);
  auto to = b.address("node-b");
  ASSERT_TRUE(a.Call(to, EchoRequest("warm")).has_value());

  // A kind this build does not know at all.
  auto r = a.CallRaw(to, 999, "whatever");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->kind, uint16_t(flxi::Kind::kForwardPublishError));
  auto e = RefusalOf(*r);
  EXPECT_EQ(e.code, flxi::ErrorCode::kUnsupportedKind);
  EXPECT_EQ(e.detail, "this broker does not know frame kind 999");

  // A kind the codec knows and no handler serves (ReplicateBootstrap): the same refusal, kind 3.
  flxi::Bootstrap boot{0, flxi::ShardRef{"t1", "ns", "s", 1, 2}, 5000};
  auto f = a.Call(to, flxi::Frame{flxi::Kind::kReplicateBootstrap, boot});
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ(f->kind, uint16_t(flxi::Kind::kForwardPublishError));
  EXPECT_EQ(RefusalOf(*f).code, flxi::ErrorCode::kUnsupportedKind);
  EXPECT_EQ(RefusalOf(*f).detail, "this broker does not know frame kind 10");

  auto next = a.Call(to, EchoRequest("next"));
  ASSERT_TRUE(next.has_value()) << next.error().message;
  EXPECT_EQ(EchoText(*next), "next");
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 1u);
  EXPECT_EQ(b.Count("felix_peer_unknown_kind_total"), 2u);
}

TEST(PeerPoolTest, MalformedBodyOfAServedKindIsRefusedInItsShape) {
  PeerNode b("node-b");
  PeerPoolOptions o = Opts();
  o.streams_per_conn = 1;
  Caller a(o);
  auto to = b.address("node-b");
  // A ForwardCacheOp body cut short after the correlation id: refused as a cache error.
  auto r = a.CallRaw(to, uint16_t(kEcho), std::string(2, '\0'));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->kind, uint16_t(flxi::Kind::kForwardCacheError));
  EXPECT_EQ(RefusalOf(*r).code, flxi::ErrorCode::kMalformed);
  auto next = a.Call(to, EchoRequest("after"));
  ASSERT_TRUE(next.has_value()) << next.error().message;
  EXPECT_EQ(EchoText(*next), "after");
  EXPECT_EQ(b.Count("felix_peer_malformed_requests_total"), 1u);
}

TEST(PeerPoolTest, AFrameTheCodecRefusesIsAnErrorNowAndNothingIsSent) {
  PeerNode b("node-b");
  Caller a(Opts());
  std::string long_key(flxi::kMaxIdentBytes + 1, 'k');
  bool called = false;
  auto sent = a.pool->Request(b.address("node-b"), EchoRequest(long_key),
                              [&called](Outcome) { called = true; });
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().code, ErrorCode::kInvalidArgument);
  a.pool->Shutdown();  // would have delivered a kStopped to a queued request
  EXPECT_FALSE(called);
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 0u);
}

TEST(PeerPoolTest, InFlightBoundShedsWithoutSending) {
  PeerNode b("node-b");
  PeerPoolOptions o = Opts();
  o.max_in_flight = 4;
  Caller a(o);
  auto to = b.address("node-b");
  std::vector<std::future<Outcome>> held;
  for (int i = 0; i < 4; ++i) held.push_back(a.Send(to, HoldRequest()));
  b.WaitHeld(4);
  auto shed = a.Call(to, HoldRequest());
  ASSERT_FALSE(shed.has_value());
  EXPECT_EQ(shed.error().kind, PeerErrorKind::kShed);
  EXPECT_TRUE(shed.error().retryable);
  b.ReleaseHeld();
  for (auto& f : held) {
    auto r = Await(f);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->kind, uint16_t(flxi::Kind::kForwardPublishOk));
  }
  ASSERT_TRUE(a.Call(to, EchoRequest("x")).has_value());  // the same stream(s) still work
  EXPECT_EQ(b.HeldTotal(), 4u);                           // the shed request never reached the peer
  EXPECT_EQ(a.Count("felix_peer_requests_shed_total"), 1u);
}

TEST(PeerPoolTest, TimeoutReleasesTheWaiter) {
  PeerNode b("node-b");
  PeerPoolOptions o = Opts();
  o.request_timeout = std::chrono::milliseconds(200);
  o.max_in_flight = 1;
  Caller a(o);
  auto to = b.address("node-b");
  auto r = a.Call(to, HoldRequest());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, PeerErrorKind::kTimeout);
  EXPECT_FALSE(r.error().retryable);
  // The slot is free again (max_in_flight = 1), and the late answer is ignored.
  b.ReleaseHeld();
  auto next = a.Call(to, EchoRequest("after"));
  ASSERT_TRUE(next.has_value()) << next.error().message;
  EXPECT_EQ(EchoText(*next), "after");
  EXPECT_EQ(a.Count("felix_peer_request_timeouts_total"), 1u);
  EXPECT_EQ(a.metrics.AddGauge("felix_peer_requests_in_flight", "").Value(), 0);
}

TEST(PeerPoolTest, KillingThePeerFailsAllWaitersAtOnce) {
  auto b = std::make_unique<PeerNode>("node-b");
  Caller a(Opts());
  auto to = b->address("node-b");
  std::vector<std::future<Outcome>> fs;
  for (int i = 0; i < 10; ++i) fs.push_back(a.Send(to, HoldRequest()));
  b->WaitHeld(10);
  b.reset();  // the peer goes away
  for (auto& f : fs) {
    auto r = Await(f);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().kind, PeerErrorKind::kDisconnected) << r.error().message;
    EXPECT_FALSE(r.error().retryable);
  }
  EXPECT_EQ(a.Count("felix_peer_requests_disconnected_total"), 10u);
}

TEST(PeerPoolTest, BackoffWindowFailsFastWithoutDialling) {
  // An address where nothing answers QUIC: a stopped endpoint's port.
  PeerNode silent("node-b");
  HostPort dead = silent.ep->local_address();
  silent.ep->Stop();
  PeerPoolOptions o = Opts();
  o.handshake_timeout = std::chrono::milliseconds(200);
  o.reconnect_base = std::chrono::milliseconds(60000);
  o.reconnect_max = std::chrono::milliseconds(60000);
  Caller a(o);
  PeerAddress to{"node-b", dead};
  auto first = a.Call(to, HoldRequest());
  ASSERT_FALSE(first.has_value());
  EXPECT_EQ(first.error().kind, PeerErrorKind::kConnectFailed) << first.error().message;
  EXPECT_TRUE(first.error().retryable);
  auto second = a.Call(to, HoldRequest());
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().kind, PeerErrorKind::kBackoff);
  EXPECT_TRUE(second.error().retryable);
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"failed\""), 1u);  // no second dial
  EXPECT_EQ(a.Count("felix_peer_requests_backoff_total"), 1u);
}

TEST(PeerPoolTest, IdleConnectionIsClosedAndReopenedOnDemand) {
  PeerNode b("node-b");
  PeerPoolOptions o = Opts();
  o.idle_timeout = std::chrono::milliseconds(200);
  auto closed = std::make_shared<std::promise<std::string>>();
  auto closed_f = closed->get_future();
  auto once = std::make_shared<std::once_flag>();
  o.on_connection_closed = [closed, once](const std::string& node, const std::string&) {
    std::call_once(*once, [&] { closed->set_value(node); });
  };
  Caller a(o);
  auto to = b.address("node-b");
  ASSERT_TRUE(a.Call(to, EchoRequest("1")).has_value());
  EXPECT_EQ(Await(closed_f), "node-b");
  EXPECT_EQ(a.Count("felix_peer_connections_idle_closed_total"), 1u);
  ASSERT_TRUE(a.Call(to, EchoRequest("2")).has_value());
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 2u);
}

TEST(PeerPoolTest, HelloCapableOkFromAnotherNodeIsRefused) {
  PeerNode b("node-b");
  Caller a(Opts());
  auto r = a.Call(b.address("node-x"), EchoRequest("lost"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, PeerErrorKind::kConnectFailed);
  EXPECT_NE(r.error().message.find("answered as node-b"), std::string::npos) << r.error().message;
  EXPECT_EQ(a.Count("felix_peer_wrong_node_total"), 1u);
  EXPECT_TRUE(b.Seen().empty());  // the request never left the caller
}

TEST(PeerPoolTest, CapabilitiesAreExchangedBothWays) {
  const uint64_t listener_bits = flxi::kCapPing | flxi::kCapForwardOffsets | (1ull << 40);
  const uint64_t dialler_bits = flxi::kCapFence | flxi::kCapTailFetch;
  PeerNode b("node-b", UnauthenticatedInternal(), false, listener_bits);
  PeerPoolOptions o = Opts();
  o.capabilities = dialler_bits;
  Caller a(o);
  auto r = a.Call(b.address("node-b"), EchoRequest("caps"));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->peer_capabilities, std::optional<uint64_t>(listener_bits));  // unknown bit kept
  auto seen = b.Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer_node_id, "node-a");
  EXPECT_EQ(seen[0].peer_capabilities, std::optional<uint64_t>(dialler_bits));
}

TEST(PeerPoolTest, ZeroCapabilitiesStayDistinctFromALegacyPeer) {
  PeerNode b("node-b");  // offers no bits
  Caller a(Opts());      // offers no bits
  auto r = a.Call(b.address("node-b"), EchoRequest("zero"));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->peer_capabilities, std::optional<uint64_t>(0));
  auto seen = b.Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer_capabilities, std::optional<uint64_t>(0));
}

// A listener from before kind 27: refuses HelloCapable as an unknown kind, answers a plain
// Hello with HelloOk naming `answer_as`, and echoes the correlation id of anything else as a
// Pong. Records every kind and correlation id it was sent.
struct LegacyListener {
  MetricsRegistry metrics;
  std::unique_ptr<Endpoint> ep;
  std::mutex mu;
  std::vector<std::pair<uint16_t, uint64_t>> got;

  explicit LegacyListener(std::string answer_as) {
    EndpointOptions eo;
    eo.tls = MakeTls(UnauthenticatedInternal());
    eo.name = "legacy";
    transport::ListenHandlers lh;
    lh.on_connection = [this, answer_as](const std::shared_ptr<Connection>& c) {
      c->SetHandlers(ConnectionHandlers{
          [this, answer_as](const std::shared_ptr<Stream>& s) {
            auto reader = std::make_shared<FrameReader>();
            s->SetHandlers(StreamHandlers{
                [this, answer_as, reader](Stream& st, std::span<const uint8_t> data) {
                  st.Consume(data.size());
                  (void)reader->Feed(data, [&](uint16_t kind, std::span<const uint8_t> body) {
                    uint64_t corr = flxi::CorrelationIdOfBody(body);
                    {
                      std::lock_guard<std::mutex> lock(mu);
                      got.emplace_back(kind, corr);
                    }
                    std::vector<uint8_t> answer;
                    if (kind == uint16_t(flxi::Kind::kHello)) {
                      flxi::Hello ok{corr, answer_as, std::nullopt};
                      answer = *flxi::EncodeFrame(flxi::Frame{flxi::Kind::kHelloOk, ok});
                    } else if (kind == uint16_t(flxi::Kind::kHelloCapable)) {
                      answer = flxi::EncodeUnsupportedKindAnswer(kind, body);
                    } else {
                      answer = *flxi::EncodeFrame(flxi::Frame{flxi::Kind::kPong, flxi::PingPong{}});
                      SetCorrelationId(answer, corr);
                    }
                    (void)st.Write(answer);
                  });
                },
                nullptr, nullptr, nullptr});
          },
          nullptr});
    };
    auto r = Endpoint::Create(Loopback(), eo, metrics, lh);
    EXPECT_TRUE(r.has_value());
    ep = std::move(*r);
  }
  ~LegacyListener() {
    if (ep) ep->Stop();
  }
  std::vector<std::pair<uint16_t, uint64_t>> Got() {
    std::lock_guard<std::mutex> lock(mu);
    return got;
  }
};

TEST(PeerPoolTest, ALegacyListenerIsGreetedAgainWithAPlainHello) {
  LegacyListener old("node-b");
  Caller a(Opts());
  PeerAddress to{"node-b", old.ep->local_address()};
  auto r = a.Call(to, HoldRequest());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->kind, uint16_t(flxi::Kind::kPong));
  EXPECT_EQ(r->peer_capabilities, std::nullopt);  // a plain HelloOk carries none
  auto got = old.Got();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first, uint16_t(flxi::Kind::kHelloCapable));
  EXPECT_EQ(got[1].first, uint16_t(flxi::Kind::kHello));
  EXPECT_NE(got[0].second, got[1].second);  // §9: the Hello gets a new correlation id
  EXPECT_EQ(got[2].first, uint16_t(kHold));
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 1u);
}

TEST(PeerPoolTest, HelloOkFromAnotherNodeIsRefusedAfterTheFallback) {
  LegacyListener old("node-x");
  Caller a(Opts());
  auto r = a.Call(PeerAddress{"node-b", old.ep->local_address()}, HoldRequest());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, PeerErrorKind::kConnectFailed);
  EXPECT_NE(r.error().message.find("answered as node-x"), std::string::npos) << r.error().message;
  EXPECT_EQ(a.Count("felix_peer_wrong_node_total"), 1u);
  for (const auto& [kind, corr] : old.Got()) EXPECT_NE(kind, uint16_t(kHold));
}

TEST(PeerPoolTest, HelloClaimingANameTheCertificateLacksIsUnauthorized) {
  TestPki pki;
  auto [bcrt, bkey] = pki.Issue("node-b", {"node-b"});
  auto [acrt, akey] = pki.Issue("node-a", {"node-a"});
  PeerNode b("node-b", InternalTls(bcrt, bkey, pki.ca_file()), /*check_identity=*/true);
  auto to = b.address("node-b");
  {
    Caller liar(Opts("node-z"), InternalTls(acrt, akey, pki.ca_file()));
    auto r = liar.Call(to, EchoRequest("lie"));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().kind, PeerErrorKind::kConnectFailed);
    EXPECT_NE(r.error().message.find("Unauthorized (code 3)"), std::string::npos)
        << r.error().message;
    EXPECT_EQ(b.Count("felix_transport_handshakes_refused_total",
                      "endpoint=\"internal\",reason=\"hello_identity\""),
              1u);
  }
  EXPECT_TRUE(b.Seen().empty());
}

TEST(PeerPoolTest, RegisteredHandlerAnswersOverMutualTls) {
  TestPki pki;
  auto [bcrt, bkey] = pki.Issue("node-b", {"node-b"});
  auto [acrt, akey] = pki.Issue("node-a", {"node-a"});
  PeerNode b("node-b", InternalTls(bcrt, bkey, pki.ca_file()), /*check_identity=*/true,
             flxi::kCapPing);
  PeerPoolOptions o = Opts("node-a");
  o.capabilities = flxi::kCapFence;
  Caller a(o, InternalTls(acrt, akey, pki.ca_file()));
  auto ok = a.Call(b.address("node-b"), EchoRequest("mtls"));
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(EchoText(*ok), "mtls");
  EXPECT_EQ(ok->peer_capabilities, std::optional<uint64_t>(flxi::kCapPing));
  auto seen = b.Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer_node_id, "node-a");
  EXPECT_EQ(seen[0].peer_capabilities, std::optional<uint64_t>(flxi::kCapFence));
}

TEST(PeerPoolTest, AGatedKindIsRefusedLocallyUnlessThePeerOfferedItsBit) {
  PeerNode plain("node-b");  // offers nothing, yet would answer Ping (it has the handler)
  Caller a(Opts());
  auto refused = a.Call(plain.address("node-b"), PingRequest());
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().kind, PeerErrorKind::kNotOffered) << refused.error().message;
  EXPECT_FALSE(refused.error().retryable);
  EXPECT_EQ(a.Count("felix_peer_requests_not_offered_total"), 1u);

  PeerNode pinging("node-c", UnauthenticatedInternal(), false, flxi::kCapPing);
  auto pong = a.Call(pinging.address("node-c"), PingRequest());
  ASSERT_TRUE(pong.has_value()) << pong.error().message;
  EXPECT_EQ(pong->kind, uint16_t(flxi::Kind::kPong));

  // A legacy peer offered no bits at all.
  LegacyListener old("node-d");
  auto legacy = a.Call(PeerAddress{"node-d", old.ep->local_address()}, PingRequest());
  ASSERT_FALSE(legacy.has_value());
  EXPECT_EQ(legacy.error().kind, PeerErrorKind::kNotOffered);
  for (const auto& [kind, corr] : old.Got()) EXPECT_NE(kind, uint16_t(flxi::Kind::kPing));
}

}  // namespace
}  // namespace felix::cluster
