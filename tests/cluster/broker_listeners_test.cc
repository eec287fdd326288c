// The daemon's two listeners, in-process, on ephemeral ports: the client port without a
// service resets streams, the internal port served by a PeerServer speaks FLXI.
#include "transport/broker_listeners.h"

#include "peer_test_util.h"

namespace felix::cluster {
namespace {

using namespace felix::cluster::test;
using transport::BrokerListeners;
using transport::ListenerConfig;

TEST(BrokerListenersTest, ClientPortResetsStreamsAndInternalPortSpeaksFlxi) {
  MetricsRegistry metrics;
  PeerServer server(PeerServerOptions{"node-b", flxi::kCapPing, false, "internal"}, metrics);
  ListenerConfig lc;
  lc.client_bind = {"127.0.0.1", 0};
  lc.internal_bind = {"127.0.0.1", 0};
  lc.node_id = "node-b";
  lc.internal_handlers = server.listen_handlers();
  std::vector<std::string> warnings;
  auto l = BrokerListeners::Start(lc, metrics, &warnings);
  ASSERT_TRUE(l.has_value()) << l.error().message;
  EXPECT_EQ(warnings.size(), 3u);  // two self-signed certificates, unauthenticated peers
  EXPECT_NE((*l)->client_address().port, 0);
  EXPECT_NE((*l)->internal_address().port, 0);
  EXPECT_NE((*l)->client_address().port, (*l)->internal_address().port);

  TlsOptions co;
  co.dial_alpn = {"felix/1"};
  auto dialer = MakeDialer(MakeTls(co), metrics);
  auto conn = DialAndWait(*dialer, (*l)->client_address(), "localhost");
  ASSERT_TRUE(conn.has_value()) << conn.error().message;
  EXPECT_EQ(EchoRoundTrip(*dialer, *conn, "auth?"),
            "reset " + std::to_string(transport::kStreamNotServedCode));

  MetricsRegistry pm;
  auto pep = MakeDialer(MakeTls(UnauthenticatedInternal()), pm);
  PeerPool pool(*pep, Opts("node-a"), pm);
  auto p = std::make_shared<std::promise<Outcome>>();
  auto f = p->get_future();
  ASSERT_TRUE(pool.Request({"node-b", (*l)->internal_address()}, PingRequest(),
                           [p](Outcome r) { p->set_value(std::move(r)); })
                  .has_value());
  auto r = Await(f);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->peer_capabilities, std::optional<uint64_t>(flxi::kCapPing));
  EXPECT_EQ(RefusalOf(*r).code, flxi::ErrorCode::kUnsupportedKind);  // nothing served
  pool.Shutdown();
  (*l)->Stop();
}

TEST(BrokerListenersTest, InternalPortWithoutAServiceResetsStreams) {
  MetricsRegistry metrics;
  ListenerConfig lc;
  lc.client_bind = {"127.0.0.1", 0};
  lc.internal_bind = {"127.0.0.1", 0};
  auto l = BrokerListeners::Start(lc, metrics, nullptr);
  ASSERT_TRUE(l.has_value()) << l.error().message;
  auto dialer = MakeDialer(MakeTls(UnauthenticatedInternal()), metrics);
  auto conn = DialAndWait(*dialer, (*l)->internal_address(), "localhost");
  ASSERT_TRUE(conn.has_value()) << conn.error().message;
  EXPECT_EQ(EchoRoundTrip(*dialer, *conn, "FLXI?"),
            "reset " + std::to_string(transport::kStreamNotServedCode));
  (*l)->Stop();
}

TEST(BrokerListenersTest, BadCertificatePathNamesTheVariable) {
  MetricsRegistry metrics;
  ListenerConfig lc;
  lc.client_bind = {"127.0.0.1", 0};
  lc.internal_bind = {"127.0.0.1", 0};
  lc.internal_tls_cert = "/nonexistent/peer.crt";
  lc.internal_tls_key = "/nonexistent/peer.key";
  lc.internal_tls_ca = "/nonexistent/ca.crt";
  auto l = BrokerListeners::Start(lc, metrics, nullptr);
  ASSERT_FALSE(l.has_value());
  EXPECT_NE(l.error().message.find("FELIX_INTERNAL_TLS_CA=/nonexistent/ca.crt"), std::string::npos)
      << l.error().message;
}

}  // namespace
}  // namespace felix::cluster
