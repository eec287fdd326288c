#include "transport/flxi_framing.h"

#include <gtest/gtest.h>

#include "transport/flxi_interim_messages.h"

namespace felix::transport {
namespace {

std::vector<uint8_t> Hex(const std::string& hex) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : hex)
    if (!isspace(static_cast<unsigned char>(c))) digits += c;
  for (size_t i = 0; i + 1 < digits.size(); i += 2)
    out.push_back(uint8_t(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return out;
}

// Golden frames from internal-protocol-bodies.md §11.
TEST(FlxiInterimTest, HelloMatchesSpecFrame) {
  auto body = flxi_interim::EncodeHello({42, "broker-a"});
  ASSERT_TRUE(body.has_value());
  std::vector<uint8_t> frame;
  AppendFlxiFrame(frame, flxi_interim::kKindHello, *body);
  EXPECT_EQ(frame, Hex("46 4C 58 49 00 01 00 05 00 00 00 14 00 00 00 00 00 00 00 2A 00 00 00 08 "
                       "62 72 6F 6B 65 72 2D 61"));
  auto back = flxi_interim::DecodeHello(std::span<const uint8_t>(frame).subspan(12));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->correlation_id, 42u);
  EXPECT_EQ(back->node_id, "broker-a");
}

TEST(FlxiInterimTest, UnsupportedKindErrorMatchesSpecFrame) {
  auto body = flxi_interim::EncodeError(
      {42, flxi_interim::kErrUnsupportedKind, "this broker does not know frame kind 40"});
  std::vector<uint8_t> frame;
  AppendFlxiFrame(frame, flxi_interim::kKindForwardPublishError, body);
  EXPECT_EQ(frame, Hex("46 4C 58 49 00 01 00 03 00 00 00 35 00 00 00 00 00 00 00 2A 00 0B 00 00 "
                       "00 27 74 68 69 73 20 62 72 6F 6B 65 72 20 64 6F 65 73 20 6E 6F 74 20 6B "
                       "6E 6F 77 20 66 72 61 6D 65 20 6B 69 6E 64 20 34 30"));
  EXPECT_FALSE(flxi_interim::DecodeHello(std::span<const uint8_t>(body).first(10)).has_value());
  std::vector<uint8_t> trailing = body;
  trailing.push_back(0);
  EXPECT_FALSE(flxi_interim::DecodeError(trailing).has_value());
}

TEST(FlxiFramingTest, SplitsAcrossAnyChunking) {
  std::vector<uint8_t> stream;
  for (uint16_t k = 1; k <= 20; ++k) {
    std::vector<uint8_t> rest(k * 37, uint8_t(k));
    AppendFlxiFrame(stream, k, k, rest);
  }
  AppendFlxiFrame(stream, 7, std::span<const uint8_t>());  // empty body
  for (size_t chunk : {size_t(1), size_t(5), size_t(12), size_t(13), size_t(100), stream.size()}) {
    FlxiFrameSplitter splitter;
    std::vector<std::pair<uint16_t, size_t>> got;
    for (size_t off = 0; off < stream.size(); off += chunk) {
      auto part =
          std::span<const uint8_t>(stream).subspan(off, std::min(chunk, stream.size() - off));
      auto err = splitter.Feed(part, [&](uint16_t kind, std::span<const uint8_t> body) {
        got.emplace_back(kind, body.size());
        if (body.size() >= 8) {
          EXPECT_EQ(FlxiCorrelationId(body), kind);
        }
      });
      ASSERT_FALSE(err.has_value());
    }
    ASSERT_EQ(got.size(), 21u) << chunk;
    EXPECT_EQ(got[4], std::make_pair(uint16_t(5), size_t(8 + 5 * 37)));
    EXPECT_EQ(got[20], std::make_pair(uint16_t(7), size_t(0)));
    EXPECT_EQ(splitter.buffered(), 0u);
  }
}

TEST(FlxiFramingTest, FatalHeaders) {
  auto feed = [](std::vector<uint8_t> bytes) {
    FlxiFrameSplitter s;
    return s.Feed(bytes, [](uint16_t, std::span<const uint8_t>) {});
  };
  EXPECT_EQ(feed({'F', 'L', 'X', '1', 0, 1, 0, 1, 0, 0, 0, 0}), FlxiFramingError::kBadMagic);
  EXPECT_EQ(feed({'F', 'L', 'X', 'I', 0, 2, 0, 1, 0, 0, 0, 0}), FlxiFramingError::kBadVersion);
  EXPECT_EQ(feed({'F', 'L', 'X', 'I', 0, 1, 0, 1, 0x04, 0, 0, 1}), FlxiFramingError::kTooLarge);
  // 64 MiB exactly is allowed (waits for the body).
  EXPECT_FALSE(feed({'F', 'L', 'X', 'I', 0, 1, 0, 1, 0x04, 0, 0, 0}).has_value());
  // Sticky.
  FlxiFrameSplitter s;
  std::vector<uint8_t> bad = {'X', 'L', 'X', 'I', 0, 1, 0, 1, 0, 0, 0, 0};
  EXPECT_TRUE(s.Feed(bad, [](uint16_t, std::span<const uint8_t>) {}).has_value());
  std::vector<uint8_t> good;
  AppendFlxiFrame(good, 1, 1, {});
  EXPECT_TRUE(s.Feed(good, [](uint16_t, std::span<const uint8_t>) { FAIL(); }).has_value());
}

}  // namespace
}  // namespace felix::transport
