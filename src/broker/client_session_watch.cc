// ClientSession's cache watches (client-protocol.md §6.5 `cache_watch`, §9.4; semantics.md §10
// "Watches"): the request is validated (exactly one of key and prefix; a prefix watch names a
// shard of a multi-shard cache; retained and from_offset are exclusive), authorized (cache.read
// on the key or the prefix, auth.md §6.3), routed (a key by its hash, a prefix by the shard it
// names; `not_leader` when another broker owns it: a watch is redirected, never forwarded),
// registered on the shard's executor (CacheShard::Watch, register-before-read), and answered
// `cache_watch_started` after the event stream opened with its hello. The request stream is
// read on (§8.3).
#include <spdlog/spdlog.h>

#include "broker/client_metrics.h"
#include "broker/client_session.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

namespace {

// Wakes a watch's writer; the writer is attached once the event stream is open.
struct WatchWriterSlot {
  std::mutex mu;
  std::weak_ptr<CacheWatchWriter> writer;
  void Set(const std::shared_ptr<CacheWatchWriter>& w) {
    std::lock_guard lock(mu);
    writer = w;
  }
  void Wake() {
    std::shared_ptr<CacheWatchWriter> w;
    {
      std::lock_guard lock(mu);
      w = writer.lock();
    }
    if (w) w->Wake();
  }
};

}  // namespace

bool ClientSession::HandleCacheWatch(const flx1::CacheWatch& request) {
  auto invalid = [this](std::string why) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest), std::move(why));
    return true;  // a validation error keeps the stream (§8.3)
  };
  if (request.key.has_value() == request.prefix.has_value()) {
    return invalid("cache_watch needs exactly one of key and prefix");
  }
  if (request.retained && request.from_offset) {
    return invalid("cache_watch: retained and from_offset are mutually exclusive");
  }
  CacheWatchFilter filter{request.prefix.has_value(),
                          request.prefix ? *request.prefix : *request.key};
  auth::CacheKey scope{filter.prefix ? auth::CacheKey::Kind::kPrefix : auth::CacheKey::Kind::kKey,
                       filter.text};
  if (request.tenant_id != auth_->tenant_id ||
      !auth_->permissions.AllowsCacheKey(auth::Action::kCacheRead, request.tenant_id,
                                         request.namespace_, request.cache, scope)) {
    SendError(Code(ProtocolErrorCode::kForbidden),
              request.tenant_id != auth_->tenant_id ? "tenant mismatch" : "forbidden");
    FinishStream();  // a refused request ends its stream (auth.md §6.4)
    return false;
  }
  auto cache = service_.resolver().FindCache(request.tenant_id, request.namespace_, request.cache);
  if (!cache) {
    SendError(Code(ProtocolErrorCode::kNotFound), "cache scope not found: " + request.tenant_id +
                                                      "/" + request.namespace_ + "/" +
                                                      request.cache);
    return true;
  }
  if (!cache->durable) {
    return invalid("cache watches need a durable (log-backed) cache; " + request.cache +
                   " is in memory");
  }
  uint32_t shard = 0;
  if (!filter.prefix) {
    shard = CacheShardForKey(*cache, filter.text);
  } else if (request.shard) {
    if (*request.shard >= cache->shards) {
      return invalid("cache_watch: shard " + std::to_string(*request.shard) + " is out of range (" +
                     request.cache + " has " + std::to_string(cache->shards) + " shards)");
    }
    shard = *request.shard;
  } else if (cache->shards > 1) {
    return invalid("cache_watch: a prefix watch on a cache with " + std::to_string(cache->shards) +
                   " shards must name its shard");
  }
  if (connection_->subscriptions >= service_.options().max_subscriptions_per_conn) {
    SendError(Code(ProtocolErrorCode::kLimitExceeded), "max subscriptions per connection exceeded");
    return true;
  }
  auto resolved = service_.resolver().ResolveCacheShard(request.tenant_id, request.namespace_,
                                                        request.cache, shard);
  if (auto* error = std::get_if<Error>(&resolved)) {
    SendError(ProtocolCodeFor(*error), error->message);
    return true;
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    SendNotLeader(*remote);  // a watch is redirected, never forwarded
    return true;
  }
  CacheWatchStart start;
  if (request.retained) {
    start.kind = CacheWatchStart::Kind::kRetained;
  } else if (request.from_offset) {
    start.kind = CacheWatchStart::Kind::kFromOffset;
    start.from_offset = Offset(*request.from_offset);
  }
  uint64_t client_id = request.subscription_id.value_or(service_.core().NextSubscriptionId());
  auto slot = std::make_shared<WatchWriterSlot>();
  CacheShardHandle handle = std::get<LocalCacheShard>(resolved).handle;
  bool posted = RunOnShard(*handle.executor, [handle, filter, start, slot, client_id](auto reply) {
    handle.cell->WhenOpen([=](Result<OpenedCache*> opened) {
      std::variant<CacheWatchRegistration, CursorError, Error> result =
          opened ? (*opened)->shard->Watch(filter, start, [slot] { slot->Wake(); })
                 : std::variant<CacheWatchRegistration, CursorError, Error>(opened.error());
      reply([handle, result = std::move(result), slot, client_id](ClientSession* self) mutable {
        if (self == nullptr) {
          if (auto* reg = std::get_if<CacheWatchRegistration>(&result)) {
            uint64_t id = reg->id;
            handle.executor->Post([cell = handle.cell, id] { cell->get()->shard->Unwatch(id); });
          }
          return;
        }
        self->OnCacheWatched(handle, std::move(result), slot, client_id);
      });
    });
  });
  if (!posted) {
    SendError(Code(ProtocolErrorCode::kShardUnavailable), "broker is stopping");
    return true;
  }
  ++connection_->subscriptions;
  return true;
}

void ClientSession::OnCacheWatched(const CacheShardHandle& handle,
                                   std::variant<CacheWatchRegistration, CursorError, Error> result,
                                   const std::shared_ptr<void>& slot_erased, uint64_t client_id) {
  auto slot = std::static_pointer_cast<WatchWriterSlot>(slot_erased);
  if (auto* cursor = std::get_if<CursorError>(&result)) {
    --connection_->subscriptions;
    flx1::SubscribeCursorError answer;  // §6.4: also the answer to a watch past the tail
    answer.reason = cursor->reason == CursorError::Reason::kTooOld
                        ? flx1::CursorErrorReason::kTooOld
                        : flx1::CursorErrorReason::kInFuture;
    answer.requested = cursor->requested.value();
    answer.available = cursor->available.value();
    if (!ended_) Send(answer);
    return;
  }
  if (auto* error = std::get_if<Error>(&result)) {
    --connection_->subscriptions;
    if (!ended_) SendError(ProtocolCodeFor(*error), error->message);
    return;
  }
  auto reg = std::get<CacheWatchRegistration>(std::move(result));
  auto unwatch = [&] {
    --connection_->subscriptions;
    uint64_t id = reg.id;
    handle.executor->Post([cell = handle.cell, id] { cell->get()->shard->Unwatch(id); });
  };
  transport::Connection* connection = stream_->connection();
  if (ended_ || connection == nullptr) {
    unwatch();
    return;
  }
  auto uni = connection->OpenUniStream();
  if (!uni) {
    unwatch();
    SendError(Code(ProtocolErrorCode::kLimitExceeded), "cannot open an event stream now");
    return;
  }
  auto writer =
      std::make_shared<CacheWatchWriter>(endpoint_, *uni, handle, reg.id, client_id, error_codes_);
  std::weak_ptr<ClientConnectionState> state = connection_;
  writer->on_stopped = [state] {
    if (auto s = state.lock()) --s->subscriptions;
  };
  slot->Set(writer);
  // §9.4: hello on the event stream, then cache_watch_started, then state/history and live.
  writer->Start(reg.queue);
  std::erase_if(connection_->watch_writers, [](const auto& weak) { return weak.expired(); });
  connection_->watch_writers.push_back(writer);
  flx1::CacheWatchStarted answer;
  answer.subscription_id = client_id;
  answer.resume_offset = reg.resume_offset.value();
  answer.resnapshot = reg.resnapshot;
  answer.retained_count = reg.retained_count;
  Send(answer);
}

}  // namespace felix::broker
