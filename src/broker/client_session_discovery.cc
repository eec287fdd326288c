// ClientSession: `shard_owners` (client-protocol.md §6.2, FEATURE_SHARD_OWNERS).
//
// A standalone broker owns every shard at generation 0 and publishes no other broker's
// address, so each shard of a known stream or cache is listed as {shard, generation 0} with no
// node_id/addr (the client keeps using the broker it dialled); an unknown name gets an empty
// list. As for stream_shards, a tenant other than the stream's authenticated one is refused
// `forbidden` "tenant mismatch" and the stream ends.
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
  for (uint32_t shard = 0; shard < shards; ++shard) {
    flx1::ShardOwner owner;
    owner.shard = shard;
    view.owners.push_back(std::move(owner));
  }
  Send(view);
  return true;
}

}  // namespace felix::broker
