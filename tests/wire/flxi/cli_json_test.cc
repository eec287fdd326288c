// Canonical JSON for the CLI: every golden frame renders and encodes back to its bytes, as do
// generated frames of every kind; malformed JSON and wrong shapes are refused as values.
#include "wire/flxi/cli_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "generator.h"
#include "golden_frames.h"

namespace felix::wire::flxi {
namespace {

using testing::kGoldenFrames;

std::string LowerHexNoSpaces(std::string_view hex) {
  std::string out;
  for (char c : hex) {
    if (c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string HexOf(const std::vector<uint8_t>& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(d[b >> 4]);
    out.push_back(d[b & 15]);
  }
  return out;
}

TEST(FlxiJson, GoldenFramesRoundTripThroughJson) {
  for (const auto& g : kGoldenFrames) {
    auto json = FlxiHexToCanonicalJson(g.hex);
    ASSERT_TRUE(json) << g.title << ": " << json.error().ToString();
    auto hex = FlxiCanonicalJsonToHex(*json);
    ASSERT_TRUE(hex) << g.title << ": " << hex.error().message << "\n" << *json;
    EXPECT_EQ(*hex, LowerHexNoSpaces(g.hex)) << g.title;
  }
}

TEST(FlxiJson, RendersKindNameAndEveryField) {
  const char* kind1 =
      "46 4C 58 49 00 01 00 01 00 00 00 3A 00 00 00 00 00 00 00 2A 00 00 00 02 74 31 00 00 00 "
      "02 6E 73 00 00 00 06 6F 72 64 65 72 73 00 00 00 03 00 00 00 00 00 00 00 07 02 00 00 00 "
      "02 00 00 00 01 61 00 00 00 02 62 62";
  auto json = FlxiHexToCanonicalJson(kind1);
  ASSERT_TRUE(json);
  EXPECT_EQ(*json,
            R"({"kind":"ForwardPublish","correlation_id":42,"shard":{"tenant":"t1",)"
            R"("namespace":"ns","stream":"orders","shard":3,"generation":7},"ack":"OnCommit",)"
            R"("payloads":["61","6262"]})");
  auto j = nlohmann::json::parse(
      *FlxiHexToCanonicalJson(kGoldenFrames[std::size(kGoldenFrames) - 1].hex));
  EXPECT_EQ(j["kind"], "ReplicateMarkedRecords");
  EXPECT_EQ(j["marks"][0]["publisher"], "alice");
  EXPECT_TRUE(j["marks"][1]["publisher"].is_null());
}

TEST(FlxiJson, GeneratedFramesOfEveryKindRoundTrip) {
  testing::FrameGenerator gen(99);
  for (Kind kind : testing::AllKinds()) {
    for (int i = 0; i < 60; ++i) {
      Frame f = gen.Make(kind);
      auto bytes = EncodeFrame(f);
      ASSERT_TRUE(bytes);
      auto json = FrameToCanonicalJson(f);
      ASSERT_TRUE(json);
      auto hex = FlxiCanonicalJsonToHex(*json);
      ASSERT_TRUE(hex) << KindName(kind) << ": " << hex.error().message;
      EXPECT_EQ(*hex, HexOf(*bytes)) << KindName(kind);
    }
  }
}

TEST(FlxiJson, RefusesBadInputAsValues) {
  EXPECT_EQ(FlxiHexToCanonicalJson("zz").error().code, DecodeErrorCode::kInvalidValue);
  EXPECT_EQ(FlxiHexToCanonicalJson("464").error().code, DecodeErrorCode::kInvalidValue);
  EXPECT_EQ(FlxiHexToCanonicalJson("464C5831000100260000000800000000000000 09").error().code,
            DecodeErrorCode::kBadMagic);
  const char* bad[] = {
      "",
      "{",
      "[]",
      R"({"kind":"Ping"})",
      R"({"kind":"Nope","correlation_id":1})",
      R"({"kind":"Ping","correlation_id":-1})",
      R"({"kind":"Ping","correlation_id":1.5})",
      R"({"kind":"Ping","correlation_id":1,"extra":0})",
      R"({"kind":"Hello","correlation_id":1,"node_id":7})",
      R"({"kind":"HelloCapable","correlation_id":1,"node_id":"a"})",
      R"({"kind":"ForwardCacheOk","correlation_id":1,"value":"abc"})",
      R"({"kind":"ForwardCacheOk","correlation_id":1,"value":"zz"})",
      R"({"kind":"ReplicateOk","correlation_id":1,"durable_offset":18446744073709551616})",
      R"({"kind":"ForwardPublishError","correlation_id":1,"code":"Nope","detail":""})",
      R"({"kind":"Fence","correlation_id":1,"shard":{"tenant":"t","namespace":"n","stream":"s","shard":4294967296,"generation":0},"log":"Stream"})",
  };
  for (const char* json : bad) {
    auto r = FlxiCanonicalJsonToHex(json);
    EXPECT_FALSE(r) << json;
    if (!r) {
      EXPECT_EQ(r.error().code, felix::ErrorCode::kInvalidArgument) << json;
    }
  }
  EXPECT_EQ(*FlxiCanonicalJsonToHex(R"({"kind":"Pong","correlation_id":9})"),
            "464c58490001002700000008"
            "0000000000000009");
}

}  // namespace
}  // namespace felix::wire::flxi
