#include "server/internal_listener.h"

namespace felix::server {

cluster::PeerServerOptions InternalServerOptions(const BrokerConfig& config) {
  cluster::PeerServerOptions o;
  o.own_node_id = config.node_id.empty() ? "localhost" : config.node_id;
  o.capabilities =
      kInternalCapabilities |
      (config.cluster_mode() ? kForwardingCapabilities | kReplicationCapabilities : uint64_t{0});
  o.check_identity = !config.internal_tls_ca.empty();
  o.endpoint_name = "internal";
  return o;
}

Result<std::unique_ptr<cluster::PeerServer>> MakeInternalService(
    const BrokerConfig& config, MetricsRegistry& metrics,
    cluster::ForwardPublishHandler* forward_publish, cluster::ReplicationHost* replication) {
  auto server = std::make_unique<cluster::PeerServer>(InternalServerOptions(config), metrics);
  if (forward_publish != nullptr) {
    if (auto r = forward_publish->RegisterOn(*server); !r) return tl::unexpected(r.error());
  }
  if (replication != nullptr) {
    if (auto r = replication->RegisterOn(*server); !r) return tl::unexpected(r.error());
  }
  return server;
}

}  // namespace felix::server
