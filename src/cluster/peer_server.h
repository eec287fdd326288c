// PeerServer: the listening side of broker-to-broker requests over FLXI, and the daemon's
// registry of internal handlers (kind → handler).
//
// On every bidi stream of an internal connection it reads frames (cluster/frame_reader.h) and:
//   - answers the handshake itself: HelloCapable (27) with HelloCapableOk (28) carrying
//     `capabilities`, a legacy Hello (5) from an older peer with HelloOk (6); it records what
//     the peer offered (nullopt for a legacy Hello). Under `check_identity` (mTLS) the node id a
//     peer claims must be one of its certificate's DNS names, else Unauthorized and the
//     connection closes (kPeerCloseUnauthorized). A malformed Hello is answered Malformed and
//     closes the connection (kPeerCloseProtocol);
//   - refuses any other frame before the handshake with Unauthorized ("Hello required first");
//   - answers a kind with no registered handler (unknown to this build, or known and not
//     served) with kind 3 ForwardPublishError / UnsupportedKind against its correlation id,
//     and keeps reading the stream (internal-protocol-bodies.md §2);
//   - decodes the body of a handled kind strictly (wire::flxi::DecodeBody); one that does not
//     decode is answered Malformed in the request's shape (cluster/peer_frames.h) and the
//     stream continues, because the envelope still gave a frame boundary;
//   - otherwise calls the handler with the decoded request and a reply callback;
//   - closes the connection (kPeerCloseProtocol, no answer) on a wrong magic, a version other
//     than 1 or a length above MAX_BODY_BYTES: there is no frame boundary to trust.
//
// Threading and lifetime: register handlers (Handle) before listen_handlers() is given to
// Endpoint::Create; afterwards everything runs on that endpoint's loop thread, handlers
// included. The MetricsRegistry must outlive the PeerServer; the endpoint keeps what it needs
// of the server alive.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/metrics.h"
#include "common/result.h"
#include "transport/endpoint.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// What a handler gets. Valid only during the handler call: the frame's strings and payloads
// are views into the received bytes, so copy what a later answer needs.
struct PeerRequest {
  const wire::flxi::Frame& frame;  // decoded; frame.kind is the kind the handler serves
  uint64_t correlation_id = 0;
  std::string_view peer_node_id;              // from the peer's Hello
  std::optional<uint64_t> peer_capabilities;  // from HelloCapable; nullopt after a plain Hello
  // The endpoint the request arrived on: a handler that answers later from another thread
  // posts the reply to its loop (Endpoint::Post).
  transport::Endpoint* endpoint = nullptr;
  // The frame's body as received, valid during the call like `frame`'s views: a handler that
  // answers later copies these bytes and decodes them again (wire::flxi::DecodeBody with
  // frame.kind) rather than encoding `frame` anew.
  std::span<const uint8_t> body;
};

// Sends the answer on the request's stream; its correlation id is set to the request's.
// Call it once, on the endpoint's loop thread (now or later). The answer's views must be valid
// during the call. An answer the codec refuses is a bug: it is logged and the connection is
// closed, so that the requester sees an indeterminate outcome rather than a false one. After
// the connection is gone a reply does nothing.
using PeerReply = std::function<void(const wire::flxi::Frame& answer)>;
using PeerHandler = std::function<void(const PeerRequest&, PeerReply)>;

struct PeerServerOptions {
  std::string own_node_id;
  uint64_t capabilities = 0;  // this broker's bits (wire::flxi::kCap*), in HelloCapableOk
  // Under mTLS: the Hello node id must be one of the peer certificate's DNS names.
  bool check_identity = false;
  std::string endpoint_name = "internal";  // metrics label
};

class PeerServer {
 public:
  PeerServer(PeerServerOptions options, MetricsRegistry& metrics);
  PeerServer(const PeerServer&) = delete;
  PeerServer& operator=(const PeerServer&) = delete;

  // Registers the handler for `kind` (replacing an earlier one). The handshake kinds are the
  // server's own: kHello and kHelloCapable are refused (kInvalidArgument).
  Result<void> Handle(wire::flxi::Kind kind, PeerHandler handler);
  // Pass to Endpoint::Create for the internal listener.
  transport::ListenHandlers listen_handlers();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace felix::cluster
