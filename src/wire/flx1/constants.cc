#include "wire/flx1/constants.h"

#include <array>

namespace felix::wire::flx1 {

namespace {

struct CodeRow {
  std::string_view name;
  RetryClass default_class;
};

// Index = code number - 1 (§8.2).
constexpr std::array<CodeRow, 15> kCodes = {{
    {"unauthenticated", RetryClass::kFatal},
    {"forbidden", RetryClass::kFatal},
    {"not_found", RetryClass::kRetryAfter},
    {"invalid_request", RetryClass::kFatal},
    {"shard_unavailable", RetryClass::kRetry},
    {"not_leader", RetryClass::kRedirect},
    {"quorum_timeout", RetryClass::kOutcomeUnknown},
    {"leadership_lost", RetryClass::kOutcomeUnknown},
    {"unacknowledged", RetryClass::kOutcomeUnknown},
    {"overloaded", RetryClass::kRetryAfter},
    {"limit_exceeded", RetryClass::kFatal},
    {"draining", RetryClass::kRetry},
    {"internal", RetryClass::kOutcomeUnknown},
    {"storage", RetryClass::kOutcomeUnknown},
    {"stale_claim", RetryClass::kRetry},
}};

constexpr std::array<std::string_view, 5> kRetryNames = {"retry", "retry_after", "redirect",
                                                         "outcome_unknown", "fatal"};

}  // namespace

std::string_view RetryClassName(RetryClass c) {
  const auto i = static_cast<size_t>(c);
  return (i >= 1 && i <= kRetryNames.size()) ? kRetryNames[i - 1] : "fatal";
}

RetryClass RetryClassFromName(std::string_view name) {
  for (size_t i = 0; i < kRetryNames.size(); ++i) {
    if (kRetryNames[i] == name) return static_cast<RetryClass>(i + 1);
  }
  return RetryClass::kFatal;
}

RetryClass RetryClassFromByte(uint8_t byte) {
  return (byte >= 1 && byte <= 5) ? static_cast<RetryClass>(byte) : RetryClass::kFatal;
}

std::optional<std::string_view> ErrorCodeName(uint16_t number) {
  if (number == 0 || number > kCodes.size()) return std::nullopt;
  return kCodes[number - 1].name;
}

std::optional<uint16_t> ErrorCodeNumber(std::string_view name) {
  for (size_t i = 0; i < kCodes.size(); ++i) {
    if (kCodes[i].name == name) return static_cast<uint16_t>(i + 1);
  }
  return std::nullopt;
}

RetryClass DefaultRetryClass(uint16_t number) {
  if (number == 0 || number > kCodes.size()) return RetryClass::kFatal;
  return kCodes[number - 1].default_class;
}

}  // namespace felix::wire::flx1
