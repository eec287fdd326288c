// PeerServer (the listening side) driven frame by frame over real QUIC on loopback: the
// handshake in both generations, refusals, and the fatal envelope errors.
#include "cluster/peer_server.h"

#include "peer_test_util.h"

namespace felix::cluster {
namespace {

using namespace felix::cluster::test;

flxi::Frame HelloFrame(uint64_t corr, std::string_view node, std::optional<uint64_t> caps) {
  flxi::Hello h{corr, node, caps};
  return flxi::Frame{flxi::HelloKind(h, false), h};
}

flxi::Frame WithCorrelation(flxi::Frame f, uint64_t corr) {
  std::visit([corr](auto& b) { b.correlation_id = corr; }, f.body);
  return f;
}

TEST(PeerServerTest, LegacyHelloIsAnsweredWithHelloOk) {
  PeerNode b("node-b", UnauthenticatedInternal(), false, flxi::kCapPing);
  RawPeer a(b.ep->local_address(), "node-b");
  a.SendFrame(HelloFrame(7, "node-a", std::nullopt));
  auto ok = a.Next();
  ASSERT_EQ(ok.kind, uint16_t(flxi::Kind::kHelloOk));  // no capabilities in the old answer
  auto hello = std::get<flxi::Hello>(ok.Decode().body);
  EXPECT_EQ(hello.correlation_id, 7u);
  EXPECT_EQ(hello.node_id, "node-b");
  EXPECT_EQ(hello.capabilities, std::nullopt);

  a.SendFrame(WithCorrelation(EchoRequest("old"), 8));
  auto answer = a.Next();
  ASSERT_EQ(answer.kind, uint16_t(flxi::Kind::kForwardCacheOk));
  EXPECT_EQ(flxi::CorrelationIdOfBody(answer.body), 8u);
  auto seen = b.Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer_node_id, "node-a");
  EXPECT_EQ(seen[0].peer_capabilities, std::nullopt);  // a legacy peer offered nothing
}

TEST(PeerServerTest, HelloCapableIsAnsweredWithOurBits) {
  PeerNode b("node-b", UnauthenticatedInternal(), false, 0xFF);
  RawPeer a(b.ep->local_address(), "node-b");
  a.SendFrame(HelloFrame(1, "node-a", 0x3));
  auto ok = a.Next();
  ASSERT_EQ(ok.kind, uint16_t(flxi::Kind::kHelloCapableOk));
  auto hello = std::get<flxi::Hello>(ok.Decode().body);
  EXPECT_EQ(hello.correlation_id, 1u);
  EXPECT_EQ(hello.node_id, "node-b");
  EXPECT_EQ(hello.capabilities, std::optional<uint64_t>(0xFF));
}

TEST(PeerServerTest, RequestBeforeHelloIsRefusedInItsShape) {
  PeerNode b("node-b");
  RawPeer a(b.ep->local_address(), "node-b");
  a.SendFrame(WithCorrelation(EchoRequest("early"), 5));
  auto refusal = a.Next();
  ASSERT_EQ(refusal.kind, uint16_t(flxi::Kind::kForwardCacheError));  // a cache op's refusal
  auto e = std::get<flxi::ErrorAnswer>(refusal.Decode().body);
  EXPECT_EQ(e.correlation_id, 5u);
  EXPECT_EQ(e.code, flxi::ErrorCode::kUnauthorized);
  EXPECT_TRUE(b.Seen().empty());
  // The connection stays usable: the handshake, then the same request, is served.
  a.SendFrame(HelloFrame(6, "node-a", 0));
  EXPECT_EQ(a.Next().kind, uint16_t(flxi::Kind::kHelloCapableOk));
  a.SendFrame(WithCorrelation(EchoRequest("late"), 7));
  EXPECT_EQ(a.Next().kind, uint16_t(flxi::Kind::kForwardCacheOk));
}

TEST(PeerServerTest, MalformedHelloIsRefusedAndClosesTheConnection) {
  PeerNode b("node-b");
  RawPeer a(b.ep->local_address(), "node-b");
  a.Send(RawFrame(uint16_t(flxi::Kind::kHelloCapable), 9, std::vector<uint8_t>{0, 0}));
  auto refusal = a.Next();
  ASSERT_EQ(refusal.kind, uint16_t(flxi::Kind::kForwardPublishError));
  auto e = std::get<flxi::ErrorAnswer>(refusal.Decode().body);
  EXPECT_EQ(e.correlation_id, 9u);
  EXPECT_EQ(e.code, flxi::ErrorCode::kMalformed);
  auto info = a.Closed();
  EXPECT_EQ(info.kind, CloseInfo::Kind::kPeer);
  EXPECT_TRUE(info.application);
  EXPECT_EQ(info.code, kPeerCloseProtocol);
}

void ExpectProtocolClose(std::vector<uint8_t> bytes) {
  PeerNode b("node-b");
  RawPeer a(b.ep->local_address(), "node-b");
  a.Send(std::move(bytes));
  auto info = a.Closed();
  EXPECT_EQ(info.kind, CloseInfo::Kind::kPeer);
  EXPECT_TRUE(info.application);
  EXPECT_EQ(info.code, kPeerCloseProtocol);
  EXPECT_TRUE(a.frames.empty());  // no answer: there is no frame boundary to trust
}

TEST(PeerServerTest, WrongMagicClosesTheConnectionWithoutAnswer) {
  auto frame = *flxi::EncodeFrame(HelloFrame(1, "node-a", 0));
  frame[3] = '1';  // FLX1: a client frame on the internal port
  ExpectProtocolClose(frame);
}

TEST(PeerServerTest, UnknownVersionClosesTheConnectionWithoutAnswer) {
  auto frame = *flxi::EncodeFrame(HelloFrame(1, "node-a", 0));
  frame[5] = 2;  // version 2
  ExpectProtocolClose(frame);
}

TEST(PeerServerTest, LengthAboveTheBodyLimitClosesTheConnection) {
  auto frame = *flxi::EncodeFrame(HelloFrame(1, "node-a", 0));
  frame[8] = 0x04;  // 64 MiB + the real length
  ExpectProtocolClose(frame);
}

TEST(PeerServerTest, HandshakeKindsAreTheServersOwn) {
  MetricsRegistry metrics;
  PeerServer server(PeerServerOptions{"node-b", 0, false, "internal"}, metrics);
  auto noop = [](const PeerRequest&, PeerReply) {};
  EXPECT_FALSE(server.Handle(flxi::Kind::kHello, noop).has_value());
  EXPECT_FALSE(server.Handle(flxi::Kind::kHelloCapable, noop).has_value());
  EXPECT_TRUE(server.Handle(flxi::Kind::kPing, noop).has_value());
}

}  // namespace
}  // namespace felix::cluster
