// base64url without padding (RFC 4648 §5), the encoding of every JWT part and JWK field.
// Decoding is strict: padding, whitespace, characters outside the URL-safe alphabet and
// non-zero trailing bits are refused.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace felix::auth {

// Initialises libsodium once (a function-local static: thread-safe, no other global state).
// Every function of this library that touches libsodium calls it first.
void EnsureSodium();

std::string Base64UrlEncode(std::span<const uint8_t> bytes);
inline std::string Base64UrlEncode(std::string_view bytes) {
  return Base64UrlEncode(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

// nullopt if `text` is not canonical unpadded base64url.
std::optional<std::vector<uint8_t>> Base64UrlDecode(std::string_view text);

}  // namespace felix::auth
