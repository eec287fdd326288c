// The FLX1 base64 codec against libsodium's ORIGINAL variant (what it replaced on the hot
// path): the same text for every input length, and the same verdict and bytes for valid,
// corrupted and random text.
#include <gtest/gtest.h>
#include <sodium.h>

#include <random>
#include <string>
#include <vector>

#include "wire/flx1/base64.h"

namespace felix::wire::flx1 {
namespace {

std::string SodiumEncode(const std::vector<uint8_t>& bytes) {
  const size_t cap = sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  std::string out(cap, '\0');
  static constexpr uint8_t kNothing = 0;
  sodium_bin2base64(out.data(), cap, bytes.empty() ? &kNothing : bytes.data(), bytes.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  out.resize(cap - 1);
  return out;
}

std::optional<std::vector<uint8_t>> SodiumDecode(const std::string& text) {
  if (text.empty()) return std::vector<uint8_t>{};
  std::vector<uint8_t> out(text.size() / 4 * 3 + 3);
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(out.data(), out.size(), text.data(), text.size(), nullptr, &len, &end,
                        sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  out.resize(len);
  return out;
}

TEST(Base64, MatchesLibsodiumOnEveryLengthAndRoundTrips) {
  ASSERT_GE(sodium_init(), 0);
  std::mt19937 rng(7);
  for (size_t n = 0; n <= 1100; ++n) {
    std::vector<uint8_t> bytes(n);
    for (auto& b : bytes) b = uint8_t(rng());
    const std::string text = Base64Encode(bytes);
    ASSERT_EQ(text, SodiumEncode(bytes)) << n;
    std::string appended = "\"";  // after what the buffer holds, as a JSON writer appends
    AppendBase64(bytes, appended);
    ASSERT_EQ(appended, "\"" + text) << n;
    auto back = Base64Decode(text);
    ASSERT_TRUE(back) << n;
    EXPECT_EQ(*back, bytes) << n;
  }
}

TEST(Base64, MatchesLibsodiumOnCorruptedAndRandomText) {
  ASSERT_GE(sodium_init(), 0);
  std::mt19937 rng(11);
  const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \n.";
  size_t accepted = 0, refused = 0;
  auto check = [&](const std::string& text) {
    auto mine = Base64Decode(text);
    auto oracle = SodiumDecode(text);
    ASSERT_EQ(mine.has_value(), oracle.has_value()) << '"' << text << '"';
    if (mine) {
      EXPECT_EQ(*mine, *oracle) << text;
      ++accepted;
    } else {
      ++refused;
    }
  };
  for (int i = 0; i < 20000; ++i) {
    // One character of a valid text replaced, dropped or added.
    std::vector<uint8_t> bytes(rng() % 12);
    for (auto& b : bytes) b = uint8_t(rng());
    std::string text = Base64Encode(bytes);
    const char c = chars[rng() % chars.size()];
    switch (rng() % 3) {
      case 0:
        if (!text.empty()) text[rng() % text.size()] = c;
        break;
      case 1:
        if (!text.empty()) text.erase(rng() % text.size(), 1);
        break;
      default:
        text.insert(rng() % (text.size() + 1), 1, c);
    }
    check(text);
  }
  for (int i = 0; i < 20000; ++i) {
    std::string text(rng() % 9, ' ');
    for (auto& ch : text) ch = chars[rng() % 66];  // the base64 alphabet and '=' mostly
    check(text);
  }
  // Both outcomes were exercised, and the edge cases the decoder singles out.
  EXPECT_GT(accepted, 1000u);
  EXPECT_GT(refused, 1000u);
  for (const char* text : {"=", "==", "====", "A===", "AB==", "ABC=", "AB=C",
                           "A=B=", "AB=", "ABE=", "ABQ=", "AR==", "AQ==", "ABCD====", "ABCDAB=="}) {
    check(text);
  }
}

}  // namespace
}  // namespace felix::wire::flx1
