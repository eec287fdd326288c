// INTERIM: the few FLXI bodies the transport itself speaks (Hello, HelloOk, the
// ForwardPublishError refusal), encoded by hand from internal-protocol-bodies.md §6.3/§6.5.
// To be replaced by the wire library's FLXI codec (src/wire/flxi/) when it is merged; nothing
// outside src/transport/ should include this file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace felix::transport::flxi_interim {

inline constexpr uint16_t kKindForwardPublishError = 3;
inline constexpr uint16_t kKindHello = 5;
inline constexpr uint16_t kKindHelloOk = 6;
inline constexpr size_t kMaxStrBytes = 512;  // MAX_IDENT_BYTES

// Error codes (§5.1) the transport uses.
inline constexpr uint16_t kErrUnavailable = 2;
inline constexpr uint16_t kErrUnauthorized = 3;
inline constexpr uint16_t kErrOverload = 4;
inline constexpr uint16_t kErrProtocolVersion = 5;
inline constexpr uint16_t kErrMalformed = 6;
inline constexpr uint16_t kErrUnsupportedKind = 11;

struct HelloBody {  // kinds 5 and 6: correlation_id u64, node_id Str
  uint64_t correlation_id = 0;
  std::string node_id;
};

struct ErrorBody {  // kind 3: correlation_id u64, code u16, detail Str
  uint64_t correlation_id = 0;
  uint16_t code = 0;
  std::string detail;
};

// Bodies only (no 12-byte header). Strings longer than 512 bytes are truncated (detail) or
// refused (node id).
Result<std::vector<uint8_t>> EncodeHello(const HelloBody& body);
std::vector<uint8_t> EncodeError(const ErrorBody& body);

// Strict: every field present, no trailing bytes, Str length ≤ 512.
Result<HelloBody> DecodeHello(std::span<const uint8_t> body);
Result<ErrorBody> DecodeError(std::span<const uint8_t> body);

}  // namespace felix::transport::flxi_interim
