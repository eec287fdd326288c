#include "wire/flx1/base64.h"

#include <sodium.h>

namespace felix::wire::flx1 {

std::string Base64Encode(std::span<const uint8_t> bytes) {
  const size_t cap = sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  std::string out(cap, '\0');
  // libsodium wants non-null pointers even for empty input.
  static constexpr uint8_t kNothing = 0;
  const uint8_t* src = bytes.empty() ? &kNothing : bytes.data();
  sodium_bin2base64(out.data(), cap, src, bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(cap - 1);  // drop the terminating NUL
  return out;
}

std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text) {
  if (text.empty()) return std::vector<uint8_t>{};
  std::vector<uint8_t> out(text.size() / 4 * 3 + 3);
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(out.data(), out.size(), text.data(), text.size(), nullptr, &len, &end,
                        sodium_base64_VARIANT_ORIGINAL) != 0) {
    return std::nullopt;
  }
  if (end != text.data() + text.size()) return std::nullopt;
  out.resize(len);
  return out;
}

}  // namespace felix::wire::flx1
