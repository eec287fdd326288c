// ClientSession: offset_for_time (client-protocol.md §6.4, FEATURE_RECORD_TIMESTAMPS).
//
// Needs stream.subscribe on the stream (auth.md §6.4); served by the shard's leader only
// (`not_leader` otherwise, never forwarded: semantics.md §4.1) and only on durable streams (an
// in-memory stream keeps no history to search: `error` invalid_request). The search runs on
// the shard's executor (StreamShard::OffsetForTime) once the shard is open; the answer is
// `offset_value` with the offset, or without one when no readable record is that recent. The
// stream is read on after every answer except an authorization refusal (§8.3).
#include "broker/client_session.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

bool ClientSession::HandleOffsetForTime(const flx1::OffsetForTime& request) {
  if (!Authorized(auth::Action::kStreamSubscribe, request.tenant_id, request.namespace_,
                  request.stream, std::nullopt, false)) {
    return false;
  }
  auto resolved = service_.resolver().ResolveStreamShard(request.tenant_id, request.namespace_,
                                                         request.stream, request.shard);
  if (auto* error = std::get_if<Error>(&resolved)) {
    SendError(ProtocolCodeFor(*error), error->message);
    return true;
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    SendNotLeader(*remote);
    return true;
  }
  auto& local = std::get<LocalStreamShard>(resolved);
  if (!local.stream->durable) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest),
              "offset_for_time needs a durable stream; '" + local.stream->name + "' is in memory");
    return true;
  }
  bool posted =
      RunOnShard(*local.handle.executor, [cell = local.handle.cell, at = request.at_micros,
                                          request_id = request.request_id](auto reply) {
        cell->WhenOpen([at, request_id, reply](Result<OpenedStream*> opened) {
          Result<std::optional<Offset>> found =
              opened ? (*opened)->shard->OffsetForTime(at)
                     : Result<std::optional<Offset>>(tl::unexpected(opened.error()));
          reply([request_id, found = std::move(found)](ClientSession* self) {
            if (self == nullptr || self->reset_) return;
            if (!found) {
              return self->SendError(ProtocolCodeFor(found.error()),
                                     "offset_for_time not served: " + found.error().message);
            }
            self->Send(flx1::OffsetValue{ValueOf(*found), request_id});
          });
        });
      });
  if (!posted) SendError(Code(ProtocolErrorCode::kShardUnavailable), "broker is stopping");
  return true;
}

}  // namespace felix::broker
