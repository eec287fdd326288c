#include "cluster/peer_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <future>
#include <random>
#include <unordered_map>

#include "cluster/frame_reader.h"
#include "cluster/peer_frames.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using transport::Connection;
using transport::ConnectionHandlers;
using transport::Endpoint;
using transport::Stream;
using transport::StreamHandlers;
using transport::TimerId;

const char* PeerErrorKindName(PeerErrorKind kind) {
  switch (kind) {
    case PeerErrorKind::kShed:
      return "shed";
    case PeerErrorKind::kBackoff:
      return "backoff";
    case PeerErrorKind::kConnectFailed:
      return "connect_failed";
    case PeerErrorKind::kTimeout:
      return "timeout";
    case PeerErrorKind::kDisconnected:
      return "disconnected";
    case PeerErrorKind::kNotOffered:
      return "not_offered";
    case PeerErrorKind::kStopped:
      return "stopped";
  }
  return "?";
}

wire::DecodeResult<flxi::Frame> PeerResponse::Decode() const {
  if (!flxi::IsKnownKind(kind)) {
    return wire::DecodeFail(wire::DecodeErrorCode::kUnknownKind,
                            "answer of unknown internal kind " + std::to_string(kind));
  }
  return flxi::DecodeBody(static_cast<flxi::Kind>(kind), body);
}

namespace {

uint64_t SteadyNs() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

struct PoolMetrics {
  Gauge* in_flight;
  Counter* shed;
  Counter* backoff;
  Counter* timeouts;
  Counter* disconnected;
  Counter* connect_ok;
  Counter* connect_failed;
  Counter* idle_closed;
  Counter* wrong_node;
  Counter* not_offered;

  explicit PoolMetrics(MetricsRegistry& r)
      : in_flight(&r.AddGauge("felix_peer_requests_in_flight",
                              "Peer requests sent or queued and not yet answered")),
        shed(&r.AddCounter("felix_peer_requests_shed_total",
                           "Peer requests shed at the in-flight bound (nothing sent)")),
        backoff(&r.AddCounter("felix_peer_requests_backoff_total",
                              "Peer requests failed fast inside a reconnect backoff window")),
        timeouts(&r.AddCounter("felix_peer_request_timeouts_total",
                               "Peer requests that got no answer in time")),
        disconnected(&r.AddCounter("felix_peer_requests_disconnected_total",
                                   "Peer requests failed because their connection dropped")),
        connect_ok(&r.AddCounter("felix_peer_connects_total", "Peer connection attempts",
                                 "result=\"ok\"")),
        connect_failed(&r.AddCounter("felix_peer_connects_total", "Peer connection attempts",
                                     "result=\"failed\"")),
        idle_closed(&r.AddCounter("felix_peer_connections_idle_closed_total",
                                  "Peer connections closed after idling")),
        wrong_node(&r.AddCounter("felix_peer_wrong_node_total",
                                 "Peer connections whose HelloOk named another node")),
        not_offered(&r.AddCounter("felix_peer_requests_not_offered_total",
                                  "Peer requests refused locally: the peer did not offer the "
                                  "capability their kind needs")) {}
};

std::string Hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[v & 0xF]);
    v >>= 4;
  } while (v != 0);
  return out;
}

PeerError Err(PeerErrorKind kind, std::string message) {
  bool retryable = kind == PeerErrorKind::kShed || kind == PeerErrorKind::kBackoff ||
                   kind == PeerErrorKind::kConnectFailed;
  return PeerError{kind, retryable, std::move(message)};
}

}  // namespace

struct PeerPool::Impl : std::enable_shared_from_this<PeerPool::Impl> {
  struct Conn {
    std::shared_ptr<Connection> c;
    std::shared_ptr<Stream> control;
    std::vector<std::shared_ptr<Stream>> streams;
    size_t rr = 0;
    std::unordered_map<uint64_t, uint64_t> waiters;  // correlation id -> request id
    uint64_t next_corr = 1;
    uint64_t hello_corr = 0;
    bool legacy_hello = false;  // the peer refused HelloCapable; asked again with Hello
    bool ready = false;
    std::optional<uint64_t> peer_caps;  // from HelloCapableOk; nullopt after a plain HelloOk
  };
  struct Req {
    std::string node;
    std::vector<uint8_t> frame;  // encoded; the correlation id is set when sent
    uint64_t required_caps = 0;  // bits the peer must have offered (RequiredCapabilities)
    PeerCallback done;
    TimerId timer = 0;
    std::shared_ptr<Conn> conn;  // set once sent
    uint64_t corr = 0;
  };
  struct Peer {
    PeerAddress addr;
    std::shared_ptr<Conn> conn;  // connecting or ready
    std::deque<uint64_t> queued;
    size_t in_flight = 0;
    int failures = 0;
    uint64_t backoff_until = 0;
    TimerId handshake_timer = 0;
    TimerId idle_timer = 0;
  };

  Impl(Endpoint& e, PeerPoolOptions opts, MetricsRegistry& r)
      : ep(e), o(std::move(opts)), m(r), rng(std::random_device{}()) {}

  Endpoint& ep;
  PeerPoolOptions o;
  PoolMetrics m;
  std::mt19937_64 rng;
  bool stopped = false;
  std::unordered_map<std::string, Peer> peers;
  std::unordered_map<uint64_t, Req> reqs;
  uint64_t next_req = 0;

  void Request(const PeerAddress& addr, std::vector<uint8_t> frame, uint64_t required_caps,
               PeerCallback done) {
    if (stopped) {
      done(tl::unexpected(Err(PeerErrorKind::kStopped, "peer pool stopped")));
      return;
    }
    Peer& p = peers[addr.node_id];
    if (!p.conn) p.addr = addr;
    if (p.in_flight >= o.max_in_flight) {
      m.shed->Increment();
      done(tl::unexpected(Err(
          PeerErrorKind::kShed,
          "peer " + addr.node_id + ": " + std::to_string(p.in_flight) + " requests in flight")));
      return;
    }
    if (!p.conn && SteadyNs() < p.backoff_until) {
      m.backoff->Increment();
      done(tl::unexpected(
          Err(PeerErrorKind::kBackoff, "peer " + addr.node_id + ": reconnect backoff")));
      return;
    }
    uint64_t id = ++next_req;
    Req& r = reqs[id];
    r.node = addr.node_id;
    r.frame = std::move(frame);
    r.required_caps = required_caps;
    r.done = std::move(done);
    r.timer = ep.RunAfter(o.request_timeout, [w = weak_from_this(), id] {
      if (auto s = w.lock()) {
        s->m.timeouts->Increment();
        s->Finish(id, tl::unexpected(Err(PeerErrorKind::kTimeout, "request timed out")));
      }
    });
    ++p.in_flight;
    m.in_flight->Add(1);
    if (p.idle_timer) {
      ep.Cancel(p.idle_timer);
      p.idle_timer = 0;
    }
    if (p.conn && p.conn->ready) {
      Send(p, id);
    } else {
      p.queued.push_back(id);
      if (!p.conn) Connect(p);
    }
  }

  void Finish(uint64_t id, Result<PeerResponse, PeerError> result) {
    auto it = reqs.find(id);
    if (it == reqs.end()) return;
    Req r = std::move(it->second);
    reqs.erase(it);
    if (r.timer) ep.Cancel(r.timer);
    auto pit = peers.find(r.node);
    if (pit != peers.end()) {
      Peer& p = pit->second;
      if (r.conn) {
        r.conn->waiters.erase(r.corr);
      } else {
        auto q = std::find(p.queued.begin(), p.queued.end(), id);
        if (q != p.queued.end()) p.queued.erase(q);
      }
      --p.in_flight;
      MaybeArmIdle(p);
    }
    m.in_flight->Add(-1);
    r.done(std::move(result));
  }

  std::shared_ptr<Stream> PickStream(Peer& p) {
    Conn& c = *p.conn;
    if (c.streams.size() < std::max<size_t>(1, o.streams_per_conn)) {
      auto s = c.c->OpenBidiStream();
      if (s) {
        SetupStream(p.addr.node_id, p.conn, *s);
        c.streams.push_back(*s);
        return *s;
      }
      if (c.streams.empty()) return nullptr;
    }
    return c.streams[c.rr++ % c.streams.size()];
  }

  void Send(Peer& p, uint64_t id) {
    Req& r = reqs[id];
    // §8: the pool refuses locally a kind whose capability the peer did not offer.
    const uint64_t missing = r.required_caps & ~p.conn->peer_caps.value_or(0);
    if (missing != 0) {
      m.not_offered->Increment();
      PeerError refused =
          Err(PeerErrorKind::kNotOffered,
              "peer " + p.addr.node_id + " did not offer capability bits 0x" + Hex(missing));
      refused.peer_capabilities = p.conn->peer_caps;
      Finish(id, tl::unexpected(std::move(refused)));
      return;
    }
    auto stream = PickStream(p);
    if (!stream) {
      Finish(id, tl::unexpected(Err(PeerErrorKind::kConnectFailed, "no stream available")));
      return;
    }
    r.corr = p.conn->next_corr++;
    r.conn = p.conn;
    p.conn->waiters[r.corr] = id;
    SetCorrelationId(r.frame, r.corr);
    std::vector<uint8_t> frame = std::move(r.frame);
    r.frame = {};
    if (auto w = stream->Write(frame); !w)
      Finish(id, tl::unexpected(Err(PeerErrorKind::kDisconnected, w.error().message)));
  }

  void SetupStream(const std::string& node, const std::shared_ptr<Conn>& conn,
                   const std::shared_ptr<Stream>& s) {
    auto reader = std::make_shared<FrameReader>();
    std::weak_ptr<Conn> wc = conn;
    auto w = weak_from_this();
    s->SetHandlers(StreamHandlers{
        [w, wc, node, reader](Stream& st, std::span<const uint8_t> data) {
          st.Consume(data.size());
          auto self = w.lock();
          auto c = wc.lock();
          if (!self || !c) return;
          auto err = reader->Feed(data, [&](uint16_t kind, std::span<const uint8_t> body) {
            self->OnFrame(node, c, kind, body);
          });
          if (err && c->c) c->c->Close(kPeerCloseProtocol, err->ToString());
        },
        nullptr,
        [w, wc](Stream&, uint64_t code) {
          // A request stream aborted: its answers are lost, so the connection is unusable.
          auto c = wc.lock();
          if (c && c->c)
            c->c->Close(kPeerCloseProtocol, "request stream reset " + std::to_string(code));
        },
        nullptr});
  }

  void Connect(Peer& p) {
    auto conn = std::make_shared<Conn>();
    p.conn = conn;
    const std::string node = p.addr.node_id;
    auto w = weak_from_this();
    p.handshake_timer = ep.RunAfter(o.handshake_timeout, [w, node, conn] {
      auto s = w.lock();
      if (!s) return;
      auto it = s->peers.find(node);
      if (it == s->peers.end() || it->second.conn != conn) return;
      it->second.handshake_timer = 0;
      s->ConnectFailed(it->second, "connect/Hello timed out");
    });
    ep.Dial(p.addr.address, transport::DialOptions{node},
            [w, node, conn](Result<std::shared_ptr<Connection>> r) {
              auto s = w.lock();
              if (!s) {
                if (r) (*r)->Close(kPeerCloseNormal, "peer pool gone");
                return;
              }
              s->OnDialed(node, conn, std::move(r));
            });
  }

  void OnDialed(const std::string& node, const std::shared_ptr<Conn>& conn,
                Result<std::shared_ptr<Connection>> r) {
    auto it = peers.find(node);
    if (it == peers.end() || it->second.conn != conn) {
      if (r) (*r)->Close(kPeerCloseNormal, "superseded");
      return;
    }
    Peer& p = it->second;
    if (!r) {
      ConnectFailed(p, r.error().message);
      return;
    }
    conn->c = *r;
    std::weak_ptr<Conn> wc = conn;
    auto w = weak_from_this();
    conn->c->SetHandlers(
        ConnectionHandlers{[](const std::shared_ptr<Stream>& s) { s->Reset(kPeerCloseProtocol); },
                           [w, node, wc](Connection&, const transport::CloseInfo& info) {
                             auto s = w.lock();
                             auto c = wc.lock();
                             if (s && c) s->OnClosed(node, c, info.reason);
                             if (s && s->o.on_connection_closed)
                               s->o.on_connection_closed(node, info.reason);
                           }});
    auto control = conn->c->OpenBidiStream();
    if (!control) {
      ConnectFailed(p, control.error().message);
      return;
    }
    conn->control = *control;
    SetupStream(node, conn, conn->control);
    SendHello(p, *conn);
  }

  // HelloCapable with our bits, or (after the peer refused kind 27) a plain Hello; each under
  // a new correlation id.
  void SendHello(Peer& p, Conn& conn) {
    conn.hello_corr = conn.next_corr++;
    flxi::Hello hello{conn.hello_corr, o.own_node_id, std::nullopt};
    if (!conn.legacy_hello) hello.capabilities = o.capabilities;
    auto frame = flxi::EncodeFrame(flxi::Frame{flxi::HelloKind(hello, false), hello});
    if (!frame) {
      ConnectFailed(p, "cannot encode Hello: " + frame.error().message);
      return;
    }
    (void)conn.control->Write(*frame);
  }

  void OnFrame(const std::string& node, const std::shared_ptr<Conn>& conn, uint16_t kind,
               std::span<const uint8_t> body) {
    uint64_t corr = flxi::CorrelationIdOfBody(body);
    if (!conn->ready && corr == conn->hello_corr) {
      OnHelloReply(node, conn, kind, body);
      return;
    }
    auto it = conn->waiters.find(corr);
    if (it == conn->waiters.end()) return;  // late answer to a request that timed out
    uint64_t id = it->second;
    Finish(id, PeerResponse{kind, std::vector<uint8_t>(body.begin(), body.end()), conn->peer_caps});
  }

  void OnHelloReply(const std::string& node, const std::shared_ptr<Conn>& conn, uint16_t kind,
                    std::span<const uint8_t> body) {
    auto it = peers.find(node);
    if (it == peers.end() || it->second.conn != conn) return;
    Peer& p = it->second;
    const auto expected = conn->legacy_hello ? flxi::Kind::kHelloOk : flxi::Kind::kHelloCapableOk;
    if (kind == static_cast<uint16_t>(expected)) {
      auto frame = flxi::DecodeBody(expected, body);
      const auto* hello = frame ? std::get_if<flxi::Hello>(&frame->body) : nullptr;
      if (!hello) {
        std::string why = std::string("malformed ") + flxi::KindName(expected) +
                          (frame ? std::string() : ": " + frame.error().ToString());
        conn->c->Close(kPeerCloseProtocol, why);
        ConnectFailed(p, why);
        return;
      }
      if (hello->node_id != node) {
        m.wrong_node->Increment();
        conn->c->Close(kPeerCloseWrongPeer, "wrong node");
        ConnectFailed(p, "dialled " + node + " but " + p.addr.address.ToString() + " answered as " +
                             std::string(hello->node_id));
        return;
      }
      conn->peer_caps = hello->capabilities;
      conn->ready = true;
      p.failures = 0;
      p.backoff_until = 0;
      if (p.handshake_timer) ep.Cancel(p.handshake_timer);
      p.handshake_timer = 0;
      m.connect_ok->Increment();
      auto queued = std::move(p.queued);
      p.queued.clear();
      for (uint64_t id : queued) Send(p, id);
      MaybeArmIdle(p);
      return;
    }
    // §9 step 2: a listener that predates kind 27 refuses it with kind 3 / UnsupportedKind;
    // ask once more with the legacy Hello.
    if (!conn->legacy_hello && kind == static_cast<uint16_t>(flxi::Kind::kForwardPublishError)) {
      auto frame = flxi::DecodeBody(flxi::Kind::kForwardPublishError, body);
      const auto* refusal = frame ? std::get_if<flxi::ErrorAnswer>(&frame->body) : nullptr;
      if (refusal && refusal->code == flxi::ErrorCode::kUnsupportedKind) {
        conn->legacy_hello = true;
        SendHello(p, *conn);
        return;
      }
    }
    std::string why = conn->legacy_hello ? "Hello refused" : "HelloCapable refused";
    if (auto refusal = DescribeRefusal(kind, body)) {
      why += ": " + *refusal;
    } else {
      why += ": unexpected reply kind " + std::to_string(kind);
    }
    conn->c->Close(kPeerCloseNormal, "hello refused");
    ConnectFailed(p, why);
  }

  void ConnectFailed(Peer& p, const std::string& reason) {
    auto conn = std::move(p.conn);
    p.conn = nullptr;
    if (p.handshake_timer) ep.Cancel(p.handshake_timer);
    p.handshake_timer = 0;
    if (conn && conn->c) conn->c->Close(kPeerCloseNormal, "connect failed");
    ++p.failures;
    // Jittered exponential backoff: uniform in [d/2, d], d = base * 2^(failures-1) <= max.
    uint64_t base = uint64_t(o.reconnect_base.count()) * 1000000;
    uint64_t cap = uint64_t(o.reconnect_max.count()) * 1000000;
    uint64_t d = base << std::min(p.failures - 1, 30);
    d = std::min(d, cap);
    uint64_t jittered = d / 2 + (d > 1 ? rng() % (d / 2 + 1) : 0);
    p.backoff_until = SteadyNs() + jittered;
    m.connect_failed->Increment();
    spdlog::warn("peer connect failed node={} addr={} reason=\"{}\" backoff_ms={}", p.addr.node_id,
                 p.addr.address.ToString(), reason, jittered / 1000000);
    auto queued = std::move(p.queued);
    p.queued.clear();
    for (uint64_t id : queued) {
      auto it = reqs.find(id);
      if (it != reqs.end()) it->second.conn = nullptr;
      Finish(id, tl::unexpected(
                     Err(PeerErrorKind::kConnectFailed, "peer " + p.addr.node_id + ": " + reason)));
    }
    if (conn) FailWaiters(*conn, "peer " + p.addr.node_id + ": " + reason);
  }

  void FailWaiters(Conn& conn, const std::string& reason) {
    std::vector<uint64_t> ids;
    for (auto& [corr, id] : conn.waiters) ids.push_back(id);
    conn.waiters.clear();
    m.disconnected->Increment(ids.size());
    for (uint64_t id : ids) Finish(id, tl::unexpected(Err(PeerErrorKind::kDisconnected, reason)));
  }

  void OnClosed(const std::string& node, const std::shared_ptr<Conn>& conn,
                const std::string& reason) {
    auto it = peers.find(node);
    if (it != peers.end() && it->second.conn == conn) {
      Peer& p = it->second;
      if (!conn->ready) {
        ConnectFailed(p, reason);
        return;
      }
      p.conn = nullptr;
      if (p.idle_timer) ep.Cancel(p.idle_timer);
      p.idle_timer = 0;
    }
    FailWaiters(*conn, "connection to " + node + " lost: " + reason);
  }

  void MaybeArmIdle(Peer& p) {
    if (p.in_flight != 0 || !p.conn || !p.conn->ready || p.idle_timer || stopped) return;
    const std::string node = p.addr.node_id;
    p.idle_timer = ep.RunAfter(o.idle_timeout, [w = weak_from_this(), node] {
      auto s = w.lock();
      if (!s) return;
      auto it = s->peers.find(node);
      if (it == s->peers.end()) return;
      Peer& p = it->second;
      p.idle_timer = 0;
      if (p.in_flight != 0 || !p.conn || !p.conn->ready) return;
      s->m.idle_closed->Increment();
      auto conn = std::move(p.conn);
      p.conn = nullptr;
      conn->c->Close(kPeerCloseNormal, "idle");
    });
  }

  void Shutdown() {
    if (stopped) return;
    stopped = true;
    std::vector<uint64_t> ids;
    for (auto& [id, r] : reqs) ids.push_back(id);
    for (uint64_t id : ids)
      Finish(id, tl::unexpected(Err(PeerErrorKind::kStopped, "peer pool stopped")));
    for (auto& [node, p] : peers) {
      if (p.handshake_timer) ep.Cancel(p.handshake_timer);
      if (p.idle_timer) ep.Cancel(p.idle_timer);
      p.handshake_timer = p.idle_timer = 0;
      if (p.conn && p.conn->c) p.conn->c->Close(kPeerCloseNormal, "shutting down");
      p.conn = nullptr;
    }
  }
};

PeerPool::PeerPool(Endpoint& endpoint, PeerPoolOptions options, MetricsRegistry& metrics)
    : endpoint_(endpoint), impl_(std::make_shared<Impl>(endpoint, std::move(options), metrics)) {}

PeerPool::~PeerPool() {
  Shutdown();
}

Result<void> PeerPool::Request(const PeerAddress& peer, const flxi::Frame& request,
                               PeerCallback done, bool poll_for_answer) {
  auto frame = EncodeWithCorrelation(request, 0);
  if (!frame) return tl::unexpected(frame.error());
  Submit(peer, std::move(*frame), RequiredCapabilities(request), std::move(done), poll_for_answer);
  return Ok();
}

void PeerPool::RequestRaw(const PeerAddress& peer, uint16_t kind, std::vector<uint8_t> rest,
                          PeerCallback done) {
  Submit(peer, RawFrame(kind, 0, rest), 0, std::move(done), false);
}

void PeerPool::Submit(const PeerAddress& peer, std::vector<uint8_t> frame, uint64_t required_caps,
                      PeerCallback done, bool poll_for_answer) {
  if (poll_for_answer) {
    // Awaited until its one outcome (EndpointOptions::poll_while_awaiting).
    endpoint_.AwaitingAnswers(+1);
    done = [endpoint = &endpoint_, done = std::move(done)](Result<PeerResponse, PeerError> r) {
      endpoint->AwaitingAnswers(-1);
      done(std::move(r));
    };
  }
  if (endpoint_.InLoopThread()) {
    impl_->Request(peer, std::move(frame), required_caps, std::move(done));
    return;
  }
  endpoint_.Post([impl = impl_, peer, frame = std::move(frame), required_caps,
                  done = std::move(done)]() mutable {
    impl->Request(peer, std::move(frame), required_caps, std::move(done));
  });
}

void PeerPool::Shutdown() {
  if (endpoint_.InLoopThread()) {
    impl_->Shutdown();
    return;
  }
  auto p = std::make_shared<std::promise<void>>();
  auto f = p->get_future();
  endpoint_.Post([impl = impl_, p] {
    impl->Shutdown();
    p->set_value();
  });
  f.wait();
}

}  // namespace felix::cluster
