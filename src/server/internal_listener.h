// The daemon's internal (FLXI) service: the cluster::PeerServer behind the internal listener,
// built from the configuration, with every internal handler this build serves registered on
// it. The handshake (HelloCapable/Hello) is the peer server's own; no other kind is served yet,
// so every request is answered UnsupportedKind. Forwarding and replication register their
// handlers here as they land, and add the capability bits they promise to
// kInternalCapabilities.
//
// Call from the main thread before the listeners start; pass listen_handlers() of the result
// as ListenerConfig::internal_handlers.
#pragma once

#include <cstdint>
#include <memory>

#include "cluster/peer_server.h"
#include "common/metrics.h"
#include "server/broker_config.h"

namespace felix::server {

// What this build promises peers in HelloCapableOk (wire::flxi::kCap*): nothing yet.
inline constexpr uint64_t kInternalCapabilities = 0;

// Own node id (FELIX_NODE_ID, or "localhost" on a single node, the name of the self-signed
// internal certificate), the capability bits, and the Hello identity check whenever peer mTLS
// is configured (FELIX_INTERNAL_TLS_CA).
cluster::PeerServerOptions InternalServerOptions(const BrokerConfig& config);

std::unique_ptr<cluster::PeerServer> MakeInternalService(const BrokerConfig& config,
                                                         MetricsRegistry& metrics);

}  // namespace felix::server
