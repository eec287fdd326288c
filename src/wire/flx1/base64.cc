// Table-driven base64. libsodium's codec (used here before) runs in constant time, which
// secrets need and payloads do not; on the cache path it was about 5 % of client and broker
// CPU (docs/performance.md change 18). Semantics are libsodium's ORIGINAL variant, checked
// against it by wire_flx1_test (Base64.MatchesLibsodium...).
#include "wire/flx1/base64.h"

#include <array>

namespace felix::wire::flx1 {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr uint8_t kInvalid = 0xff;

constexpr std::array<uint8_t, 256> MakeDecodeTable() {
  std::array<uint8_t, 256> table{};
  for (auto& v : table) v = kInvalid;
  for (uint8_t i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = i;
  return table;
}
constexpr std::array<uint8_t, 256> kDecode = MakeDecodeTable();

}  // namespace

void AppendBase64(std::span<const uint8_t> bytes, std::string& out) {
  const size_t start = out.size();
  out.resize(start + (bytes.size() + 2) / 3 * 4, '=');
  char* o = out.data() + start;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8 | bytes[i + 2];
    *o++ = kAlphabet[v >> 18];
    *o++ = kAlphabet[(v >> 12) & 63];
    *o++ = kAlphabet[(v >> 6) & 63];
    *o++ = kAlphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t(bytes[i]) << 16;
    if (rest == 2) v |= uint32_t(bytes[i + 1]) << 8;
    *o++ = kAlphabet[v >> 18];
    *o++ = kAlphabet[(v >> 12) & 63];
    if (rest == 2) *o = kAlphabet[(v >> 6) & 63];  // else stays '='
  }
}

std::string Base64Encode(std::span<const uint8_t> bytes) {
  std::string out;
  AppendBase64(bytes, out);
  return out;
}

std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text) {
  if (text.empty()) return std::vector<uint8_t>{};
  if (text.size() % 4 != 0) return std::nullopt;
  // Padding: at most two '=' at the very end.
  size_t pad = 0;
  if (text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  const size_t chars = text.size() - pad;
  std::vector<uint8_t> out(chars * 3 / 4);
  size_t o = 0, i = 0;
  for (; i + 4 <= chars; i += 4) {
    const uint8_t a = kDecode[uint8_t(text[i])], b = kDecode[uint8_t(text[i + 1])],
                  c = kDecode[uint8_t(text[i + 2])], d = kDecode[uint8_t(text[i + 3])];
    // Every valid value is below 64: one test catches an invalid character among the four.
    if ((a | b | c | d) & 0xc0) return std::nullopt;
    const uint32_t v = uint32_t(a) << 18 | uint32_t(b) << 12 | uint32_t(c) << 6 | d;
    out[o++] = uint8_t(v >> 16);
    out[o++] = uint8_t(v >> 8);
    out[o++] = uint8_t(v);
  }
  if (pad > 0) {
    // The last group holds 4 - pad characters: 2 (one byte) or 3 (two bytes).
    const uint8_t a = kDecode[uint8_t(text[i])], b = kDecode[uint8_t(text[i + 1])];
    if (a == kInvalid || b == kInvalid) return std::nullopt;
    uint32_t v = uint32_t(a) << 18 | uint32_t(b) << 12;
    if (pad == 1) {
      const uint8_t c = kDecode[uint8_t(text[i + 2])];
      if (c == kInvalid) return std::nullopt;
      v |= uint32_t(c) << 6;
      if ((v & 0xff) != 0) return std::nullopt;  // non-zero trailing bits
      out[o++] = uint8_t(v >> 16);
      out[o++] = uint8_t(v >> 8);
    } else {
      if ((v & 0xffff) != 0) return std::nullopt;
      out[o++] = uint8_t(v >> 16);
    }
  }
  return out;
}

}  // namespace felix::wire::flx1
