#include "auth/base64url.h"

#include <sodium.h>

#include <cstdlib>

namespace felix::auth {

void EnsureSodium() {
  // sodium_init() is idempotent and thread-safe; the static only avoids repeated calls.
  static const int initialised = sodium_init();
  if (initialised < 0) std::abort();  // no usable randomness: nothing safe can run
}

std::string Base64UrlEncode(std::span<const uint8_t> bytes) {
  EnsureSodium();
  constexpr int kVariant = sodium_base64_VARIANT_URLSAFE_NO_PADDING;
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), kVariant), '\0');
  sodium_bin2base64(out.data(), out.size(), bytes.data(), bytes.size(), kVariant);
  out.resize(out.size() - 1);  // the encoded length counts the terminating NUL
  return out;
}

std::optional<std::vector<uint8_t>> Base64UrlDecode(std::string_view text) {
  EnsureSodium();
  std::vector<uint8_t> out(text.size() * 3 / 4 + 1);
  size_t written = 0;
  const char* end = nullptr;
  if (sodium_base642bin(out.data(), out.size(), text.data(), text.size(), nullptr, &written, &end,
                        sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0) {
    return std::nullopt;
  }
  if (end != text.data() + text.size()) return std::nullopt;
  out.resize(written);
  return out;
}

}  // namespace felix::auth
