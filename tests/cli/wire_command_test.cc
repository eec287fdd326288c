// End to end: the built `felix wire` command decodes FLX1 golden frames to canonical JSON,
// encodes that JSON back to the same bytes, and refuses bad input with typed messages and
// exit codes.
#include <gtest/gtest.h>

#include "support/child_process.h"

namespace felix {
namespace {

using testing::BuiltProgram;
using testing::RunProgram;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::pair<int, std::string> Felix(const std::vector<std::string>& args) {
  return RunProgram(BuiltProgram("src/cli/felix"), args);
}

TEST(CliWire, DecodeThenEncodeReproducesGoldenFrames) {
  const std::vector<std::string> vectors = {
      // V9 auth with capabilities
      "464c583100010000000000477b2274797065223a2261757468222c2274656e616e745f6964223a227431222c22"
      "746f6b656e223a2264656d6f2d746f6b656e222c22636c69656e745f666c616773223a32357d",
      // V14 acked keyed binary publish
      "464c5831000100490000002d00000000000000070200026b3700027431000764656661756c74000464656d6f00"
      "0000010000000568656c6c6f",
      // D6 ack with owner and offset
      "464c583100011090000000340000000000000000070000000862726f6b65722d62000d31302e302e302e353a35"
      "3030300000000000000007000000000000002a",
      // D10 shared batch with timestamps
      "464c583100014004000000130000000100060a24181e4000000000036f6e65",
  };
  for (const auto& hex : vectors) {
    auto [code, json] = Felix({"wire", "decode", "--proto", "flx1", hex});
    ASSERT_EQ(code, 0) << json;
    auto [code2, hex2] = Felix({"wire", "encode", "--proto", "flx1", Trim(json)});
    ASSERT_EQ(code2, 0) << hex2;
    EXPECT_EQ(Trim(hex2), hex);
  }
}

TEST(CliWire, DecodePrintsEveryField) {
  auto [code, json] =
      Felix({"wire", "decode", "--proto", "flx1",
             "464c583100010000000000247b2274797065223a22617574685f6f6b222c227365727665725f666c61"
             "6773223a32357d"});
  ASSERT_EQ(code, 0);
  EXPECT_EQ(Trim(json),
            R"({"frame":"json","flags":0,"message":{"type":"auth_ok","server_flags":25,)"
            R"("server_features":null,"server_features_hi":null,"listener_ports":null,)"
            R"("publish_window":null}})");
}

TEST(CliWire, RefusalsHaveExitCodes) {
  // Unknown flag 0x8000.
  auto [code, out] = Felix(
      {"wire", "decode", "--proto", "flx1", "464c5831000180100000000b0000000000000000070000"});
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("unknown_flags"), std::string::npos) << out;
  // Not hex.
  std::tie(code, out) = Felix({"wire", "decode", "--proto", "flx1", "xyz"});
  EXPECT_EQ(code, 1);
  // Canonical JSON whose flags contradict its content.
  std::tie(code, out) = Felix({"wire", "encode", "--proto", "flx1",
                               R"({"frame":"json","flags":1,"message":{"type":"ok"}})"});
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("flags"), std::string::npos) << out;
  // FLXI is not in this build.
  std::tie(code, out) = Felix({"wire", "decode", "--proto", "flxi", "00"});
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("not built yet"), std::string::npos) << out;
  std::tie(code, out) = Felix({"wire", "encode", "--proto", "flxi", "{}"});
  EXPECT_EQ(code, 2);
}

}  // namespace
}  // namespace felix
