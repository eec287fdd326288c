// FLXI: the broker-internal protocol codec (forwarding, replication, fencing, liveness).
//
// Pure encode/decode, no I/O. A frame is a frozen 12-byte big-endian header (magic "FLXI",
// version 1, kind u16, length u32) and a body whose first eight bytes are always the
// correlation id. The byte layouts are internal-protocol-bodies.md; every kind 1–39 is here.
//
// Decoding is strict: the body is exactly `length` bytes, every field is present, nothing
// trails the last field, counts are bounded by what remains before anything is allocated,
// strings are length-bounded and valid UTF-8. Decoded strings, blobs and payloads are views
// into the input (no copy): the input buffer must outlive the decoded Frame.
//
// Encoding refuses (never truncates) a field over its limit, an enum value outside the
// registry, or a body whose optional parts do not match its kind.
//
// Everything here is a pure function over its arguments; any thread may call it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "wire/decode_error.h"

namespace felix::wire::flxi {

inline constexpr uint32_t kMagic = 0x464C5849;  // "FLXI"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 12;
inline constexpr uint32_t kMaxBodyBytes = 64u * 1024u * 1024u;  // MAX_BODY_BYTES
inline constexpr size_t kMaxIdentBytes = 512;                   // every Str field
inline constexpr size_t kMaxCredentialBytes = 16384;            // Cred / OptCred
inline constexpr uint32_t kMaxBatchPayloads = 65536;            // PayloadList count
inline constexpr uint32_t kMaxGenerations = 512;                // generations in kinds 32/36
inline constexpr size_t kMaxPublisherBytes = 255;               // u8 length in the marks section
inline constexpr uint32_t kMaxFetchAnswerBytes = 4u * 1024u * 1024u;  // records per fetch answer

// Message discriminants. Renumbering is forbidden; a test pins every value.
enum class Kind : uint16_t {
  kForwardPublish = 1,
  kForwardPublishOk = 2,
  kForwardPublishError = 3,
  kNotLeader = 4,
  kHello = 5,
  kHelloOk = 6,
  kReplicateRecords = 7,
  kReplicateOk = 8,
  kReplicateError = 9,
  kReplicateBootstrap = 10,
  kForwardCacheOp = 11,
  kForwardCacheOk = 12,
  kForwardCacheError = 13,
  kReplicateCacheRecords = 14,
  kReplicateCacheBootstrap = 15,
  kReplicateGroupRecords = 16,
  kReplicateGroupBootstrap = 17,
  kReplicateDeadLetterRecords = 18,
  kReplicateDeadLetterBootstrap = 19,
  kReplicateCounterRecords = 20,
  kReplicateCounterBootstrap = 21,
  kAuthorizedForwardPublish = 22,
  kAuthorizedForwardCacheOp = 23,
  kReplicateRebuild = 24,
  kReplicateMarkedRecords = 25,
  kReplicateCommittedRecords = 26,
  kHelloCapable = 27,
  kHelloCapableOk = 28,
  kFence = 29,
  kFenceOk = 30,
  kReplicateFetch = 31,
  kReplicateLabelledRecords = 32,
  kReplicateLabelledFetch = 33,
  kConditionalForwardCacheOp = 34,
  kConditionalForwardCacheOk = 35,
  kReplicateTimedRecords = 36,
  kReplicateTimedFetch = 37,
  kPing = 38,
  kPong = 39,
};
inline constexpr uint16_t kMaxKnownKind = 39;

// Error codes carried by kinds 3, 9 and 13.
enum class ErrorCode : uint16_t {
  kStaleRoute = 1,
  kUnavailable = 2,
  kUnauthorized = 3,
  kOverload = 4,
  kProtocolVersion = 5,
  kMalformed = 6,
  kStorageFailed = 7,
  kLogGap = 8,
  kLogConflict = 9,
  kFencedEpoch = 10,
  kUnsupportedKind = 11,
};
// {StaleRoute, Unavailable, Overload, LogGap}.
bool IsRetryable(ErrorCode code);

enum class AckMode : uint8_t { kNone = 0, kOnAccept = 1, kOnCommit = 2 };

enum class CacheOpKind : uint8_t {
  kPut = 1,
  kGet = 2,
  kDelete = 3,
  kCounterAdd = 4,
  kCounterGet = 5,
};

// Which of a shard's logs; the wire's own numbering.
enum class ReplicaLog : uint8_t {
  kStream = 1,
  kCache = 2,
  kGroupCursors = 3,
  kGroupDeadLetters = 4,
  kCounters = 5,
};

// Low 7 bits of a producer-mark byte; bit 0x80 means a publisher follows.
enum class MarkType : uint8_t {
  kNone = 0,
  kOpens = 1,  // followed by producer_id u64, sequence u64, batch_len u32
  kContinues = 2,
  kGenerationStart = 3,
  kAtomicCommit = 4,
};
inline constexpr uint8_t kMarkPublisherBit = 0x80;

enum class CacheCondition : uint8_t {
  kNone = 0,     // a Get that wants the version back
  kAbsent = 1,   // key must be absent
  kVersion = 2,  // key must be at `version` (the u64 is on the wire only for this one)
};

// Peer capability bits (kinds 27/28). Unknown bits are kept, never refused.
inline constexpr uint64_t kCapFence = 1ull << 0;
inline constexpr uint64_t kCapTailFetch = 1ull << 1;
inline constexpr uint64_t kCapGenerationLabels = 1ull << 2;
inline constexpr uint64_t kCapForwardOffsets = 1ull << 3;
inline constexpr uint64_t kCapCacheFence = 1ull << 4;
inline constexpr uint64_t kCapRecordTimes = 1ull << 5;
inline constexpr uint64_t kCapBallots = 1ull << 6;
inline constexpr uint64_t kCapPing = 1ull << 7;

// Raw bytes (payloads, values). Not necessarily UTF-8; a view into the decoded input.
using Bytes = std::string_view;

// Str tenant, Str namespace, Str stream (the cache name for a cache shard), u32 shard,
// u64 generation (the assignment generation the sender acts at).
struct ShardRef {
  std::string_view tenant;
  std::string_view ns;
  std::string_view stream;
  uint32_t shard = 0;
  uint64_t generation = 0;
  bool operator==(const ShardRef&) const = default;
};

// Kinds 1 (legacy, credential absent) and 22 (credential present and non-empty).
struct ForwardPublish {
  uint64_t correlation_id = 0;
  ShardRef shard;
  AckMode ack = AckMode::kOnCommit;
  std::vector<Bytes> payloads;
  std::optional<std::string_view> credential;
  bool operator==(const ForwardPublish&) const = default;
};

// Kind 2: inclusive range; first > last (1..=0) means "no log".
struct ForwardPublishOk {
  uint64_t correlation_id = 0;
  uint64_t first_offset = 0;
  uint64_t last_offset = 0;
  bool operator==(const ForwardPublishOk&) const = default;
};

// Kinds 3 (ForwardPublishError, also the generic unknown-kind refusal) and 13
// (ForwardCacheError).
struct ErrorAnswer {
  uint64_t correlation_id = 0;
  ErrorCode code = ErrorCode::kMalformed;
  std::string_view detail;  // ≤ 512 bytes, operator-only
  bool operator==(const ErrorAnswer&) const = default;
};

// Kind 4.
struct NotLeader {
  uint64_t correlation_id = 0;
  std::string_view node_id;
  std::string_view advertise_addr;
  uint64_t generation = 0;
  bool operator==(const NotLeader&) const = default;
};

// Kinds 5/6 (capabilities absent) and 27/28 (capabilities present, may be 0).
struct Hello {
  uint64_t correlation_id = 0;
  std::string_view node_id;
  std::optional<uint64_t> capabilities;
  bool operator==(const Hello&) const = default;
};

// One entry of the marks section (kinds 25, 26, 32, 36).
struct RecordMark {
  MarkType type = MarkType::kNone;
  uint64_t producer_id = 0;                   // kOpens only
  uint64_t sequence = 0;                      // kOpens only
  uint32_t batch_len = 0;                     // kOpens only
  std::optional<std::string_view> publisher;  // ≤ 255 bytes
  bool operator==(const RecordMark&) const = default;
};

struct GenerationStart {
  uint64_t generation = 0;
  uint64_t start_offset = 0;
  bool operator==(const GenerationStart&) const = default;
};

// The records family: kinds 7, 14, 16, 18, 20 (plain), 25 (+marks), 26 (+marks, log, commit),
// 32 (+marks, log, optional commit, generations), 36 (kind 32 + one time per payload).
// The decoded marks are exactly what travelled (an all-`none` list is kept, not emptied), so a
// decoded message re-encodes to the same bytes; use HasAnyMark() for the semantic test.
struct Records {
  uint64_t correlation_id = 0;
  ShardRef shard;
  uint64_t first_offset = 0;
  uint64_t checksum = 0;  // CRC-32 zero-extended; see BatchChecksum
  std::vector<Bytes> payloads;
  std::vector<RecordMark> marks;             // 25/26/32/36: one per payload; otherwise empty
  std::optional<ReplicaLog> log;             // 26/32/36 only
  std::optional<uint64_t> commit_offset;     // 26: required; 32/36: optional; otherwise absent
  std::vector<GenerationStart> generations;  // 32/36 only (oldest first)
  std::vector<uint64_t> times;               // 36: one per payload (µs since the Unix epoch)
  bool operator==(const Records&) const = default;
};

// Kind 8.
struct ReplicateOk {
  uint64_t correlation_id = 0;
  uint64_t durable_offset = 0;
  bool operator==(const ReplicateOk&) const = default;
};

// Kind 9.
struct ReplicateError {
  uint64_t correlation_id = 0;
  ErrorCode code = ErrorCode::kMalformed;
  uint64_t expected_offset = 0;
  std::string_view detail;
  bool operator==(const ReplicateError&) const = default;
};

// Kinds 10, 15, 17, 19, 21: the kind says which log.
struct Bootstrap {
  uint64_t correlation_id = 0;
  ShardRef shard;
  uint64_t base_offset = 0;
  bool operator==(const Bootstrap&) const = default;
};

struct Condition {
  CacheCondition type = CacheCondition::kNone;
  uint64_t version = 0;  // on the wire only for kVersion; must be 0 otherwise
  bool operator==(const Condition&) const = default;
};

// Kinds 11 (no credential, no condition), 23 (non-empty credential, no condition) and 34
// (credential present, possibly empty = "no auth", and a condition).
struct CacheOp {
  uint64_t correlation_id = 0;
  ShardRef shard;
  CacheOpKind op = CacheOpKind::kGet;
  std::string_view key;
  uint64_t ttl_ms = 0;
  Bytes value;  // CounterAdd: 8-byte big-endian i64 (see EncodeCounterValue)
  std::optional<std::string_view> credential;
  std::optional<Condition> condition;
  bool operator==(const CacheOp&) const = default;
};

// Kind 12: value present (possibly empty) or a miss.
struct ForwardCacheOk {
  uint64_t correlation_id = 0;
  std::optional<Bytes> value;
  bool operator==(const ForwardCacheOk&) const = default;
};

// Kind 24.
struct Rebuild {
  uint64_t correlation_id = 0;
  ShardRef shard;
  ReplicaLog log = ReplicaLog::kStream;
  uint64_t base_offset = 0;
  bool operator==(const Rebuild&) const = default;
};

// Kind 29.
struct Fence {
  uint64_t correlation_id = 0;
  ShardRef shard;
  ReplicaLog log = ReplicaLog::kStream;
  bool operator==(const Fence&) const = default;
};

// Kind 30.
struct FenceOk {
  uint64_t correlation_id = 0;
  uint64_t log_end = 0;
  uint64_t commit_offset = 0;
  uint64_t last_generation = 0;
  bool operator==(const FenceOk&) const = default;
};

// Kinds 31, 33, 37 (identical bodies).
struct Fetch {
  uint64_t correlation_id = 0;
  ShardRef shard;
  ReplicaLog log = ReplicaLog::kStream;
  uint64_t from_offset = 0;
  uint32_t max_bytes = 0;
  bool operator==(const Fetch&) const = default;
};

// Kind 35.
struct ConditionalCacheOk {
  uint64_t correlation_id = 0;
  bool applied = false;
  std::optional<uint64_t> version;
  std::optional<Bytes> value;
  bool operator==(const ConditionalCacheOk&) const = default;
};

// Kinds 38 (Ping) and 39 (Pong): the correlation id only.
struct PingPong {
  uint64_t correlation_id = 0;
  bool operator==(const PingPong&) const = default;
};

using Body = std::variant<ForwardPublish, ForwardPublishOk, ErrorAnswer, NotLeader, Hello, Records,
                          ReplicateOk, ReplicateError, Bootstrap, CacheOp, ForwardCacheOk, Rebuild,
                          Fence, FenceOk, Fetch, ConditionalCacheOk, PingPong>;

// A typed message: the kind and its body. The body alternative must be the one the kind's
// grammar uses (BodyIndexForKind) and its optional parts must match the kind.
struct Frame {
  Kind kind = Kind::kPing;
  Body body = PingPong{};
  bool operator==(const Frame&) const = default;
};

// The 12-byte header as the envelope decoder sees it: raw kind (maybe unknown) and length.
struct Envelope {
  uint16_t kind = 0;
  uint32_t length = 0;
  bool operator==(const Envelope&) const = default;
};

// --- names -----------------------------------------------------------------------------------

bool IsKnownKind(uint16_t kind);
const char* KindName(Kind kind);  // "ForwardPublish", ...
std::optional<Kind> KindFromName(std::string_view name);
const char* ErrorCodeName(ErrorCode code);  // "StaleRoute", ...
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name);
const char* AckModeName(AckMode mode);
std::optional<AckMode> AckModeFromName(std::string_view name);
const char* CacheOpKindName(CacheOpKind op);
std::optional<CacheOpKind> CacheOpKindFromName(std::string_view name);
const char* ReplicaLogName(ReplicaLog log);
std::optional<ReplicaLog> ReplicaLogFromName(std::string_view name);
const char* MarkTypeName(MarkType type);
std::optional<MarkType> MarkTypeFromName(std::string_view name);
const char* CacheConditionName(CacheCondition c);
std::optional<CacheCondition> CacheConditionFromName(std::string_view name);

// The Body alternative index a kind's grammar uses.
size_t BodyIndexForKind(Kind kind);

// --- decode ----------------------------------------------------------------------------------

// Envelope decode (the stream reader's): needs the 12 header bytes; checks magic and version
// only and returns the raw kind and length even for an unknown kind. kBadMagic / kBadVersion
// are fatal for the connection (there is no frame boundary to trust).
DecodeResult<Envelope> DecodeEnvelope(std::span<const uint8_t> bytes);

// Typed header decode: envelope, then the kind must be known (kUnknownKind) and the length at
// most kMaxBodyBytes (kFrameTooLarge).
DecodeResult<Envelope> DecodeTypedHeader(std::span<const uint8_t> bytes);

// Strict body decode for a known kind; `body` is exactly the header's `length` bytes.
DecodeResult<Frame> DecodeBody(Kind kind, std::span<const uint8_t> body);

// A whole frame: typed header, then exactly `length` body bytes (fewer → kIncomplete, more →
// kTrailingBytes), then the strict body decode.
DecodeResult<Frame> DecodeFrame(std::span<const uint8_t> bytes);

// --- encode ----------------------------------------------------------------------------------

// The whole frame (header + body). Refuses (kInvalidArgument) over-limit fields, invalid
// UTF-8 in string fields, enum values outside the registry, a body alternative or optional
// parts that do not match the kind, and a body above kMaxBodyBytes.
Result<std::vector<uint8_t>> EncodeFrame(const Frame& frame);

// --- kind selection (the sender picks the kind from what is present) ------------------------

// §6.1: a credential → 22 AuthorizedForwardPublish, none → 1 ForwardPublish.
Kind ForwardPublishKind(const ForwardPublish& m);
// §6.9: a condition → 34; else a credential → 23; else 11.
Kind CacheOpFrameKind(const CacheOp& m);
// §6.5: capabilities → 27/28, none → 5/6; `answer` picks the listener's kind.
Kind HelloKind(const Hello& m, bool answer);

// §7.1: the frame a leader sends for `records` destined to `log`. `labelled` (the follower
// offered GENERATION_LABELS for this log) sends kind 32, or 36 with `timed` (RECORD_TIMES;
// `records.times` must then hold one time per payload); else a commit offset sends 26; else a
// stream batch with any mark or publisher sends 25; else the log's own kind (7, 14, 16, 18,
// 20). The marks list is padded with `none` to one per payload where the kind has a marks
// section and dropped where it has none; sections the chosen kind does not carry (log,
// commit, generations, times) are set or cleared to match. Refuses marks or publishers on a
// non-stream log that would have to be dropped; drops times unless labelled and timed.
Result<Frame> MakeRecordsFrame(ReplicaLog log, Records records, bool labelled, bool timed);

// §7.2 / §6.8: the log a records, bootstrap, rebuild, fence or fetch frame is about — the log
// byte where the body has one, else the kind's own log. nullopt for other kinds.
std::optional<ReplicaLog> TargetLog(const Frame& frame);

// --- helpers ---------------------------------------------------------------------------------

uint64_t CorrelationId(const Frame& frame);

// The first 8 body bytes as a big-endian u64, or 0 when the body is shorter (how a frame of
// an unknown kind is matched to its request).
uint64_t CorrelationIdOfBody(std::span<const uint8_t> body);
// "this broker does not know frame kind N".
std::string UnsupportedKindDetail(uint16_t kind);
// The whole answer to a frame of a kind this broker does not know: kind 3
// ForwardPublishError, code UnsupportedKind, UnsupportedKindDetail(kind), correlation id
// CorrelationIdOfBody(body). The receiver then carries on with the next frame.
std::vector<uint8_t> EncodeUnsupportedKindAnswer(uint16_t kind, std::span<const uint8_t> body);

// batch_checksum: CRC-32 (zlib polynomial) over each payload's u32 big-endian length and
// bytes, then — only when any mark is not `none` or any publisher is present — the marks
// section as it travels. Zero-extended to u64. `marks` may be empty.
uint64_t BatchChecksum(std::span<const Bytes> payloads, std::span<const RecordMark> marks);
// True when any mark is not `none` or carries a publisher.
bool HasAnyMark(std::span<const RecordMark> marks);

// A replica clamps ReplicateFetch.max_bytes into [1, kMaxFetchAnswerBytes].
uint32_t ClampFetchBytes(uint32_t max_bytes);

// CounterAdd deltas and counter sums ride `value` as exactly 8 big-endian bytes.
std::string EncodeCounterValue(int64_t v);
DecodeResult<int64_t> DecodeCounterValue(Bytes value);

}  // namespace felix::wire::flxi
