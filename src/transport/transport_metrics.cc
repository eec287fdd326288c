#include "transport/transport_metrics.h"

namespace felix::transport {

TransportMetrics TransportMetrics::Register(MetricsRegistry& r, const std::string& endpoint) {
  const std::string ep = "endpoint=\"" + endpoint + "\"";
  auto refused = [&](const char* reason) {
    return &r.AddCounter("felix_transport_handshakes_refused_total",
                         "QUIC handshakes refused or failed, by reason",
                         ep + ",reason=\"" + reason + "\"");
  };
  TransportMetrics m;
  m.connections = &r.AddGauge("felix_transport_connections", "Established QUIC connections", ep);
  m.accepted = &r.AddCounter("felix_transport_connections_accepted_total",
                             "QUIC connections accepted (handshake completed)", ep);
  m.dialled = &r.AddCounter("felix_transport_connections_dialled_total",
                            "QUIC connections dialled (handshake confirmed)", ep);
  m.refused_alpn = refused("alpn");
  m.refused_certificate = refused("certificate");
  m.refused_timeout = refused("timeout");
  m.refused_other = refused("other");
  m.refused_hello_identity = refused("hello_identity");
  m.stateless_resets =
      &r.AddCounter("felix_transport_stateless_resets_sent_total", "Stateless resets sent", ep);
  m.version_negotiations = &r.AddCounter("felix_transport_version_negotiations_total",
                                         "Version Negotiation packets sent", ep);
  m.send_errors = &r.AddCounter("felix_transport_udp_send_errors_total",
                                "UDP sends that failed (datagrams left to loss recovery)", ep);
  m.datagrams_sent = &r.AddCounter("felix_transport_udp_datagrams_sent_total",
                                   "UDP datagrams sent (each GSO segment counts)", ep);
  m.send_calls = &r.AddCounter("felix_transport_udp_send_calls_total",
                               "System calls that sent UDP datagrams (sendmsg, sendmmsg)", ep);
  m.datagrams_received = &r.AddCounter("felix_transport_udp_datagrams_received_total",
                                       "UDP datagrams received (each GRO segment counts)", ep);
  m.loop_wakeups = &r.AddCounter("felix_transport_loop_wakeups_total",
                                 "Times the endpoint's loop thread returned from ppoll", ep);
  return m;
}

}  // namespace felix::transport
