#include "wire/decode_error.h"

namespace felix::wire {

const char* DecodeErrorName(DecodeErrorCode code) {
  switch (code) {
    case DecodeErrorCode::kIncomplete:
      return "incomplete";
    case DecodeErrorCode::kTrailingBytes:
      return "trailing_bytes";
    case DecodeErrorCode::kBadMagic:
      return "bad_magic";
    case DecodeErrorCode::kBadVersion:
      return "bad_version";
    case DecodeErrorCode::kUnknownKind:
      return "unknown_kind";
    case DecodeErrorCode::kUnknownFlags:
      return "unknown_flags";
    case DecodeErrorCode::kFrameTooLarge:
      return "frame_too_large";
    case DecodeErrorCode::kStringTooLong:
      return "string_too_long";
    case DecodeErrorCode::kCountTooLarge:
      return "count_too_large";
    case DecodeErrorCode::kInvalidUtf8:
      return "invalid_utf8";
    case DecodeErrorCode::kInvalidValue:
      return "invalid_value";
    case DecodeErrorCode::kInvalidJson:
      return "invalid_json";
    case DecodeErrorCode::kEmptyCredential:
      return "empty_credential";
  }
  return "unknown";
}

std::string DecodeError::ToString() const {
  return std::string(DecodeErrorName(code)) + (detail.empty() ? "" : ": " + detail);
}

}  // namespace felix::wire
