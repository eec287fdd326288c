// End to end: the real felix-broker process serves FLXI on its internal port under peer mTLS.
// A PeerPool with its own certificate completes the capability handshake (HelloCapableOk
// names the broker and carries its bits), a request of a kind the daemon does not serve is
// answered UnsupportedKind, and a peer claiming a name its certificate lacks is refused.
#include <signal.h>

#include "peer_test_util.h"
#include "server/internal_listener.h"
#include "support/child_process.h"

namespace felix::cluster {
namespace {

using namespace felix::cluster::test;
using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;

HostPort FieldOf(const std::string& line, const std::string& name) {
  size_t at = line.find(name + "=");
  if (at == std::string::npos) return {};
  at += name.size() + 1;
  auto parsed = ParseHostPort(line.substr(at, line.find(' ', at) - at));
  return parsed ? *parsed : HostPort{};
}

TEST(InternalListenerE2E, BrokerAnswersTheCapabilityHandshakeUnderMutualTls) {
  TestPki pki;
  // Without FELIX_NODE_ID the broker's own node id is "localhost".
  auto [bcrt, bkey] = pki.Issue("broker", {"localhost"});
  auto [acrt, akey] = pki.Issue("node-a", {"node-a"});
  std::string dir = MakeTempDir("felix-internal");
  ChildProcess broker(BuiltProgram("src/server/felix-broker"), {},
                      {{"FELIX_DATA_DIR", dir + "/data"},
                       {"FELIX_QUIC_BIND", "127.0.0.1:0"},
                       {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
                       {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"},
                       {"FELIX_INTERNAL_TLS_CERT", bcrt},
                       {"FELIX_INTERNAL_TLS_KEY", bkey},
                       {"FELIX_INTERNAL_TLS_CA", pki.ca_file()}});
  auto line = broker.WaitForLine("felix-broker listening");
  ASSERT_TRUE(line) << broker.stderr_text();
  HostPort internal = FieldOf(*line, "internal");
  ASSERT_NE(internal.port, 0) << *line;

  {
    Caller a(Opts("node-a"), InternalTls(acrt, akey, pki.ca_file()));
    auto r = a.Call(PeerAddress{"localhost", internal}, HoldRequest());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->peer_capabilities, std::optional<uint64_t>(server::kInternalCapabilities));
    EXPECT_EQ(r->kind, uint16_t(flxi::Kind::kForwardPublishError));
    auto e = RefusalOf(*r);
    EXPECT_EQ(e.code, flxi::ErrorCode::kUnsupportedKind);
    EXPECT_EQ(e.detail, "this broker does not know frame kind 1");  // ForwardPublish: not yet
  }
  {
    Caller liar(Opts("node-z"), InternalTls(acrt, akey, pki.ca_file()));
    auto r = liar.Call(PeerAddress{"localhost", internal}, HoldRequest());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().kind, PeerErrorKind::kConnectFailed);
    EXPECT_NE(r.error().message.find("Unauthorized (code 3)"), std::string::npos)
        << r.error().message;
  }
  EXPECT_EQ(broker.Stop(SIGTERM), 0) << broker.stderr_text();
  EXPECT_NE(broker.stderr_text().find("peer hello refused claimed_node=node-z"), std::string::npos);
}

}  // namespace
}  // namespace felix::cluster
