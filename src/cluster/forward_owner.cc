#include "cluster/forward_owner.h"

#include <spdlog/spdlog.h>

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

ForwardAnswer ForwardAnswer::NotLeader(std::string node_id, std::string addr, uint64_t generation) {
  ForwardAnswer a;
  a.type = Type::kNotLeader;
  a.node_id = std::move(node_id);
  a.advertise_addr = std::move(addr);
  a.generation = generation;
  return a;
}

flxi::Frame ForwardAnswer::ToFrame(uint64_t correlation_id) const {
  switch (type) {
    case Type::kOk:
      switch (shape) {
        case Shape::kPublish:
          return flxi::Frame{flxi::Kind::kForwardPublishOk,
                             flxi::ForwardPublishOk{correlation_id, first_offset, last_offset}};
        case Shape::kCache:
          return flxi::Frame{flxi::Kind::kForwardCacheOk,
                             flxi::ForwardCacheOk{correlation_id, value}};
        case Shape::kConditionalCache:
          return flxi::Frame{flxi::Kind::kConditionalForwardCacheOk,
                             flxi::ConditionalCacheOk{correlation_id, applied, version, value}};
      }
      break;
    case Type::kNotLeader:
      return flxi::Frame{flxi::Kind::kNotLeader,
                         flxi::NotLeader{correlation_id, node_id, advertise_addr, generation}};
    case Type::kError:
      break;
  }
  return flxi::Frame{
      shape == Shape::kPublish ? flxi::Kind::kForwardPublishError : flxi::Kind::kForwardCacheError,
      flxi::ErrorAnswer{correlation_id, code, detail}};
}

std::string ForwardAnswer::Outcome() const {
  if (type == Type::kOk) return "ok";
  if (type == Type::kNotLeader) return "not_leader";
  return ErrorCodeLabel(code);
}

ForwardAnswer RefusalOf(const Error& error) {
  switch (error.code) {
    case ErrorCode::kNotFound:
      return ForwardAnswer::Error(flxi::ErrorCode::kUnavailable,
                                  "not known to this broker (yet): " + error.message);
    case ErrorCode::kInvalidArgument:
      return ForwardAnswer::Error(flxi::ErrorCode::kMalformed, "wrong shard: " + error.message);
    case ErrorCode::kUnavailable:
      return ForwardAnswer::Error(flxi::ErrorCode::kUnavailable, error.message);
    default:
      return ForwardAnswer::Error(flxi::ErrorCode::kStorageFailed, error.message);
  }
}

std::optional<ForwardAnswer> GenerationRefusal(const ForwardOwnerOptions& options,
                                               const broker::RemoteShard* remote,
                                               uint64_t route_generation, uint64_t requested) {
  const uint64_t g = route_generation;
  if (requested > g) {
    return ForwardAnswer::Error(flxi::ErrorCode::kStaleRoute,
                                "routing view is behind: have generation " + std::to_string(g) +
                                    ", caller has " + std::to_string(requested));
  }
  if (remote != nullptr) {
    std::string addr =
        options.internal_addr_of ? options.internal_addr_of(remote->owner_node_id) : "";
    return ForwardAnswer::NotLeader(remote->owner_node_id, std::move(addr), g);
  }
  if (requested < g) {
    return ForwardAnswer::NotLeader(options.own_node_id, options.own_internal_addr, g);
  }
  return std::nullopt;
}

std::variant<auth::AuthContext, ForwardAnswer> VerifyForwardCredential(
    const catalog::Catalog& catalog, catalog::VerifiedCredentials& verified,
    std::string_view tenant, std::optional<std::string_view> credential) {
  if (!credential || credential->empty()) {
    return ForwardAnswer::Error(flxi::ErrorCode::kUnauthorized,
                                "a forward must carry the client's credential");
  }
  auto context = verified.Verify(catalog, tenant, *credential, auth::NowUnixSeconds());
  if (!context) {
    return ForwardAnswer::Error(flxi::ErrorCode::kUnauthorized,
                                "credential refused: " + context.error().ToString());
  }
  return **context;
}

void CountReceived(MetricsRegistry& metrics, flxi::Kind kind, const ForwardAnswer& answer) {
  metrics
      .AddCounter(
          "felix_forward_received_total",
          "forwarded requests this broker answered as owner, by kind and outcome",
          std::string("kind=\"") + flxi::KindName(kind) + "\",outcome=\"" + answer.Outcome() + "\"")
      .Increment();
}

void RefuseNow(MetricsRegistry& metrics, flxi::Kind kind, const flxi::ShardRef& shard,
               std::string_view peer, const ForwardAnswer& answer, const PeerReply& reply,
               uint64_t correlation_id) {
  spdlog::debug("forward refused kind={} shard={}/{}/{}#{} generation={} peer={} outcome={} {}",
                flxi::KindName(kind), shard.tenant, shard.ns, shard.stream, shard.shard,
                shard.generation, peer, answer.Outcome(), answer.detail);
  CountReceived(metrics, kind, answer);
  reply(answer.ToFrame(correlation_id));
}

}  // namespace felix::cluster
