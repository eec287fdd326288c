// ClientSession: atomic commits and shard state (client-protocol.md §6.8, semantics.md §8).
//
// `commit` (stream.publish) and `state_get` (stream.subscribe) route by `entity_key` like a
// keyed publish, are served only by the shard's owner (`not_leader` otherwise: a commit is
// never forwarded) and only on durable streams. A commit becomes one commit-flagged record in
// the shard's stream log (StreamShard::Commit) and is answered `commit_ok` once that record is
// committed per the stream's durability mode; `state_get` reads the shard's state view. Both
// keep the stream open; a refused authorization ends it (§8.3).
#include "broker/client_session.h"
#include "broker/commit_record.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

namespace {

std::string_view AsView(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

std::optional<LocalStreamShard> ClientSession::ResolveCommitShard(std::string_view tenant,
                                                                  std::string_view ns,
                                                                  std::string_view stream,
                                                                  const std::vector<uint8_t>& key,
                                                                  const char* what) {
  auto resolved = service_.resolver().ResolvePublish(tenant, ns, stream, AsView(key));
  if (auto* error = std::get_if<Error>(&resolved)) {
    SendError(ProtocolCodeFor(*error), error->message);
    return std::nullopt;
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    SendNotLeader(*remote);  // served by the shard's owner only, never forwarded (§6.8)
    return std::nullopt;
  }
  auto& local = std::get<LocalStreamShard>(resolved);
  if (!local.stream->durable) {
    SendError(
        Code(ProtocolErrorCode::kInvalidRequest),
        std::string(what) + " needs a durable stream; '" + local.stream->name + "' is in memory");
    return std::nullopt;
  }
  return local;
}

std::optional<bool> ClientSession::HandleCommitRequest(const flx1::Message& message) {
  if (auto* m = std::get_if<flx1::Commit>(&message)) {
    if (!Authorized(auth::Action::kStreamPublish, m->tenant_id, m->namespace_, m->stream,
                    std::nullopt, false)) {
      return false;
    }
    if (m->expected_offset) {
      // Needs FEATURE_PUBLISH_CONDITIONAL, which this broker does not advertise.
      SendError(Code(ProtocolErrorCode::kInvalidRequest),
                "commit not served: expected_offset needs FEATURE_PUBLISH_CONDITIONAL, which this "
                "broker does not serve");
      return true;
    }
    if (service_.options().cluster) {
      // Refused in a cluster until the fleet feature atomic_commit exists (§6.8): replication
      // does not carry the commit flag yet.
      SendError(Code(ProtocolErrorCode::kInvalidRequest),
                "commit not served: atomic commits are not enabled in this cluster");
      return true;
    }
    auto local = ResolveCommitShard(m->tenant_id, m->namespace_, m->stream, m->entity_key,
                                    "an atomic commit");
    if (!local) return true;
    CommitRecord record;
    record.event = m->event;
    record.ops.reserve(m->changes.size());
    for (const flx1::StateChange& change : m->changes) {
      CommitOp op;
      op.kind =
          change.op == flx1::StateChange::Op::kPut ? CommitOp::Kind::kPut : CommitOp::Kind::kDelete;
      op.key = change.key;
      if (op.kind == CommitOp::Kind::kPut) op.value = change.value;
      record.ops.push_back(std::move(op));
    }
    auto body = std::make_shared<const std::vector<uint8_t>>(EncodeCommitRecord(record));
    uint64_t request_id = m->request_id;
    bool posted = RunOnShard(
        *local->handle.executor, [cell = local->handle.cell, body, request_id](auto reply) {
          cell->WhenOpen([body, request_id, reply](Result<OpenedStream*> opened) {
            auto answer = [reply, request_id](Result<Offset> offset) {
              reply([request_id, offset](ClientSession* self) {
                if (self == nullptr || self->reset_) return;
                if (!offset) {
                  return self->SendError(ProtocolCodeFor(offset.error()),
                                         "commit not written: " + offset.error().message);
                }
                self->Send(flx1::CommitOk{request_id, offset->value()});
              });
            };
            if (!opened) return answer(tl::unexpected(opened.error()));
            (*opened)->shard->Commit(body, NowMicrosRoundedToMillis(), answer);
          });
        });
    if (!posted) SendError(Code(ProtocolErrorCode::kShardUnavailable), "broker is stopping");
    return true;
  }
  if (auto* m = std::get_if<flx1::StateGet>(&message)) {
    if (!Authorized(auth::Action::kStreamSubscribe, m->tenant_id, m->namespace_, m->stream,
                    std::nullopt, false)) {
      return false;
    }
    auto local =
        ResolveCommitShard(m->tenant_id, m->namespace_, m->stream, m->entity_key, "shard state");
    if (!local) return true;
    bool posted = RunOnShard(*local->handle.executor, [cell = local->handle.cell, key = m->key,
                                                       request_id = m->request_id](auto reply) {
      cell->WhenOpen([key, request_id, reply](Result<OpenedStream*> opened) {
        Result<StateLookup> found = tl::unexpected(Error{});
        if (opened) {
          found = (*opened)->shard->StateGet(key);
        } else {
          found = tl::unexpected(opened.error());
        }
        reply([request_id, found = std::move(found)](ClientSession* self) {
          if (self == nullptr || self->reset_) return;
          if (!found) {
            return self->SendError(ProtocolCodeFor(found.error()),
                                   "state_get not served: " + found.error().message);
          }
          flx1::StateValue answer;
          answer.value = found->value;
          answer.version = ValueOf(found->version);
          answer.as_of = ValueOf(found->as_of);
          answer.request_id = request_id;
          self->Send(std::move(answer));
        });
      });
    });
    if (!posted) SendError(Code(ProtocolErrorCode::kShardUnavailable), "broker is stopping");
    return true;
  }
  return std::nullopt;
}

}  // namespace felix::broker
