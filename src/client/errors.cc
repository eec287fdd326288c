#include "client/error_mapping.h"
#include "wire/flx1/constants.h"

namespace felix {

const char* ClientErrorCodeName(ClientErrorCode code) {
  switch (code) {
    case ClientErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ClientErrorCode::kForbidden:
      return "forbidden";
    case ClientErrorCode::kNotFound:
      return "not_found";
    case ClientErrorCode::kInvalidRequest:
      return "invalid_request";
    case ClientErrorCode::kShardUnavailable:
      return "shard_unavailable";
    case ClientErrorCode::kNotLeader:
      return "not_leader";
    case ClientErrorCode::kQuorumTimeout:
      return "quorum_timeout";
    case ClientErrorCode::kLeadershipLost:
      return "leadership_lost";
    case ClientErrorCode::kUnacknowledged:
      return "unacknowledged";
    case ClientErrorCode::kOverloaded:
      return "overloaded";
    case ClientErrorCode::kLimitExceeded:
      return "limit_exceeded";
    case ClientErrorCode::kDraining:
      return "draining";
    case ClientErrorCode::kInternal:
      return "internal";
    case ClientErrorCode::kStorage:
      return "storage";
    case ClientErrorCode::kStaleClaim:
      return "stale_claim";
    case ClientErrorCode::kUnknown:
      return "unknown";
    case ClientErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ClientErrorCode::kTransport:
      return "transport";
    case ClientErrorCode::kTimeout:
      return "timeout";
    case ClientErrorCode::kClosed:
      return "closed";
    case ClientErrorCode::kProtocol:
      return "protocol";
    case ClientErrorCode::kUnsupported:
      return "unsupported";
    case ClientErrorCode::kCursorTooOld:
      return "cursor_too_old";
    case ClientErrorCode::kCursorInFuture:
      return "cursor_in_future";
    case ClientErrorCode::kLagged:
      return "lagged";
    case ClientErrorCode::kShardMoved:
      return "shard_moved";
    case ClientErrorCode::kStreamEnded:
      return "stream_ended";
    case ClientErrorCode::kIndeterminate:
      return "indeterminate";
  }
  return "unknown";
}

const char* RetryClassName(RetryClass retry) {
  switch (retry) {
    case RetryClass::kRetry:
      return "retry";
    case RetryClass::kRetryAfter:
      return "retry_after";
    case RetryClass::kRedirect:
      return "redirect";
    case RetryClass::kOutcomeUnknown:
      return "outcome_unknown";
    case RetryClass::kFatal:
      return "fatal";
  }
  return "fatal";
}

std::string ClientError::ToString() const {
  std::string out = code_name.empty() ? ClientErrorCodeName(code) : code_name;
  out += " (";
  out += RetryClassName(retry);
  out += "): ";
  out += message;
  if (reason) out += " [reason " + *reason + "]";
  if (retry_after_ms) out += " [retry after " + std::to_string(retry_after_ms) + " ms]";
  if (available) out += " [available " + std::to_string(*available) + "]";
  if (resume_from) out += " [resume from " + std::to_string(*resume_from) + "]";
  return out;
}

ClientError MakeClientError(ClientErrorCode code, std::string message) {
  ClientError e;
  e.code = code;
  e.message = std::move(message);
  e.code_name = ClientErrorCodeName(code);
  uint16_t n = static_cast<uint16_t>(code);
  if (n >= 1 && n <= 15) {
    e.retry = static_cast<RetryClass>(wire::flx1::DefaultRetryClass(n));
  } else {
    switch (code) {
      case ClientErrorCode::kTransport:
      case ClientErrorCode::kTimeout:
      case ClientErrorCode::kIndeterminate:
        e.retry = RetryClass::kOutcomeUnknown;
        break;
      case ClientErrorCode::kLagged:
      case ClientErrorCode::kStreamEnded:
        e.retry = RetryClass::kRetry;
        break;
      case ClientErrorCode::kShardMoved:
        e.retry = RetryClass::kRedirect;
        break;
      default:
        e.retry = RetryClass::kFatal;
        break;
    }
  }
  return e;
}

ClientError AsWriteOutcome(ClientError e) {
  if (e.retry != RetryClass::kOutcomeUnknown || e.code == ClientErrorCode::kIndeterminate) return e;
  e.cause = e.code;
  e.message =
      "outcome unknown, the write may have been applied (" + e.code_name + "): " + e.message;
  e.code = ClientErrorCode::kIndeterminate;
  e.code_name = ClientErrorCodeName(ClientErrorCode::kIndeterminate);
  return e;
}

namespace client_impl {

namespace flx1 = wire::flx1;

namespace {

ClientError FromNumber(uint16_t number, std::string name, std::optional<RetryClass> retry,
                       std::string message) {
  ClientError e;
  if (flx1::ErrorCodeName(number)) {
    e.code = static_cast<ClientErrorCode>(number);
  } else {
    e.code = ClientErrorCode::kUnknown;
  }
  e.code_name = std::move(name);
  e.retry = retry ? *retry : static_cast<RetryClass>(flx1::DefaultRetryClass(number));
  e.message = std::move(message);
  return e;
}

}  // namespace

ClientError FromWire(const std::optional<std::string>& code,
                     const std::optional<std::string>& retry,
                     const std::optional<flx1::ErrorDetail>& detail, std::string message,
                     RetryClass fallback) {
  std::optional<RetryClass> cls;
  if (retry) cls = static_cast<RetryClass>(flx1::RetryClassFromName(*retry));
  ClientError e;
  if (code) {
    auto number = flx1::ErrorCodeNumber(*code);
    // An unknown code keeps its name; its class is the one sent (fatal when none was).
    e = FromNumber(number.value_or(0), *code, cls ? cls : std::optional<RetryClass>(), message);
    if (!number && !cls) e.retry = RetryClass::kFatal;
  } else {
    e.code = ClientErrorCode::kUnknown;
    e.code_name = "unknown";
    e.retry = cls.value_or(fallback);
    e.message = std::move(message);
  }
  if (detail) {
    e.reason = detail->reason;
    e.retry_after_ms = detail->retry_after_ms.value_or(0);
  }
  return e;
}

ClientError FromErrorMessage(const flx1::Error& error, RetryClass fallback) {
  return FromWire(error.code, error.retry, error.detail, error.message, fallback);
}

ClientError FromPublishError(const flx1::PublishError& error) {
  return FromWire(error.code, error.retry, error.detail, error.message,
                  RetryClass::kOutcomeUnknown);
}

ClientError FromBinaryAck(const flx1::BinaryPublishAck& ack) {
  std::string message(ack.message);
  if (!ack.code) {
    ClientError e;
    e.code = ClientErrorCode::kUnknown;
    e.code_name = "unknown";
    e.retry = RetryClass::kOutcomeUnknown;
    e.message = std::move(message);
    return e;
  }
  auto name = flx1::ErrorCodeName(ack.code->code);
  ClientError e = FromNumber(
      ack.code->code, name ? std::string(*name) : "code_" + std::to_string(ack.code->code),
      static_cast<RetryClass>(flx1::RetryClassFromByte(ack.code->retry)), std::move(message));
  if (ack.detail) {
    if (!ack.detail->reason.empty()) e.reason = std::string(ack.detail->reason);
    e.retry_after_ms = ack.detail->retry_after_ms;
  }
  return e;
}

ClientError FromCursorError(const flx1::SubscribeCursorError& error) {
  bool too_old = error.reason == flx1::CursorErrorReason::kTooOld;
  ClientError e = MakeClientError(
      too_old ? ClientErrorCode::kCursorTooOld : ClientErrorCode::kCursorInFuture,
      too_old ? "offset " + std::to_string(error.requested) +
                    " is no longer retained; oldest retained is " + std::to_string(error.available)
              : "offset " + std::to_string(error.requested) + " is past the tail " +
                    std::to_string(error.available));
  e.requested = error.requested;
  e.available = error.available;
  return e;
}

ClientError FromNotLeader(const flx1::NotLeader& not_leader) {
  ClientError e = MakeClientError(ClientErrorCode::kNotLeader,
                                  "shard is owned by " + not_leader.node_id +
                                      (not_leader.addr ? " at " + *not_leader.addr : ""));
  e.retry = RetryClass::kRedirect;
  e.leader_node = not_leader.node_id;
  e.leader_addr = not_leader.addr;
  e.leader_generation = not_leader.generation;
  return e;
}

ClientError FromTransport(const Error& error, const std::string& what, RetryClass retry) {
  ClientError e = MakeClientError(
      error.code == ErrorCode::kTimeout ? ClientErrorCode::kTimeout : ClientErrorCode::kTransport,
      what + ": " + error.message);
  e.retry = retry;
  return e;
}

ClientError FromDecode(const wire::DecodeError& error, const std::string& where) {
  return MakeClientError(ClientErrorCode::kProtocol, where + ": " + error.ToString());
}

}  // namespace client_impl
}  // namespace felix
