// BrokerListeners: the daemon's two QUIC listeners, started from plain settings (transport
// cannot see server/BrokerConfig; main.cc copies the fields over).
//   - the client listener (role kClient, ALPN felix/1 optional), served by the handlers the
//     caller passes (the broker's FLX1 service); without them it accepts connections and
//     streams and resets every stream with kStreamNotServedCode;
//   - the internal listener (role kInternal, ALPN felix-internal/1 required), served by the
//     handlers the caller passes (the daemon's cluster::PeerServer: FLXI handshake, internal
//     handlers, unknown-kind refusals); without them it resets every stream the same way.
// The transport knows nothing of FLX1 or FLXI bodies: both protocols arrive as handlers.
// Start/Stop from the main thread; Stop joins both loop threads.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/net_address.h"
#include "common/result.h"
#include "transport/endpoint.h"
#include "transport/tls_context.h"

namespace felix::transport {

inline constexpr uint64_t kStreamNotServedCode = 0x101;

struct ListenerConfig {
  HostPort client_bind{"0.0.0.0", 5000};
  HostPort internal_bind{"0.0.0.0", 5001};
  std::string tls_cert, tls_key, tls_client_ca;
  std::string internal_tls_cert, internal_tls_key, internal_tls_ca;
  std::string node_id;  // empty: single node
  std::chrono::milliseconds idle_timeout{6000};
  // The internal endpoint runs on the client endpoint's loop thread (EndpointOptions::
  // share_loop_of): a request one port hands to the other stays on one thread.
  bool shared_loop = true;
  // EndpointOptions::poll_while_awaiting of the internal endpoint (FELIX_FORWARD_POLL_US):
  // forwarded requests await their owners' answers (PeerPool::Request with poll_for_answer).
  // With `shared_loop` the one loop thread polls for both ports.
  std::chrono::microseconds internal_poll_while_awaiting{0};
  std::optional<ListenHandlers> client_handlers;    // the FLX1 service; unset: refuse streams
  std::optional<ListenHandlers> internal_handlers;  // the FLXI peer server; unset: refuse streams
};

class BrokerListeners {
 public:
  // Loads TLS material (failures name the variable and path), binds both ports, starts the
  // loops. Warnings (self-signed certificates, unauthenticated peers) go to `warnings`.
  static Result<std::unique_ptr<BrokerListeners>> Start(const ListenerConfig& config,
                                                        MetricsRegistry& metrics,
                                                        std::vector<std::string>* warnings);
  ~BrokerListeners();
  HostPort client_address() const { return client_->local_address(); }
  HostPort internal_address() const { return internal_->local_address(); }
  const TlsContext& client_tls() const { return client_->tls(); }
  // The client listener's endpoint (shutdown drain posts to its loop).
  Endpoint& client_endpoint() { return *client_; }
  // The internal listener's endpoint: the PeerPool dials peers from it (same TLS identity). With
  // `shared_loop` it runs on the client endpoint's thread, which must outlive it (it does:
  // Stop stops the client endpoint first, and members are destroyed in reverse order).
  Endpoint& internal_endpoint() { return *internal_; }
  void Stop();

 private:
  BrokerListeners() = default;
  std::unique_ptr<Endpoint> client_;
  std::unique_ptr<Endpoint> internal_;
};

}  // namespace felix::transport
