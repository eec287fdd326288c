// ClientSession's cache and counter requests (client-protocol.md §6.5–6.6, semantics.md §10):
// authorization by the cache-key rule (auth.md §6.3–6.4), routing by the frozen shard hash
// (shard_modulo over the cache's shard count), execution on the shard's executor, answers by
// request id in completion order.
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
  uint32_t features = flx1::kFeatureCacheDelete | flx1::kFeatureCacheShards;
  if (options.durable_storage) features |= flx1::kFeatureCounters;
  return features;
}

std::optional<bool> ClientSession::HandleCacheRequest(const flx1::Message& message) {
  bool keep_reading = true;
  if (auto* put = std::get_if<flx1::CachePut>(&message)) {
    bool single_shot = !put->request_id;
    auto handle = ResolveCacheShard(auth::Action::kCacheWrite, put->tenant_id, put->namespace_,
                                    put->cache, put->key, single_shot, &keep_reading);
    if (!handle) return keep_reading;
    PostCacheOp(*handle, single_shot,
                [key = put->key, value = ToString(put->value), ttl = put->ttl_ms,
                 request_id = put->request_id](CacheShard& shard, auto reply) mutable {
                  shard.Put(std::move(key), std::move(value), ttl,
                            [reply, request_id](Result<void> result) {
                              reply([result, request_id](ClientSession& session) {
                                if (!result) return session.SendCacheError(result.error());
                                if (request_id) return session.Send(flx1::CacheOk{*request_id});
                                session.Send(flx1::Ok{});
                              });
                            });
                });
    return true;
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
    bool single_shot = !answer.request_id;
    auto handle = ResolveCacheShard(is_get ? auth::Action::kCacheRead : auth::Action::kCacheWrite,
                                    answer.tenant_id, answer.namespace_, answer.cache, answer.key,
                                    single_shot, &keep_reading);
    if (!handle) return keep_reading;
    auto answer_with = [answer](const std::optional<std::string>& value) {
      flx1::CacheValue out = answer;
      if (value) out.value = ToBytes(*value);
      return [out = std::move(out)](ClientSession& session) { session.Send(out); };
    };
    if (is_get) {
      PostCacheOp(*handle, single_shot,
                  [answer_with, key = answer.key](CacheShard& shard, auto reply) {
                    reply(answer_with(shard.Get(key)));
                  });
    } else {
      PostCacheOp(
          *handle, single_shot, [answer_with, key = answer.key](CacheShard& shard, auto reply) {
            shard.Delete(key, [reply, answer_with](Result<std::optional<std::string>> removed) {
              if (!removed) {
                Error error = removed.error();
                return reply([error](ClientSession& s) { s.SendCacheError(error); });
              }
              reply(answer_with(*removed));
            });
          });
    }
    return true;
  }
  if (auto* add = std::get_if<flx1::CounterAdd>(&message)) {
    auto handle = ResolveCacheShard(auth::Action::kCacheWrite, add->tenant_id, add->namespace_,
                                    add->cache, add->key, false, &keep_reading);
    if (!handle) return keep_reading;
    PostCacheOp(*handle, false,
                [key = add->key, delta = add->delta, request_id = add->request_id](
                    CacheShard& shard, auto reply) mutable {
                  shard.CounterAdd(std::move(key), delta, [reply, request_id](Result<int64_t> sum) {
                    reply([sum, request_id](ClientSession& session) {
                      if (!sum) return session.SendCacheError(sum.error());
                      session.Send(flx1::CounterValue{*sum, request_id});
                    });
                  });
                });
    return true;
  }
  if (auto* get = std::get_if<flx1::CounterGet>(&message)) {
    auto handle = ResolveCacheShard(auth::Action::kCacheRead, get->tenant_id, get->namespace_,
                                    get->cache, get->key, false, &keep_reading);
    if (!handle) return keep_reading;
    PostCacheOp(*handle, false,
                [key = get->key, request_id = get->request_id](CacheShard& shard, auto reply) {
                  auto sum = shard.CounterGet(key);
                  reply([sum, request_id](ClientSession& session) {
                    if (!sum) return session.SendCacheError(sum.error());
                    session.Send(flx1::CounterValue{*sum, request_id});
                  });
                });
    return true;
  }
  if (auto* shards = std::get_if<flx1::CacheShards>(&message)) return HandleCacheShards(*shards);
  return std::nullopt;
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

std::optional<CacheShardHandle> ClientSession::ResolveCacheShard(
    auth::Action action, std::string_view tenant, std::string_view ns, std::string_view cache,
    std::string_view key, bool single_shot, bool* keep_reading) {
  const char* refusal = nullptr;
  if (tenant != auth_->tenant_id) {
    refusal = "tenant mismatch";
  } else if (!auth_->permissions.AllowsCacheKey(action, tenant, ns, cache,
                                                auth::CacheKey{auth::CacheKey::Kind::kKey, key})) {
    refusal = "forbidden";
  }
  if (refusal != nullptr) {
    // A refused cache request ends the stream it came on (auth.md §6.4).
    SendError(Code(ProtocolErrorCode::kForbidden), refusal);
    FinishStream();
    *keep_reading = false;
    return std::nullopt;
  }
  auto refuse = [&](uint16_t code, std::string message) -> std::optional<CacheShardHandle> {
    SendError(code, std::move(message));
    *keep_reading = !single_shot;
    if (single_shot) FinishStream();  // its single answer was the refusal
    return std::nullopt;
  };
  auto resolved = service_.resolver().ResolveCacheKey(tenant, ns, cache, key);
  if (auto* error = std::get_if<Error>(&resolved)) {
    return refuse(ProtocolCodeFor(*error), error->message);
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    // Until forwarding serves it, the client learns the owner (a redirect-class answer).
    SendNotLeader(*remote);
    *keep_reading = !single_shot;
    if (single_shot) FinishStream();
    return std::nullopt;
  }
  return std::get<LocalCacheShard>(resolved).handle;
}

void ClientSession::PostCacheOp(const CacheShardHandle& handle, bool single_shot, CacheOp op) {
  bool posted = RunOnShard(
      *handle.executor, [cell = handle.cell, op = std::move(op), single_shot](auto reply) {
        auto answer_on_loop = [reply, single_shot](CacheAnswer answer) {
          reply([single_shot, answer = std::move(answer)](ClientSession* self) {
            if (self == nullptr) return;
            if (!self->ended_) answer(*self);
            if (single_shot) self->FinishStream();
          });
        };
        cell->WhenOpen([op, answer_on_loop](Result<OpenedCache*> opened) {
          if (!opened) {
            return answer_on_loop(
                [error = opened.error()](ClientSession& self) { self.SendCacheError(error); });
          }
          op(*(*opened)->shard, answer_on_loop);
        });
      });
  if (!posted) {
    SendCacheError(Error{ErrorCode::kUnavailable, "broker is stopping"});
    if (single_shot) FinishStream();
  }
}

void ClientSession::SendCacheError(const Error& error) {
  SendError(ProtocolCodeFor(error), error.message);
}

}  // namespace felix::broker
