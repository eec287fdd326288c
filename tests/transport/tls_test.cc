// The refusal matrix (roles, ALPN, certificates) and certificate rotation, over real UDP.
#include <algorithm>

#include "transport_test_util.h"

namespace felix::transport {
namespace {

using namespace felix::transport::test;

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

uint64_t CounterValue(MetricsRegistry& m, const std::string& endpoint, const std::string& reason) {
  return m
      .AddCounter("felix_transport_handshakes_refused_total", "",
                  "endpoint=\"" + endpoint + "\",reason=\"" + reason + "\"")
      .Value();
}

class InternalMatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [scrt, skey] = pki_.Issue("node-b", {"node-b"});
    EndpointOptions so;
    so.name = "internal";
    server_ = std::make_unique<EchoServer>(MakeTls(InternalTls(scrt, skey, pki_.ca_file())),
                                           metrics_, so);
  }

  Result<std::shared_ptr<Connection>> DialWith(TlsOptions o, const std::string& name) {
    dialer_ = MakeDialer(MakeTls(std::move(o)), metrics_);
    return DialAndWait(*dialer_, server_->addr(), name);
  }
  uint64_t Refused(const std::string& reason) {
    OnLoop(*server_->ep, [] {});  // the listener has finished the iteration that refused
    return CounterValue(metrics_, "internal", reason);
  }

  MetricsRegistry metrics_;
  TestPki pki_;
  std::unique_ptr<EchoServer> server_;
  std::unique_ptr<Endpoint> dialer_;
};

TEST_F(InternalMatrixTest, ValidPeerIsAcceptedAndItsNamesExposed) {
  auto [crt, key] = pki_.Issue("node-a", {"node-a"});
  auto conn = DialWith(InternalTls(crt, key, pki_.ca_file()), "node-b");
  ASSERT_TRUE(conn.has_value()) << conn.error().message;
  EXPECT_EQ(OnLoop(*dialer_, [&] { return (*conn)->alpn(); }), "felix-internal/1");
  EXPECT_EQ(EchoRoundTrip(*dialer_, *conn, "hi"), "hi");
  auto accepted = server_->first->get_future();
  auto sconn = Await(accepted);
  auto names = OnLoop(*server_->ep, [&] { return sconn->peer_dns_names(); });
  EXPECT_TRUE(Contains(names, "node-a"));
  EXPECT_TRUE(Contains(OnLoop(*dialer_, [&] { return (*conn)->peer_dns_names(); }), "node-b"));
}

TEST_F(InternalMatrixTest, NoAlpnIsRefused) {
  TlsOptions o;  // a client-role dialler offering no ALPN
  o.role = Role::kClient;
  auto conn = DialWith(o, "node-b");
  ASSERT_FALSE(conn.has_value());
  EXPECT_NE(conn.error().message.find("TLS alert 120"), std::string::npos) << conn.error().message;
  EXPECT_EQ(Refused("alpn"), 1u);
}

TEST_F(InternalMatrixTest, ClientAlpnOnInternalPortIsRefused) {
  TlsOptions o;
  o.role = Role::kClient;
  o.dial_alpn = {"felix/1"};
  auto conn = DialWith(o, "node-b");
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(Refused("alpn"), 1u);
}

TEST_F(InternalMatrixTest, PeerWithoutCertificateIsRefused) {
  TlsOptions o = InternalTls("", "", pki_.ca_file());
  o.no_certificate = true;
  auto conn = DialWith(o, "node-b");
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(Refused("certificate"), 1u);
}

TEST_F(InternalMatrixTest, PeerFromAnotherCaIsRefused) {
  TestPki rogue("rogue-ca");
  auto [crt, key] = rogue.Issue("node-a", {"node-a"});
  auto conn = DialWith(InternalTls(crt, key, pki_.ca_file()), "node-b");
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(Refused("certificate"), 1u);
}

TEST_F(InternalMatrixTest, ExpiredPeerCertificateIsRefused) {
  auto now = std::chrono::system_clock::now();
  auto [crt, key] =
      pki_.Issue("node-a", {"node-a"}, now - std::chrono::hours(1), now - std::chrono::hours(48));
  auto conn = DialWith(InternalTls(crt, key, pki_.ca_file()), "node-b");
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(Refused("certificate"), 1u);
}

TEST_F(InternalMatrixTest, ListenerWithWrongNameIsRefusedByDialler) {
  auto [crt, key] = pki_.Issue("node-a", {"node-a"});
  auto conn = DialWith(InternalTls(crt, key, pki_.ca_file()), "node-c");
  ASSERT_FALSE(conn.has_value());
  EXPECT_NE(conn.error().message.find("does not match"), std::string::npos) << conn.error().message;
  EXPECT_EQ(CounterValue(metrics_, "dialer", "certificate"), 1u);
}

TEST_F(InternalMatrixTest, ListenerFromUntrustedCaIsRefusedByDialler) {
  TestPki other("other-ca");
  auto [crt, key] = pki_.Issue("node-a", {"node-a"});
  auto conn = DialWith(InternalTls(crt, key, other.ca_file()), "node-b");
  ASSERT_FALSE(conn.has_value());
}

TEST(ClientPortTest, InternalAlpnOnClientPortIsRefused) {
  MetricsRegistry metrics;
  TlsOptions so;
  EchoServer server(MakeTls(so), metrics);
  TlsOptions o;
  o.role = Role::kClient;
  o.dial_alpn = {"felix-internal/1"};
  auto dialer = MakeDialer(MakeTls(o), metrics);
  auto conn = DialAndWait(*dialer, server.addr(), "localhost");
  ASSERT_FALSE(conn.has_value());
  EXPECT_NE(conn.error().message.find("TLS alert 120"), std::string::npos) << conn.error().message;
  OnLoop(*server.ep, [] {});
  EXPECT_EQ(CounterValue(metrics, "client", "alpn"), 1u);
}

TEST(ClientPortTest, InternalDiallerOnClientPortIsRefused) {
  MetricsRegistry metrics;
  EchoServer server(MakeTls(TlsOptions{}), metrics);
  TlsOptions o;
  o.role = Role::kInternal;
  auto dialer = MakeDialer(MakeTls(o), metrics);
  ASSERT_FALSE(DialAndWait(*dialer, server.addr(), "localhost").has_value());
}

TEST(ClientPortTest, ClientVerifiesSelfSignedLocalhostCertificate) {
  MetricsRegistry metrics;
  auto server_tls = MakeTls(TlsOptions{});
  ASSERT_TRUE(server_tls->self_signed());
  std::string dir = felix::testing::MakeTempDir("felix-transport-pin");
  WriteFile(dir + "/pin.pem", server_tls->self_signed_cert_pem());
  EchoServer server(server_tls, metrics);
  TlsOptions o;
  o.ca_file = dir + "/pin.pem";  // the client trusts exactly the broker's certificate
  o.dial_alpn = {"felix/1"};
  auto dialer = MakeDialer(MakeTls(o), metrics);
  auto ok = DialAndWait(*dialer, server.addr(), "localhost");
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  auto wrong = DialAndWait(*dialer, server.addr(), "not-localhost");
  ASSERT_FALSE(wrong.has_value());
}

// FELIX_TLS_CLIENT_CA: client certificates are optional on the client port, verified when
// presented.
TEST(ClientPortTest, OptionalClientCertificateIsVerifiedWhenPresented) {
  MetricsRegistry metrics;
  TestPki pki;
  TlsOptions so;
  so.ca_file = pki.ca_file();
  EchoServer server(MakeTls(so), metrics);

  auto [crt, key] = pki.Issue("alice", {"alice.clients.example"});
  TlsOptions with_cert;
  with_cert.cert_file = crt;
  with_cert.key_file = key;
  auto d1 = MakeDialer(MakeTls(with_cert), metrics);
  auto c1 = DialAndWait(*d1, server.addr(), "localhost");
  ASSERT_TRUE(c1.has_value()) << c1.error().message;
  auto accepted = server.first->get_future();
  auto sconn = Await(accepted);
  EXPECT_TRUE(Contains(OnLoop(*server.ep, [&] { return sconn->peer_dns_names(); }),
                       "alice.clients.example"));

  TlsOptions without;
  without.no_certificate = true;
  auto d2 = MakeDialer(MakeTls(without), metrics);
  auto c2 = DialAndWait(*d2, server.addr(), "localhost");
  ASSERT_TRUE(c2.has_value()) << c2.error().message;
  EXPECT_EQ(EchoRoundTrip(*d2, *c2, "anon"), "anon");

  TestPki rogue("rogue-ca");
  auto [rcrt, rkey] = rogue.Issue("mallory", {"mallory"});
  TlsOptions bad;
  bad.cert_file = rcrt;
  bad.key_file = rkey;
  auto d3 = MakeDialer(MakeTls(bad), metrics);
  ASSERT_FALSE(DialAndWait(*d3, server.addr(), "localhost").has_value());
}

TEST(TlsContextTest, UnsetInternalVariablesWarnAndAcceptAnyPeer) {
  MetricsRegistry metrics;
  std::vector<std::string> warnings;
  TlsOptions o;
  o.role = Role::kInternal;
  o.cert_var = "FELIX_INTERNAL_TLS_CERT";
  o.key_var = "FELIX_INTERNAL_TLS_KEY";
  o.ca_var = "FELIX_INTERNAL_TLS_CA";
  auto tls = TlsContext::Create(o, &warnings);
  ASSERT_TRUE(tls.has_value());
  EXPECT_EQ(warnings.size(), 2u);
  EndpointOptions so;
  so.name = "internal";
  EchoServer server(*tls, metrics, so);
  auto dialer = MakeDialer(MakeTls(o), metrics);
  auto conn = DialAndWait(*dialer, server.addr(), "whatever-node");
  ASSERT_TRUE(conn.has_value()) << conn.error().message;
  EXPECT_EQ(OnLoop(*dialer, [&] { return (*conn)->alpn(); }), "felix-internal/1");
}

TEST(TlsContextTest, LoadFailureNamesVariableAndPath) {
  TestPki pki;
  auto r = TlsContext::Create(InternalTls("/nonexistent/cert.pem", "/nonexistent/key.pem", ""));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("FELIX_INTERNAL_TLS_CERT=/nonexistent/cert.pem"),
            std::string::npos)
      << r.error().message;
  auto [crt, key] = pki.Issue("n", {"n"});
  auto ca = TlsContext::Create(InternalTls(crt, key, "/nonexistent/ca.pem"));
  ASSERT_FALSE(ca.has_value());
  EXPECT_NE(ca.error().message.find("FELIX_INTERNAL_TLS_CA=/nonexistent/ca.pem"),
            std::string::npos);
  WriteFile(pki.dir + "/garbage.key", "not a key");
  auto bad = TlsContext::Create(InternalTls(crt, pki.dir + "/garbage.key", pki.ca_file()));
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("FELIX_INTERNAL_TLS_KEY=" + pki.dir + "/garbage.key"),
            std::string::npos)
      << bad.error().message;
}

// Files replaced while a connection is up: the old connection keeps working, a new one gets
// the new certificate.
TEST(TlsRotationTest, NewHandshakesUseReloadedCertificate) {
  MetricsRegistry metrics;
  TestPki pki;
  auto [crt, key] = pki.Issue("node-b", {"node-b", "v1.node-b"});
  auto server_tls = MakeTls(InternalTls(crt, key, pki.ca_file()));
  EndpointOptions so;
  so.name = "internal";
  EchoServer server(server_tls, metrics, so);
  auto [ccrt, ckey] = pki.Issue("node-a", {"node-a"});
  auto dialer = MakeDialer(MakeTls(InternalTls(ccrt, ckey, pki.ca_file())), metrics);

  auto first = DialAndWait(*dialer, server.addr(), "node-b");
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_TRUE(Contains(OnLoop(*dialer, [&] { return (*first)->peer_dns_names(); }), "v1.node-b"));

  pki.Issue("node-b", {"node-b", "v2.node-b"});  // overwrites the same two files
  ASSERT_TRUE(server_tls->ReloadNow().has_value());

  EXPECT_EQ(EchoRoundTrip(*dialer, *first, "still-up"), "still-up");
  auto second = DialAndWait(*dialer, server.addr(), "node-b");
  ASSERT_TRUE(second.has_value()) << second.error().message;
  auto names = OnLoop(*dialer, [&] { return (*second)->peer_dns_names(); });
  EXPECT_TRUE(Contains(names, "v2.node-b"));
  EXPECT_FALSE(Contains(names, "v1.node-b"));
  EXPECT_EQ(EchoRoundTrip(*dialer, *first, "old-still-up"), "old-still-up");
}

// The periodic path: with a zero interval every new handshake re-reads the files.
TEST(TlsRotationTest, PeriodicReloadPicksUpReplacedFiles) {
  MetricsRegistry metrics;
  TestPki pki;
  auto [crt, key] = pki.Issue("node-b", {"node-b", "v1.node-b"});
  TlsOptions so = InternalTls(crt, key, pki.ca_file());
  so.reload_interval = std::chrono::milliseconds(0);
  EndpointOptions eo;
  eo.name = "internal";
  EchoServer server(MakeTls(so), metrics, eo);
  auto [ccrt, ckey] = pki.Issue("node-a", {"node-a"});
  auto dialer = MakeDialer(MakeTls(InternalTls(ccrt, ckey, pki.ca_file())), metrics);
  auto first = DialAndWait(*dialer, server.addr(), "node-b");
  ASSERT_TRUE(first.has_value()) << first.error().message;
  pki.Issue("node-b", {"node-b", "v2.node-b"});
  auto second = DialAndWait(*dialer, server.addr(), "node-b");
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_TRUE(Contains(OnLoop(*dialer, [&] { return (*second)->peer_dns_names(); }), "v2.node-b"));
  EXPECT_EQ(EchoRoundTrip(*dialer, *first, "old"), "old");
}

// A broken file at reload time keeps the previous certificate in use.
TEST(TlsRotationTest, FailedReloadKeepsPreviousCertificate) {
  MetricsRegistry metrics;
  TestPki pki;
  auto [crt, key] = pki.Issue("node-b", {"node-b"});
  auto server_tls = MakeTls(InternalTls(crt, key, pki.ca_file()));
  WriteFile(crt, "garbage");
  auto r = server_tls->ReloadNow();
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("FELIX_INTERNAL_TLS_CERT=" + crt), std::string::npos);
  EndpointOptions so;
  so.name = "internal";
  EchoServer server(server_tls, metrics, so);
  auto [ccrt, ckey] = pki.Issue("node-a", {"node-a"});
  auto dialer = MakeDialer(MakeTls(InternalTls(ccrt, ckey, pki.ca_file())), metrics);
  ASSERT_TRUE(DialAndWait(*dialer, server.addr(), "node-b").has_value());
}

}  // namespace
}  // namespace felix::transport
