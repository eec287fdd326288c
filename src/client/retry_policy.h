// How a cluster-aware Client reacts to a failed request (client-protocol.md §8.1): act on the
// retry class the broker sent, never on the code. Pure functions; any thread.
#pragma once

#include <chrono>
#include <cstdint>

#include "felix/errors.h"

namespace felix::client_impl {

enum class RetryStep : uint8_t {
  kStop,      // give the error to the caller
  kRetry,     // send again (to the shard's owner as now known) after `delay`
  kRedirect,  // send to the broker the error names (leader_addr), at once
};

struct RetryDecision {
  RetryStep step = RetryStep::kStop;
  std::chrono::milliseconds delay{0};
};

// Backoff between attempts: 20 ms doubling to 400 ms; a retry_after_ms the broker suggested
// wins (capped at 5 s).
std::chrono::milliseconds RetryDelay(const ClientError& e, uint32_t attempts_made);

// `attempts_made` counts sends so far (1 after the first); `max_attempts` bounds them.
// retry / retry_after: again while attempts remain. redirect: follow when the error names an
// address (hops are bounded by the caller), else like retry. outcome_unknown: again only when
// `idempotent` (the request may have been applied). fatal: stop.
RetryDecision DecideRetry(const ClientError& e, bool idempotent, uint32_t attempts_made,
                          uint32_t max_attempts);

}  // namespace felix::client_impl
