// ClientSession: the consumer-group requests (client-protocol.md §6.7, consumer-groups.md §5):
// permission (auth.md §6.4 group rule), names, stream and shard checks on the loop thread,
// then the StreamGroups of the shard does the work on the shard's executor and the answer is
// sent from the loop thread.
#include <spdlog/spdlog.h>

#include "broker/client_session.h"
#include "broker/protocol_codes.h"
#include "catalog/model.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

namespace {

// The client protocol's code for a group refusal (client-protocol.md §8.2).
uint16_t GroupProtocolCode(GroupErrc reason) {
  switch (reason) {
    case GroupErrc::kInvalidRequest:
      return Code(ProtocolErrorCode::kInvalidRequest);
    case GroupErrc::kStaleClaim:
      return Code(ProtocolErrorCode::kStaleClaim);
    case GroupErrc::kUnavailable:
      return Code(ProtocolErrorCode::kShardUnavailable);
    case GroupErrc::kGone:
      return Code(ProtocolErrorCode::kNotFound);
    case GroupErrc::kStorage:
      break;
  }
  return Code(ProtocolErrorCode::kStorage);
}

}  // namespace

void ClientSession::SendGroupError(const GroupError& error) {
  flx1::Error answer;
  answer.message = error.message;
  if (error_codes_) {
    uint16_t code = GroupProtocolCode(error.reason);
    if (auto name = flx1::ErrorCodeName(code)) answer.code = std::string(*name);
    flx1::RetryClass retry = error.fatal ? flx1::RetryClass::kFatal : flx1::DefaultRetryClass(code);
    answer.retry = std::string(flx1::RetryClassName(retry));
  }
  Send(std::move(answer));
}

std::optional<StreamShardHandle> ClientSession::OpenGroupShard(const GroupScope& scope,
                                                               auth::Action action,
                                                               bool* keep_reading) {
  const char* refusal = nullptr;
  if (scope.tenant != auth_->tenant_id) {
    refusal = "tenant mismatch";
  } else if (!auth_->permissions.AllowsGroup(action, scope.tenant, scope.ns, scope.stream,
                                             scope.group)) {
    refusal = "forbidden";
  }
  if (refusal != nullptr) {
    SendError(Code(ProtocolErrorCode::kForbidden), refusal);
    FinishStream();  // authorization failures end the stream (§8.3)
    *keep_reading = false;
    return std::nullopt;
  }
  if (!catalog::IsValidName(scope.group)) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest),
              "group name must be 1-128 characters of [A-Za-z0-9._-] starting with a letter or "
              "digit");
    return std::nullopt;
  }
  auto resolved =
      service_.resolver().ResolveStreamShard(scope.tenant, scope.ns, scope.stream, scope.shard);
  if (auto* error = std::get_if<Error>(&resolved)) {
    SendError(ProtocolCodeFor(*error), error->message);
    return std::nullopt;
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    SendNotLeader(*remote);  // group requests go to the shard's leader (§6.7)
    return std::nullopt;
  }
  auto& local = std::get<LocalStreamShard>(resolved);
  if (!local.stream->durable) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest),
              "consumer groups need a durable stream; '" + local.stream->name + "' is in memory");
    return std::nullopt;
  }
  return local.handle;
}

void ClientSession::RunGroupOp(const StreamShardHandle& handle, GroupOp op) {
  // Each stage runs once: the replies are moved along, not copied (a std::function holding a
  // std::function allocates at every copy; docs/performance.md change 34).
  bool posted = RunOnShard(
      *handle.executor, [cell = handle.cell, op = std::move(op)](LoopReply reply) mutable {
        reply.null_after_reset_ = true;
        cell->WhenOpen([op = std::move(op),
                        reply = std::move(reply)](Result<OpenedStream*> opened) mutable {
          if (opened && (*opened)->groups) return op(*(*opened)->groups, std::move(reply));
          Error error = opened ? Error{ErrorCode::kInvalidArgument,
                                       "this broker has no durable storage for this stream, so it "
                                       "serves no consumer groups"}
                               : opened.error();
          reply([error](ClientSession* self) {
            if (self != nullptr) self->SendError(ProtocolCodeFor(error), error.message);
          });
        });
      });
  if (!posted) SendError(Code(ProtocolErrorCode::kShardUnavailable), "broker is stopping");
}

bool ClientSession::HandleGroupRequest(const flx1::Message& message, bool* keep_reading) {
  using Action = auth::Action;
  auto ScopeOf = [](const auto& m) {
    return GroupScope{m.tenant_id, m.namespace_, m.stream, m.group, m.shard};
  };
  // Answers a settle (cache_ok) or its refusal.
  auto settle_reply = [](uint64_t request_id) {
    return [request_id](GroupResult<void> result) -> GroupReply {
      return [request_id, result = std::move(result)](ClientSession* self) {
        if (self == nullptr) return;
        if (!result) return self->SendGroupError(result.error());
        self->Send(flx1::CacheOk{request_id});
      };
    };
  };

  if (auto* m = std::get_if<flx1::GroupPoll>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupConsume, keep_reading);
    if (!handle) return true;
    if (m->consumer && (m->consumer->empty() || m->consumer->size() > 128)) {
      SendError(Code(ProtocolErrorCode::kInvalidRequest),
                "group poll not served: consumer must be 1-128 bytes");
      return true;
    }
    GroupPollRequest request;
    request.max_records = m->max_records;
    request.wait = std::chrono::milliseconds(m->wait_ms);
    request.visibility = std::chrono::milliseconds(m->visibility_ms.value_or(0));
    if (m->consumer) {
      // A member is the consumer name scoped to the authenticated principal (semantics.md §9).
      request.member.member = auth_->subject + '\0' + *m->consumer;
      request.member.connection = connection_->id;
      request.reclaim = m->reclaim.value_or(false);
    }
    std::string group = m->group;
    uint64_t request_id = m->request_id;
    Executor* executor = handle->executor;
    RunGroupOp(*handle, [group, request, request_id, executor](StreamGroups& groups,
                                                               LoopReply reply) {
      auto* owner = &groups;
      groups.Poll(
          group, request,
          [group, request_id, reply = std::move(reply), executor, owner](auto result) {
            reply([group, request_id, executor, owner,
                   result = std::move(result)](ClientSession* self) mutable {
              if (self == nullptr) {
                // Nobody will see these records: hand them back without counting the attempt.
                if (!result || result->empty()) return;
                std::vector<std::pair<Offset, uint32_t>> claims;
                for (const auto& d : *result) claims.emplace_back(d.offset, d.attempts);
                executor->Post([owner, group, claims] { owner->Release(group, claims); });
                return;
              }
              if (!result) return self->SendGroupError(result.error());
              // Optional record fields only for clients that offered their bit (§6.7); a
              // `publisher` only where one was stored (FELIX_RECORD_PUBLISHERS).
              const bool skipped = (self->peer_features_ & flx1::kFeatureGroupSkipped) != 0;
              const bool publishers = (self->peer_features_ & flx1::kFeatureGroupPublisher) != 0;
              const bool timestamps = (self->peer_features_ & flx1::kFeatureRecordTimestamps) != 0;
              // Encoded from the log's read buffers the deliveries hold: no copy per record.
              std::vector<flx1::GroupRecordView> records(result->size());
              for (size_t i = 0; i < records.size(); ++i) {
                const GroupDelivery& d = (*result)[i];
                flx1::GroupRecordView& record = records[i];
                record.offset = d.offset.value();
                record.payload = d.payload;
                record.attempts = d.attempts;
                if (skipped && d.skipped_before != 0) record.skipped_before = d.skipped_before;
                if (timestamps) record.timestamp_micros = d.timestamp_micros;
                if (publishers && !d.publisher.empty()) {
                  record.publisher = std::string_view(
                      reinterpret_cast<const char*>(d.publisher.data()), d.publisher.size());
                }
              }
              self->Send(flx1::GroupRecordsView{records, request_id});
            });
          });
    });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupAck>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupConsume, keep_reading);
    if (!handle) return true;
    RunGroupOp(*handle,
               [group = m->group, offset = Offset(m->offset), make = settle_reply(m->request_id)](
                   StreamGroups& groups, LoopReply reply) {
                 groups.Ack(group, offset, [make, reply = std::move(reply)](GroupResult<void> r) {
                   reply(make(std::move(r)));
                 });
               });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupNack>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupConsume, keep_reading);
    if (!handle) return true;
    auto delay = std::chrono::milliseconds(m->delay_ms.value_or(0));
    RunGroupOp(*handle, [group = m->group, offset = Offset(m->offset), delay,
                         attempts = m->attempts.value_or(0), make = settle_reply(m->request_id)](
                            StreamGroups& groups, LoopReply reply) {
      groups.Nack(
          group, offset, delay, attempts,
          [make, reply = std::move(reply)](GroupResult<void> r) { reply(make(std::move(r))); });
    });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupExtend>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupConsume, keep_reading);
    if (!handle) return true;
    RunGroupOp(*handle, [group = m->group, offset = Offset(m->offset), attempts = m->attempts,
                         extend = std::chrono::milliseconds(m->extend_ms),
                         request_id = m->request_id](StreamGroups& groups, LoopReply reply) {
      groups.Extend(group, offset, attempts, extend,
                    [request_id, reply = std::move(reply)](GroupResult<uint64_t> r) {
                      reply([request_id, r = std::move(r)](ClientSession* self) {
                        if (self == nullptr) return;
                        if (!r) return self->SendGroupError(r.error());
                        self->Send(flx1::GroupExtended{*r, request_id});
                      });
                    });
    });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupDeadLetter>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupConsume, keep_reading);
    if (!handle) return true;
    RunGroupOp(
        *handle, [group = m->group, offset = Offset(m->offset), make = settle_reply(m->request_id)](
                     StreamGroups& groups, LoopReply reply) {
          groups.DeadLetter(group, offset, [make, reply = std::move(reply)](GroupResult<void> r) {
            reply(make(std::move(r)));
          });
        });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupDeadLetters>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupConsume, keep_reading);
    if (!handle) return true;
    RunGroupOp(*handle, [group = m->group, request_id = m->request_id](StreamGroups& groups,
                                                                       LoopReply reply) {
      groups.ListDeadLetters(
          group, [request_id, reply = std::move(reply)](GroupResult<std::vector<Offset>> r) {
            reply([request_id, r = std::move(r)](ClientSession* self) {
              if (self == nullptr) return;
              if (!r) return self->SendGroupError(r.error());
              std::vector<uint64_t> offsets;
              offsets.reserve(r->size());
              for (const Offset o : *r) offsets.push_back(o.value());
              self->Send(flx1::GroupDeadLetterList{std::move(offsets), request_id});
            });
          });
    });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupRedrive>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupManage, keep_reading);
    if (!handle) return true;
    RunGroupOp(
        *handle, [group = m->group, offset = Offset(m->offset), make = settle_reply(m->request_id)](
                     StreamGroups& groups, LoopReply reply) {
          groups.Redrive(group, offset, [make, reply = std::move(reply)](GroupResult<void> r) {
            reply(make(std::move(r)));
          });
        });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupDiscard>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupManage, keep_reading);
    if (!handle) return true;
    RunGroupOp(
        *handle, [group = m->group, offset = Offset(m->offset), make = settle_reply(m->request_id)](
                     StreamGroups& groups, LoopReply reply) {
          groups.Discard(group, offset, [make, reply = std::move(reply)](GroupResult<void> r) {
            reply(make(std::move(r)));
          });
        });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupDescribe>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupConsume, keep_reading);
    if (!handle) return true;
    RunGroupOp(*handle, [group = m->group, request_id = m->request_id](StreamGroups& groups,
                                                                       LoopReply reply) {
      groups.Describe(group,
                      [request_id, reply = std::move(reply)](GroupResult<GroupDescription> r) {
                        reply([request_id, r = std::move(r)](ClientSession* self) {
                          if (self == nullptr) return;
                          if (!r) return self->SendGroupError(r.error());
                          flx1::GroupInfo info;
                          info.committed = ValueOf(r->committed);
                          info.tail = r->tail.value();
                          info.in_flight = r->in_flight;
                          info.owed = r->owed;
                          info.dead_letters = r->dead_letters;
                          info.request_id = request_id;
                          self->Send(info);
                        });
                      });
    });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupSeek>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupManage, keep_reading);
    if (!handle) return true;
    GroupSeekTarget target;
    switch (m->start.kind) {
      case flx1::StartPosition::Kind::kEarliest:
        target.kind = GroupSeekTarget::Kind::kEarliest;
        break;
      case flx1::StartPosition::Kind::kLatest:
        target.kind = GroupSeekTarget::Kind::kLatest;
        break;
      case flx1::StartPosition::Kind::kOffset:
        target.kind = GroupSeekTarget::Kind::kOffset;
        target.offset = Offset(m->start.offset);
        break;
    }
    RunGroupOp(*handle, [group = m->group, target, if_new = m->if_new, request_id = m->request_id](
                            StreamGroups& groups, LoopReply reply) {
      groups.Seek(group, target, if_new,
                  [request_id, reply = std::move(reply)](GroupResult<std::pair<Offset, bool>> r) {
                    reply([request_id, r = std::move(r)](ClientSession* self) {
                      if (self == nullptr) return;
                      if (!r) return self->SendGroupError(r.error());
                      self->Send(flx1::GroupPosition{r->first.value(), r->second, request_id});
                    });
                  });
    });
    return true;
  }
  if (auto* m = std::get_if<flx1::GroupDelete>(&message)) {
    auto handle = OpenGroupShard(ScopeOf(*m), Action::kGroupManage, keep_reading);
    if (!handle) return true;
    RunGroupOp(*handle, [group = m->group, request_id = m->request_id](StreamGroups& groups,
                                                                       LoopReply reply) {
      groups.Delete(group, [request_id, reply = std::move(reply)](GroupResult<bool> r) {
        reply([request_id, r = std::move(r)](ClientSession* self) {
          if (self == nullptr) return;
          if (!r) return self->SendGroupError(r.error());
          self->Send(flx1::GroupDeleted{*r, request_id});
        });
      });
    });
    return true;
  }
  return false;
}

}  // namespace felix::broker
