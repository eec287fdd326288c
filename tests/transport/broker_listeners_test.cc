// The daemon's two listeners, in-process, on ephemeral ports.
#include "transport/broker_listeners.h"

#include "transport/flxi_interim_messages.h"
#include "transport_test_util.h"

namespace felix::transport {
namespace {

using namespace felix::transport::test;

TEST(BrokerListenersTest, ClientPortResetsStreamsAndInternalPortSpeaksFlxi) {
  MetricsRegistry metrics;
  ListenerConfig lc;
  lc.client_bind = {"127.0.0.1", 0};
  lc.internal_bind = {"127.0.0.1", 0};
  lc.node_id = "node-b";
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
            "reset " + std::to_string(kStreamNotServedCode));

  TlsOptions io;
  io.role = Role::kInternal;
  MetricsRegistry pm;
  auto pep = MakeDialer(MakeTls(io), pm);
  PeerPoolOptions po;
  po.own_node_id = "node-a";
  PeerPool pool(*pep, po, pm);
  auto p = std::make_shared<std::promise<Result<PeerResponse, PeerError>>>();
  auto f = p->get_future();
  pool.Request({"node-b", (*l)->internal_address()}, 38, {},
               [p](Result<PeerResponse, PeerError> r) { p->set_value(std::move(r)); });
  auto r = Await(f);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->kind, flxi_interim::kKindForwardPublishError);  // nothing served yet
  pool.Shutdown();
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
}  // namespace felix::transport
