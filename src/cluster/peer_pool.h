// PeerPool: the dialling side of broker-to-broker requests over FLXI.
//
// One connection per peer (node id), reused by every request, with requests multiplexed
// round-robin over `streams_per_conn` bidi request streams plus one control stream that
// carries the handshake. Every request gets exactly one terminal outcome, delivered once on
// the endpoint's loop thread:
//   - a response frame (any kind, including a refusal such as ForwardPublishError /
//     UnsupportedKind, matched by correlation id within its own connection);
//   - kShed (retryable): the peer already has `max_in_flight` requests; nothing was sent;
//   - kBackoff (retryable): a reconnect backoff window is open after failed connects; nothing
//     was dialled or sent;
//   - kConnectFailed (retryable): the connection or its handshake failed before the request
//     was sent;
//   - kTimeout (not retryable, indeterminate): no answer within `request_timeout`;
//   - kDisconnected (not retryable, indeterminate): the connection dropped while it was pending
//     (every waiter on that connection fails at once);
//   - kNotOffered (not retryable against this peer): the request's kind needs a capability
//     the peer did not offer in the handshake (RequiredCapabilities, §8); nothing was sent;
//   - kStopped: the pool shut down.
//
// The handshake (internal-protocol-bodies.md §9) runs first on every connection: HelloCapable
// with `capabilities`; a peer that predates kind 27 answers ForwardPublishError/UnsupportedKind
// and is asked again with a plain Hello under a new correlation id (that peer has no
// capabilities). The node id in the answer must equal the node id dialled (under mTLS the
// listener's certificate name is checked too, in the TLS handshake); any other answer fails
// the connection. Connections with nothing in flight for `idle_timeout` are closed.
//
// Threading: Request, RequestRaw and Shutdown may be called from any thread; callbacks run on
// the endpoint's loop thread. The Endpoint (role kInternal) must outlive the PeerPool; destroy
// the pool (or call Shutdown) from a thread other than the loop thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/net_address.h"
#include "common/result.h"
#include "transport/endpoint.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

struct PeerPoolOptions {
  std::string own_node_id;
  uint64_t capabilities = 0;  // this broker's bits (wire::flxi::kCap*), offered in HelloCapable
  size_t streams_per_conn = 4;
  size_t max_in_flight = 1024;
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds handshake_timeout{2000};  // dial + handshake (both Hellos)
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds reconnect_base{50};
  std::chrono::milliseconds reconnect_max{5000};
  // Optional observer, on the loop thread: a pooled connection to `node_id` went away (idle
  // close, failure, peer close, shutdown). For logs and tests.
  std::function<void(const std::string& node_id, const std::string& reason)> on_connection_closed;
};

struct PeerAddress {
  std::string node_id;  // checked against the handshake answer (and the certificate under mTLS)
  HostPort address;     // the peer's internal listener
};

enum class PeerErrorKind {
  kShed,
  kBackoff,
  kConnectFailed,
  kTimeout,
  kDisconnected,
  kNotOffered,
  kStopped,
};
const char* PeerErrorKindName(PeerErrorKind kind);

struct PeerError {
  PeerErrorKind kind = PeerErrorKind::kDisconnected;
  bool retryable = false;
  std::string message;
  // kNotOffered only: what the peer did offer (nullopt: it answered a plain HelloOk), so a
  // caller that guessed can resend in a kind the peer takes.
  std::optional<uint64_t> peer_capabilities;
};

struct PeerResponse {
  uint16_t kind = 0;          // raw: a peer newer than this build may answer an unknown kind
  std::vector<uint8_t> body;  // starts with the correlation id
  // What the peer offered in HelloCapableOk; nullopt when it answered a plain HelloOk.
  std::optional<uint64_t> peer_capabilities;

  // The strict typed decode (wire::flxi::DecodeBody); the frame's views point into `body`, so
  // this response must outlive it.
  wire::DecodeResult<wire::flxi::Frame> Decode() const;
};

using PeerCallback = std::function<void(Result<PeerResponse, PeerError>)>;

class PeerPool {
 public:
  PeerPool(transport::Endpoint& endpoint, PeerPoolOptions options, MetricsRegistry& metrics);
  ~PeerPool();
  PeerPool(const PeerPool&) = delete;
  PeerPool& operator=(const PeerPool&) = delete;

  // Sends `request`; its correlation id is ignored (the pool assigns one per connection). A
  // kind gated by a capability is refused with kNotOffered when the peer did not offer it.
  // Encoding happens here, on the caller's thread: a frame the codec refuses is an error
  // returned now (kInvalidArgument) and `done` is never called. Otherwise `done` gets exactly
  // one outcome.
  // `poll_for_answer`: the endpoint's loop polls for the answer instead of sleeping
  // (Endpoint::AwaitingAnswers, EndpointOptions::poll_while_awaiting) — a forward, whose
  // client waits on it.
  Result<void> Request(const PeerAddress& peer, const wire::flxi::Frame& request, PeerCallback done,
                       bool poll_for_answer = false);
  // Sends a frame of raw `kind` whose body is the pool's correlation id followed by `rest`:
  // for kinds newer than the codec (and tests of the unknown-kind refusal). Not gated.
  void RequestRaw(const PeerAddress& peer, uint16_t kind, std::vector<uint8_t> rest,
                  PeerCallback done);
  // Fails everything pending with kStopped and closes the connections; waits for the loop.
  void Shutdown();

  struct Impl;

 private:
  void Submit(const PeerAddress& peer, std::vector<uint8_t> frame, uint64_t required_caps,
              PeerCallback done, bool poll_for_answer);

  transport::Endpoint& endpoint_;
  std::shared_ptr<Impl> impl_;
};

}  // namespace felix::cluster
