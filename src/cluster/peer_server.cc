#include "cluster/peer_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "cluster/frame_reader.h"
#include "cluster/peer_frames.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using transport::Connection;
using transport::ConnectionHandlers;
using transport::Stream;
using transport::StreamHandlers;

struct PeerServer::Impl : std::enable_shared_from_this<PeerServer::Impl> {
  struct ConnState {
    bool hello_done = false;
    bool closing = false;
    std::string peer_node;
    std::optional<uint64_t> peer_caps;
  };

  Impl(PeerServerOptions opts, MetricsRegistry& r)
      : o(std::move(opts)),
        refused_hello(
            &r.AddCounter("felix_transport_handshakes_refused_total",
                          "QUIC handshakes refused or failed, by reason",
                          "endpoint=\"" + o.endpoint_name + "\",reason=\"hello_identity\"")),
        unknown_kind(&r.AddCounter("felix_peer_unknown_kind_total",
                                   "Peer frames of a kind this broker does not serve")),
        malformed(&r.AddCounter("felix_peer_malformed_requests_total",
                                "Peer requests whose body did not decode")) {}

  PeerServerOptions o;
  Counter* refused_hello;
  Counter* unknown_kind;
  Counter* malformed;
  std::map<flxi::Kind, PeerHandler> handlers;

  void OnConnection(const std::shared_ptr<Connection>& c) {
    auto st = std::make_shared<ConnState>();
    std::weak_ptr<Connection> wc = c;
    auto self = shared_from_this();
    c->SetHandlers(ConnectionHandlers{
        [self, wc, st](const std::shared_ptr<Stream>& s) { self->OnStream(wc, st, s); }, nullptr});
  }

  void OnStream(std::weak_ptr<Connection> wc, std::shared_ptr<ConnState> st,
                const std::shared_ptr<Stream>& s) {
    if (s->is_unidirectional()) {
      s->Reset(kPeerCloseProtocol);
      return;
    }
    auto reader = std::make_shared<FrameReader>();
    std::weak_ptr<Stream> ws = s;
    auto self = shared_from_this();
    s->SetHandlers(StreamHandlers{
        [self, wc, st, ws, reader](Stream& str, std::span<const uint8_t> data) {
          str.Consume(data.size());
          auto err = reader->Feed(data, [&](uint16_t kind, std::span<const uint8_t> body) {
            self->OnFrame(wc, *st, ws, kind, body);
          });
          if (err && !st->closing) {
            // Not our protocol or version: no frame boundary to trust, no answer.
            st->closing = true;
            // The reason names the defect in words ("bad magic" is what an FLX1 client that
            // dialled the internal port sees, as with the reference).
            std::string reason =
                err->code == wire::DecodeErrorCode::kBadMagic     ? "bad magic: " + err->detail
                : err->code == wire::DecodeErrorCode::kBadVersion ? "bad version: " + err->detail
                                                                  : err->ToString();
            if (auto c = wc.lock()) c->Close(kPeerCloseProtocol, reason);
          }
        },
        [](Stream& str) { str.Finish(); }, nullptr, nullptr});
  }

  // Writes an encoded frame on the request's stream (nothing once it is gone).
  static void Write(const std::weak_ptr<Stream>& ws, std::span<const uint8_t> frame) {
    if (auto s = ws.lock()) (void)s->Write(frame);
  }

  static PeerReply MakeReply(std::weak_ptr<Connection> wc, std::weak_ptr<Stream> ws,
                             uint64_t corr) {
    return [wc, ws, corr](const flxi::Frame& answer) {
      auto bytes = EncodeWithCorrelation(answer, corr);
      if (!bytes) {
        spdlog::error("peer answer {} to correlation {} does not encode: {}",
                      flxi::KindName(answer.kind), corr, bytes.error().message);
        if (auto c = wc.lock()) c->Close(kPeerCloseProtocol, "answer does not encode");
        return;
      }
      Write(ws, *bytes);
    };
  }

  static void Refuse(const std::weak_ptr<Stream>& ws, uint16_t kind, uint64_t corr,
                     flxi::ErrorCode code, std::string_view detail) {
    // A refusal always encodes: the detail is cut to MAX_IDENT_BYTES at a character boundary.
    if (auto bytes = EncodeWithCorrelation(Refusal(kind, corr, code, detail), corr)) {
      Write(ws, *bytes);
    }
  }

  void OnFrame(const std::weak_ptr<Connection>& wc, ConnState& st, const std::weak_ptr<Stream>& ws,
               uint16_t kind, std::span<const uint8_t> body) {
    if (st.closing) return;
    auto conn = wc.lock();
    if (!conn) return;
    const uint64_t corr = flxi::CorrelationIdOfBody(body);
    if (kind == static_cast<uint16_t>(flxi::Kind::kHello) ||
        kind == static_cast<uint16_t>(flxi::Kind::kHelloCapable)) {
      OnHello(*conn, st, ws, static_cast<flxi::Kind>(kind), body, corr);
      return;
    }
    if (!st.hello_done) {
      Refuse(ws, kind, corr, flxi::ErrorCode::kUnauthorized, "Hello required first");
      return;
    }
    auto it =
        flxi::IsKnownKind(kind) ? handlers.find(static_cast<flxi::Kind>(kind)) : handlers.end();
    if (it == handlers.end()) {
      unknown_kind->Increment();
      Write(ws, flxi::EncodeUnsupportedKindAnswer(kind, body));
      return;
    }
    auto frame = flxi::DecodeBody(it->first, body);
    if (!frame) {
      malformed->Increment();
      Refuse(ws, kind, corr, flxi::ErrorCode::kMalformed, frame.error().ToString());
      return;
    }
    it->second(PeerRequest{*frame, corr, st.peer_node, st.peer_caps, &conn->endpoint(), body},
               MakeReply(wc, ws, corr));
  }

  void OnHello(Connection& conn, ConnState& st, const std::weak_ptr<Stream>& ws, flxi::Kind kind,
               std::span<const uint8_t> body, uint64_t corr) {
    auto frame = flxi::DecodeBody(kind, body);
    const auto* hello = frame ? std::get_if<flxi::Hello>(&frame->body) : nullptr;
    if (!hello) {
      std::string why = std::string("malformed ") + flxi::KindName(kind) +
                        (frame ? std::string() : ": " + frame.error().ToString());
      Refuse(ws, static_cast<uint16_t>(kind), corr, flxi::ErrorCode::kMalformed, why);
      st.closing = true;
      conn.Close(kPeerCloseProtocol, why);
      return;
    }
    if (o.check_identity) {
      auto names = conn.peer_dns_names();
      if (std::find(names.begin(), names.end(), hello->node_id) == names.end()) {
        refused_hello->Increment();
        spdlog::warn("peer hello refused claimed_node={} remote={}: not a name of its certificate",
                     hello->node_id, conn.remote_address().ToString());
        Refuse(ws, static_cast<uint16_t>(kind), corr, flxi::ErrorCode::kUnauthorized,
               "node id " + std::string(hello->node_id) + " is not a name of the peer certificate");
        st.closing = true;
        conn.Close(kPeerCloseUnauthorized, "hello node id not in certificate");
        return;
      }
    }
    st.hello_done = true;
    st.peer_node = std::string(hello->node_id);
    st.peer_caps = hello->capabilities;
    // Answer in the handshake's own generation: HelloCapableOk with our bits to a HelloCapable,
    // HelloOk (no capabilities) to a legacy Hello.
    flxi::Hello ok{corr, o.own_node_id, std::nullopt};
    if (hello->capabilities) ok.capabilities = o.capabilities;
    auto bytes = flxi::EncodeFrame(flxi::Frame{flxi::HelloKind(ok, true), ok});
    if (!bytes) {
      // Only an own node id above 512 bytes gets here; startup refuses such an id.
      Refuse(ws, static_cast<uint16_t>(kind), corr, flxi::ErrorCode::kUnavailable,
             "cannot encode the answer: " + bytes.error().message);
      return;
    }
    Write(ws, *bytes);
  }
};

PeerServer::PeerServer(PeerServerOptions options, MetricsRegistry& metrics)
    : impl_(std::make_shared<Impl>(std::move(options), metrics)) {}

Result<void> PeerServer::Handle(flxi::Kind kind, PeerHandler handler) {
  if (kind == flxi::Kind::kHello || kind == flxi::Kind::kHelloCapable) {
    return Fail(ErrorCode::kInvalidArgument, std::string("the handshake kind ") +
                                                 flxi::KindName(kind) +
                                                 " is answered by the peer server itself");
  }
  impl_->handlers[kind] = std::move(handler);
  return Ok();
}

transport::ListenHandlers PeerServer::listen_handlers() {
  transport::ListenHandlers h;
  h.on_connection = [impl = impl_](const std::shared_ptr<Connection>& c) { impl->OnConnection(c); };
  return h;
}

}  // namespace felix::cluster
