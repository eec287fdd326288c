#include "broker/group_log_record.h"

#include <charconv>

#include "wire/byte_reader.h"

namespace felix::broker {
namespace {

constexpr size_t kHeaderV1 = 14;
constexpr size_t kHeaderV2 = 22;

uint32_t LoadLe32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void PutLe(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(uint8_t(value >> (8 * i)));
}

tl::unexpected<GroupRecordError> Bad(GroupRecordError e) {
  return tl::unexpected<GroupRecordError>(e);
}

}  // namespace

const char* GroupRecordErrorName(GroupRecordError error) {
  switch (error) {
    case GroupRecordError::kTooShort:
      return "group record is shorter than its fixed header";
    case GroupRecordError::kVersion:
      return "group record version is not readable by this build";
    case GroupRecordError::kKeyLength:
      return "group record key length exceeds the record";
    case GroupRecordError::kKeyNotUtf8:
      return "group record key is not valid UTF-8";
    case GroupRecordError::kOp:
      return "group record op is not one this build knows";
    case GroupRecordError::kCursorValue:
      return "cursor value is not an 8-byte position";
    case GroupRecordError::kDeadLetterKey:
      return "dead-letter key is not <group>\\x1F<offset>";
    case GroupRecordError::kDeadLetterValue:
      return "dead-letter value is neither empty nor \"redriven\"";
  }
  return "group record error";
}

std::vector<uint8_t> EncodeGroupLogRecord(const GroupLogRecord& record) {
  std::vector<uint8_t> out;
  bool put = record.op == GroupRecordOp::kPut;
  out.reserve(kHeaderV1 + record.key.size() + (put ? record.value.size() : 0));
  out.push_back(1);
  out.push_back(static_cast<uint8_t>(record.op));
  PutLe(out, 0, 8);  // no expiry
  PutLe(out, record.key.size(), 4);
  out.insert(out.end(), record.key.begin(), record.key.end());
  if (put) out.insert(out.end(), record.value.begin(), record.value.end());
  return out;
}

tl::expected<GroupLogRecord, GroupRecordError> DecodeGroupLogRecord(
    std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderV1) return Bad(GroupRecordError::kTooShort);
  uint8_t version = bytes[0];
  if (version != 1 && version != 2) return Bad(GroupRecordError::kVersion);
  size_t header = version == 1 ? kHeaderV1 : kHeaderV2;
  if (bytes.size() < header) return Bad(GroupRecordError::kTooShort);
  uint8_t op = bytes[1];
  if (op > 1 || (op == 1 && version == 2)) return Bad(GroupRecordError::kOp);
  uint64_t key_len = LoadLe32(bytes.data() + 10);
  if (key_len > bytes.size() - header) return Bad(GroupRecordError::kKeyLength);
  std::string_view key(reinterpret_cast<const char*>(bytes.data() + header), key_len);
  if (!wire::IsValidUtf8(key)) return Bad(GroupRecordError::kKeyNotUtf8);
  GroupLogRecord record;
  record.op = static_cast<GroupRecordOp>(op);
  record.key = std::string(key);
  if (record.op == GroupRecordOp::kPut) {
    auto rest = bytes.subspan(header + key_len);
    record.value.assign(rest.begin(), rest.end());
  }
  return record;
}

std::vector<uint8_t> EncodeCursorPut(std::string_view group, uint64_t position) {
  GroupLogRecord record{GroupRecordOp::kPut, std::string(group), std::string(8, '\0')};
  for (int i = 0; i < 8; ++i) record.value[i] = char(uint8_t(position >> (56 - 8 * i)));
  return EncodeGroupLogRecord(record);
}

std::vector<uint8_t> EncodeCursorDelete(std::string_view group) {
  return EncodeGroupLogRecord(GroupLogRecord{GroupRecordOp::kDelete, std::string(group), {}});
}

tl::expected<uint64_t, GroupRecordError> DecodeCursorValue(std::string_view value) {
  if (value.size() != 8) return Bad(GroupRecordError::kCursorValue);
  uint64_t position = 0;
  for (char c : value) position = (position << 8) | uint8_t(c);
  return position;
}

std::string DeadLetterKey(std::string_view group, uint64_t offset) {
  std::string key(group);
  key.push_back(kDeadLetterSeparator);
  key += std::to_string(offset);
  return key;
}

tl::expected<DeadLetterKeyParts, GroupRecordError> ParseDeadLetterKey(std::string_view key) {
  size_t at = key.rfind(kDeadLetterSeparator);
  if (at == std::string_view::npos) return Bad(GroupRecordError::kDeadLetterKey);
  std::string_view digits = key.substr(at + 1);
  if (digits.empty() || digits.size() > 20) return Bad(GroupRecordError::kDeadLetterKey);
  uint64_t offset = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), offset);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return Bad(GroupRecordError::kDeadLetterKey);
  }
  return DeadLetterKeyParts{std::string(key.substr(0, at)), offset};
}

std::vector<uint8_t> EncodeDeadLetterPut(std::string_view group, uint64_t offset,
                                         DeadLetterState state) {
  GroupLogRecord record{GroupRecordOp::kPut, DeadLetterKey(group, offset),
                        state == DeadLetterState::kRedriven ? std::string(kRedrivenValue) : ""};
  return EncodeGroupLogRecord(record);
}

std::vector<uint8_t> EncodeDeadLetterDelete(std::string_view group, uint64_t offset) {
  return EncodeGroupLogRecord(
      GroupLogRecord{GroupRecordOp::kDelete, DeadLetterKey(group, offset), {}});
}

tl::expected<DeadLetterState, GroupRecordError> DecodeDeadLetterValue(std::string_view value) {
  if (value.empty()) return DeadLetterState::kDeadLettered;
  if (value == kRedrivenValue) return DeadLetterState::kRedriven;
  return Bad(GroupRecordError::kDeadLetterValue);
}

}  // namespace felix::broker
