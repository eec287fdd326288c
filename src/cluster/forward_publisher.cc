#include "cluster/forward_publisher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "cluster/peer_frames.h"
#include "wire/flx1/constants.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using wire::flx1::ProtocolErrorCode;

struct ForwardPublisher::Attempt {
  // One of the two: a publish, or a cache operation (`cache_done` set).
  broker::ForwardPublishRequest request;
  std::function<void(broker::ForwardPublishOutcome)> done;
  broker::ForwardCacheRequest cache;
  std::function<void(broker::ForwardCacheOutcome)> cache_done;
  bool is_cache = false;
  std::string node_id;                 // the owner this send goes to
  std::optional<HostPort> named_addr;  // from a NotLeader; else nodes/
  uint64_t generation = 0;
  std::set<std::pair<std::string, uint64_t>> tried;
  int sends = 0;
  int retries = 0;      // consecutive backoff retries, for the delay
  bool legacy = false;  // UnsupportedKind answered kind 22 (23): kind 1 (11) was sent once
  broker::ForwardPublishOutcome last_failure;
  broker::CacheCommandResult cache_result;  // a cache operation's answer, once ok
  bool finished = false;

  const std::string& Credential() const { return is_cache ? cache.credential : request.credential; }
  // A lost answer leaves the outcome unknown for anything that may have written; a read
  // (cache get, counter get) lands on the same state twice and may be re-sent.
  bool IsRead() const { return is_cache && !cache.command.is_write(); }
  // A conditional write or a versioned get travels as kind 34 (internal-protocol-bodies.md
  // §6.9: a condition present selects it).
  bool IsConditional() const {
    return is_cache && (cache.command.condition.has_value() || cache.command.want_version);
  }
  std::string ShardText() const {
    if (is_cache) {
      return cache.tenant + "/" + cache.ns + "/" + cache.cache + "#" +
             std::to_string(cache.target.shard);
    }
    return request.tenant + "/" + request.ns + "/" + request.stream + "#" +
           std::to_string(request.target.shard);
  }
};

namespace {

uint16_t Code(ProtocolErrorCode c) {
  return static_cast<uint16_t>(c);
}

broker::ForwardPublishOutcome Failure(ProtocolErrorCode code, std::string message) {
  broker::ForwardPublishOutcome o;
  o.ok = false;
  o.code = Code(code);
  o.message = std::move(message);
  return o;
}

// The first send goes to the owner the ingress resolved, at its generation.
std::shared_ptr<ForwardPublisher::Attempt> NewAttempt(const broker::RemoteShard& target) {
  auto attempt = std::make_shared<ForwardPublisher::Attempt>();
  attempt->node_id = target.owner_node_id;
  attempt->generation = target.generation.value();
  attempt->last_failure = Failure(ProtocolErrorCode::kShardUnavailable, "owner unreachable");
  return attempt;
}

// What a lost or unreadable answer leaves the client knowing.
std::string Unknown(const ForwardPublisher::Attempt& attempt) {
  return attempt.is_cache ? "the cache operation may or may not have been applied"
                          : "the publish may or may not have been written";
}

}  // namespace

void ForwardPublisher::OnCacheOk(const std::shared_ptr<Attempt>& attempt,
                                 const flxi::ForwardCacheOk& ok) {
  Count(*attempt, "ok");
  broker::CacheCommandResult& result = attempt->cache_result;
  if (attempt->cache.command.is_counter()) {
    if (ok.value) {
      auto sum = flxi::DecodeCounterValue(*ok.value);
      if (!sum) {
        broker::ForwardPublishOutcome bad =
            Failure(ProtocolErrorCode::kUnacknowledged,
                    "the shard owner's counter did not decode (" + sum.error().ToString() +
                        "): " + Unknown(*attempt));
        return Finish(attempt, std::move(bad));
      }
      result.sum = *sum;
    }
  } else if (ok.value) {
    result.value = std::string(*ok.value);
  }
  broker::ForwardPublishOutcome done;
  done.ok = true;
  return Finish(attempt, std::move(done));
}

ForwardPublisher::ForwardPublisher(PeerPool& pool, transport::Endpoint& loop,
                                   ForwardPublisherOptions options, MetricsRegistry& metrics)
    : pool_(pool), loop_(loop), options_(std::move(options)), metrics_(metrics) {}

void ForwardPublisher::Forward(broker::ForwardPublishRequest request,
                               std::function<void(broker::ForwardPublishOutcome)> done) {
  auto attempt = NewAttempt(request.target);
  attempt->request = std::move(request);
  attempt->done = std::move(done);
  Send(attempt);
}

void ForwardPublisher::ForwardCache(broker::ForwardCacheRequest request,
                                    std::function<void(broker::ForwardCacheOutcome)> done) {
  auto attempt = NewAttempt(request.target);
  attempt->is_cache = true;
  attempt->cache = std::move(request);
  attempt->cache_done = std::move(done);
  Send(attempt);
}

void ForwardPublisher::Count(const Attempt& attempt, std::string_view outcome) {
  flxi::Kind k =
      attempt.is_cache
          ? (attempt.IsConditional() ? flxi::Kind::kConditionalForwardCacheOp
                                     : (attempt.legacy ? flxi::Kind::kForwardCacheOp
                                                       : flxi::Kind::kAuthorizedForwardCacheOp))
          : (attempt.legacy ? flxi::Kind::kForwardPublish : flxi::Kind::kAuthorizedForwardPublish);
  const char* kind = flxi::KindName(k);
  metrics_
      .AddCounter("felix_forward_sent_total",
                  "forwarded requests this broker sent as ingress, by kind and outcome",
                  std::string("kind=\"") + kind + "\",outcome=\"" + std::string(outcome) + "\"")
      .Increment();
}

void ForwardPublisher::Send(const std::shared_ptr<Attempt>& attempt) {
  if (attempt->sends >= options_.max_attempts) {
    auto failure = attempt->last_failure;
    failure.message += " (gave up after " + std::to_string(attempt->sends) + " attempts)";
    return Finish(attempt, std::move(failure));
  }
  std::optional<HostPort> addr = attempt->named_addr;
  if (!addr && options_.internal_addr_of) addr = options_.internal_addr_of(attempt->node_id);
  ++attempt->sends;
  if (!addr) {
    attempt->last_failure = Failure(
        ProtocolErrorCode::kShardUnavailable,
        "shard owner is unavailable: no internal address for broker '" + attempt->node_id + "'");
    Count(*attempt, "no_address");
    return RetryLater(attempt, "no internal address");
  }
  attempt->tried.insert({attempt->node_id, attempt->generation});
  std::string counter_bytes;  // a counter delta's 8 bytes, alive until the frame is encoded
  flxi::Frame frame =
      attempt->is_cache ? CacheFrame(*attempt, counter_bytes) : PublishFrame(*attempt);
  auto sent = pool_.Request(
      PeerAddress{attempt->node_id, *addr}, frame,
      [this, attempt](Result<PeerResponse, PeerError> answer) {
        OnAnswer(attempt, std::move(answer));
      },
      /*poll_for_answer=*/true);
  if (!sent) {
    Count(*attempt, "refused_locally");
    Finish(attempt,
           Failure(ProtocolErrorCode::kInvalidRequest,
                   std::string("cannot forward this ") +
                       (attempt->is_cache ? "operation: " : "batch: ") + sent.error().message));
  }
}

flxi::Frame ForwardPublisher::PublishFrame(const Attempt& attempt) {
  const auto& r = attempt.request;
  flxi::ForwardPublish fp;
  fp.shard = flxi::ShardRef{r.tenant, r.ns, r.stream, r.target.shard, attempt.generation};
  fp.ack = flxi::AckMode::kOnCommit;  // the owner answers after its durable write regardless
  fp.payloads.reserve(r.payloads.size());
  for (auto p : r.payloads) {
    fp.payloads.emplace_back(reinterpret_cast<const char*>(p.data()), p.size());
  }
  if (!attempt.legacy && !r.credential.empty()) fp.credential = r.credential;
  return flxi::Frame{flxi::ForwardPublishKind(fp), std::move(fp)};
}

flxi::Frame ForwardPublisher::CacheFrame(const Attempt& attempt, std::string& counter_bytes) {
  using Op = broker::CacheCommand::Op;
  const auto& r = attempt.cache;
  const auto& c = r.command;
  flxi::CacheOp op;
  op.shard = flxi::ShardRef{r.tenant, r.ns, r.cache, r.target.shard, attempt.generation};
  switch (c.op) {
    case Op::kPut:
      op.op = flxi::CacheOpKind::kPut;
      op.value = c.value;
      // FLXI's 0 means "no expiry": a client's 0 ("expired at once") travels as 1 ms.
      if (c.ttl_ms) op.ttl_ms = std::max<uint64_t>(*c.ttl_ms, 1);
      break;
    case Op::kGet:
      op.op = flxi::CacheOpKind::kGet;
      break;
    case Op::kDelete:
      op.op = flxi::CacheOpKind::kDelete;
      break;
    case Op::kCounterAdd:
      op.op = flxi::CacheOpKind::kCounterAdd;
      counter_bytes = flxi::EncodeCounterValue(c.delta);
      op.value = counter_bytes;
      break;
    case Op::kCounterGet:
      op.op = flxi::CacheOpKind::kCounterGet;
      break;
  }
  op.key = c.key;
  if (!attempt.legacy && !r.credential.empty()) op.credential = r.credential;
  if (c.condition) {
    op.condition = c.condition->type == broker::CacheCondition::Type::kAbsent
                       ? flxi::Condition{flxi::CacheCondition::kAbsent, 0}
                       : flxi::Condition{flxi::CacheCondition::kVersion, c.condition->version};
  } else if (c.want_version) {
    op.condition = flxi::Condition{flxi::CacheCondition::kNone, 0};  // a versioned get
  }
  if (op.condition && !op.credential) op.credential = std::string_view();  // OptCred: none
  return flxi::Frame{flxi::CacheOpFrameKind(op), std::move(op)};
}

void ForwardPublisher::RetryLater(const std::shared_ptr<Attempt>& attempt, std::string why) {
  if (attempt->sends >= options_.max_attempts) return Send(attempt);  // gives up at once
  int n = std::min(attempt->retries++, 10);
  auto delay = std::min(options_.backoff_max, options_.backoff_base * (1 << n));
  spdlog::debug("forward retry shard={} generation={} peer={} in {} ms: {}", attempt->ShardText(),
                attempt->generation, attempt->node_id, delay.count(), why);
  // Timers belong to the loop; the first send may run on the caller's thread.
  auto arm = [this, attempt, delay] { loop_.RunAfter(delay, [this, attempt] { Send(attempt); }); };
  if (loop_.InLoopThread()) {
    arm();
  } else {
    loop_.Post(std::move(arm));
  }
}

void ForwardPublisher::Finish(const std::shared_ptr<Attempt>& attempt,
                              broker::ForwardPublishOutcome outcome) {
  if (attempt->finished) return;
  attempt->finished = true;
  if (!outcome.ok) {
    spdlog::log(outcome.code == Code(ProtocolErrorCode::kUnacknowledged) ? spdlog::level::warn
                                                                         : spdlog::level::debug,
                "forward failed shard={} generation={} peer={} code={} {}", attempt->ShardText(),
                attempt->generation, attempt->node_id, outcome.code, outcome.message);
  }
  if (attempt->is_cache) {
    auto done = std::move(attempt->cache_done);
    broker::ForwardCacheOutcome out;
    out.ok = outcome.ok;
    out.result = std::move(attempt->cache_result);
    out.code = outcome.code;
    out.message = std::move(outcome.message);
    if (done) done(std::move(out));
    return;
  }
  auto done = std::move(attempt->done);
  attempt->request.owner.reset();  // the payloads are no longer needed
  if (done) done(std::move(outcome));
}

void ForwardPublisher::OnAnswer(const std::shared_ptr<Attempt>& attempt,
                                Result<PeerResponse, PeerError> answer) {
  using flxi::ErrorCode;
  if (!answer) {
    const PeerError& e = answer.error();
    Count(*attempt, PeerErrorKindName(e.kind));
    switch (e.kind) {
      case PeerErrorKind::kShed:
      case PeerErrorKind::kBackoff:
      case PeerErrorKind::kConnectFailed:  // nothing was sent: safe to send again
        attempt->last_failure = Failure(ProtocolErrorCode::kShardUnavailable,
                                        "shard owner is unavailable: " + e.message);
        return RetryLater(attempt, e.message);
      case PeerErrorKind::kTimeout:
      case PeerErrorKind::kDisconnected:
        if (attempt->IsRead()) {  // lands on the same state twice: may be asked again
          attempt->last_failure = Failure(ProtocolErrorCode::kShardUnavailable,
                                          "the shard owner's answer was lost: " + e.message);
          return RetryLater(attempt, e.message);
        }
        // The owner may have written it before its answer was lost: indeterminate.
        return Finish(attempt, Failure(ProtocolErrorCode::kUnacknowledged,
                                       "forwarded to broker '" + attempt->node_id +
                                           "', but its answer was lost (" + e.message +
                                           "): " + Unknown(*attempt)));
      case PeerErrorKind::kNotOffered:
      case PeerErrorKind::kStopped:
        return Finish(attempt, Failure(ProtocolErrorCode::kShardUnavailable,
                                       "cannot forward to the shard owner: " + e.message));
    }
    return;
  }
  const PeerResponse& response = *answer;
  auto frame = response.Decode();
  if (!frame) {
    Count(*attempt, "undecodable");
    return Finish(attempt, Failure(ProtocolErrorCode::kUnacknowledged,
                                   "the shard owner's answer did not decode (" +
                                       frame.error().ToString() + "): " + Unknown(*attempt)));
  }
  if (const auto* ok = std::get_if<flxi::ForwardCacheOk>(&frame->body); ok && attempt->is_cache) {
    return OnCacheOk(attempt, *ok);
  }
  if (const auto* ok = std::get_if<flxi::ConditionalCacheOk>(&frame->body);
      ok && attempt->IsConditional()) {
    Count(*attempt, "ok");
    broker::CacheCommandResult& result = attempt->cache_result;
    result.applied = ok->applied;
    result.version = ok->version;
    if (ok->value) result.value = std::string(*ok->value);
    broker::ForwardPublishOutcome done;
    done.ok = true;
    return Finish(attempt, std::move(done));
  }
  if (const auto* ok = std::get_if<flxi::ForwardPublishOk>(&frame->body);
      ok && !attempt->is_cache) {
    Count(*attempt, "ok");
    broker::ForwardPublishOutcome outcome;
    outcome.ok = true;
    outcome.owner_node_id = attempt->node_id;
    outcome.owner_generation = attempt->generation;
    bool trusted =
        response.peer_capabilities && (*response.peer_capabilities & flxi::kCapForwardOffsets) != 0;
    if (trusted && ok->first_offset <= ok->last_offset) {
      outcome.offsets = std::make_pair(ok->first_offset, ok->last_offset);
    }
    return Finish(attempt, std::move(outcome));
  }
  if (const auto* moved = std::get_if<flxi::NotLeader>(&frame->body)) {
    Count(*attempt, "not_leader");
    std::string node(moved->node_id);
    attempt->last_failure =
        Failure(ProtocolErrorCode::kShardUnavailable,
                "shard is moving: broker '" + attempt->node_id + "' named broker '" + node +
                    "' at generation " + std::to_string(moved->generation));
    if (attempt->tried.count({node, moved->generation}) != 0) {
      auto failure = attempt->last_failure;
      failure.message += ", which was already tried: redirect loop refused";
      return Finish(attempt, std::move(failure));
    }
    attempt->node_id = std::move(node);
    attempt->generation = moved->generation;
    attempt->named_addr.reset();
    if (auto addr = ParseHostPort(moved->advertise_addr)) attempt->named_addr = *addr;
    attempt->retries = 0;
    return Send(attempt);  // the refusal is the evidence nothing was written: follow now
  }
  const auto* error = std::get_if<flxi::ErrorAnswer>(&frame->body);
  if (error == nullptr) {
    Count(*attempt, "unexpected_kind");
    return Finish(attempt, Failure(ProtocolErrorCode::kUnacknowledged,
                                   std::string("the shard owner answered ") +
                                       flxi::KindName(frame->kind) + ": " + Unknown(*attempt)));
  }
  std::string detail = "broker '" + attempt->node_id +
                       "' refused the forward: " + flxi::ErrorCodeName(error->code) + " " +
                       std::string(error->detail);
  Count(*attempt, ErrorCodeLabel(error->code));
  switch (error->code) {
    case ErrorCode::kStaleRoute:
    case ErrorCode::kUnavailable:
      attempt->last_failure = Failure(ProtocolErrorCode::kShardUnavailable, detail);
      return RetryLater(attempt, detail);
    case ErrorCode::kOverload:
      attempt->last_failure = Failure(ProtocolErrorCode::kOverloaded, detail);
      return RetryLater(attempt, detail);
    case ErrorCode::kUnsupportedKind:
      if (attempt->IsConditional()) {
        // An owner from before kind 34: a versioned get is asked again as a plain get (its
        // answer has no version); a conditional write is refused, never sent unconditionally.
        if (attempt->cache.command.condition) {
          return Finish(attempt,
                        Failure(ProtocolErrorCode::kInternal,
                                detail + " (the shard owner does not serve conditional writes)"));
        }
        attempt->cache.command.want_version = false;
        attempt->tried.erase({attempt->node_id, attempt->generation});
        return Send(attempt);
      }
      if (!attempt->legacy && !attempt->Credential().empty()) {
        attempt->legacy = true;  // an owner from before kind 22 (23): the legacy kind, once
        attempt->tried.erase({attempt->node_id, attempt->generation});
        return Send(attempt);
      }
      return Finish(attempt, Failure(ProtocolErrorCode::kInternal, detail));
    case ErrorCode::kUnauthorized:
      return Finish(attempt, Failure(ProtocolErrorCode::kForbidden, detail));
    case ErrorCode::kMalformed:
      return Finish(attempt, Failure(ProtocolErrorCode::kInvalidRequest, detail));
    case ErrorCode::kStorageFailed:
      return Finish(attempt, Failure(ProtocolErrorCode::kStorage, detail));
    default:
      return Finish(attempt, Failure(ProtocolErrorCode::kInternal, detail));
  }
}

}  // namespace felix::cluster
