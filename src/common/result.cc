#include "common/result.h"

namespace felix {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kIo:
      return "io_error";
    case ErrorCode::kCorruption:
      return "corruption";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

std::string Error::ToString() const {
  return std::string(ErrorCodeName(code)) + ": " + message;
}

}  // namespace felix
