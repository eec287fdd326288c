#include "server/internal_listener.h"

namespace felix::server {

cluster::PeerServerOptions InternalServerOptions(const BrokerConfig& config) {
  cluster::PeerServerOptions o;
  o.own_node_id = config.node_id.empty() ? "localhost" : config.node_id;
  o.capabilities = kInternalCapabilities;
  o.check_identity = !config.internal_tls_ca.empty();
  o.endpoint_name = "internal";
  return o;
}

std::unique_ptr<cluster::PeerServer> MakeInternalService(const BrokerConfig& config,
                                                         MetricsRegistry& metrics) {
  return std::make_unique<cluster::PeerServer>(InternalServerOptions(config), metrics);
}

}  // namespace felix::server
