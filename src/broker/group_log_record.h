// Records of the consumer-group cursor log and dead-letter log (storage.md §19).
//
// Both logs use the cache record layout of storage.md §17.1 (little-endian header, no TTL):
//   off 0  u8   version            1 (2 = "carried version", compaction only; read, not written)
//   off 1  u8   op                 0 = put, 1 = delete
//   off 2  u64  expires_at_millis  always 0 here
//   off 10 u32  key_len
//   (v2: u64 version)
//   key, then (put only) the value = the rest of the record.
// Cursor log: key = group name, value = committed position as 8-byte big-endian u64.
// Dead-letter log: key = "<group>\x1F<offset as decimal ASCII>", value empty = dead-lettered,
// "redriven" = redriven and not yet finished; a delete removes the entry.
//
// Decoding is bounded by the record's bytes (never allocates from a length field) and fails
// with a typed error; pure functions, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace felix::broker {

enum class GroupRecordOp : uint8_t { kPut = 0, kDelete = 1 };

struct GroupLogRecord {
  GroupRecordOp op = GroupRecordOp::kPut;
  std::string key;
  std::string value;  // put only
  bool operator==(const GroupLogRecord&) const = default;
};

enum class GroupRecordError : uint8_t {
  kTooShort,        // shorter than the fixed header
  kVersion,         // version not 1 or 2
  kKeyLength,       // key_len larger than what remains
  kKeyNotUtf8,      // key is not valid UTF-8
  kOp,              // op not 0/1, or a delete with version 2
  kCursorValue,     // cursor value is not exactly 8 bytes
  kDeadLetterKey,   // no separator, or the offset is not a decimal u64
  kDeadLetterValue  // neither empty nor "redriven"
};
const char* GroupRecordErrorName(GroupRecordError error);

std::vector<uint8_t> EncodeGroupLogRecord(const GroupLogRecord& record);
tl::expected<GroupLogRecord, GroupRecordError> DecodeGroupLogRecord(std::span<const uint8_t> bytes);

// Cursor log helpers.
std::vector<uint8_t> EncodeCursorPut(std::string_view group, uint64_t position);
std::vector<uint8_t> EncodeCursorDelete(std::string_view group);
tl::expected<uint64_t, GroupRecordError> DecodeCursorValue(std::string_view value);

// Dead-letter log helpers.
inline constexpr char kDeadLetterSeparator = '\x1F';
inline constexpr std::string_view kRedrivenValue = "redriven";
enum class DeadLetterState : uint8_t { kDeadLettered, kRedriven };
std::string DeadLetterKey(std::string_view group, uint64_t offset);
struct DeadLetterKeyParts {
  std::string group;
  uint64_t offset = 0;
};
tl::expected<DeadLetterKeyParts, GroupRecordError> ParseDeadLetterKey(std::string_view key);
std::vector<uint8_t> EncodeDeadLetterPut(std::string_view group, uint64_t offset,
                                         DeadLetterState state);
std::vector<uint8_t> EncodeDeadLetterDelete(std::string_view group, uint64_t offset);
tl::expected<DeadLetterState, GroupRecordError> DecodeDeadLetterValue(std::string_view value);

}  // namespace felix::broker
