// Names of FLXI kinds and enumerations (canonical JSON, logs, the CLI).
#include <array>
#include <utility>

#include "wire/flxi/flxi.h"

namespace felix::wire::flxi {
namespace {

constexpr std::array<const char*, kMaxKnownKind + 1> kKindNames = {
    "",
    "ForwardPublish",
    "ForwardPublishOk",
    "ForwardPublishError",
    "NotLeader",
    "Hello",
    "HelloOk",
    "ReplicateRecords",
    "ReplicateOk",
    "ReplicateError",
    "ReplicateBootstrap",
    "ForwardCacheOp",
    "ForwardCacheOk",
    "ForwardCacheError",
    "ReplicateCacheRecords",
    "ReplicateCacheBootstrap",
    "ReplicateGroupRecords",
    "ReplicateGroupBootstrap",
    "ReplicateDeadLetterRecords",
    "ReplicateDeadLetterBootstrap",
    "ReplicateCounterRecords",
    "ReplicateCounterBootstrap",
    "AuthorizedForwardPublish",
    "AuthorizedForwardCacheOp",
    "ReplicateRebuild",
    "ReplicateMarkedRecords",
    "ReplicateCommittedRecords",
    "HelloCapable",
    "HelloCapableOk",
    "Fence",
    "FenceOk",
    "ReplicateFetch",
    "ReplicateLabelledRecords",
    "ReplicateLabelledFetch",
    "ConditionalForwardCacheOp",
    "ConditionalForwardCacheOk",
    "ReplicateTimedRecords",
    "ReplicateTimedFetch",
    "Ping",
    "Pong",
};

constexpr std::array<const char*, 12> kErrorNames = {
    "",          "StaleRoute",    "Unavailable", "Unauthorized", "Overload",    "ProtocolVersion",
    "Malformed", "StorageFailed", "LogGap",      "LogConflict",  "FencedEpoch", "UnsupportedKind",
};
constexpr std::array<const char*, 3> kAckNames = {"None", "OnAccept", "OnCommit"};
constexpr std::array<const char*, 6> kOpNames = {"",       "Put",        "Get",
                                                 "Delete", "CounterAdd", "CounterGet"};
constexpr std::array<const char*, 6> kLogNames = {
    "", "Stream", "Cache", "GroupCursors", "GroupDeadLetters", "Counters"};
constexpr std::array<const char*, 5> kMarkNames = {"None", "Opens", "Continues", "GenerationStart",
                                                   "AtomicCommit"};
constexpr std::array<const char*, 3> kConditionNames = {"None", "Absent", "Version"};

template <typename E, size_t N>
const char* NameOf(const std::array<const char*, N>& names, E v) {
  auto i = static_cast<size_t>(v);
  return i < N && names[i][0] != '\0' ? names[i] : "?";
}

template <typename E, size_t N>
std::optional<E> FromName(const std::array<const char*, N>& names, std::string_view name) {
  if (name.empty()) return std::nullopt;
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace

bool IsRetryable(ErrorCode code) {
  return code == ErrorCode::kStaleRoute || code == ErrorCode::kUnavailable ||
         code == ErrorCode::kOverload || code == ErrorCode::kLogGap;
}

bool IsKnownKind(uint16_t kind) {
  return kind >= 1 && kind <= kMaxKnownKind;
}

const char* KindName(Kind kind) {
  return NameOf(kKindNames, kind);
}
std::optional<Kind> KindFromName(std::string_view name) {
  return FromName<Kind>(kKindNames, name);
}
const char* ErrorCodeName(ErrorCode code) {
  return NameOf(kErrorNames, code);
}
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name) {
  return FromName<ErrorCode>(kErrorNames, name);
}
const char* AckModeName(AckMode mode) {
  return NameOf(kAckNames, mode);
}
std::optional<AckMode> AckModeFromName(std::string_view name) {
  return FromName<AckMode>(kAckNames, name);
}
const char* CacheOpKindName(CacheOpKind op) {
  return NameOf(kOpNames, op);
}
std::optional<CacheOpKind> CacheOpKindFromName(std::string_view name) {
  return FromName<CacheOpKind>(kOpNames, name);
}
const char* ReplicaLogName(ReplicaLog log) {
  return NameOf(kLogNames, log);
}
std::optional<ReplicaLog> ReplicaLogFromName(std::string_view name) {
  return FromName<ReplicaLog>(kLogNames, name);
}
const char* MarkTypeName(MarkType type) {
  return NameOf(kMarkNames, type);
}
std::optional<MarkType> MarkTypeFromName(std::string_view name) {
  return FromName<MarkType>(kMarkNames, name);
}
const char* CacheConditionName(CacheCondition c) {
  return NameOf(kConditionNames, c);
}
std::optional<CacheCondition> CacheConditionFromName(std::string_view name) {
  return FromName<CacheCondition>(kConditionNames, name);
}

size_t BodyIndexForKind(Kind kind) {
  switch (kind) {
    case Kind::kForwardPublish:
    case Kind::kAuthorizedForwardPublish:
      return 0;
    case Kind::kForwardPublishOk:
      return 1;
    case Kind::kForwardPublishError:
    case Kind::kForwardCacheError:
      return 2;
    case Kind::kNotLeader:
      return 3;
    case Kind::kHello:
    case Kind::kHelloOk:
    case Kind::kHelloCapable:
    case Kind::kHelloCapableOk:
      return 4;
    case Kind::kReplicateRecords:
    case Kind::kReplicateCacheRecords:
    case Kind::kReplicateGroupRecords:
    case Kind::kReplicateDeadLetterRecords:
    case Kind::kReplicateCounterRecords:
    case Kind::kReplicateMarkedRecords:
    case Kind::kReplicateCommittedRecords:
    case Kind::kReplicateLabelledRecords:
    case Kind::kReplicateTimedRecords:
      return 5;
    case Kind::kReplicateOk:
      return 6;
    case Kind::kReplicateError:
      return 7;
    case Kind::kReplicateBootstrap:
    case Kind::kReplicateCacheBootstrap:
    case Kind::kReplicateGroupBootstrap:
    case Kind::kReplicateDeadLetterBootstrap:
    case Kind::kReplicateCounterBootstrap:
      return 8;
    case Kind::kForwardCacheOp:
    case Kind::kAuthorizedForwardCacheOp:
    case Kind::kConditionalForwardCacheOp:
      return 9;
    case Kind::kForwardCacheOk:
      return 10;
    case Kind::kReplicateRebuild:
      return 11;
    case Kind::kFence:
      return 12;
    case Kind::kFenceOk:
      return 13;
    case Kind::kReplicateFetch:
    case Kind::kReplicateLabelledFetch:
    case Kind::kReplicateTimedFetch:
      return 14;
    case Kind::kConditionalForwardCacheOk:
      return 15;
    case Kind::kPing:
    case Kind::kPong:
      return 16;
  }
  return std::variant_npos;
}

}  // namespace felix::wire::flxi
