// Client cache and counter calls (client-protocol.md §6.5–6.6) on pooled cache streams.
//
// A `error` answer carries no request id, so each cache stream ("lane") has at most one request
// in flight: an answer, error or not, then belongs to that request without doubt. Concurrent
// callers get lanes of their own (opened on demand, each authenticated with the client's
// token; idle ones are kept for reuse). A lane that answered `error`, or that the broker
// ended, is not reused.
#include <deque>
#include <future>
#include <vector>

#include "client/answer_wait.h"
#include "client/connection_port.h"
#include "client/error_mapping.h"
#include "client/frame_reader.h"
#include "client/router.h"
#include "felix/client.h"
#include "wire/flx1/frame.h"

namespace felix {

namespace flx1 = wire::flx1;

namespace client_impl {
namespace {

// As many lanes as callers commonly share one Client: a lane dropped while idle costs its next
// caller a new stream and an `auth` round trip (docs/performance.md, change 55).
constexpr size_t kMaxIdleLanes = 64;

using Answer = ClientResult<flx1::Message>;
using AnswerCallback = std::function<void(Answer)>;

ClientError Error(ClientErrorCode code, std::string message) {
  return MakeClientError(code, std::move(message));
}

}  // namespace

class CacheChannel : public std::enable_shared_from_this<CacheChannel> {
 public:
  explicit CacheChannel(ConnectionPort& port) : port_(port) {}

  // Any thread: sends the request (already encoded, carrying `request_id`) and waits.
  Answer Call(uint64_t request_id, std::vector<uint8_t> frame, RetryClass timeout_class);
  uint64_t NextRequestId() { return next_request_id_++; }
  ConnectionPort& port() { return port_; }

  void Shutdown(const ClientError& why);

 private:
  struct Lane {
    std::shared_ptr<transport::Stream> stream;
    FrameReader reader;
    bool authenticated = false;
    bool dead = false;
    std::optional<uint64_t> request_id;
    AnswerCallback callback;
    explicit Lane(uint32_t max_frame) : reader(max_frame) {}
  };

  // Loop thread.
  void Send(uint64_t request_id, const std::vector<uint8_t>& frame, AnswerCallback callback);
  void OnData(const std::shared_ptr<Lane>& lane, transport::Stream& stream,
              std::span<const uint8_t> data);
  FrameReader::Verdict OnFrame(const std::shared_ptr<Lane>& lane, uint16_t flags,
                               std::span<const uint8_t> payload);
  void Complete(const std::shared_ptr<Lane>& lane, Answer answer, bool reusable);
  void Kill(const std::shared_ptr<Lane>& lane, const ClientError& why);

  ConnectionPort& port_;
  std::atomic<uint64_t> next_request_id_{1};
  // Loop thread only.
  std::vector<std::shared_ptr<Lane>> idle_;
  std::vector<std::shared_ptr<Lane>> busy_;
  bool shut_down_ = false;
  std::optional<ClientError> shutdown_reason_;
};

std::shared_ptr<CacheChannel> MakeCacheChannel(ConnectionPort& port) {
  return std::make_shared<CacheChannel>(port);
}

void ShutdownCacheChannel(CacheChannel& channel, const ClientError& why) {
  channel.Shutdown(why);
}

Answer CacheChannel::Call(uint64_t request_id, std::vector<uint8_t> frame,
                          RetryClass timeout_class) {
  auto answer = std::make_shared<AnswerSlot<Answer>>();
  auto self = shared_from_this();
  const auto timeout = port_.client_options().request_timeout;
  bool posted = false;
  auto send = [&] {
    posted = port_.PostToLoop([self, request_id, frame = std::move(frame), answer] {
      self->Send(request_id, frame, [answer](Answer a) { answer->Set(std::move(a)); });
    });
  };
  // ClientOptions::caller_runs_io: this thread sends and reads the answer itself; otherwise
  // (or while another caller drives) the loop thread does, and this one waits.
  const bool ready = SendAndAwait(
      &port_, send, [&] { return posted; }, *answer, port_.client_options().spin_wait, timeout);
  if (!posted) return tl::unexpected(Error(ClientErrorCode::kClosed, "the client was closed"));
  if (!ready) {
    ClientError e = Error(ClientErrorCode::kTimeout,
                          "no answer within " + std::to_string(timeout.count()) + " ms");
    e.retry = timeout_class;
    return tl::unexpected(e);
  }
  return answer->Take();
}

void CacheChannel::Send(uint64_t request_id, const std::vector<uint8_t>& frame,
                        AnswerCallback callback) {
  if (shut_down_) {
    return callback(tl::unexpected(
        shutdown_reason_.value_or(Error(ClientErrorCode::kClosed, "the client was closed"))));
  }
  std::shared_ptr<Lane> lane;
  while (!idle_.empty() && !lane) {
    lane = idle_.back();
    idle_.pop_back();
    if (lane->dead) lane.reset();
  }
  if (!lane) {
    auto stream = port_.OpenAuthenticatedStream();
    if (!stream) return callback(tl::unexpected(stream.error()));
    lane = std::make_shared<Lane>(port_.client_options().max_frame_bytes);
    lane->stream = *stream;
    std::weak_ptr<CacheChannel> weak = weak_from_this();
    std::weak_ptr<Lane> weak_lane = lane;
    auto with = [weak, weak_lane](auto fn) {
      auto self = weak.lock();
      auto l = weak_lane.lock();
      if (self && l) fn(*self, l);
    };
    lane->stream->SetHandlers(transport::StreamHandlers{
        .on_data =
            [with](transport::Stream& s, std::span<const uint8_t> data) {
              with([&](CacheChannel& self, const std::shared_ptr<Lane>& l) {
                self.OnData(l, s, data);
              });
            },
        .on_fin =
            [with](transport::Stream&) {
              with([](CacheChannel& self, const std::shared_ptr<Lane>& l) {
                self.Kill(l,
                          Error(ClientErrorCode::kTransport, "the broker ended the cache stream"));
              });
            },
        .on_reset =
            [with](transport::Stream&, uint64_t code) {
              with([code](CacheChannel& self, const std::shared_ptr<Lane>& l) {
                self.Kill(l,
                          Error(ClientErrorCode::kTransport,
                                "the cache stream was reset (code " + std::to_string(code) + ")"));
              });
            },
        .on_writable = nullptr,
    });
  }
  lane->request_id = request_id;
  lane->callback = std::move(callback);
  busy_.push_back(lane);
  if (auto wrote = lane->stream->Write(frame); !wrote) {
    Kill(lane, FromTransport(wrote.error(), "send", RetryClass::kOutcomeUnknown));
  }
}

void CacheChannel::OnData(const std::shared_ptr<Lane>& lane, transport::Stream& stream,
                          std::span<const uint8_t> data) {
  auto fed = lane->reader.Feed(data, [this, &lane](uint16_t flags, std::span<const uint8_t> p) {
    return OnFrame(lane, flags, p);
  });
  if (fed.consume) stream.Consume(fed.consume);
  if (fed.error) {
    stream.Reset(0);
    Kill(lane, *fed.error);
  }
}

FrameReader::Verdict CacheChannel::OnFrame(const std::shared_ptr<Lane>& lane, uint16_t flags,
                                           std::span<const uint8_t> payload) {
  auto frame = flx1::DecodePayload(flags, payload);
  if (!frame || !std::holds_alternative<flx1::Message>(*frame)) {
    ClientError why = frame ? Error(ClientErrorCode::kProtocol, "unexpected binary frame")
                            : FromDecode(frame.error(), "cache stream");
    Complete(lane, tl::unexpected(why), false);
    return FrameReader::Verdict::kStop;
  }
  flx1::Message& message = std::get<flx1::Message>(*frame);
  if (std::holds_alternative<flx1::AuthOk>(message) || std::holds_alternative<flx1::Ok>(message)) {
    if (!lane->authenticated) {
      lane->authenticated = true;
      return FrameReader::Verdict::kAccept;
    }
    // A best-effort put's `ok` (this client always sends request ids): treat as its answer.
  }
  if (auto* error = std::get_if<flx1::Error>(&message)) {
    Complete(lane, tl::unexpected(FromErrorMessage(*error, RetryClass::kFatal)), false);
    return FrameReader::Verdict::kAccept;
  }
  if (auto* not_leader = std::get_if<flx1::NotLeader>(&message)) {
    Complete(lane, tl::unexpected(FromNotLeader(*not_leader)), false);
    return FrameReader::Verdict::kAccept;
  }
  std::optional<uint64_t> id;
  std::visit(
      [&id](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, flx1::CacheValue>) {
          id = m.request_id;
        } else if constexpr (std::is_same_v<M, flx1::CacheOk> ||
                             std::is_same_v<M, flx1::CounterValue>) {
          id = m.request_id;
        } else if constexpr (std::is_same_v<M, flx1::Unsupported>) {
          id = m.request_id;
        }
      },
      message);
  if (!id || id != lane->request_id) {
    Complete(lane,
             tl::unexpected(Error(ClientErrorCode::kProtocol,
                                  "unexpected answer on the cache stream: " +
                                      std::string(std::visit(
                                          [](const auto& m) -> std::string_view {
                                            using M = std::decay_t<decltype(m)>;
                                            if constexpr (std::is_same_v<M, flx1::UnknownMessage>)
                                              return m.type;
                                            else
                                              return M::kType;
                                          },
                                          message)))),
             false);
    return FrameReader::Verdict::kAccept;
  }
  Complete(lane, std::move(message), true);
  return FrameReader::Verdict::kAccept;
}

void CacheChannel::Complete(const std::shared_ptr<Lane>& lane, Answer answer, bool reusable) {
  AnswerCallback callback = std::move(lane->callback);
  lane->callback = nullptr;
  lane->request_id.reset();
  std::erase(busy_, lane);
  if (reusable && !lane->dead && !shut_down_ && idle_.size() < kMaxIdleLanes) {
    idle_.push_back(lane);
  } else if (!lane->dead) {
    lane->dead = true;
    lane->stream->Finish();
  }
  if (callback) callback(std::move(answer));
}

void CacheChannel::Kill(const std::shared_ptr<Lane>& lane, const ClientError& why) {
  lane->dead = true;
  std::erase(idle_, lane);
  if (lane->callback) {
    ClientError failure = why;
    if (failure.code == ClientErrorCode::kTransport) failure.retry = RetryClass::kOutcomeUnknown;
    AnswerCallback callback = std::move(lane->callback);
    lane->callback = nullptr;
    std::erase(busy_, lane);
    callback(tl::unexpected(failure));
  }
  std::erase(busy_, lane);
  // The stream's handlers hold only weak references: dropping the lane releases it.
}

void CacheChannel::Shutdown(const ClientError& why) {
  if (shut_down_) return;
  shut_down_ = true;
  shutdown_reason_ = why;
  auto busy = std::move(busy_);
  busy_.clear();
  for (auto& lane : busy) Kill(lane, why);
  for (auto& lane : idle_) lane->dead = true;
  idle_.clear();
}

}  // namespace client_impl

// ---- CacheRef ----

ClientResult<CacheRef> CacheRef::Parse(std::string_view text) {
  CacheRef ref;
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) {
    ref.cache = std::string(text);
  } else {
    ref.namespace_name = std::string(text.substr(0, slash));
    ref.cache = std::string(text.substr(slash + 1));
  }
  if (ref.cache.empty() || ref.namespace_name.empty() || ref.cache.find('/') != std::string::npos) {
    return tl::unexpected(
        MakeClientError(ClientErrorCode::kInvalidArgument,
                        "cache '" + std::string(text) + "': expected cache or namespace/cache"));
  }
  return ref;
}

std::string CacheRef::ToString() const {
  return namespace_name + "/" + cache;
}

// ---- Client methods ----

namespace {

struct Request {
  const ClientOptions* options;
  uint32_t features;  // of the broker Connect reached (every broker of a cluster serves alike)
  uint64_t id;
};

ClientResult<Request> Prepare(Client::Router& router, const CacheRef& cache, uint32_t needs_feature,
                              const char* what) {
  auto home = router.Home();
  auto& channel = client_impl::CacheChannelOf(*home);
  if (cache.cache.empty() || cache.namespace_name.empty())
    return tl::unexpected(
        MakeClientError(ClientErrorCode::kInvalidArgument, "empty namespace or cache name"));
  uint32_t features = channel.port().server_features();
  if (needs_feature != 0 && (features & needs_feature) == 0)
    return tl::unexpected(MakeClientError(ClientErrorCode::kUnsupported,
                                          std::string("the broker does not serve ") + what));
  return Request{&router.options(), features, channel.NextRequestId()};
}

// Sends `message` to the owner of `key`'s shard (router.h) and waits for its answer.
// `idempotent`: may be resent when its outcome is unknown; `write`: such an outcome is
// reported as kIndeterminate.
ClientResult<flx1::Message> Roundtrip(Client::Router& router, const CacheRef& cache,
                                      std::string_view key, uint64_t id, flx1::Message message,
                                      RetryClass timeout_class, bool idempotent, bool write) {
  auto frame = flx1::EncodeMessageFrame(message);
  if (!frame)
    return tl::unexpected(MakeClientError(ClientErrorCode::kInvalidArgument,
                                          "cache request: " + frame.error().message));
  Client::Router::Target target{{client_impl::NameKind::kCache, cache.namespace_name, cache.cache},
                                std::nullopt,
                                std::string(key),
                                true};
  return router.Call<flx1::Message>(
      target, idempotent, write, [&](Client::Impl& conn) -> ClientResult<flx1::Message> {
        auto answer = client_impl::CacheChannelOf(conn).Call(id, *frame, timeout_class);
        if (!answer) return answer;
        if (auto* unsupported = std::get_if<flx1::Unsupported>(&*answer)) {
          return tl::unexpected(
              MakeClientError(ClientErrorCode::kUnsupported,
                              "the broker does not serve " + unsupported->request_type));
        }
        return answer;
      });
}

template <typename T>
ClientResult<T> Expect(ClientResult<flx1::Message> answer) {
  if (!answer) return tl::unexpected(answer.error());
  if (auto* typed = std::get_if<T>(&*answer)) return std::move(*typed);
  return tl::unexpected(MakeClientError(ClientErrorCode::kProtocol,
                                        std::string("expected ") + std::string(T::kType)));
}

std::optional<std::string> ValueOf(const flx1::CacheValue& value) {
  if (!value.value) return std::nullopt;
  return std::string(value.value->begin(), value.value->end());
}

}  // namespace

ClientResult<void> Client::CachePut(const CacheRef& cache, std::string_view key,
                                    std::string_view value,
                                    std::optional<std::chrono::milliseconds> ttl) {
  auto request = Prepare(*router_, cache, 0, "cache_put");
  if (!request) return tl::unexpected(request.error());
  if (ttl && ttl->count() < 0)
    return tl::unexpected(MakeClientError(ClientErrorCode::kInvalidArgument, "negative ttl"));
  flx1::CachePut put;
  put.tenant_id = request->options->tenant_id;
  put.namespace_ = cache.namespace_name;
  put.cache = cache.cache;
  put.key = std::string(key);
  put.value = flx1::Bytes(value.begin(), value.end());
  put.request_id = request->id;
  if (ttl) put.ttl_ms = static_cast<uint64_t>(ttl->count());
  uint64_t id = *put.request_id;
  // Not resent after a lost answer: a second put would restart the entry's TTL.
  auto ok = Expect<flx1::CacheOk>(Roundtrip(*router_, cache, key, id, std::move(put),
                                            RetryClass::kOutcomeUnknown, false, true));
  if (!ok) return tl::unexpected(ok.error());
  return {};
}

ClientResult<std::optional<std::string>> Client::CacheGet(const CacheRef& cache,
                                                          std::string_view key) {
  auto request = Prepare(*router_, cache, 0, "cache_get");
  if (!request) return tl::unexpected(request.error());
  flx1::CacheGet get;
  get.tenant_id = request->options->tenant_id;
  get.namespace_ = cache.namespace_name;
  get.cache = cache.cache;
  get.key = std::string(key);
  get.request_id = request->id;
  uint64_t id = *get.request_id;
  auto value = Expect<flx1::CacheValue>(
      Roundtrip(*router_, cache, key, id, std::move(get), RetryClass::kRetry, true, false));
  if (!value) return tl::unexpected(value.error());
  return ValueOf(*value);
}

ClientResult<std::optional<std::string>> Client::CacheDelete(const CacheRef& cache,
                                                             std::string_view key) {
  auto request = Prepare(*router_, cache, flx1::kFeatureCacheDelete, "cache_delete");
  if (!request) return tl::unexpected(request.error());
  flx1::CacheDelete del;
  del.tenant_id = request->options->tenant_id;
  del.namespace_ = cache.namespace_name;
  del.cache = cache.cache;
  del.key = std::string(key);
  del.request_id = request->id;
  uint64_t id = *del.request_id;
  // Not resent after a lost answer: between the two, another client's put may land, and the
  // second delete would erase it (and answer that put's value as the one deleted) — not
  // linearizable (fault-run seeds 40, 53, 60, 65: Porcupine). A lost answer is kIndeterminate.
  auto value = Expect<flx1::CacheValue>(Roundtrip(*router_, cache, key, id, std::move(del),
                                                  RetryClass::kOutcomeUnknown, false, true));
  if (!value) return tl::unexpected(value.error());
  return ValueOf(*value);
}

ClientResult<int64_t> Client::CounterAdd(const CacheRef& cache, std::string_view key,
                                         int64_t delta) {
  auto request = Prepare(*router_, cache, flx1::kFeatureCounters, "counter_add");
  if (!request) return tl::unexpected(request.error());
  flx1::CounterAdd add;
  add.tenant_id = request->options->tenant_id;
  add.namespace_ = cache.namespace_name;
  add.cache = cache.cache;
  add.key = std::string(key);
  add.delta = delta;
  add.request_id = request->id;
  uint64_t id = add.request_id;
  // Not resent after a lost answer: it would count twice.
  auto value = Expect<flx1::CounterValue>(Roundtrip(*router_, cache, key, id, std::move(add),
                                                    RetryClass::kOutcomeUnknown, false, true));
  if (!value) return tl::unexpected(value.error());
  if (!value->value)
    return tl::unexpected(
        MakeClientError(ClientErrorCode::kProtocol, "counter_value without a value after an add"));
  return *value->value;
}

ClientResult<std::optional<int64_t>> Client::CounterGet(const CacheRef& cache,
                                                        std::string_view key) {
  auto request = Prepare(*router_, cache, flx1::kFeatureCounters, "counter_get");
  if (!request) return tl::unexpected(request.error());
  flx1::CounterGet get;
  get.tenant_id = request->options->tenant_id;
  get.namespace_ = cache.namespace_name;
  get.cache = cache.cache;
  get.key = std::string(key);
  get.request_id = request->id;
  uint64_t id = get.request_id;
  auto value = Expect<flx1::CounterValue>(
      Roundtrip(*router_, cache, key, id, std::move(get), RetryClass::kRetry, true, false));
  if (!value) return tl::unexpected(value.error());
  return value->value;
}

}  // namespace felix
