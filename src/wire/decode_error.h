// DecodeError: why a frame or payload was refused. Every decoder in `wire` returns
// Result<T, DecodeError>; the code is stable (tests, metrics and error answers key on it) and
// `detail` names the field at fault.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace felix::wire {

enum class DecodeErrorCode : uint8_t {
  kIncomplete,     // fewer bytes than a field needs
  kTrailingBytes,  // bytes left after the last field
  kBadMagic,       // header magic is not FLX1 / FLXI
  kBadVersion,     // header version is not 1
  kUnknownKind,    // FLXI kind not in the registry (envelope still valid)
  kUnknownFlags,   // FLX1 flag bits this build does not know (refused, never masked)
  kFrameTooLarge,  // length above the protocol or configured limit
  kStringTooLong,  // a string above its cap
  kCountTooLarge,  // a declared count above its cap or above what the bytes can hold
  kInvalidUtf8,
  kInvalidValue,     // an enum or field value out of range, or a forbidden combination
  kInvalidJson,      // FLX1 JSON that does not parse or lacks a required field
  kEmptyCredential,  // Cred with length 0
};

const char* DecodeErrorName(DecodeErrorCode code);

struct DecodeError {
  DecodeErrorCode code;
  std::string detail;

  std::string ToString() const;
  bool operator==(const DecodeError& other) const { return code == other.code; }
};

template <typename T>
using DecodeResult = Result<T, DecodeError>;

inline tl::unexpected<DecodeError> DecodeFail(DecodeErrorCode code, std::string detail) {
  return tl::unexpected<DecodeError>(DecodeError{code, std::move(detail)});
}

}  // namespace felix::wire
