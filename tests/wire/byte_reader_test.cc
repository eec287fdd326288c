#include "wire/byte_reader.h"

#include <gtest/gtest.h>

#include "wire/byte_writer.h"

namespace felix::wire {
namespace {

TEST(ByteReader, ReadsBigEndianAndRoundTripsWithWriter) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  w.WriteU8(0xAB);
  w.WriteU16(0x1234);
  w.WriteU32(0xDEADBEEF);
  w.WriteU64(0x0102030405060708ull);
  w.WriteI64(-2);
  w.WriteBytes16("key");
  w.WriteBytes32(std::string_view("payload"));
  ASSERT_EQ(buf[1], 0x12);
  ASSERT_EQ(buf[2], 0x34);
  ByteReader r(buf);
  EXPECT_EQ(*r.ReadU8("a"), 0xAB);
  EXPECT_EQ(*r.ReadU16("b"), 0x1234);
  EXPECT_EQ(*r.ReadU32("c"), 0xDEADBEEFu);
  EXPECT_EQ(*r.ReadU64("d"), 0x0102030405060708ull);
  EXPECT_EQ(*r.ReadI64("e"), -2);
  EXPECT_EQ(*r.ReadString16("key"), "key");
  EXPECT_EQ(r.ReadBytes32("payload")->size(), 7u);
  EXPECT_TRUE(r.ExpectEnd("frame"));
}

TEST(ByteReader, ShortInputIsIncompleteNeverOverread) {
  const uint8_t three[] = {1, 2, 3};
  ByteReader r(three, sizeof three);
  auto v = r.ReadU32("count");
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, DecodeErrorCode::kIncomplete);
  EXPECT_NE(v.error().detail.find("count"), std::string::npos);
  // A length prefix promising more than remains.
  const uint8_t lying[] = {0, 0, 0, 9, 'a'};
  ByteReader r2(lying, sizeof lying);
  EXPECT_EQ(r2.ReadBytes32("payload").error().code, DecodeErrorCode::kIncomplete);
}

TEST(ByteReader, StringLimitsAndUtf8AreEnforced) {
  const uint8_t too_long[] = {0, 4, 'a', 'b', 'c', 'd'};
  ByteReader r(too_long, sizeof too_long);
  EXPECT_EQ(r.ReadString16("tenant", 3).error().code, DecodeErrorCode::kStringTooLong);
  const uint8_t bad_utf8[] = {0, 2, 0xC0, 0x80};  // overlong NUL
  ByteReader r2(bad_utf8, sizeof bad_utf8);
  EXPECT_EQ(r2.ReadString16("tenant").error().code, DecodeErrorCode::kInvalidUtf8);
}

TEST(ByteReader, CountIsBoundedByRemainingBytesBeforeAllocation) {
  const uint8_t body[] = {0, 0, 0, 0, 0, 0, 0, 0};
  ByteReader r(body, sizeof body);
  EXPECT_TRUE(r.CheckCount(2, 4, 65536, "payloads"));
  EXPECT_EQ(r.CheckCount(3, 4, 65536, "payloads").error().code, DecodeErrorCode::kCountTooLarge);
  EXPECT_EQ(r.CheckCount(70000, 0, 65536, "payloads").error().code,
            DecodeErrorCode::kCountTooLarge);
}

TEST(ByteReader, TrailingBytesAreRefused) {
  const uint8_t body[] = {0, 1, 2};
  ByteReader r(body, sizeof body);
  ASSERT_TRUE(r.ReadU16("x"));
  EXPECT_EQ(r.ExpectEnd("body").error().code, DecodeErrorCode::kTrailingBytes);
}

// The ASCII fast path reads eight bytes at a time: a bad or multi-byte sequence must be found
// at every position relative to those words, and a sequence cut at the end still refused.
TEST(IsValidUtf8, FindsEverySequenceWhereverItFallsAmongLongAscii) {
  for (size_t at = 0; at < 41; ++at) {
    std::string text(41, 'a');
    text[at] = '\x80';  // lone continuation byte
    EXPECT_FALSE(IsValidUtf8(text)) << at;
    text.replace(at, 1, "\xC3\xA9");  // é
    EXPECT_TRUE(IsValidUtf8(text)) << at;
    text.replace(at, 2, "\xED\xA0\x80");  // surrogate
    EXPECT_FALSE(IsValidUtf8(text)) << at;
  }
  for (size_t length = 0; length < 20; ++length) {
    EXPECT_FALSE(IsValidUtf8(std::string(length, 'z') + "\xE2\x82")) << length;  // truncated
    EXPECT_TRUE(IsValidUtf8(std::string(length, 'z') + "\xE2\x82\xAC")) << length;
  }
}

TEST(IsValidUtf8, AcceptsValidAndRefusesMalformed) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
}

}  // namespace
}  // namespace felix::wire

namespace felix::wire {
namespace {

// Reserve sizes a fresh buffer exactly (one allocation for a frame of known size) but grows a
// buffer that already holds frames geometrically: appending a thousand frames to one batch
// reallocates a handful of times, not once per frame.
TEST(ByteWriter, ReserveIsExactForAFreshBufferAndGeometricForABatch) {
  std::vector<uint8_t> fresh;
  ByteWriter(fresh).Reserve(300);
  EXPECT_EQ(fresh.capacity(), 300u);

  std::vector<uint8_t> batch;
  const std::vector<uint8_t> frame(280, 0x5a);
  size_t reallocations = 0;
  const uint8_t* data = nullptr;
  for (int i = 0; i < 1000; ++i) {
    ByteWriter w(batch);
    w.Reserve(frame.size());
    if (batch.data() != data) {
      ++reallocations;
      data = batch.data();
    }
    w.WriteBytes(std::span<const uint8_t>(frame));
  }
  EXPECT_EQ(batch.size(), 280'000u);
  EXPECT_LE(reallocations, 12u);
}

}  // namespace
}  // namespace felix::wire
