// The body of an atomic-commit record (storage.md §3.4), stored as one commit-flagged record
// (storage::kRecordFlagCommit) in a stream shard's `stream` log. Big-endian:
//   u8  version = 1
//   u32 event_len, then the event bytes
//   u32 op_count, then per op: u8 kind (0 = put, 1 = delete), u32 key_len, key (UTF-8),
//                              and for a put: u32 value_len, value
// Readers other than replication see the record as its event bytes at the record's offset;
// the shard's state view (ShardState) is projected from the ops.
//
// Decoding is bounded by the body's bytes: every length and the op count are checked against
// what remains before anything is allocated, and trailing bytes are refused. Pure functions,
// any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace felix::broker {

inline constexpr uint8_t kCommitRecordVersion = 1;

struct CommitOp {
  enum class Kind : uint8_t { kPut = 0, kDelete = 1 };
  Kind kind = Kind::kPut;
  std::string key;
  std::vector<uint8_t> value;  // put only
  bool operator==(const CommitOp&) const = default;
};

struct CommitRecord {
  std::vector<uint8_t> event;
  std::vector<CommitOp> ops;
  bool operator==(const CommitRecord&) const = default;
};

enum class CommitRecordError : uint8_t {
  kTruncated,  // a field runs past the end of the body
  kVersion,    // version byte not 1
  kOpKind,     // op kind not 0 or 1
  kTrailing,   // bytes after the last op
};
const char* CommitRecordErrorName(CommitRecordError error);

std::vector<uint8_t> EncodeCommitRecord(const CommitRecord& record);
tl::expected<CommitRecord, CommitRecordError> DecodeCommitRecord(std::span<const uint8_t> body);
// The event bytes inside `body` (a view into it), checking only the header and event length:
// what every reader but the state view needs.
tl::expected<std::span<const uint8_t>, CommitRecordError> CommitEventBytes(
    std::span<const uint8_t> body);

}  // namespace felix::broker
