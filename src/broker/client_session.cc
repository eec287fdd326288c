#include "broker/client_session.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "broker/protocol_codes.h"
#include "broker/publish_path.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

namespace {

// Frames up to this size are handled in place in the transport's receive buffer; larger ones
// are assembled in the session as their bytes arrive (the stream window could not hold them).
constexpr size_t kInPlaceLimit = 256 * 1024;
// QUIC application code for a stream we abort on a protocol violation.
constexpr uint64_t kStreamProtocolError = 0x100;

constexpr uint16_t kServerFlags = flx1::kKnownFlags;  // every flag, as the reference (§3)

std::string_view TypeOf(const flx1::Message& message) {
  return std::visit(
      [](const auto& m) -> std::string_view {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, flx1::UnknownMessage>) {
          return m.type;
        } else {
          return T::kType;
        }
      },
      message);
}

// The request's `request_id`, when it carried one (a readable u64 for unknown types).
std::optional<uint64_t> RequestIdOf(const flx1::Message& message) {
  return std::visit(
      [](const auto& m) -> std::optional<uint64_t> {
        using T = std::decay_t<decltype(m)>;
        std::optional<uint64_t> id;
        if constexpr (std::is_same_v<T, flx1::UnknownMessage>) {
          id = m.request_id;
        } else {
          auto visit = [&id](std::string_view name, const auto& value, unsigned = 0) {
            using V = std::decay_t<decltype(value)>;
            if (name != "request_id") return;
            if constexpr (std::is_same_v<V, uint64_t> ||
                          std::is_same_v<V, std::optional<uint64_t>>) {
              id = value;
            }
          };
          T::Fields(m, visit);
        }
        return id;
      },
      message);
}

// Message types only a broker sends: a client sending one gets "unexpected message type".
bool IsBrokerToClientType(std::string_view type) {
  static constexpr std::string_view kTypes[] = {"auth_ok",
                                                "ok",
                                                "unsupported",
                                                "topology_view",
                                                "stream_shards_view",
                                                "cache_shards_view",
                                                "shard_owners_view",
                                                "not_leader",
                                                "publish_ok",
                                                "publish_error",
                                                "producer_init_ok",
                                                "publish_refused",
                                                "subscribed",
                                                "subscribe_cursor_error",
                                                "event_stream_hello",
                                                "event",
                                                "event_batch",
                                                "shard_moved",
                                                "subscription_lagged",
                                                "offset_value",
                                                "stream_records",
                                                "cache_value",
                                                "cache_ok",
                                                "cache_condition_result",
                                                "cache_watch_started",
                                                "cache_event",
                                                "cache_watch_lagged",
                                                "counter_value",
                                                "group_records",
                                                "group_extended",
                                                "group_dead_letter_list",
                                                "group_position",
                                                "group_info",
                                                "group_deleted",
                                                "commit_ok",
                                                "state_value",
                                                "shard_inspect_info",
                                                "subscriptions_list_info"};
  for (auto t : kTypes) {
    if (t == type) return true;
  }
  return false;
}

// Wakes a subscription's writer; the writer is attached once the event stream is open.
struct WriterSlot {
  std::mutex mu;
  std::weak_ptr<EventStreamWriter> writer;
  void Set(const std::shared_ptr<EventStreamWriter>& w) {
    std::lock_guard lock(mu);
    writer = w;
  }
  void Wake() {
    std::shared_ptr<EventStreamWriter> w;
    {
      std::lock_guard lock(mu);
      w = writer.lock();
    }
    if (w) w->Wake();
  }
};

}  // namespace

uint64_t NowMicrosRoundedToMillis() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  return static_cast<uint64_t>(ms) * 1000;  // storage keeps milliseconds: live == replayed
}

uint32_t ServerFeatures(const ClientServiceOptions& options) {
  uint32_t features =
      flx1::kFeatureStreamShards | flx1::kFeatureShardOwners | flx1::kFeatureIdempotentProducer |
      flx1::kFeatureSequenceReused | flx1::kFeatureErrorCodes | flx1::kFeatureUnsupported |
      flx1::kFeatureSubscribeQueue | flx1::kFeatureAckOnCommit | CacheFeatures(options);
  if (options.publish_window > 0) {
    features |= flx1::kFeaturePublishPipeline | flx1::kFeatureStreamPublishWindow;
  }
  if (options.cluster) features |= flx1::kFeatureTopology | flx1::kFeatureRedirect;
  if (options.durable_storage) {
    features |= flx1::kFeatureConsumerGroup | flx1::kFeatureGroupDeadLetters |
                flx1::kFeatureGroupAdmin | flx1::kFeatureGroupClaimControl |
                flx1::kFeatureSubscriptionLagged | flx1::kFeatureGroupConsumer |
                flx1::kFeatureGroupSkipped | flx1::kFeatureGroupPublisher |
                flx1::kFeatureRecordTimestamps;
  }
  // Advertised always, as the reference does (client-protocol.md §7): commits are served on
  // durable streams (refused on in-memory ones and, for now, in a cluster); `shard_moved` is
  // encoded per §6.4 but a standalone broker never moves a shard, so it never sends one.
  features |= flx1::kFeatureAtomicCommit | flx1::kFeatureShardMoved;
  return features;
}

ClientSession::ClientSession(ClientService& service,
                             std::shared_ptr<ClientConnectionState> connection,
                             std::shared_ptr<transport::Stream> stream)
    : service_(service),
      connection_(std::move(connection)),
      stream_(std::move(stream)),
      endpoint_(stream_->connection()->endpoint()) {}

void ClientSession::Start() {
  InstallHandlers();
}

void ClientSession::InstallHandlers() {
  // The handlers keep the session alive through `owner` and capture it by raw pointer: no
  // allocation per handler (StreamHandlers::owner).
  ClientSession* self = this;
  transport::StreamHandlers handlers;
  handlers.owner = shared_from_this();
  handlers.on_data = [self](transport::Stream&, std::span<const uint8_t> data) {
    self->OnData(data);
  };
  handlers.on_fin = [self](transport::Stream&) {
    self->peer_finished_ = true;
    if (self->pending_ops_ == 0) self->FinishStream();
    self->MaybeRelease();
  };
  handlers.on_reset = [self](transport::Stream&, uint64_t) {
    self->ended_ = true;
    self->reset_ = true;
    self->MaybeRelease();
  };
  stream_->SetHandlers(std::move(handlers));
}

void ClientSession::ForceRelease() {
  // Directly, not posted: a release posted while the endpoint shut down may never have run.
  ended_ = true;
  reset_ = true;
  released_ = true;
  stream_->SetHandlers({});
}

void ClientConnectionState::ReleaseAll() {
  for (auto& weak : writers) {
    if (auto writer = weak.lock()) writer->ForceRelease();
  }
  for (auto& weak : sessions) {
    if (auto session = weak.lock()) session->ForceRelease();
  }
  for (auto& weak : watch_writers) {
    if (auto writer = weak.lock()) writer->ForceRelease();
  }
  writers.clear();
  watch_writers.clear();
  sessions.clear();
}

void ClientSession::MaybeRelease() {
  if (released_ || pending_ops_ != 0) return;
  if (!(reset_ || (ended_ && peer_finished_))) return;
  released_ = true;
  // The handlers hold this session; drop them outside the handler now running.
  if (stream_->ReleaseHandlers()) return;
  auto stream = stream_;
  endpoint_.Post([stream] { stream->SetHandlers({}); });
}

void ClientSession::OnData(std::span<const uint8_t> data) {
  if (ended_) {
    stream_->Consume(data.size());
    return;
  }
  size_t used = 0;
  if (assembly_total_ > 0) {
    size_t take = std::min(assembly_total_ - assembly_.size(), data.size());
    assembly_.insert(assembly_.end(), data.begin(), data.begin() + take);
    used = take;
    if (assembly_.size() < assembly_total_ ||
        !RoomForFrame(assembly_flags_,
                      std::span<const uint8_t>(assembly_).subspan(flx1::kHeaderSize))) {
      if (assembly_.size() == assembly_total_) read_paused_ = true;  // kept until room comes
      stream_->Consume(used);
      return;
    }
    std::vector<uint8_t> frame = std::move(assembly_);
    assembly_ = {};
    assembly_total_ = 0;
    HandleFrame(assembly_flags_, std::span<const uint8_t>(frame).subspan(flx1::kHeaderSize));
  }
  while (!ended_) {
    auto rest = data.subspan(used);
    if (rest.size() < flx1::kHeaderSize) break;
    if (PublishWindowFull()) {
      read_paused_ = true;  // the rest stays unread until answers make room (§9.3)
      break;
    }
    uint32_t limit =
        auth_ ? service_.options().max_frame_bytes : service_.options().preauth_max_frame_bytes;
    auto header = flx1::DecodeEnvelope(rest, limit);
    if (!header) {
      FlushUnackedRun();  // what came before the bad header is handled first
      if (ended_) break;
      if (header.error().code == wire::DecodeErrorCode::kFrameTooLarge) {
        // Ends on the header alone, before any payload is read (§2 rule 5).
        SendError(Code(ProtocolErrorCode::kInvalidRequest),
                  auth_ ? "frame exceeds max_frame_bytes" : "frame too large before auth");
        FinishStream();
      } else {
        DropStream();  // wrong magic or version: no frame boundary to trust
      }
      break;
    }
    size_t total = flx1::kHeaderSize + header->length;
    if (rest.size() < total) {
      if (total > kInPlaceLimit) {
        assembly_flags_ = header->flags;
        assembly_total_ = total;
        assembly_.assign(rest.begin(), rest.end());
        used += rest.size();
      }
      break;
    }
    auto payload = rest.subspan(flx1::kHeaderSize, header->length);
    if (!RoomForFrame(header->flags, payload)) {
      read_paused_ = true;  // the rest stays unread until publishes in flight make room
      break;
    }
    if (!TryJoinUnackedRun(header->flags, payload) && !ended_) {
      HandleFrame(header->flags, payload);
    }
    used += total;
  }
  FlushUnackedRun();  // the run views `data`, consumed below
  if (ended_) used = data.size();
  stream_->Consume(used);
}

bool ClientSession::HandleFrame(uint16_t flags, std::span<const uint8_t> payload) {
  if ((flags & ~flx1::kKnownFlags) != 0) {
    // Refused, never masked; the payload is skipped and the stream goes on (§2 rule 4).
    SendError(Code(ProtocolErrorCode::kInvalidRequest), "unsupported frame flags");
    return true;
  }
  if (flags == 0) {
    ClientConnectionState& connection = *connection_;
    if (connection.last_auth && payload.size() == connection.last_auth_payload.size() &&
        std::equal(payload.begin(), payload.end(), connection.last_auth_payload.begin())) {
      return HandleAuth(*connection.last_auth);  // the bytes of the last `auth`: same message
    }
    auto frame = flx1::DecodePayload(0, payload);
    if (!frame || !std::holds_alternative<flx1::Message>(*frame)) {
      DropStream();  // undecodable JSON: dropped without an answer (§4)
      return false;
    }
    auto& message = std::get<flx1::Message>(*frame);
    if (auto* auth = std::get_if<flx1::Auth>(&message);
        auth != nullptr && payload.size() <= ClientConnectionState::kMaxRememberedAuth) {
      connection.last_auth_payload.assign(payload.begin(), payload.end());
      connection.last_auth = std::move(*auth);
      connection.last_auth_context.reset();
      return HandleAuth(*connection.last_auth);
    }
    return HandleMessage(std::move(message));
  }
  if (auto valid = flx1::CheckFlags(flags); !valid) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest),
              "malformed frame: " + valid.error().ToString());
    return true;
  }
  if ((flags & flx1::kFlagBinaryPublishBatch) != 0) return HandleBinaryPublish(flags, payload);
  SendError(Code(ProtocolErrorCode::kInvalidRequest), "unexpected message type");
  FinishStream();
  return false;
}

bool ClientSession::HandleMessage(flx1::Message message) {
  if (auto* auth = std::get_if<flx1::Auth>(&message)) return HandleAuth(*auth);
  std::string_view type = TypeOf(message);
  if (std::holds_alternative<flx1::Error>(message)) {
    DropStream();  // a client sending `error`: closed without an answer (§8.3)
    return false;
  }
  if (IsBrokerToClientType(type)) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest), "unexpected message type");
    FinishStream();
    return false;
  }
  if (!auth_) {
    SendError(Code(ProtocolErrorCode::kUnauthenticated), "auth required");
    FinishStream();
    return false;
  }
  if (std::holds_alternative<flx1::Publish>(message) ||
      std::holds_alternative<flx1::PublishBatch>(message)) {
    return HandleJsonPublish(std::make_shared<flx1::Message>(std::move(message)));
  }
  if (service_.draining()) {  // shutdown: requests admitted before still get their answers
    service_.NoteDrainingRefusal();
    SendError(Code(ProtocolErrorCode::kDraining), "broker is shutting down");
    FinishStream();
    return false;
  }
  if (auto* subscribe = std::get_if<flx1::Subscribe>(&message)) return HandleSubscribe(*subscribe);
  if (auto* shards = std::get_if<flx1::StreamShards>(&message)) return HandleStreamShards(*shards);
  if (auto* owners = std::get_if<flx1::ShardOwners>(&message)) return HandleShardOwners(*owners);
  if (service_.options().cluster && std::holds_alternative<flx1::Topology>(message)) {
    return HandleTopology();
  }
  if (auto* init = std::get_if<flx1::ProducerInit>(&message)) return HandleProducerInit(*init);
  if (std::holds_alternative<flx1::PublishIdempotent>(message)) {
    return HandlePublishIdempotent(std::make_shared<flx1::Message>(std::move(message)));
  }
  if (auto handled = HandleCacheRequest(message)) return *handled;
  if (bool keep_reading = true; HandleGroupRequest(message, &keep_reading)) return keep_reading;
  if (auto handled = HandleCommitRequest(message)) return *handled;
  if (auto* at = std::get_if<flx1::OffsetForTime>(&message);
      at != nullptr && service_.options().durable_storage) {
    return HandleOffsetForTime(*at);  // RECORD_TIMESTAMPS is advertised with durable storage
  }

  // A request this broker does not serve (it did not advertise it).
  bool negotiated_unsupported = (peer_features_ & flx1::kFeatureUnsupported) != 0;
  if (negotiated_unsupported) {
    flx1::Unsupported answer;
    answer.request_type = std::string(type);
    answer.request_id = RequestIdOf(message);  // §6.1: kept whenever the request had one
    if (auto* extension = std::get_if<flx1::Extension>(&message)) {
      answer.extension = extension->name;
    }
    Send(std::move(answer));
    return true;
  }
  if (std::holds_alternative<flx1::UnknownMessage>(message)) {
    DropStream();  // unknown type without UNSUPPORTED: the stream is closed
    return false;
  }
  SendError(Code(ProtocolErrorCode::kInvalidRequest),
            std::string(type) + " is not supported by this broker");
  FinishStream();
  return false;
}

bool ClientSession::HandleAuth(const flx1::Auth& auth) {
  // The error-code offer counts even for a refused auth (§6.1 step 1).
  if (auth.client_features && (*auth.client_features & flx1::kFeatureErrorCodes) != 0) {
    error_codes_ = true;
  }
  if (auth_) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest), "auth already established");
    FinishStream();
    return false;
  }
  if (service_.draining()) {  // client-protocol.md §6.1: a draining broker admits no stream
    service_.NoteDrainingRefusal();
    SendError(Code(ProtocolErrorCode::kDraining), "broker is shutting down");
    FinishStream();
    return false;
  }
  ClientConnectionState& connection = *connection_;
  const bool remembered = connection.last_auth && &auth == &*connection.last_auth;
  const int64_t now = auth::NowUnixSeconds();
  auto snapshot = service_.catalog().Snapshot();
  if (remembered && connection.last_auth_context &&
      now < connection.last_auth_context->expires_at &&
      connection.last_auth_snapshot.lock() == snapshot) {
    auth_ = connection.last_auth_context;
  } else {
    auto context =
        service_.verified_credentials().Verify(service_.catalog(), auth.tenant_id, auth.token, now);
    if (!context) {
      service_.metrics().auth_failures.Increment();
      spdlog::debug("auth refused tenant={} reason={}", auth.tenant_id, context.error().ToString());
      SendError(Code(ProtocolErrorCode::kUnauthenticated), auth::kAuthFailedMessage);
      FinishStream();
      return false;
    }
    auth_ = std::move(*context);
    if (remembered) {
      // The snapshot read before Verify: if the catalog changed in between, the next `auth`
      // finds another one and verifies again.
      connection.last_auth_context = auth_;
      connection.last_auth_snapshot = snapshot;
    }
  }
  connection.any_stream_authenticated = true;
  peer_flags_ = auth.client_flags.value_or(flx1::kOriginalV1Flags);
  peer_features_ = auth.client_features.value_or(0);
  std::optional<uint32_t> window = NegotiatePublishing(peer_features_);
  if (auth.client_flags) {
    std::vector<uint8_t>& frame = connection.auth_ok_frames[window ? 1 : 0];
    if (frame.empty()) {
      flx1::AuthOk ok;
      ok.server_flags = kServerFlags;
      ok.server_features = ServerFeatures(service_.options());
      ok.publish_window = window;
      auto encoded = flx1::EncodeMessageFrame(ok);
      if (!encoded) {
        spdlog::error("answer encode failed: {}", encoded.error().ToString());
        return true;
      }
      frame = std::move(*encoded);
    }
    if (!stream_->is_unidirectional()) (void)stream_->Write(frame);
  } else {
    Send(flx1::Ok{});
  }
  return true;
}

bool ClientSession::Authorized(auth::Action action, std::string_view tenant, std::string_view ns,
                               std::string_view stream, std::optional<uint64_t> request_id,
                               bool binary) {
  const char* refusal = AuthorizationRefusal(*auth_, action, tenant, ns, stream);
  if (refusal == nullptr) return true;
  if (request_id) {
    SendPublishError(binary, *request_id, Code(ProtocolErrorCode::kForbidden), refusal);
  } else {
    SendError(Code(ProtocolErrorCode::kForbidden), refusal);
  }
  FinishStream();  // authorization failures end the stream (§8.3)
  return false;
}

bool ClientSession::HandleBinaryPublish(uint16_t flags, std::span<const uint8_t> payload) {
  if (!auth_) {
    SendError(Code(ProtocolErrorCode::kUnauthenticated), "auth required");
    FinishStream();
    return false;
  }
  bool acked = (flags & flx1::kFlagBinaryPublishAcked) != 0;
  auto batch = flx1::DecodePublishBatch(flags, payload);
  if (!batch) {
    std::string message = "malformed publish batch: " + batch.error().ToString();
    if (acked && payload.size() >= 8) {
      uint64_t request_id = 0;  // at offset 0 so even a malformed batch can be answered
      for (int i = 0; i < 8; ++i) request_id = (request_id << 8) | payload[i];
      WithTicket(TakeAnswerTicket(true), [&] {
        SendPublishError(true, request_id, Code(ProtocolErrorCode::kInvalidRequest), message);
      });
    } else if (acked) {
      SendError(Code(ProtocolErrorCode::kInvalidRequest), message);
    }
    return true;
  }
  return PublishDecodedBatch(acked, payload, *batch);
}

bool ClientSession::PublishDecodedBatch(bool acked, std::span<const uint8_t> payload,
                                        const flx1::BinaryPublishBatch& batch) {
  // One copy per frame (never per record): payload views are rebased onto the copy, which
  // then lives as long as the batch is in the log's hands and in subscriber queues.
  auto owner = std::make_shared<std::vector<uint8_t>>(payload.begin(), payload.end());
  PublishRequest request;
  request.tenant = batch.tenant_id;
  request.ns = batch.namespace_;
  request.stream = batch.stream;
  request.key = batch.key;
  request.acked = acked;
  if (batch.acked) request.request_id = batch.acked->request_id;
  request.binary = true;
  request.payloads.reserve(batch.payloads.size());
  for (std::string_view p : batch.payloads) {
    size_t offset =
        static_cast<size_t>(reinterpret_cast<const uint8_t*>(p.data()) - payload.data());
    request.payloads.emplace_back(owner->data() + offset, p.size());
  }
  request.owner = std::move(owner);
  bool keep_reading = true;
  if (batch.idempotent) {  // 0x0100 (requires 0x0008): answered in JSON after the write
    IdempotentRequest idempotent{request.tenant,
                                 request.ns,
                                 request.stream,
                                 request.key,
                                 std::move(request.owner),
                                 std::move(request.payloads),
                                 batch.acked->request_id,
                                 batch.idempotent->producer_id,
                                 batch.idempotent->sequence};
    WithTicket(TakeAnswerTicket(true),
               [&] { keep_reading = PublishIdempotent(std::move(idempotent)); });
    return keep_reading;
  }
  WithTicket(TakeAnswerTicket(acked), [&] { keep_reading = Publish(std::move(request)); });
  return keep_reading;
}

bool ClientSession::HandleJsonPublish(std::shared_ptr<flx1::Message> message) {
  service_.metrics().json_publishes.Increment();
  PublishRequest request;
  std::optional<flx1::AckMode> ack;
  const std::optional<flx1::Bytes>* key = nullptr;
  auto to_span = [](const flx1::Bytes& b) { return std::span<const uint8_t>(b.data(), b.size()); };
  bool single = false;
  if (auto* p = std::get_if<flx1::Publish>(message.get())) {
    request.tenant = p->tenant_id;
    request.ns = p->namespace_;
    request.stream = p->stream;
    request.payloads.push_back(to_span(p->payload));
    key = &p->key;
    request.request_id = p->request_id;
    ack = p->ack;
    single = true;
  } else {
    auto& b = std::get<flx1::PublishBatch>(*message);
    request.tenant = b.tenant_id;
    request.ns = b.namespace_;
    request.stream = b.stream;
    for (const auto& payload : b.payloads) request.payloads.push_back(to_span(payload));
    key = &b.key;
    request.request_id = b.request_id;
    ack = b.ack;
  }
  if (*key) {
    request.key = std::string_view(reinterpret_cast<const char*>((*key)->data()), (*key)->size());
  }
  // An absent ack mode means acknowledged (§6.3).
  request.acked = ack.value_or(flx1::AckMode::kPerMessage) != flx1::AckMode::kNone;
  if (request.acked && !request.request_id) {
    SendError(Code(ProtocolErrorCode::kInvalidRequest),
              single ? "missing request_id for acked publish"
                     : "missing request_id for acked publish batch");
    return true;
  }
  request.owner = std::move(message);
  bool keep_reading = true;
  WithTicket(TakeAnswerTicket(request.acked), [&] { keep_reading = Publish(std::move(request)); });
  return keep_reading;
}

std::shared_ptr<const std::string> ClientSession::StoredPublisher() {
  if (!service_.options().record_publishers || !auth_ || !auth_->publisher_name) return nullptr;
  if (!stored_publisher_)
    stored_publisher_ = std::make_shared<const std::string>(*auth_->publisher_name);
  return stored_publisher_;
}

bool ClientSession::Publish(PublishRequest request) {
  std::optional<uint64_t> answer_id = request.acked ? request.request_id : std::nullopt;
  if (!Authorized(auth::Action::kStreamPublish, request.tenant, request.ns, request.stream,
                  answer_id, request.binary)) {
    return false;
  }
  const uint32_t frames = request.frames;
  auto refuse = [&](uint16_t code, std::string message) {
    service_.metrics().publish_error.Increment(frames);
    if (answer_id) SendPublishError(request.binary, *answer_id, code, std::move(message));
    return true;  // validation, not-found and overload answers keep the stream (§8.3)
  };
  if (service_.draining()) {
    service_.NoteDrainingRefusal();
    return refuse(Code(ProtocolErrorCode::kDraining), "broker is shutting down");  // not written
  }
  auto route = RoutePublish(request.tenant, request.ns, request.stream, request.key, true);
  if (auto* refusal = std::get_if<Refusal>(&route)) {
    return refuse(refusal->first, std::move(refusal->second));
  }
  std::optional<catalog::Stream> remote_stream;
  if (std::holds_alternative<RemoteShard>(route)) {
    remote_stream = service_.resolver().FindStream(request.tenant, request.ns, request.stream);
    if (!remote_stream) return refuse(Code(ProtocolErrorCode::kNotFound), "stream not found");
  }
  const catalog::Stream& stream =
      remote_stream ? *remote_stream : *std::get<PublishRoute>(route).stream;
  size_t bytes = 0;
  if (auto refusal = AdmitPublish(stream, request.payloads, &bytes)) {
    if (!answer_id && refusal->first == Code(ProtocolErrorCode::kOverloaded)) {
      service_.metrics().publish_dropped.Increment(frames);  // fire-and-forget is shed
      return true;
    }
    return refuse(refusal->first, std::move(refusal->second));
  }
  if (auto* remote = std::get_if<RemoteShard>(&route)) {
    ForwardPublish(std::move(request), *remote, answer_id, stream.durable, bytes);
    return true;
  }
  const PublishRoute& target = std::get<PublishRoute>(route);

  PayloadBatch batch{std::move(request.owner), std::move(request.payloads),
                     NowMicrosRoundedToMillis()};
  bool binary = request.binary;
  bool durable = target.stream->durable;
  if (durable) batch.publisher = StoredPublisher();
  // Answered after the write when commit acks were negotiated, and always on a `Quorum`
  // stream (after its commit gate, when the shard has one); otherwise at enqueue below
  // (semantics.md §2.3).
  const bool after_write =
      commit_acks_ || target.stream->consistency == catalog::Consistency::kQuorum;
  std::optional<uint64_t> commit_answer_id = after_write ? answer_id : std::nullopt;
  std::optional<uint64_t> ticket = current_ticket_;
  std::atomic<size_t>* inflight_total = &service_.inflight_total();  // outlives completions
  bool queued =
      RunOnShard(*target.handle.executor, [cell = target.handle.cell, batch = std::move(batch),
                                           commit_answer_id, binary, bytes, durable, ticket,
                                           inflight_total, frames](auto reply) mutable {
        PublishWhenOpen(*cell, std::move(batch),
                        [reply, commit_answer_id, binary, bytes, durable, ticket, inflight_total,
                         frames](Result<Offset> result) {
                          inflight_total->fetch_sub(bytes);
                          reply([commit_answer_id, binary, bytes, durable, ticket, frames,
                                 result = std::move(result)](ClientSession* self) {
                            if (self == nullptr) return;
                            self->ReleasePublish(bytes);
                            if (result) {
                              self->service_.metrics().publish_ok.Increment(frames);
                            } else {
                              self->service_.metrics().publish_error.Increment(frames);
                              if (!commit_answer_id) {
                                // Already acknowledged at enqueue (or never acked): the loss window
                                // §2.2 names.
                                spdlog::warn("publish failed after its enqueue ack: {}",
                                             result.error().ToString());
                              }
                            }
                            if (commit_answer_id) {
                              self->WithTicket(ticket, [&] {
                                self->AnswerPublish(binary, *commit_answer_id, result, durable);
                              });
                            }
                          });
                        });
      });
  if (!queued) {  // the shard is shutting down
    ReleasePublish(bytes);
    inflight_total->fetch_sub(bytes);
    return refuse(Code(ProtocolErrorCode::kShardUnavailable), "shard is closing");
  }
  if (answer_id && !after_write) AnswerPublishQueued(binary, *answer_id);
  return true;
}

void ClientSession::AnswerPublish(bool binary, uint64_t request_id, const Result<Offset>& result,
                                  bool durable, const RemoteShard* owner) {
  if (!result) {
    SendPublishError(binary, request_id, ProtocolCodeFor(result.error()), result.error().message);
    return;
  }
  service_.metrics().acks.Increment();
  // An offset only for a client that offered 0x1000 and only from a log: an in-memory
  // stream's position is no offset a client could resume from (semantics.md §2.4).
  bool with_offset = durable && (peer_flags_ & flx1::kFlagBinaryPublishAckOffset) != 0;
  if (binary) {
    flx1::BinaryPublishAck ack;
    ack.status = flx1::BinaryPublishAck::Status::kOk;
    ack.request_id = request_id;
    if (with_offset) ack.offset = result->value();
    if (owner != nullptr && (peer_flags_ & flx1::kFlagBinaryPublishAckOwner) != 0) {
      ack.owner = flx1::BinaryPublishAck::Owner{owner->owner_node_id, std::nullopt,
                                                owner->generation.value()};
      if (!owner->owner_client_addr.empty()) ack.owner->addr = owner->owner_client_addr;
    }
    std::vector<uint8_t> frame;
    if (flx1::AppendFrame(flx1::Flx1Frame{ack}, frame)) WritePublishAnswer(std::move(frame));
    return;
  }
  flx1::PublishOk ok;
  ok.request_id = request_id;
  if (with_offset) ok.offset = result->value();
  if (auto frame = flx1::EncodeMessageFrame(ok)) WritePublishAnswer(std::move(*frame));
}

void ClientSession::SendPublishError(bool binary, uint64_t request_id, uint16_t code,
                                     std::string message) {
  if (binary) {
    flx1::BinaryPublishAck ack;
    ack.status = flx1::BinaryPublishAck::Status::kError;
    ack.request_id = request_id;
    if (message.size() > flx1::kMaxBinaryStringBytes) message.resize(flx1::kMaxBinaryStringBytes);
    ack.message = message;
    if ((peer_flags_ & flx1::kFlagBinaryPublishAckCode) != 0) {
      ack.code =
          flx1::BinaryPublishAck::Code{code, static_cast<uint8_t>(flx1::DefaultRetryClass(code))};
    }
    std::vector<uint8_t> frame;
    if (flx1::AppendFrame(flx1::Flx1Frame{ack}, frame)) WritePublishAnswer(std::move(frame));
    return;
  }
  flx1::PublishError error;
  error.request_id = request_id;
  error.message = std::move(message);
  if (error_codes_) {
    if (auto name = flx1::ErrorCodeName(code)) error.code = std::string(*name);
    error.retry = std::string(flx1::RetryClassName(flx1::DefaultRetryClass(code)));
  }
  if (auto frame = flx1::EncodeMessageFrame(error)) WritePublishAnswer(std::move(*frame));
}

bool ClientSession::HandleSubscribe(const flx1::Subscribe& request) {
  if (!Authorized(auth::Action::kStreamSubscribe, request.tenant_id, request.namespace_,
                  request.stream, std::nullopt, false)) {
    return false;
  }
  if (connection_->subscriptions >= service_.options().max_subscriptions_per_conn) {
    SendError(Code(ProtocolErrorCode::kLimitExceeded), "max subscriptions per connection exceeded");
    FinishStream();
    return false;
  }
  auto resolved = service_.resolver().ResolveStreamShard(request.tenant_id, request.namespace_,
                                                         request.stream, request.shard.value_or(0));
  if (auto* error = std::get_if<Error>(&resolved)) {
    SendError(ProtocolCodeFor(*error), error->message);
    FinishStream();
    return false;
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    SendNotLeader(*remote);  // a subscription is redirected, never forwarded
    FinishStream();
    return false;
  }
  auto& local = std::get<LocalStreamShard>(resolved);
  StartPosition start;
  if (request.start) {
    switch (request.start->kind) {
      case flx1::StartPosition::Kind::kLatest:
        break;
      case flx1::StartPosition::Kind::kEarliest:
        start.kind = StartPosition::Kind::kEarliest;
        break;
      case flx1::StartPosition::Kind::kOffset:
        start.kind = StartPosition::Kind::kOffset;
        start.offset = Offset(request.start->offset);
        break;
    }
  }
  uint64_t client_id = request.subscription_id.value_or(service_.core().NextSubscriptionId());
  bool durable = local.stream->durable;
  // client-protocol.md §7: subscription_lagged only to a client that offered the feature and
  // reads offsets; every other durable subscriber is slowed down to replay instead.
  bool end_on_lag = durable && (peer_features_ & flx1::kFeatureSubscriptionLagged) != 0 &&
                    (peer_flags_ & flx1::kFlagEventBatchOffsets) != 0;
  std::optional<uint32_t> requested_capacity = request.queue_capacity;
  auto slot = std::make_shared<WriterSlot>();
  StreamShardHandle shard_handle = local.handle;
  bool posted = RunOnShard(*shard_handle.executor, [shard_handle, start, requested_capacity, slot,
                                                    client_id, durable, end_on_lag](auto reply) {
    shard_handle.cell->WhenOpen([=](Result<OpenedStream*> opened) {
      if (!opened) {
        reply([error = opened.error()](ClientSession* self) {
          if (self == nullptr) return;
          --self->connection_->subscriptions;
          self->SendError(ProtocolCodeFor(error), error.message);
          self->FinishStream();
        });
        return;
      }
      auto shard = (*opened)->shard;
      auto result = shard->Subscribe(
          start, requested_capacity.value_or(0), [slot] { slot->Wake(); }, end_on_lag);
      reply([shard_handle, shard, result = std::move(result), slot, client_id, durable,
             requested_capacity](ClientSession* self) mutable {
        if (self == nullptr) {
          if (auto* sub = std::get_if<Subscription>(&result)) {
            uint64_t id = sub->id;
            shard_handle.executor->Post([shard, id] { shard->Unsubscribe(id); });
          }
          return;
        }
        self->OnSubscribed(shard_handle, std::move(result), slot, client_id, durable,
                           requested_capacity);
      });
    });
  });
  if (!posted) {
    SendError(Code(ProtocolErrorCode::kShardUnavailable), "broker is stopping");
    FinishStream();
    return false;
  }
  ++connection_->subscriptions;
  return true;
}

void ClientSession::OnSubscribed(const StreamShardHandle& handle,
                                 std::variant<Subscription, CursorError> result,
                                 const std::shared_ptr<void>& slot_erased, uint64_t client_id,
                                 bool durable, std::optional<uint32_t> requested_capacity) {
  auto slot = std::static_pointer_cast<WriterSlot>(slot_erased);
  if (auto* cursor = std::get_if<CursorError>(&result)) {
    --connection_->subscriptions;
    flx1::SubscribeCursorError answer;
    answer.reason = cursor->reason == CursorError::Reason::kTooOld
                        ? flx1::CursorErrorReason::kTooOld
                        : flx1::CursorErrorReason::kInFuture;
    answer.requested = cursor->requested.value();
    answer.available = cursor->available.value();
    Send(answer);
    FinishStream();
    return;
  }
  Subscription sub = std::get<Subscription>(std::move(result));
  auto unsubscribe = [&] {
    --connection_->subscriptions;
    uint64_t id = sub.id;
    handle.executor->Post([cell = handle.cell, id] { cell->get()->shard->Unsubscribe(id); });
  };
  transport::Connection* connection = stream_->connection();
  if (ended_ || connection == nullptr) {
    unsubscribe();
    return;
  }
  auto uni = connection->OpenUniStream();
  if (!uni) {
    unsubscribe();
    SendError(Code(ProtocolErrorCode::kLimitExceeded), "cannot open an event stream now");
    FinishStream();
    return;
  }
  EventStreamWriter::Variant variant;
  variant.offsets = durable && (peer_flags_ & flx1::kFlagEventBatchOffsets) != 0;
  variant.timestamps = (peer_flags_ & flx1::kFlagEventBatchTimestamps) != 0;
  variant.skipped = (peer_flags_ & flx1::kFlagEventBatchSkipped) != 0;
  variant.publisher = (peer_flags_ & flx1::kFlagEventBatchPublisher) != 0;
  variant.error_codes = error_codes_;
  variant.shard_moved = (peer_features_ & flx1::kFeatureShardMoved) != 0;
  auto writer = std::make_shared<EventStreamWriter>(endpoint_, *uni, handle, sub.id, client_id,
                                                    variant, service_.metrics());
  std::weak_ptr<ClientConnectionState> state = connection_;
  writer->on_stopped = [state] {
    if (auto s = state.lock()) --s->subscriptions;
  };
  slot->Set(writer);
  service_.metrics().subscribers.Add(1);
  // Order of §1.3: hello on the event stream, then `subscribed`, then history and live.
  writer->Start(sub.queue);
  std::erase_if(connection_->writers, [](const auto& weak) { return weak.expired(); });
  connection_->writers.push_back(writer);
  flx1::Subscribed answer;
  answer.subscription_id = client_id;
  if (durable && (peer_flags_ & flx1::kFlagEventBatchOffsets) != 0) {
    answer.start_offset = sub.start_offset.value();
    answer.live_offset = sub.live_offset.value();
  }
  if (requested_capacity) answer.queue_capacity = sub.queue_capacity;
  Send(answer);
  FinishStream();
}

bool ClientSession::HandleStreamShards(const flx1::StreamShards& request) {
  if (request.tenant_id != auth_->tenant_id) {
    SendError(Code(ProtocolErrorCode::kForbidden), "tenant mismatch");
    FinishStream();
    return false;
  }
  flx1::StreamShardsView view;
  view.request_id = request.request_id;
  if (auto stream =
          service_.resolver().FindStream(request.tenant_id, request.namespace_, request.stream)) {
    view.shards = stream->shards;
    if (stream->routing == catalog::Routing::kJumpHash)
      view.routing = flx1::ShardRouting::kJumpHash;
  }
  Send(view);
  return true;
}

template <typename Encode>
void ClientSession::SendEncoded(const Encode& encode) {
  if (stream_->is_unidirectional()) return;  // publish-only streams are never answered
  std::string& frame = connection_->answer_buffer;
  frame.clear();
  if (auto encoded = encode(frame); !encoded) {
    spdlog::error("answer encode failed: {}", encoded.error().ToString());
    return;
  }
  (void)stream_->Write(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frame.data()), frame.size()));
  if (frame.capacity() > ClientConnectionState::kMaxKeptAnswerBuffer) std::string().swap(frame);
}

void ClientSession::Send(const flx1::Message& message) {
  SendEncoded([&](std::string& frame) { return flx1::AppendMessageFrame(message, frame); });
}

void ClientSession::Send(const flx1::GroupRecordsView& answer) {
  SendEncoded([&](std::string& frame) { return flx1::AppendGroupRecordsFrame(answer, frame); });
}

void ClientSession::SendError(uint16_t code, std::string message) {
  flx1::Error error;
  error.message = std::move(message);
  if (error_codes_) {
    if (auto name = flx1::ErrorCodeName(code)) error.code = std::string(*name);
    error.retry = std::string(flx1::RetryClassName(flx1::DefaultRetryClass(code)));
  }
  Send(std::move(error));
}

void ClientSession::FinishStream() {
  if (ended_ && finished_) return;
  ended_ = true;
  finished_ = true;
  if (!stream_->is_unidirectional()) stream_->Finish();
  MaybeRelease();
}

void ClientSession::DropStream() {
  ended_ = true;
  finished_ = true;
  stream_->Reset(kStreamProtocolError);
  reset_ = true;
  MaybeRelease();
}

}  // namespace felix::broker
