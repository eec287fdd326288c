// The cursor and dead-letter log records (storage.md §17.1 layout, §19 keys and values).
#include "broker/group_log_record.h"

#include <gtest/gtest.h>

namespace felix::broker {
namespace {

std::vector<uint8_t> Hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoul(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

TEST(GroupLogRecordTest, CursorPutLayout) {
  // version 1, put, no expiry, key_len 1, key "g", value 1000 as 8-byte big-endian.
  EXPECT_EQ(EncodeCursorPut("g", 1000), Hex("01"
                                            "00"
                                            "0000000000000000"
                                            "01000000"
                                            "67"
                                            "00000000000003E8"));
  auto decoded = DecodeGroupLogRecord(EncodeCursorPut("g", 1000));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->key, "g");
  EXPECT_EQ(DecodeCursorValue(decoded->value), 1000u);
}

TEST(GroupLogRecordTest, DeadLetterKeysAndValues) {
  EXPECT_EQ(DeadLetterKey("g", 42), std::string("g\x1F"
                                                "42"));
  auto parts = ParseDeadLetterKey(DeadLetterKey("orders-workers", 18446744073709551615ull));
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->group, "orders-workers");
  EXPECT_EQ(parts->offset, 18446744073709551615ull);
  EXPECT_FALSE(ParseDeadLetterKey("g42"));
  EXPECT_FALSE(ParseDeadLetterKey(std::string("g\x1F") + "4x"));
  EXPECT_FALSE(ParseDeadLetterKey(std::string("g\x1F")));
  auto put = DecodeGroupLogRecord(EncodeDeadLetterPut("g", 42, DeadLetterState::kRedriven));
  ASSERT_TRUE(put);
  EXPECT_EQ(DecodeDeadLetterValue(put->value), DeadLetterState::kRedriven);
  auto empty = DecodeGroupLogRecord(EncodeDeadLetterPut("g", 42, DeadLetterState::kDeadLettered));
  ASSERT_TRUE(empty);
  EXPECT_EQ(DecodeDeadLetterValue(empty->value), DeadLetterState::kDeadLettered);
  EXPECT_FALSE(DecodeDeadLetterValue("other"));
  // A delete is the header and the key only: 01 01 <8 zero bytes> 04000000 "g\x1F42".
  EXPECT_EQ(EncodeDeadLetterDelete("g", 42), Hex("010100000000000000000400000067"
                                                 "1F3432"));
}

TEST(GroupLogRecordTest, BadRecordsAreTypedErrors) {
  EXPECT_EQ(DecodeGroupLogRecord(Hex("0100")).error(), GroupRecordError::kTooShort);
  EXPECT_EQ(DecodeGroupLogRecord(Hex("030000000000000000000000000000")).error(),
            GroupRecordError::kVersion);
  EXPECT_EQ(DecodeGroupLogRecord(Hex("010200000000000000000000000000")).error(),
            GroupRecordError::kOp);
  EXPECT_EQ(DecodeGroupLogRecord(Hex("0100000000000000000005000000676767")).error(),
            GroupRecordError::kKeyLength);
  EXPECT_EQ(DecodeGroupLogRecord(Hex("0100000000000000000001000000FF")).error(),
            GroupRecordError::kKeyNotUtf8);
  EXPECT_EQ(DecodeCursorValue("1234567").error(), GroupRecordError::kCursorValue);
}

}  // namespace
}  // namespace felix::broker
