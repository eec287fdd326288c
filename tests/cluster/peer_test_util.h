// Helpers for the FLXI peer tests, over real QUIC on loopback: a peer broker (internal
// endpoint + PeerServer with an echo kind and a held kind), a caller (dialling endpoint +
// PeerPool), and a raw peer that writes FLXI frames by hand and collects what comes back.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>

#include "cluster/frame_reader.h"
#include "cluster/peer_frames.h"
#include "cluster/peer_pool.h"
#include "cluster/peer_server.h"
#include "transport/transport_test_util.h"

namespace felix::cluster::test {

using namespace felix::transport::test;
namespace flxi = wire::flxi;
using transport::CloseInfo;
using transport::Connection;
using transport::ConnectionHandlers;
using transport::Endpoint;
using transport::EndpointOptions;
using transport::Role;
using transport::Stream;
using transport::StreamHandlers;
using transport::TlsOptions;

using Outcome = Result<PeerResponse, PeerError>;

// The echo kind: a ForwardCacheOp Get whose key is answered back as the ForwardCacheOk value.
constexpr flxi::Kind kEcho = flxi::Kind::kForwardCacheOp;
// The held kind: ForwardPublish, answered ForwardPublishOk only when the test releases it.
constexpr flxi::Kind kHold = flxi::Kind::kForwardPublish;

inline flxi::Frame EchoRequest(std::string_view key) {
  flxi::CacheOp op;
  op.shard = flxi::ShardRef{"t1", "ns", "cache", 0, 0};
  op.op = flxi::CacheOpKind::kGet;
  op.key = key;
  return flxi::Frame{kEcho, op};
}

inline flxi::Frame HoldRequest() {
  flxi::ForwardPublish fp;
  fp.shard = flxi::ShardRef{"t1", "ns", "orders", 0, 0};
  fp.payloads = {"x"};
  return flxi::Frame{kHold, fp};
}

// Ping needs the peer's PING capability (RequiredCapabilities).
inline flxi::Frame PingRequest() {
  return flxi::Frame{flxi::Kind::kPing, flxi::PingPong{}};
}

// The echoed key of an answer to EchoRequest ("" plus a test failure otherwise).
inline std::string EchoText(const PeerResponse& r) {
  auto f = r.Decode();
  EXPECT_TRUE(f.has_value()) << (f ? "" : f.error().ToString());
  if (!f) return "";
  EXPECT_EQ(f->kind, flxi::Kind::kForwardCacheOk);
  const auto* ok = std::get_if<flxi::ForwardCacheOk>(&f->body);
  if (ok == nullptr || !ok->value) return "";
  return std::string(*ok->value);
}

// The refusal an answer carries (kinds 3/13 decode to ErrorAnswer).
inline flxi::ErrorAnswer RefusalOf(const PeerResponse& r) {
  auto f = r.Decode();
  EXPECT_TRUE(f.has_value()) << (f ? "" : f.error().ToString());
  const auto* e = f ? std::get_if<flxi::ErrorAnswer>(&f->body) : nullptr;
  EXPECT_NE(e, nullptr);
  return e ? *e : flxi::ErrorAnswer{};
}

inline TlsOptions UnauthenticatedInternal() {
  TlsOptions o;
  o.role = Role::kInternal;
  return o;
}

struct SeenRequest {
  std::string peer_node_id;
  std::optional<uint64_t> peer_capabilities;
};

// A peer broker: internal listener + PeerServer answering kEcho and Ping, and holding kHold
// requests.
struct PeerNode {
  MetricsRegistry metrics;
  std::unique_ptr<PeerServer> server;
  std::unique_ptr<Endpoint> ep;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PeerReply> held;
  size_t held_total = 0;
  std::vector<SeenRequest> seen;  // every echo request, in order

  explicit PeerNode(const std::string& node_id, TlsOptions tls = UnauthenticatedInternal(),
                    bool check_identity = false, uint64_t capabilities = 0) {
    server = std::make_unique<PeerServer>(
        PeerServerOptions{node_id, capabilities, check_identity, "internal"}, metrics);
    auto echo = server->Handle(kEcho, [this](const PeerRequest& req, PeerReply reply) {
      {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back({std::string(req.peer_node_id), req.peer_capabilities});
      }
      const auto& op = std::get<flxi::CacheOp>(req.frame.body);
      reply(flxi::Frame{flxi::Kind::kForwardCacheOk, flxi::ForwardCacheOk{0, op.key}});
    });
    EXPECT_TRUE(echo.has_value());
    auto hold = server->Handle(kHold, [this](const PeerRequest&, PeerReply reply) {
      std::lock_guard<std::mutex> lock(mu);
      held.push_back(std::move(reply));
      ++held_total;
      cv.notify_all();
    });
    EXPECT_TRUE(hold.has_value());
    auto ping = server->Handle(flxi::Kind::kPing, [](const PeerRequest&, PeerReply reply) {
      reply(flxi::Frame{flxi::Kind::kPong, flxi::PingPong{}});
    });
    EXPECT_TRUE(ping.has_value());
    EndpointOptions eo;
    eo.tls = MakeTls(std::move(tls));
    eo.name = "internal";
    auto r = Endpoint::Create(Loopback(), eo, metrics, server->listen_handlers());
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
    ep = std::move(*r);
  }
  // Stops the loop first: handlers use the members declared after `ep`.
  ~PeerNode() {
    if (ep) ep->Stop();
  }
  PeerAddress address(const std::string& node_id) const {
    return PeerAddress{node_id, ep->local_address()};
  }
  void WaitHeld(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return held_total >= n; }));
  }
  void ReleaseHeld() {
    OnLoop(*ep, [this] {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& r : held) {
        r(flxi::Frame{flxi::Kind::kForwardPublishOk, flxi::ForwardPublishOk{0, 1, 0}});
      }
      held.clear();
    });
  }
  size_t HeldTotal() {
    std::lock_guard<std::mutex> lock(mu);
    return held_total;
  }
  std::vector<SeenRequest> Seen() {
    std::lock_guard<std::mutex> lock(mu);
    return seen;
  }
  uint64_t Count(const std::string& name, const std::string& labels = "") {
    OnLoop(*ep, [] {});  // counters are bumped on the loop: let it finish the last frame
    return metrics.AddCounter(name, "", labels).Value();
  }
};

inline PeerPoolOptions Opts(const std::string& own = "node-a") {
  PeerPoolOptions o;
  o.own_node_id = own;
  return o;
}

struct Caller {
  MetricsRegistry metrics;
  std::unique_ptr<Endpoint> ep;
  std::unique_ptr<PeerPool> pool;

  explicit Caller(PeerPoolOptions o, TlsOptions tls = UnauthenticatedInternal()) {
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
  std::future<Outcome> Send(const PeerAddress& to, const flxi::Frame& request) {
    auto p = std::make_shared<std::promise<Outcome>>();
    auto f = p->get_future();
    auto sent = pool->Request(to, request, [p](Outcome r) { p->set_value(std::move(r)); });
    EXPECT_TRUE(sent.has_value()) << (sent ? "" : sent.error().message);
    return f;
  }
  Outcome Call(const PeerAddress& to, const flxi::Frame& request) {
    auto f = Send(to, request);
    return Await(f);
  }
  Outcome CallRaw(const PeerAddress& to, uint16_t kind, std::string rest) {
    auto p = std::make_shared<std::promise<Outcome>>();
    auto f = p->get_future();
    pool->RequestRaw(to, kind, std::vector<uint8_t>(rest.begin(), rest.end()),
                     [p](Outcome r) { p->set_value(std::move(r)); });
    return Await(f);
  }
  uint64_t Count(const std::string& name, const std::string& labels = "") {
    return metrics.AddCounter(name, "", labels).Value();
  }
};

struct RawFrameSeen {
  uint16_t kind = 0;
  std::vector<uint8_t> body;
  flxi::Frame Decode() const {
    auto f = flxi::DecodeBody(static_cast<flxi::Kind>(kind), body);
    EXPECT_TRUE(f.has_value()) << (f ? "" : f.error().ToString());
    return f ? *f : flxi::Frame{};
  }
};

// One dialled connection with one bidi stream, driven by hand: Send writes bytes, Next waits
// for the next whole frame that came back, Closed waits for the connection to close.
struct RawPeer {
  MetricsRegistry metrics;
  std::unique_ptr<Endpoint> ep;
  std::shared_ptr<Connection> conn;
  std::shared_ptr<Stream> stream;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RawFrameSeen> frames;
  std::optional<CloseInfo> closed;
  FrameReader reader;

  RawPeer(const HostPort& to, const std::string& server_name,
          TlsOptions tls = UnauthenticatedInternal()) {
    ep = MakeDialer(MakeTls(std::move(tls)), metrics);
    auto c = DialAndWait(*ep, to, server_name);
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message);
    if (!c) return;
    conn = *c;
    OnLoop(*ep, [this] {
      conn->SetHandlers(ConnectionHandlers{nullptr, [this](Connection&, const CloseInfo& i) {
                                             std::lock_guard<std::mutex> lock(mu);
                                             closed = i;
                                             cv.notify_all();
                                           }});
      auto s = conn->OpenBidiStream();
      ASSERT_TRUE(s.has_value());
      stream = *s;
      stream->SetHandlers(StreamHandlers{
          [this](Stream& st, std::span<const uint8_t> data) {
            st.Consume(data.size());
            (void)reader.Feed(data, [this](uint16_t kind, std::span<const uint8_t> body) {
              std::lock_guard<std::mutex> lock(mu);
              frames.push_back({kind, std::vector<uint8_t>(body.begin(), body.end())});
              cv.notify_all();
            });
          },
          nullptr, nullptr, nullptr});
    });
  }
  ~RawPeer() {
    if (ep) {
      OnLoop(*ep, [this] { stream.reset(); });
      ep->Stop();
    }
  }
  void Send(std::vector<uint8_t> bytes) {
    OnLoop(*ep, [this, bytes = std::move(bytes)] { (void)stream->Write(bytes); });
  }
  void SendFrame(const flxi::Frame& f) {
    auto bytes = flxi::EncodeFrame(f);
    ASSERT_TRUE(bytes.has_value()) << bytes.error().message;
    Send(*bytes);
  }
  RawFrameSeen Next() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, kWait, [&] { return !frames.empty(); })) {
      ADD_FAILURE() << "no frame came back";
      std::abort();
    }
    RawFrameSeen f = std::move(frames.front());
    frames.pop_front();
    return f;
  }
  CloseInfo Closed() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, kWait, [&] { return closed.has_value(); })) {
      ADD_FAILURE() << "the connection stayed open";
      std::abort();
    }
    return *closed;
  }
};

}  // namespace felix::cluster::test
