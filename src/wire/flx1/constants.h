// FLX1 constants: frame envelope, frame flag bits (client-protocol §2–3), feature bits (§7),
// error codes and retry classes (§8), limits (§10). Pure constants and lookups; no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace felix::wire::flx1 {

// §2 frame envelope.
inline constexpr uint32_t kMagic = 0x464C5831;  // "FLX1"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderSize = 12;

// §10 limits (reference defaults; the caller passes the one that applies).
inline constexpr uint32_t kDefaultMaxFrameBytes = 16 * 1024 * 1024;
inline constexpr uint32_t kPreauthMaxFrameBytes = 64 * 1024;
inline constexpr size_t kMaxPublisherBytes = 255;
inline constexpr size_t kMaxBinaryStringBytes = 65535;

// §3 frame flag bits.
inline constexpr uint16_t kFlagBinaryPublishBatch = 0x0001;
inline constexpr uint16_t kFlagBinaryEventBatch = 0x0002;
inline constexpr uint16_t kFlagBinaryEventBatchShared = 0x0004;
inline constexpr uint16_t kFlagBinaryPublishAcked = 0x0008;
inline constexpr uint16_t kFlagBinaryPublishAck = 0x0010;
inline constexpr uint16_t kFlagEventBatchOffsets = 0x0020;
inline constexpr uint16_t kFlagBinaryPublishKeyed = 0x0040;
inline constexpr uint16_t kFlagBinaryPublishAckOwner = 0x0080;
inline constexpr uint16_t kFlagBinaryPublishIdempotent = 0x0100;
inline constexpr uint16_t kFlagBinaryPublishAckCode = 0x0200;
inline constexpr uint16_t kFlagBinaryPublishAckDetail = 0x0400;
inline constexpr uint16_t kFlagEventBatchSkipped = 0x0800;
inline constexpr uint16_t kFlagBinaryPublishAckOffset = 0x1000;
inline constexpr uint16_t kFlagEventBatchPublisher = 0x2000;
inline constexpr uint16_t kFlagEventBatchTimestamps = 0x4000;

// Every bit this build knows (newest reference KNOWN_FLAGS); anything else is refused.
inline constexpr uint16_t kKnownFlags = 0x7FFF;
// The three bits that existed before negotiation; assumed for a peer that sent no flags.
inline constexpr uint16_t kOriginalV1Flags = 0x0007;

// §7 feature bits (low word, `client_features` / `server_features`).
inline constexpr uint32_t kFeatureTopology = 0x0000'0001;
inline constexpr uint32_t kFeatureRedirect = 0x0000'0002;
inline constexpr uint32_t kFeatureCacheDelete = 0x0000'0004;
inline constexpr uint32_t kFeatureConsumerGroup = 0x0000'0008;
inline constexpr uint32_t kFeatureGroupDeadLetters = 0x0000'0010;
inline constexpr uint32_t kFeatureStreamShards = 0x0000'0020;
inline constexpr uint32_t kFeatureCacheWatch = 0x0000'0040;
inline constexpr uint32_t kFeatureCacheWatchRetained = 0x0000'0080;
inline constexpr uint32_t kFeatureCounters = 0x0000'0100;
inline constexpr uint32_t kFeatureIdempotentProducer = 0x0000'0200;
inline constexpr uint32_t kFeatureCacheShards = 0x0000'0400;
inline constexpr uint32_t kFeatureErrorCodes = 0x0000'0800;
inline constexpr uint32_t kFeatureShardMoved = 0x0000'1000;
inline constexpr uint32_t kFeatureUnsupported = 0x0000'2000;
inline constexpr uint32_t kFeatureSequenceReused = 0x0000'4000;
inline constexpr uint32_t kFeaturePublishPipeline = 0x0000'8000;
inline constexpr uint32_t kFeatureAtomicCommit = 0x0001'0000;
inline constexpr uint32_t kFeatureStreamPublishWindow = 0x0002'0000;
inline constexpr uint32_t kFeatureShardOwners = 0x0004'0000;
inline constexpr uint32_t kFeatureAckOnCommit = 0x0008'0000;
inline constexpr uint32_t kFeatureGroupConsumer = 0x0010'0000;
inline constexpr uint32_t kFeatureSubscriptionLagged = 0x0020'0000;
inline constexpr uint32_t kFeatureGroupSkipped = 0x0040'0000;
inline constexpr uint32_t kFeatureGroupPublisher = 0x0080'0000;
inline constexpr uint32_t kFeatureGroupAdmin = 0x0100'0000;
inline constexpr uint32_t kFeatureCacheConditional = 0x0200'0000;
inline constexpr uint32_t kFeatureRecordTimestamps = 0x0400'0000;
inline constexpr uint32_t kFeatureGroupClaimControl = 0x0800'0000;
inline constexpr uint32_t kFeaturePublishConditional = 0x1000'0000;
inline constexpr uint32_t kFeatureStreamRead = 0x2000'0000;
inline constexpr uint32_t kFeatureSubscribeQueue = 0x4000'0000;
// Not a feature: marks that a `_hi` word follows and that the sender reads the peer's.
inline constexpr uint32_t kFeatureExtended = 0x8000'0000;
// Extended word (`client_features_hi` / `server_features_hi`).
inline constexpr uint32_t kFeatureHiInspect = 0x0000'0001;

// §8.1 retry classes. The JSON form is a string, the binary ack form a byte; an unknown
// string or byte reads as kFatal.
enum class RetryClass : uint8_t {
  kRetry = 1,
  kRetryAfter = 2,
  kRedirect = 3,
  kOutcomeUnknown = 4,
  kFatal = 5,
};
std::string_view RetryClassName(RetryClass c);
RetryClass RetryClassFromName(std::string_view name);  // unknown → kFatal
RetryClass RetryClassFromByte(uint8_t byte);           // unknown → kFatal

// §8.2 error codes: string in JSON, u16 in the binary ack. Unknown codes decode fine; these
// lookups answer nullopt for them.
enum class ProtocolErrorCode : uint16_t {
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
};
std::optional<std::string_view> ErrorCodeName(uint16_t number);
std::optional<uint16_t> ErrorCodeNumber(std::string_view name);
// The class a code has when a sender says nothing else (§8.2 table); kFatal for unknown codes.
RetryClass DefaultRetryClass(uint16_t number);

}  // namespace felix::wire::flx1
