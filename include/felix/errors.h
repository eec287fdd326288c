// Typed errors of the Felix C++ client library.
//
// Every fallible call returns felix::ClientResult<T> (a tl::expected<T, ClientError>); nothing
// in the public API throws. A ClientError carries:
//   - code: one of the broker's error codes (client-protocol §8.2), or a client-side condition
//     (transport failure, timeout, closed client, protocol violation, cursor refusal, ...);
//   - retry: the retry class (§8.1) *as the broker sent it* when it sent one, otherwise the
//     class the client knows applies. Act on the class, not on the code;
//   - message, plus optional detail (reason, retry_after_ms) and, for cursor refusals and
//     ended subscriptions, the offsets that tell where to resume.
//
// Plain values; safe to copy and use from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <tl/expected.hpp>

namespace felix {

enum class ClientErrorCode : uint16_t {
  // Broker error codes (§8.2), same numbers as the binary acknowledgement's u16.
  kUnauthenticated = 1,
  kForbidden = 2,
  kNotFound = 3,
  kInvalidRequest = 4,
  kShardUnavailable = 5,
  kNotLeader = 6,
  kQuorumTimeout = 7,
  kLeadershipLost = 8,
  kUnacknowledged = 9,
  kOverloaded = 10,
  kLimitExceeded = 11,
  kDraining = 12,
  kInternal = 13,
  kStorage = 14,
  kStaleClaim = 15,
  // The broker sent a code this client does not know (code_name holds it) or no code at all
  // (a broker that did not negotiate error codes).
  kUnknown = 1000,
  // Client-side conditions.
  kInvalidArgument = 1001,  // bad options or arguments; nothing was sent
  kTransport = 1002,        // connection or handshake failure, connection lost
  kTimeout = 1003,          // no answer within the configured time
  kClosed = 1004,           // the client (or the subscription) was closed
  kProtocol = 1005,         // the broker sent something this client cannot accept
  kUnsupported = 1006,      // the broker did not advertise what the call needs
  kCursorTooOld = 1007,     // subscribe offset below retention; `available` = oldest retained
  kCursorInFuture = 1008,   // subscribe offset past the tail; `available` = current tail
  kLagged = 1009,           // the broker ended the subscription after dropping records;
                            // resume at `resume_from`
  kShardMoved = 1010,       // the shard moved to another broker; resume at `resume_from`
  kStreamEnded = 1011,      // the broker ended the event stream (resume at next_offset())
  // A non-idempotent write (acknowledged publish, cache put, counter add) was sent but its
  // outcome is unknown: it may or may not have been applied. Never a failure: check (read
  // back) before writing again. `cause` says what was reported (kUnacknowledged,
  // kQuorumTimeout, kTimeout, kTransport, ...); retry is always kOutcomeUnknown. The client
  // never resends such a write by itself.
  kIndeterminate = 1012,
};

// §8.1 retry classes (same numbers as the binary acknowledgement's retry byte).
enum class RetryClass : uint8_t {
  kRetry = 1,           // nothing applied; resending is safe
  kRetryAfter = 2,      // nothing applied; wait (retry_after_ms if given), then resend
  kRedirect = 3,        // nothing applied; the shard's owner is another broker
  kOutcomeUnknown = 4,  // may have been applied; resend only what is idempotent
  kFatal = 5,           // will fail the same way again
};

struct ClientError {
  ClientErrorCode code = ClientErrorCode::kInternal;
  RetryClass retry = RetryClass::kFatal;
  std::string message;
  std::string code_name;                // wire name ("not_found", "code_42") or client name
  std::optional<std::string> reason;    // detail.reason, e.g. "moving"
  uint64_t retry_after_ms = 0;          // 0 = no suggestion
  std::optional<uint64_t> requested;    // cursor errors: the offset asked for
  std::optional<uint64_t> available;    // cursor errors: oldest retained / current tail
  std::optional<uint64_t> resume_from;  // kLagged / kShardMoved / kStreamEnded
  // kNotLeader from a cluster broker: who serves the shard (its client-facing address when the
  // broker knows it) and the assignment generation.
  std::optional<std::string> leader_node;
  std::optional<std::string> leader_addr;
  std::optional<uint64_t> leader_generation;
  // kIndeterminate: the code that was reported.
  std::optional<ClientErrorCode> cause;

  // True for kIndeterminate: the write may have been applied.
  bool indeterminate() const { return code == ClientErrorCode::kIndeterminate; }

  // "not_found (retry_after): stream not found".
  std::string ToString() const;
};

template <typename T>
using ClientResult = tl::expected<T, ClientError>;

// Stable lower-case names: "not_found", "transport", "cursor_too_old", ...
const char* ClientErrorCodeName(ClientErrorCode code);
// "retry", "retry_after", "redirect", "outcome_unknown", "fatal".
const char* RetryClassName(RetryClass retry);

// A ClientError with the class the client assigns to `code` when nobody said otherwise.
ClientError MakeClientError(ClientErrorCode code, std::string message);
// `e` as the outcome of a non-idempotent write: kIndeterminate (cause = e.code) when its class
// is outcome_unknown, `e` unchanged otherwise.
ClientError AsWriteOutcome(ClientError e);

}  // namespace felix
