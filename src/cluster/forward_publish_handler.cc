#include "cluster/forward_publish_handler.h"

#include <memory>
#include <vector>

#include "broker/publish_path.h"
#include "cluster/peer_frames.h"

namespace felix::cluster {

namespace flxi = wire::flxi;

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
  const auto* remote = std::get_if<broker::RemoteShard>(&resolved);
  uint64_t g = remote ? remote->generation.value()
                      : std::get<broker::LocalStreamShard>(resolved).generation.value();
  if (auto refusal = GenerationRefusal(options_, remote, g, ref.generation)) return *refusal;
  // The owner's decision rests on the client's authority, not on the forwarder's honesty.
  auto context = VerifyForwardCredential(catalog_, credentials_, ref.tenant, request.credential);
  if (auto* refusal = std::get_if<ForwardAnswer>(&context)) return std::move(*refusal);
  if (const char* refusal = broker::AuthorizationRefusal(std::get<auth::AuthContext>(context),
                                                         auth::Action::kStreamPublish, ref.tenant,
                                                         ref.ns, ref.stream)) {
    return ForwardAnswer::Error(
        ErrorCode::kUnauthorized,
        std::string("credential does not allow stream.publish: ") + refusal);
  }
  if (request.payloads.empty()) {
    return ForwardAnswer::Error(ErrorCode::kMalformed, "empty batch");
  }
  return std::move(std::get<broker::LocalStreamShard>(resolved));
}

ForwardAnswer WrittenAnswer(const Result<Offset>& written, uint64_t count, bool durable) {
  if (!written) {
    return ForwardAnswer::Error(written.error().code == ErrorCode::kUnavailable
                                    ? flxi::ErrorCode::kUnavailable
                                    : flxi::ErrorCode::kStorageFailed,
                                written.error().message);
  }
  ForwardAnswer a;
  a.type = ForwardAnswer::Type::kOk;
  if (durable) {
    a.first_offset = written->value();
    a.last_offset = (*written + count - 1).value();
  }  // else 1..=0: no log, no offsets
  return a;
}

void ForwardPublishHandler::Handle(const PeerRequest& request, PeerReply reply) {
  const auto& forward = std::get<flxi::ForwardPublish>(request.frame.body);
  const flxi::Kind kind = request.frame.kind;
  const uint64_t corr = request.correlation_id;
  auto decided = Decide(forward, kind);
  if (auto* answer = std::get_if<ForwardAnswer>(&decided)) {
    return RefuseNow(metrics_, kind, forward.shard, request.peer_node_id, *answer, reply, corr);
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
  const bool durable = local.stream->durable;
  transport::Endpoint* loop = request.endpoint;
  auto answer = [this, loop, reply, corr, kind, count, durable](Result<Offset> written) {
    ForwardAnswer a = WrittenAnswer(written, count, durable);
    loop->Post([this, reply, corr, kind, a = std::move(a)] {
      CountReceived(metrics_, kind, a);
      reply(a.ToFrame(corr));
    });
  };
  auto cell = local.handle.cell;
  // Inline on this loop thread when the shard's executor is idle, as a client's own publish
  // runs (ClientSession::RunOnShard): no wakeup there and back, and the answer, posted to this
  // same loop, leaves in this iteration's packets.
  if (!local.handle.executor->RunOrPost([cell, batch = std::move(batch), answer]() mutable {
        broker::PublishWhenOpen(*cell, std::move(batch), answer);
      })) {
    ForwardAnswer a = ForwardAnswer::Error(flxi::ErrorCode::kUnavailable, "shard is closing");
    CountReceived(metrics_, kind, a);
    reply(a.ToFrame(corr));
  }
}

Result<void> ForwardPublishHandler::RegisterOn(PeerServer& server) {
  auto handler = [this](const PeerRequest& r, PeerReply reply) { Handle(r, std::move(reply)); };
  if (auto r = server.Handle(flxi::Kind::kAuthorizedForwardPublish, handler); !r) return r;
  return server.Handle(flxi::Kind::kForwardPublish, handler);
}

}  // namespace felix::cluster
