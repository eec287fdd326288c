// Cache and counter log records (storage.md §17.1 and §18), byte for byte.
//
// A cache record (little-endian payload inside the big-endian segment frame):
//   version u8 (1 = normal, 2 = compaction copy carrying the original version) | op u8
//   (0 put, 1 delete) | expires_at_millis u64 (0 = never) | key_len u32 | [version u64 when
//   v2] | key | value (put only: the rest of the record).
// A counter record, exactly 14 + key_len bytes:
//   version u8 = 1 | op u8 (0 delta, 1 checkpoint) | value i64 | key_len u32 | key.
//
// Decoders bound every length by the bytes that remain and return views into the input;
// malformed input is a kCorruption error naming the rule broken, never a crash. Pure
// functions, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace felix::broker {

struct CacheRecord {
  enum class Op : uint8_t { kPut = 0, kDelete = 1 };
  Op op = Op::kPut;
  uint64_t expires_at_millis = 0;           // 0 = never; always 0 for a delete
  std::optional<uint64_t> carried_version;  // v2 (compaction copy of a put) only
  std::string_view key;
  std::span<const uint8_t> value;  // put only
};

struct CounterRecord {
  enum class Op : uint8_t { kDelta = 0, kCheckpoint = 1 };
  Op op = Op::kDelta;
  int64_t value = 0;  // the delta, or the sum as of this record
  std::string_view key;
};

inline constexpr size_t kCacheRecordHeaderBytes = 14;    // v1; v2 adds 8
inline constexpr size_t kCounterRecordHeaderBytes = 14;  // plus the key

std::vector<uint8_t> EncodeCacheRecord(const CacheRecord& record);
// Errors (kCorruption): "CacheRecordTooShort", "CacheRecordVersion", "CacheRecordKeyLength",
// "CacheRecordKeyNotUtf8", "CacheRecordOp" (also a delete with version byte 2), as in §17.1.
// Bytes after a delete's key are ignored (as the reference decoder does).
Result<CacheRecord> DecodeCacheRecord(std::span<const uint8_t> payload);

std::vector<uint8_t> EncodeCounterRecord(const CounterRecord& record);
// Errors (kCorruption) with the §18 details: "is shorter than its fixed header", "version is
// not readable by this build", "key length does not match the record", "key is not valid
// UTF-8", "op is not one this build knows".
Result<CounterRecord> DecodeCounterRecord(std::span<const uint8_t> payload);

}  // namespace felix::broker
