// Broker-to-broker requests over FLXI: PeerPool (the dialling side) and PeerServer (the
// internal listener side).
//
// PeerPool keeps one connection per peer (node id), reused by every request, with requests
// multiplexed round-robin over `streams_per_conn` bidi request streams plus one control stream
// that carries the Hello exchange. Every request gets exactly one terminal outcome, delivered
// once on the endpoint's loop thread:
//   - a response frame (any kind, including a ForwardPublishError refusal such as
//     UnsupportedKind, matched by correlation id within its own connection);
//   - kShed (retryable): the peer already has `max_in_flight` requests; nothing was sent;
//   - kBackoff (retryable): a reconnect backoff window is open after failed connects; nothing
//     was dialled or sent;
//   - kConnectFailed (retryable): the connection or its Hello failed before the request was sent;
//   - kTimeout (not retryable, indeterminate): no answer within `request_timeout`;
//   - kDisconnected (not retryable, indeterminate): the connection dropped while it was pending
//     (every waiter on that connection fails at once);
//   - kStopped: the pool shut down.
// The Hello exchange runs first on every connection, and the node id in HelloOk must equal the
// node id dialled (under mTLS the listener's certificate name is checked too, in the handshake).
// Connections with nothing in flight for `idle_timeout` are closed.
//
// Threading: Request and Shutdown may be called from any thread; callbacks run on the endpoint's
// loop thread. The Endpoint (role kInternal) must outlive the PeerPool; destroy the pool (or
// call Shutdown) from a thread other than the loop thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/net_address.h"
#include "common/result.h"
#include "transport/endpoint.h"

namespace felix::transport {

// Application close codes on internal connections.
inline constexpr uint64_t kPeerCloseNormal = 0;        // idle, shutdown
inline constexpr uint64_t kPeerCloseProtocol = 1;      // bad magic/version, malformed Hello
inline constexpr uint64_t kPeerCloseUnauthorized = 3;  // Hello node id not in the certificate
inline constexpr uint64_t kPeerCloseWrongPeer = 4;     // HelloOk named another node

struct PeerPoolOptions {
  std::string own_node_id;
  size_t streams_per_conn = 4;
  size_t max_in_flight = 1024;
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds handshake_timeout{2000};  // dial + Hello
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds reconnect_base{50};
  std::chrono::milliseconds reconnect_max{5000};
  // Optional observer, on the loop thread: a pooled connection to `node_id` went away (idle
  // close, failure, peer close, shutdown). For logs and tests.
  std::function<void(const std::string& node_id, const std::string& reason)> on_connection_closed;
};

struct PeerAddress {
  std::string node_id;  // checked against HelloOk (and the certificate under mTLS)
  HostPort address;     // the peer's internal listener
};

enum class PeerErrorKind { kShed, kBackoff, kConnectFailed, kTimeout, kDisconnected, kStopped };
const char* PeerErrorKindName(PeerErrorKind kind);

struct PeerError {
  PeerErrorKind kind = PeerErrorKind::kDisconnected;
  bool retryable = false;
  std::string message;
};

struct PeerResponse {
  uint16_t kind = 0;
  std::vector<uint8_t> body;  // starts with the correlation id
};

using PeerCallback = std::function<void(Result<PeerResponse, PeerError>)>;

class PeerPool {
 public:
  PeerPool(Endpoint& endpoint, PeerPoolOptions options, MetricsRegistry& metrics);
  ~PeerPool();
  PeerPool(const PeerPool&) = delete;
  PeerPool& operator=(const PeerPool&) = delete;

  // Sends a request of `kind`; `body` excludes the correlation id (the pool assigns it).
  void Request(const PeerAddress& peer, uint16_t kind, std::vector<uint8_t> body,
               PeerCallback done);
  // Fails everything pending with kStopped and closes the connections; waits for the loop.
  void Shutdown();

  struct Impl;

 private:
  Endpoint& endpoint_;
  std::shared_ptr<Impl> impl_;
};

// What a PeerServer handler gets.
struct PeerRequest {
  uint16_t kind = 0;
  std::span<const uint8_t> body;  // starts with the correlation id
  uint64_t correlation_id = 0;
  std::string peer_node_id;  // from the peer's Hello
};
// Sends the response frame: `rest` is the body after the correlation id (added for you).
using PeerReply = std::function<void(uint16_t kind, std::span<const uint8_t> rest)>;
using PeerHandler = std::function<void(const PeerRequest&, PeerReply)>;

struct PeerServerOptions {
  std::string own_node_id;
  // Under mTLS: the Hello node id must be one of the peer certificate's DNS names.
  bool check_identity = false;
  std::string endpoint_name = "internal";  // metrics label
};

// Serves the internal listener: answers Hello, dispatches known kinds to handlers, answers
// unknown kinds with ForwardPublishError/UnsupportedKind against their correlation id and keeps
// reading the stream, and closes the connection on a wrong magic or version. Register handlers
// before creating the endpoint; the handlers run on the endpoint's loop thread.
class PeerServer {
 public:
  PeerServer(PeerServerOptions options, MetricsRegistry& metrics);
  void Handle(uint16_t kind, PeerHandler handler);
  // Pass to Endpoint::Create for the internal listener.
  ListenHandlers listen_handlers();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace felix::transport
