// ClientSession's cache and counter requests (client-protocol.md §6.5–6.6, semantics.md §10):
// authorization by the cache-key rule (auth.md §6.3–6.4), routing by the frozen shard hash
// (shard_modulo over the cache's shard count), execution on the shard's executor — or, for a
// key another broker owns, on that owner through the service's CacheForwarder (semantics.md
// §10 "any broker forwards operations to the owner") — answers by request id in completion
// order. Both ways run the same CacheCommand (broker/cache_path.h).
#include <spdlog/spdlog.h>

#include "broker/client_metrics.h"
#include "broker/client_session.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

namespace {

flx1::Bytes ToBytes(const std::string& text) {
  return flx1::Bytes(text.begin(), text.end());
}

std::string ToString(const flx1::Bytes& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

uint32_t CacheFeatures(const ClientServiceOptions& options) {
  uint32_t features =
      flx1::kFeatureCacheDelete | flx1::kFeatureCacheShards | flx1::kFeatureCacheConditional;
  if (options.durable_storage) {
    // Watches read the cache log: only log-backed (durable) caches serve them (§7).
    features |=
        flx1::kFeatureCounters | flx1::kFeatureCacheWatch | flx1::kFeatureCacheWatchRetained;
  }
  return features;
}

std::optional<bool> ClientSession::HandleCacheRequest(const flx1::Message& message) {
  using Op = CacheCommand::Op;
  if (auto* put = std::get_if<flx1::CachePut>(&message)) {
    CacheCommand command{Op::kPut, put->key, ToString(put->value), put->ttl_ms, 0};
    auto request_id = put->request_id;
    return ServeCacheCommand(put->tenant_id, put->namespace_, put->cache, std::move(command),
                             !request_id,
                             [request_id](ClientSession& session, const CacheCommandResult&) {
                               if (request_id) return session.Send(flx1::CacheOk{*request_id});
                               session.Send(flx1::Ok{});
                             });
  }
  const bool is_get = std::holds_alternative<flx1::CacheGet>(message);
  if (is_get || std::holds_alternative<flx1::CacheDelete>(message)) {
    // CacheGet and CacheDelete share their fields; both answer cache_value.
    flx1::CacheValue answer;
    if (is_get) {
      const auto& m = std::get<flx1::CacheGet>(message);
      answer = flx1::CacheValue{m.tenant_id, m.namespace_, m.cache, m.key, {}, m.request_id, {}};
    } else {
      const auto& m = std::get<flx1::CacheDelete>(message);
      answer = flx1::CacheValue{m.tenant_id, m.namespace_, m.cache, m.key, {}, m.request_id, {}};
    }
    CacheCommand command{is_get ? Op::kGet : Op::kDelete, answer.key, {}, std::nullopt, 0};
    // §6.5: a hit's version only to a client that offered CACHE_CONDITIONAL.
    command.want_version = is_get && (peer_features_ & flx1::kFeatureCacheConditional) != 0;
    std::string tenant = answer.tenant_id, ns = answer.namespace_, cache = answer.cache;
    return ServeCacheCommand(tenant, ns, cache, std::move(command), !answer.request_id,
                             [answer](ClientSession& session, const CacheCommandResult& result) {
                               flx1::CacheValue out = answer;
                               if (result.value) out.value = ToBytes(*result.value);
                               if (result.value) out.version = result.version;
                               session.Send(std::move(out));
                             });
  }
  auto answer_sum = [](uint64_t request_id) {
    return [request_id](ClientSession& session, const CacheCommandResult& result) {
      session.Send(flx1::CounterValue{result.sum, request_id});
    };
  };
  if (auto* add = std::get_if<flx1::CounterAdd>(&message)) {
    CacheCommand command{Op::kCounterAdd, add->key, {}, std::nullopt, add->delta};
    return ServeCacheCommand(add->tenant_id, add->namespace_, add->cache, std::move(command), false,
                             answer_sum(add->request_id));
  }
  if (auto* get = std::get_if<flx1::CounterGet>(&message)) {
    CacheCommand command{Op::kCounterGet, get->key, {}, std::nullopt, 0};
    return ServeCacheCommand(get->tenant_id, get->namespace_, get->cache, std::move(command), false,
                             answer_sum(get->request_id));
  }
  if (auto* shards = std::get_if<flx1::CacheShards>(&message)) return HandleCacheShards(*shards);
  if (auto* watch = std::get_if<flx1::CacheWatch>(&message)) return HandleCacheWatch(*watch);
  return HandleConditionalCacheRequest(message);
}

std::optional<bool> ClientSession::HandleConditionalCacheRequest(const flx1::Message& message) {
  using Op = CacheCommand::Op;
  CacheCommand command;
  std::string tenant, ns, cache;
  uint64_t request_id = 0;
  if (auto* put = std::get_if<flx1::CachePutIf>(&message)) {
    command = CacheCommand{Op::kPut, put->key, ToString(put->value), put->ttl_ms, 0};
    command.condition =
        put->condition.kind == flx1::CacheCondition::Kind::kAbsent
            ? CacheCondition{CacheCondition::Type::kAbsent, 0}
            : CacheCondition{CacheCondition::Type::kVersion, put->condition.version};
    tenant = put->tenant_id, ns = put->namespace_, cache = put->cache;
    request_id = put->request_id;
  } else if (auto* del = std::get_if<flx1::CacheDeleteIf>(&message)) {
    command = CacheCommand{Op::kDelete, del->key, {}, std::nullopt, 0};
    command.condition = CacheCondition{CacheCondition::Type::kVersion, del->version};
    tenant = del->tenant_id, ns = del->namespace_, cache = del->cache;
    request_id = del->request_id;
  } else {
    return std::nullopt;
  }
  return ServeCacheCommand(
      tenant, ns, cache, std::move(command), false,
      [request_id](ClientSession& session, const CacheCommandResult& result) {
        session.Send(flx1::CacheConditionResult{result.applied, result.version, request_id});
      });
}

bool ClientSession::HandleCacheShards(const flx1::CacheShards& request) {
  if (request.tenant_id != auth_->tenant_id) {
    SendError(Code(ProtocolErrorCode::kForbidden), "tenant mismatch");
    FinishStream();
    return false;
  }
  flx1::CacheShardsView view;
  view.request_id = request.request_id;
  if (auto cache =
          service_.resolver().FindCache(request.tenant_id, request.namespace_, request.cache)) {
    view.shards = cache->shards;
  }
  Send(view);
  return true;
}

bool ClientSession::ServeCacheCommand(std::string_view tenant, std::string_view ns,
                                      std::string_view cache, CacheCommand command,
                                      bool single_shot, CacheResultAnswer answer) {
  if (const char* refusal = CacheAuthorizationRefusal(*auth_, CacheActionOf(command.op), tenant, ns,
                                                      cache, command.key)) {
    // A refused cache request ends the stream it came on (auth.md §6.4).
    SendError(Code(ProtocolErrorCode::kForbidden), refusal);
    FinishStream();
    return false;
  }
  auto resolved = service_.resolver().ResolveCacheKey(tenant, ns, cache, command.key);
  if (auto* error = std::get_if<Error>(&resolved)) {
    SendError(ProtocolCodeFor(*error), error->message);
    if (single_shot) FinishStream();  // its single answer was the refusal
    return !single_shot;
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    if (service_.cache_forwarder() != nullptr) {
      ForwardCacheCommand(*remote, tenant, ns, cache, std::move(command), single_shot,
                          std::move(answer));
      return true;
    }
    // No forwarder (a broker outside a cluster): the client learns the owner.
    SendNotLeader(*remote);
    if (single_shot) FinishStream();
    return !single_shot;
  }
  const auto& handle = std::get<LocalCacheShard>(resolved).handle;
  bool posted = RunOnShard(*handle.executor, [cell = handle.cell, command = std::move(command),
                                              answer, single_shot](auto reply) mutable {
    RunCacheCommandWhenOpen(
        *cell, std::move(command), [reply, answer, single_shot](Result<CacheCommandResult> result) {
          reply([answer, single_shot, result](ClientSession* self) {
            ClientSession::AnswerCacheCommand(self, result, single_shot, answer);
          });
        });
  });
  if (!posted) {
    SendCacheError(Error{ErrorCode::kUnavailable, "broker is stopping"});
    if (single_shot) FinishStream();
  }
  return true;
}

void ClientSession::ForwardCacheCommand(const RemoteShard& remote, std::string_view tenant,
                                        std::string_view ns, std::string_view cache,
                                        CacheCommand command, bool single_shot,
                                        CacheResultAnswer answer) {
  ForwardCacheRequest forward;
  forward.target = remote;
  forward.tenant = std::string(tenant);
  forward.ns = std::string(ns);
  forward.cache = std::string(cache);
  forward.command = std::move(command);
  forward.credential = auth_->raw_token;
  auto reply = PendingReply();
  service_.cache_forwarder()->ForwardCache(
      std::move(forward), [reply, answer, single_shot](ForwardCacheOutcome outcome) {
        reply([answer, single_shot, outcome = std::move(outcome)](ClientSession* self) {
          if (outcome.ok) {
            return ClientSession::AnswerCacheCommand(
                self, Result<CacheCommandResult>(outcome.result), single_shot, answer);
          }
          if (self == nullptr) return;
          if (!self->ended_) self->SendError(outcome.code, outcome.message);
          if (single_shot) self->FinishStream();
        });
      });
}

void ClientSession::AnswerCacheCommand(ClientSession* self,
                                       const Result<CacheCommandResult>& result, bool single_shot,
                                       const CacheResultAnswer& answer) {
  if (self == nullptr) return;  // the session is gone: nobody to answer
  if (!self->ended_) {
    if (result) {
      answer(*self, *result);
    } else {
      self->SendCacheError(result.error());
    }
  }
  if (single_shot) self->FinishStream();
}

void ClientSession::SendCacheError(const Error& error) {
  SendError(ProtocolCodeFor(error), error.message);
}

}  // namespace felix::broker
