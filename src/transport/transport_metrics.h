// Prometheus series of one endpoint (label endpoint="<name>"), registered on the daemon's
// MetricsRegistry. The registry must outlive the endpoint. Updates are lock-free, any thread.
#pragma once

#include <string>

#include "common/metrics.h"

namespace felix::transport {

struct TransportMetrics {
  Gauge* connections = nullptr;  // established and not yet closed
  Counter* accepted = nullptr;
  Counter* dialled = nullptr;
  Counter* refused_alpn = nullptr;  // handshakes refused/failed, by reason
  Counter* refused_certificate = nullptr;
  Counter* refused_timeout = nullptr;
  Counter* refused_other = nullptr;
  Counter* refused_hello_identity = nullptr;  // FLXI Hello node id not in the peer certificate
  Counter* stateless_resets = nullptr;
  Counter* version_negotiations = nullptr;
  Counter* send_errors = nullptr;
  // Per-request costs (docs/performance.md): UDP datagrams each way (a GSO send counts each
  // segment) and wakeups of the endpoint's loop thread (ppoll returns).
  Counter* datagrams_sent = nullptr;
  Counter* datagrams_received = nullptr;
  // System calls that sent them (sendmsg, or one sendmmsg for several connections' datagrams).
  Counter* send_calls = nullptr;
  Counter* loop_wakeups = nullptr;

  static TransportMetrics Register(MetricsRegistry& registry, const std::string& endpoint);
};

}  // namespace felix::transport
