// ClientSession: `shard_owners` (client-protocol.md §6.2, FEATURE_SHARD_OWNERS) and `topology`
// (FEATURE_TOPOLOGY, cluster brokers: the routers' brokers with a client address).
//
// Each shard of a known stream or cache is listed with who serves it, from the ShardResolver's
// router: a shard served here as {shard, generation} with no node_id/addr (the client keeps
// using the broker it dialled; a standalone broker answers generation 0 for all), a shard
// served elsewhere with the owner's node id, client address (if known) and generation; an
// unknown name gets an empty list. As for stream_shards, a tenant other than the stream's
// authenticated one is refused `forbidden` "tenant mismatch" and the stream ends.
#include <algorithm>

#include "broker/client_session.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;

bool ClientSession::HandleShardOwners(const flx1::ShardOwners& request) {
  if (request.tenant_id != auth_->tenant_id) {
    SendError(Code(flx1::ProtocolErrorCode::kForbidden), "tenant mismatch");
    FinishStream();
    return false;
  }
  uint32_t shards = 0;
  if (request.kind == flx1::ShardKind::kStream) {
    if (auto stream =
            service_.core().FindStream(request.tenant_id, request.namespace_, request.name)) {
      shards = stream->shards;
    }
  } else if (auto cache =
                 service_.core().FindCache(request.tenant_id, request.namespace_, request.name)) {
    shards = std::max<uint32_t>(cache->shards, 1);  // a registered cache counts as one
  }
  flx1::ShardOwnersView view;
  view.request_id = request.request_id;
  view.owners.reserve(shards);
  ShardKind kind =
      request.kind == flx1::ShardKind::kStream ? ShardKind::kStream : ShardKind::kCache;
  for (uint32_t shard = 0; shard < shards; ++shard) {
    Route route = service_.resolver().RouteOf(
        ShardId{request.tenant_id, request.namespace_, request.name, kind, shard});
    flx1::ShardOwner owner;
    owner.shard = shard;
    owner.generation = route.generation.value();
    if (route.is_remote()) {
      owner.node_id = route.owner_node_id;
      if (!route.owner_client_addr.empty()) owner.addr = route.owner_client_addr;
    } else if (!route.is_local()) {
      owner.unavailable = route.unavailable_reason;
    }
    view.owners.push_back(std::move(owner));
  }
  Send(view);
  return true;
}

bool ClientSession::HandleTopology() {
  flx1::TopologyView view;
  for (auto& broker : service_.resolver().router().Brokers()) {
    view.brokers.push_back(
        flx1::BrokerAddr{std::move(broker.node_id), std::move(broker.client_addr)});
  }
  Send(view);
  return true;
}

}  // namespace felix::broker
