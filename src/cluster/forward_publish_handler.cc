#include "cluster/forward_publish_handler.h"

#include <spdlog/spdlog.h>

#include <memory>
#include <vector>

#include "auth/token.h"
#include "broker/publish_path.h"
#include "catalog/verify.h"
#include "cluster/peer_frames.h"

namespace felix::cluster {

namespace flxi = wire::flxi;

ForwardAnswer ForwardAnswer::Error(flxi::ErrorCode code, std::string detail) {
  ForwardAnswer a;
  a.type = Type::kError;
  a.code = code;
  if (detail.size() > flxi::kMaxIdentBytes) detail.resize(flxi::kMaxIdentBytes);
  a.detail = std::move(detail);
  return a;
}

flxi::Frame ForwardAnswer::ToFrame(uint64_t correlation_id) const {
  switch (type) {
    case Type::kOk:
      return flxi::Frame{flxi::Kind::kForwardPublishOk,
                         flxi::ForwardPublishOk{correlation_id, first_offset, last_offset}};
    case Type::kNotLeader:
      return flxi::Frame{flxi::Kind::kNotLeader,
                         flxi::NotLeader{correlation_id, node_id, advertise_addr, generation}};
    case Type::kError:
      break;
  }
  return flxi::Frame{flxi::Kind::kForwardPublishError,
                     flxi::ErrorAnswer{correlation_id, code, detail}};
}

std::string ForwardAnswer::Outcome() const {
  if (type == Type::kOk) return "ok";
  if (type == Type::kNotLeader) return "not_leader";
  return ErrorCodeLabel(code);
}

namespace {

ForwardAnswer NotLeaderAnswer(std::string node_id, std::string addr, uint64_t generation) {
  ForwardAnswer a;
  a.type = ForwardAnswer::Type::kNotLeader;
  a.node_id = std::move(node_id);
  a.advertise_addr = std::move(addr);
  a.generation = generation;
  return a;
}

// The router's refusals, in FLXI terms (only kNotFound / kInvalidArgument / kUnavailable
// come from routing itself; anything else refused opening the shard's logs).
ForwardAnswer RefusalOf(const Error& error) {
  switch (error.code) {
    case ErrorCode::kNotFound:
      return ForwardAnswer::Error(flxi::ErrorCode::kUnavailable,
                                  "stream not known to this broker (yet): " + error.message);
    case ErrorCode::kInvalidArgument:
      return ForwardAnswer::Error(flxi::ErrorCode::kMalformed, "wrong shard: " + error.message);
    case ErrorCode::kUnavailable:
      return ForwardAnswer::Error(flxi::ErrorCode::kUnavailable, error.message);
    default:
      return ForwardAnswer::Error(flxi::ErrorCode::kStorageFailed, error.message);
  }
}

}  // namespace

ForwardPublishHandler::ForwardPublishHandler(Options options, broker::ShardResolver& resolver,
                                             const catalog::Catalog& catalog,
                                             MetricsRegistry& metrics)
    : options_(std::move(options)), resolver_(resolver), catalog_(catalog), metrics_(metrics) {}

std::variant<broker::LocalStreamShard, ForwardAnswer> ForwardPublishHandler::Decide(
    const flxi::ForwardPublish& request, flxi::Kind kind) {
  using flxi::ErrorCode;
  if (kind != flxi::Kind::kAuthorizedForwardPublish || !request.credential) {
    return ForwardAnswer::Error(ErrorCode::kUnauthorized,
                                "a forwarded publish must carry the client's credential (kind 22)");
  }
  const flxi::ShardRef& ref = request.shard;
  auto resolved = resolver_.ResolveStreamShard(ref.tenant, ref.ns, ref.stream, ref.shard);
  if (auto* error = std::get_if<Error>(&resolved)) return RefusalOf(*error);
  if (auto* remote = std::get_if<broker::RemoteShard>(&resolved)) {
    uint64_t g = remote->generation.value();
    if (ref.generation > g) {
      return ForwardAnswer::Error(ErrorCode::kStaleRoute,
                                  "routing view is behind: have generation " + std::to_string(g) +
                                      ", caller has " + std::to_string(ref.generation));
    }
    std::string addr =
        options_.internal_addr_of ? options_.internal_addr_of(remote->owner_node_id) : "";
    return NotLeaderAnswer(remote->owner_node_id, std::move(addr), g);
  }
  auto& local = std::get<broker::LocalStreamShard>(resolved);
  uint64_t g = local.generation.value();
  if (ref.generation > g) {
    return ForwardAnswer::Error(ErrorCode::kStaleRoute, "routing view is behind: have generation " +
                                                            std::to_string(g) + ", caller has " +
                                                            std::to_string(ref.generation));
  }
  if (ref.generation < g) {
    return NotLeaderAnswer(options_.own_node_id, options_.own_internal_addr, g);
  }
  // The owner's decision rests on the client's authority, not on the forwarder's honesty.
  auto context =
      catalog::VerifyClientToken(catalog_, ref.tenant, *request.credential, auth::NowUnixSeconds());
  if (!context) {
    return ForwardAnswer::Error(ErrorCode::kUnauthorized,
                                "credential refused: " + context.error().ToString());
  }
  if (const char* refusal = broker::AuthorizationRefusal(*context, auth::Action::kStreamPublish,
                                                         ref.tenant, ref.ns, ref.stream)) {
    return ForwardAnswer::Error(
        ErrorCode::kUnauthorized,
        std::string("credential does not allow stream.publish: ") + refusal);
  }
  if (request.payloads.empty()) {
    return ForwardAnswer::Error(ErrorCode::kMalformed, "empty batch");
  }
  return std::move(local);
}

void ForwardPublishHandler::Count(flxi::Kind kind, const ForwardAnswer& answer) {
  metrics_
      .AddCounter(
          "felix_forward_received_total",
          "forwarded requests this broker answered as owner, by kind and outcome",
          std::string("kind=\"") + flxi::KindName(kind) + "\",outcome=\"" + answer.Outcome() + "\"")
      .Increment();
}

void ForwardPublishHandler::Handle(const PeerRequest& request, PeerReply reply) {
  const auto& forward = std::get<flxi::ForwardPublish>(request.frame.body);
  const flxi::Kind kind = request.frame.kind;
  const uint64_t corr = request.correlation_id;
  auto decided = Decide(forward, kind);
  if (auto* answer = std::get_if<ForwardAnswer>(&decided)) {
    if (answer->type != ForwardAnswer::Type::kOk) {
      spdlog::debug("forward refused shard={}/{}/{}#{} generation={} peer={} outcome={} {}",
                    forward.shard.tenant, forward.shard.ns, forward.shard.stream,
                    forward.shard.shard, forward.shard.generation, request.peer_node_id,
                    answer->Outcome(), answer->detail);
    }
    Count(kind, *answer);
    reply(answer->ToFrame(corr));
    return;
  }
  auto& local = std::get<broker::LocalStreamShard>(decided);
  // The payloads are views into the received frame: one copy for the whole batch.
  size_t total = 0;
  for (auto p : forward.payloads) total += p.size();
  auto owner = std::make_shared<std::vector<uint8_t>>();
  owner->reserve(total);
  std::vector<std::span<const uint8_t>> payloads;
  payloads.reserve(forward.payloads.size());
  for (auto p : forward.payloads) owner->insert(owner->end(), p.begin(), p.end());
  size_t at = 0;
  for (auto p : forward.payloads) {
    payloads.emplace_back(owner->data() + at, p.size());
    at += p.size();
  }
  broker::PayloadBatch batch{std::move(owner), std::move(payloads),
                             broker::NowMicrosRoundedToMillis()};
  const uint64_t count = forward.payloads.size();
  const bool durable = local.stream.durable;
  transport::Endpoint* loop = request.endpoint;
  auto answer = [this, loop, reply, corr, kind, count, durable](Result<uint64_t> written) {
    ForwardAnswer a;
    if (!written) {
      a = ForwardAnswer::Error(written.error().code == ErrorCode::kUnavailable
                                   ? flxi::ErrorCode::kUnavailable
                                   : flxi::ErrorCode::kStorageFailed,
                               written.error().message);
    } else {
      a.type = ForwardAnswer::Type::kOk;
      if (durable) {
        a.first_offset = *written;
        a.last_offset = *written + count - 1;
      }  // else 1..=0: no log, no offsets
    }
    loop->Post([this, reply, corr, kind, a = std::move(a)] {
      Count(kind, a);
      reply(a.ToFrame(corr));
    });
  };
  auto cell = local.handle.cell;
  if (!local.handle.executor->Post([cell, batch = std::move(batch), answer]() mutable {
        broker::PublishWhenOpen(*cell, std::move(batch), answer);
      })) {
    ForwardAnswer a = ForwardAnswer::Error(flxi::ErrorCode::kUnavailable, "shard is closing");
    Count(kind, a);
    reply(a.ToFrame(corr));
  }
}

Result<void> ForwardPublishHandler::RegisterOn(PeerServer& server) {
  auto handler = [this](const PeerRequest& r, PeerReply reply) { Handle(r, std::move(reply)); };
  if (auto r = server.Handle(flxi::Kind::kAuthorizedForwardPublish, handler); !r) return r;
  return server.Handle(flxi::Kind::kForwardPublish, handler);
}

}  // namespace felix::cluster
