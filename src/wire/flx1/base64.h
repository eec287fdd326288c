// Standard base64 (RFC 4648 §4, `+/`, with `=` padding) as FLX1 JSON byte fields use it,
// with the semantics of libsodium's ORIGINAL variant. Decoding is strict: padding required, no
// whitespace, no URL-safe alphabet, no non-zero trailing bits. Not constant-time (payloads,
// not secrets: auth/base64url.h is the one for keys and tokens).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace felix::wire::flx1 {

std::string Base64Encode(std::span<const uint8_t> bytes);
// The same text appended to `out`: a JSON writer encodes a byte field in place, without a
// string of its own per field (docs/performance.md change 68).
void AppendBase64(std::span<const uint8_t> bytes, std::string& out);
// nullopt when `text` is not canonical padded standard base64.
std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text);

}  // namespace felix::wire::flx1
