// PeerPool and PeerServer over real QUIC on loopback.
#include "transport/peer_pool.h"

#include <mutex>

#include "transport/flxi_framing.h"
#include "transport/flxi_interim_messages.h"
#include "transport_test_util.h"

namespace felix::transport {
namespace {

using namespace felix::transport::test;
namespace fi = flxi_interim;

constexpr uint16_t kPing = 38;
constexpr uint16_t kPong = 39;
constexpr uint16_t kHold = 100;  // test kind: answered only when the test says so

using Outcome = Result<PeerResponse, PeerError>;

TlsOptions UnauthenticatedInternal() {
  TlsOptions o;
  o.role = Role::kInternal;
  return o;
}

// A peer broker: internal listener + PeerServer answering Ping and holding kHold requests.
struct PeerNode {
  MetricsRegistry metrics;
  std::unique_ptr<PeerServer> server;
  std::unique_ptr<Endpoint> ep;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PeerReply> held;
  size_t held_total = 0;

  PeerNode(const std::string& node_id, TlsOptions tls, bool check_identity = false) {
    server = std::make_unique<PeerServer>(PeerServerOptions{node_id, check_identity}, metrics);
    server->Handle(
        kPing, [](const PeerRequest& req, PeerReply reply) { reply(kPong, req.body.subspan(8)); });
    server->Handle(kHold, [this](const PeerRequest&, PeerReply reply) {
      std::lock_guard<std::mutex> lock(mu);
      held.push_back(std::move(reply));
      ++held_total;
      cv.notify_all();
    });
    EndpointOptions eo;
    eo.tls = MakeTls(std::move(tls));
    eo.name = "internal";
    auto r = Endpoint::Create(Loopback(), eo, metrics, server->listen_handlers());
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    ep = std::move(*r);
  }
  void WaitHeld(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return held_total >= n; }));
  }
  void ReleaseHeld() {
    OnLoop(*ep, [this] {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& r : held) r(kPong, {});
      held.clear();
    });
  }
  size_t HeldTotal() {
    std::lock_guard<std::mutex> lock(mu);
    return held_total;
  }
};

struct Caller {
  MetricsRegistry metrics;
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<PeerPool> pool;

  Caller(PeerPoolOptions o, TlsOptions tls = UnauthenticatedInternal()) {
    EndpointOptions eo;
    eo.tls = MakeTls(std::move(tls));
    eo.name = "internal-dial";
    auto r = Endpoint::Create(Loopback(), eo, metrics, std::nullopt);
    EXPECT_TRUE(r.has_value());
    ep = std::move(*r);
    pool = std::make_unique<PeerPool>(*ep, std::move(o), metrics);
  }
  ~Caller() {
    pool.reset();
    ep.reset();
  }
  std::future<Outcome> Send(const PeerAddress& to, uint16_t kind, std::string payload = "") {
    auto p = std::make_shared<std::promise<Outcome>>();
    auto f = p->get_future();
    pool->Request(to, kind, std::vector<uint8_t>(payload.begin(), payload.end()),
                  [p](Outcome r) { p->set_value(std::move(r)); });
    return f;
  }
  Outcome Call(const PeerAddress& to, uint16_t kind, std::string payload = "") {
    auto f = Send(to, kind, std::move(payload));
    return Await(f);
  }
  uint64_t Count(const std::string& name, const std::string& labels = "") {
    return metrics.AddCounter(name, "", labels).Value();
  }
};

PeerPoolOptions Opts(const std::string& own = "node-a") {
  PeerPoolOptions o;
  o.own_node_id = own;
  return o;
}

std::string BodyText(const PeerResponse& r) {
  return std::string(r.body.begin() + 8, r.body.end());
}

TEST(PeerPoolTest, RequestsShareOneConnectionAcrossStreams) {
  PeerNode b("node-b", UnauthenticatedInternal());
  Caller a(Opts());
  PeerAddress to{"node-b", b.ep->local_address()};
  std::vector<std::future<Outcome>> fs;
  for (int i = 0; i < 50; ++i) fs.push_back(a.Send(to, kPing, "p" + std::to_string(i)));
  for (int i = 0; i < 50; ++i) {
    auto r = Await(fs[size_t(i)]);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->kind, kPong);
    EXPECT_EQ(BodyText(*r), "p" + std::to_string(i));
  }
  auto again = a.Call(to, kPing, "again");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 1u);
}

TEST(PeerPoolTest, UnknownKindIsAnsweredAndTheStreamContinues) {
  PeerNode b("node-b", UnauthenticatedInternal());
  PeerPoolOptions o = Opts();
  o.streams_per_conn = 1;  // everything on one request stream
  Caller a(o);
  PeerAddress to{"node-b", b.ep->local_address()};
  ASSERT_TRUE(a.Call(to, kPing, "warm").has_value());
  auto r = a.Call(to, 999, "whatever");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->kind, fi::kKindForwardPublishError);
  auto e = fi::DecodeError(r->body);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, fi::kErrUnsupportedKind);
  EXPECT_EQ(e->detail, "this broker does not know frame kind 999");
  auto next = a.Call(to, kPing, "next");
  ASSERT_TRUE(next.has_value()) << next.error().message;
  EXPECT_EQ(BodyText(*next), "next");
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 1u);
}

TEST(PeerPoolTest, InFlightBoundShedsWithoutSending) {
  PeerNode b("node-b", UnauthenticatedInternal());
  PeerPoolOptions o = Opts();
  o.max_in_flight = 4;
  Caller a(o);
  PeerAddress to{"node-b", b.ep->local_address()};
  std::vector<std::future<Outcome>> held;
  for (int i = 0; i < 4; ++i) held.push_back(a.Send(to, kHold));
  b.WaitHeld(4);
  auto shed = a.Call(to, kHold);
  ASSERT_FALSE(shed.has_value());
  EXPECT_EQ(shed.error().kind, PeerErrorKind::kShed);
  EXPECT_TRUE(shed.error().retryable);
  b.ReleaseHeld();
  for (auto& f : held) EXPECT_TRUE(Await(f).has_value());
  ASSERT_TRUE(a.Call(to, kPing).has_value());  // the Ping went through the same stream(s)
  EXPECT_EQ(b.HeldTotal(), 4u);                // the shed request never reached the peer
  EXPECT_EQ(a.Count("felix_peer_requests_shed_total"), 1u);
}

TEST(PeerPoolTest, TimeoutReleasesTheWaiter) {
  PeerNode b("node-b", UnauthenticatedInternal());
  PeerPoolOptions o = Opts();
  o.request_timeout = std::chrono::milliseconds(200);
  o.max_in_flight = 1;
  Caller a(o);
  PeerAddress to{"node-b", b.ep->local_address()};
  auto r = a.Call(to, kHold);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, PeerErrorKind::kTimeout);
  EXPECT_FALSE(r.error().retryable);
  // The slot is free again (max_in_flight = 1), and the late answer is ignored.
  b.ReleaseHeld();
  auto next = a.Call(to, kPing, "after");
  ASSERT_TRUE(next.has_value()) << next.error().message;
  EXPECT_EQ(BodyText(*next), "after");
  EXPECT_EQ(a.Count("felix_peer_request_timeouts_total"), 1u);
  EXPECT_EQ(a.metrics.AddGauge("felix_peer_requests_in_flight", "").Value(), 0);
}

TEST(PeerPoolTest, KillingThePeerFailsAllWaitersAtOnce) {
  auto b = std::make_unique<PeerNode>("node-b", UnauthenticatedInternal());
  Caller a(Opts());
  PeerAddress to{"node-b", b->ep->local_address()};
  std::vector<std::future<Outcome>> fs;
  for (int i = 0; i < 10; ++i) fs.push_back(a.Send(to, kHold));
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
  PeerNode silent("node-b", UnauthenticatedInternal());
  HostPort dead = silent.ep->local_address();
  silent.ep->Stop();
  PeerPoolOptions o = Opts();
  o.handshake_timeout = std::chrono::milliseconds(200);
  o.reconnect_base = std::chrono::milliseconds(60000);
  o.reconnect_max = std::chrono::milliseconds(60000);
  Caller a(o);
  PeerAddress to{"node-b", dead};
  auto first = a.Call(to, kPing);
  ASSERT_FALSE(first.has_value());
  EXPECT_EQ(first.error().kind, PeerErrorKind::kConnectFailed) << first.error().message;
  EXPECT_TRUE(first.error().retryable);
  auto second = a.Call(to, kPing);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().kind, PeerErrorKind::kBackoff);
  EXPECT_TRUE(second.error().retryable);
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"failed\""), 1u);  // no second dial
  EXPECT_EQ(a.Count("felix_peer_requests_backoff_total"), 1u);
}

TEST(PeerPoolTest, IdleConnectionIsClosedAndReopenedOnDemand) {
  PeerNode b("node-b", UnauthenticatedInternal());
  PeerPoolOptions o = Opts();
  o.idle_timeout = std::chrono::milliseconds(200);
  auto closed = std::make_shared<std::promise<std::string>>();
  auto closed_f = closed->get_future();
  auto once = std::make_shared<std::once_flag>();
  o.on_connection_closed = [closed, once](const std::string& node, const std::string&) {
    std::call_once(*once, [&] { closed->set_value(node); });
  };
  Caller a(o);
  PeerAddress to{"node-b", b.ep->local_address()};
  ASSERT_TRUE(a.Call(to, kPing).has_value());
  EXPECT_EQ(Await(closed_f), "node-b");
  EXPECT_EQ(a.Count("felix_peer_connections_idle_closed_total"), 1u);
  ASSERT_TRUE(a.Call(to, kPing).has_value());
  EXPECT_EQ(a.Count("felix_peer_connects_total", "result=\"ok\""), 2u);
}

TEST(PeerPoolTest, AnswerFromAnotherNodeIsRefused) {
  PeerNode b("node-b", UnauthenticatedInternal());
  Caller a(Opts());
  auto r = a.Call(PeerAddress{"node-x", b.ep->local_address()}, kPing);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, PeerErrorKind::kConnectFailed);
  EXPECT_NE(r.error().message.find("answered as node-b"), std::string::npos) << r.error().message;
  EXPECT_EQ(a.Count("felix_peer_wrong_node_total"), 1u);
}

TEST(PeerPoolTest, HelloClaimingANameTheCertificateLacksIsUnauthorized) {
  TestPki pki;
  auto [bcrt, bkey] = pki.Issue("node-b", {"node-b"});
  auto [acrt, akey] = pki.Issue("node-a", {"node-a"});
  PeerNode b("node-b", InternalTls(bcrt, bkey, pki.ca_file()), /*check_identity=*/true);
  PeerAddress to{"node-b", b.ep->local_address()};
  {
    Caller liar(Opts("node-z"), InternalTls(acrt, akey, pki.ca_file()));
    auto r = liar.Call(to, kPing);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().kind, PeerErrorKind::kConnectFailed);
    EXPECT_NE(r.error().message.find("code 3"), std::string::npos) << r.error().message;
    OnLoop(*b.ep, [] {});
    EXPECT_EQ(b.metrics
                  .AddCounter("felix_transport_handshakes_refused_total", "",
                              "endpoint=\"internal\",reason=\"hello_identity\"")
                  .Value(),
              1u);
  }
  Caller honest(Opts("node-a"), InternalTls(acrt, akey, pki.ca_file()));
  auto ok = honest.Call(to, kPing, "mtls");
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(BodyText(*ok), "mtls");
}

TEST(PeerServerTest, WrongMagicClosesTheConnection) {
  PeerNode b("node-b", UnauthenticatedInternal());
  MetricsRegistry m;
  auto dialer = MakeDialer(MakeTls(UnauthenticatedInternal()), m);
  auto conn = DialAndWait(*dialer, b.ep->local_address(), "node-b");
  ASSERT_TRUE(conn.has_value()) << conn.error().message;
  auto closed = std::make_shared<std::promise<CloseInfo>>();
  auto f = closed->get_future();
  OnLoop(*dialer, [&] {
    (*conn)->SetHandlers(ConnectionHandlers{
        nullptr, [closed](Connection&, const CloseInfo& i) { closed->set_value(i); }});
    auto s = (*conn)->OpenBidiStream();
    ASSERT_TRUE(s.has_value());
    std::vector<uint8_t> frame;
    AppendFlxiFrame(frame, 5, 1, {});
    frame[3] = '1';  // FLX1: a client frame on the internal port
    (void)(*s)->Write(frame);
  });
  CloseInfo info = Await(f);
  EXPECT_EQ(info.kind, CloseInfo::Kind::kPeer);
  EXPECT_TRUE(info.application);
  EXPECT_EQ(info.code, kPeerCloseProtocol);
}

}  // namespace
}  // namespace felix::transport
