// The daemon's internal (FLXI) service: the cluster::PeerServer behind the internal listener,
// built from the configuration, with every internal handler this build serves registered on
// it. The handshake (HelloCapable/Hello) is the peer server's own. In cluster mode the owner's
// side of a forwarded publish (cluster::ForwardPublishHandler, kinds 22 and 1) is registered
// and FORWARD_OFFSETS is promised (main.cc registers the cache side, cluster::ForwardCacheHandler,
// kinds 23/34/11, on the result); every other kind is answered UnsupportedKind. Replication
// registers its handlers here as it lands, with the capability bits it promises.
//
// Call from the main thread before the listeners start; pass listen_handlers() of the result
// as ListenerConfig::internal_handlers.
#pragma once

#include <cstdint>
#include <memory>

#include "cluster/forward_publish_handler.h"
#include "cluster/peer_server.h"
#include "cluster/replication_host.h"
#include "common/metrics.h"
#include "common/result.h"
#include "server/broker_config.h"
#include "wire/flxi/flxi.h"

namespace felix::server {

// What this build promises peers in HelloCapableOk (wire::flxi::kCap*) on every broker, and
// what cluster mode adds because it serves forwarded publishes: FORWARD_OFFSETS (a stream
// without a log is answered 1..=0, never 0..=0).
inline constexpr uint64_t kInternalCapabilities = 0;
inline constexpr uint64_t kForwardingCapabilities = wire::flxi::kCapForwardOffsets;
// Cluster mode also serves replication (cluster/replication_host.h): followers take per-record
// generation labels (kind 32) and the leader's record times (kind 36), and answer the
// promotion fence (kind 29) and its fetches (31, 33, 37) of a shard's own log and of a cache
// shard's counter log (CACHE_FENCE: a promoted cache leader fences both, replication.md §10
// step 6; labels then also ride the cache and counter logs, §7.1).
inline constexpr uint64_t kReplicationCapabilities =
    wire::flxi::kCapGenerationLabels | wire::flxi::kCapRecordTimes | wire::flxi::kCapFence |
    wire::flxi::kCapTailFetch | wire::flxi::kCapCacheFence;

// Own node id (FELIX_NODE_ID, or "localhost" on a single node, the name of the self-signed
// internal certificate), the capability bits, and the Hello identity check whenever peer mTLS
// is configured (FELIX_INTERNAL_TLS_CA).
cluster::PeerServerOptions InternalServerOptions(const BrokerConfig& config);

// `forward_publish` and `replication` (cluster mode; must outlive the service) are registered
// when given.
Result<std::unique_ptr<cluster::PeerServer>> MakeInternalService(
    const BrokerConfig& config, MetricsRegistry& metrics,
    cluster::ForwardPublishHandler* forward_publish = nullptr,
    cluster::ReplicationHost* replication = nullptr);

}  // namespace felix::server
