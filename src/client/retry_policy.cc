#include "client/retry_policy.h"

#include <algorithm>

namespace felix::client_impl {

namespace {
constexpr std::chrono::milliseconds kFirstBackoff{20};
constexpr std::chrono::milliseconds kMaxBackoff{400};
constexpr std::chrono::milliseconds kMaxSuggested{5000};
}  // namespace

std::chrono::milliseconds RetryDelay(const ClientError& e, uint32_t attempts_made) {
  if (e.retry_after_ms > 0)
    return std::min(std::chrono::milliseconds(e.retry_after_ms), kMaxSuggested);
  std::chrono::milliseconds delay = kFirstBackoff;
  for (uint32_t i = 1; i < attempts_made && delay < kMaxBackoff; ++i) delay *= 2;
  return std::min(delay, kMaxBackoff);
}

RetryDecision DecideRetry(const ClientError& e, bool idempotent, uint32_t attempts_made,
                          uint32_t max_attempts) {
  switch (e.retry) {
    case RetryClass::kRedirect:
      if (e.leader_addr && !e.leader_addr->empty()) return {RetryStep::kRedirect, {}};
      break;  // no address: ask again, wherever the owner is now known to be
    case RetryClass::kRetry:
    case RetryClass::kRetryAfter:
      break;
    case RetryClass::kOutcomeUnknown:
      if (!idempotent) return {};
      break;
    case RetryClass::kFatal:
      return {};
  }
  if (attempts_made >= max_attempts) return {};
  return {RetryStep::kRetry, RetryDelay(e, attempts_made)};
}

}  // namespace felix::client_impl
