#include "cluster/forward_cache_handler.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using broker::CacheCommand;

namespace {

ForwardAnswer::Shape ShapeOf(flxi::Kind kind) {
  return kind == flxi::Kind::kConditionalForwardCacheOp ? ForwardAnswer::Shape::kConditionalCache
                                                        : ForwardAnswer::Shape::kCache;
}

CacheCommand::Op OpOf(flxi::CacheOpKind op) {
  switch (op) {
    case flxi::CacheOpKind::kPut:
      return CacheCommand::Op::kPut;
    case flxi::CacheOpKind::kDelete:
      return CacheCommand::Op::kDelete;
    case flxi::CacheOpKind::kCounterAdd:
      return CacheCommand::Op::kCounterAdd;
    case flxi::CacheOpKind::kCounterGet:
      return CacheCommand::Op::kCounterGet;
    case flxi::CacheOpKind::kGet:
      break;
  }
  return CacheCommand::Op::kGet;
}

// Step 5: the command the request describes, or why it makes no sense.
std::variant<CacheCommand, ForwardAnswer> CommandOf(const flxi::CacheOp& request) {
  CacheCommand command;
  command.op = OpOf(request.op);
  command.key = std::string(request.key);
  auto malformed = [](std::string why) {
    return ForwardAnswer::Error(flxi::ErrorCode::kMalformed, std::move(why));
  };
  if (command.op == CacheCommand::Op::kPut) {
    command.value = std::string(request.value);
    if (request.ttl_ms != 0) command.ttl_ms = request.ttl_ms;  // 0 = no expiry (§6.9)
  }
  if (command.op == CacheCommand::Op::kCounterAdd) {
    auto delta = flxi::DecodeCounterValue(request.value);
    if (!delta) return malformed("counter delta: " + delta.error().ToString());
    command.delta = *delta;
  }
  if (request.condition) {
    const flxi::Condition& c = *request.condition;
    const bool write =
        command.op == CacheCommand::Op::kPut || command.op == CacheCommand::Op::kDelete;
    if (c.type == flxi::CacheCondition::kNone) {
      if (command.op != CacheCommand::Op::kGet) {
        return malformed("condition none is a versioned get; the op is not a get");
      }
      command.want_version = true;
    } else if (!write) {
      return malformed("a condition applies to a put or a delete only");
    } else if (c.type == flxi::CacheCondition::kAbsent) {
      command.condition = broker::CacheCondition{broker::CacheCondition::Type::kAbsent, 0};
    } else {
      command.condition = broker::CacheCondition{broker::CacheCondition::Type::kVersion, c.version};
    }
  }
  return command;
}

// The op's failure, in FLXI terms (what the ingress retries and what it tells the client).
ForwardAnswer FailureOf(const Error& error) {
  switch (error.code) {
    case ErrorCode::kUnavailable:
      return ForwardAnswer::Error(flxi::ErrorCode::kUnavailable, error.message);
    case ErrorCode::kInvalidArgument:
      return ForwardAnswer::Error(flxi::ErrorCode::kMalformed, error.message);
    default:
      return ForwardAnswer::Error(flxi::ErrorCode::kStorageFailed, error.message);
  }
}

// What the owner answers an applied command.
ForwardAnswer AnswerOf(const CacheCommand::Op op, const broker::CacheCommandResult& result) {
  ForwardAnswer a;
  a.type = ForwardAnswer::Type::kOk;
  a.applied = result.applied;
  a.version = result.version;
  if (op == CacheCommand::Op::kCounterAdd || op == CacheCommand::Op::kCounterGet) {
    if (result.sum) a.value = flxi::EncodeCounterValue(*result.sum);
  } else if (op != CacheCommand::Op::kPut) {
    a.value = result.value;  // a Put always answers present=0
  }
  return a;
}

}  // namespace

ForwardCacheHandler::ForwardCacheHandler(Options options, broker::ShardResolver& resolver,
                                         const catalog::Catalog& catalog, MetricsRegistry& metrics)
    : options_(std::move(options)), resolver_(resolver), catalog_(catalog), metrics_(metrics) {}

std::variant<ForwardCacheHandler::Proceed, ForwardAnswer> ForwardCacheHandler::Decide(
    const flxi::CacheOp& request, flxi::Kind kind) {
  auto decided = DecideUnshaped(request, kind);
  if (auto* answer = std::get_if<ForwardAnswer>(&decided)) answer->shape = ShapeOf(kind);
  return decided;
}

std::variant<ForwardCacheHandler::Proceed, ForwardAnswer> ForwardCacheHandler::DecideUnshaped(
    const flxi::CacheOp& request, flxi::Kind kind) {
  using flxi::ErrorCode;
  if (kind == flxi::Kind::kForwardCacheOp || !request.credential || request.credential->empty()) {
    return ForwardAnswer::Error(
        ErrorCode::kUnauthorized,
        "a forwarded cache operation must carry the client's credential (kind 23 or 34)");
  }
  const flxi::ShardRef& ref = request.shard;
  auto resolved = resolver_.ResolveCacheKey(ref.tenant, ref.ns, ref.stream, request.key);
  if (auto* error = std::get_if<Error>(&resolved)) return RefusalOf(*error);
  const auto* remote = std::get_if<broker::RemoteShard>(&resolved);
  const auto* local = std::get_if<broker::LocalCacheShard>(&resolved);
  uint32_t key_shard = remote ? remote->shard : local->shard;
  if (key_shard != ref.shard) {
    return ForwardAnswer::Error(
        ErrorCode::kMalformed, "wrong shard: the key routes to shard " + std::to_string(key_shard) +
                                   ", the forward names shard " + std::to_string(ref.shard));
  }
  uint64_t g = remote ? remote->generation.value() : local->generation.value();
  if (auto refusal = GenerationRefusal(options_, remote, g, ref.generation)) return *refusal;
  auto command = CommandOf(request);
  if (auto* refusal = std::get_if<ForwardAnswer>(&command)) return std::move(*refusal);
  auto& cmd = std::get<CacheCommand>(command);
  // The owner's decision rests on the client's authority, not on the forwarder's honesty.
  auto context = VerifyForwardCredential(catalog_, credentials_, ref.tenant, request.credential);
  if (auto* refusal = std::get_if<ForwardAnswer>(&context)) return std::move(*refusal);
  auth::Action action = broker::CacheActionOf(cmd.op);
  if (const char* refusal =
          broker::CacheAuthorizationRefusal(std::get<auth::AuthContext>(context), action,
                                            ref.tenant, ref.ns, ref.stream, request.key)) {
    return ForwardAnswer::Error(
        ErrorCode::kUnauthorized,
        std::string("credential does not allow ") +
            (action == auth::Action::kCacheRead ? "cache.read" : "cache.write") +
            " on this key: " + refusal);
  }
  return Proceed{std::move(std::get<broker::LocalCacheShard>(resolved)), std::move(cmd)};
}

void ForwardCacheHandler::Handle(const PeerRequest& request, PeerReply reply) {
  const auto& op = std::get<flxi::CacheOp>(request.frame.body);
  const flxi::Kind kind = request.frame.kind;
  const uint64_t corr = request.correlation_id;
  auto decided = Decide(op, kind);
  if (auto* answer = std::get_if<ForwardAnswer>(&decided)) {
    return RefuseNow(metrics_, kind, op.shard, request.peer_node_id, *answer, reply, corr);
  }
  auto& proceed = std::get<Proceed>(decided);
  const CacheCommand::Op cmd_op = proceed.command.op;
  const ForwardAnswer::Shape shape = ShapeOf(kind);
  transport::Endpoint* loop = request.endpoint;
  auto answer = [this, loop, reply, corr, kind, cmd_op,
                 shape](Result<broker::CacheCommandResult> result) {
    ForwardAnswer a = result ? AnswerOf(cmd_op, *result) : FailureOf(result.error());
    a.shape = shape;
    loop->Post([this, reply, corr, kind, a = std::move(a)] {
      CountReceived(metrics_, kind, a);
      reply(a.ToFrame(corr));
    });
  };
  auto cell = proceed.local.handle.cell;
  // Inline on this loop thread when the shard's executor is idle (as ForwardPublishHandler).
  if (!proceed.local.handle.executor->RunOrPost(
          [cell, command = std::move(proceed.command), answer]() mutable {
            broker::RunCacheCommandWhenOpen(*cell, std::move(command), answer);
          })) {
    ForwardAnswer a = ForwardAnswer::Error(flxi::ErrorCode::kUnavailable, "shard is closing");
    a.shape = shape;
    CountReceived(metrics_, kind, a);
    reply(a.ToFrame(corr));
  }
}

Result<void> ForwardCacheHandler::RegisterOn(PeerServer& server) {
  auto handler = [this](const PeerRequest& r, PeerReply reply) { Handle(r, std::move(reply)); };
  for (auto kind : {flxi::Kind::kAuthorizedForwardCacheOp, flxi::Kind::kConditionalForwardCacheOp,
                    flxi::Kind::kForwardCacheOp}) {
    if (auto r = server.Handle(kind, handler); !r) return r;
  }
  return {};
}

}  // namespace felix::cluster
