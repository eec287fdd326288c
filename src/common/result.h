// Result<T>: every fallible call across a subsystem boundary returns a value or an Error,
// never throws. Subsystems with richer failure sets (wire decoding, storage recovery) use
// Result<T, TheirError> with their own typed error.
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

namespace felix {

// Broad failure classes; the message says what exactly, naming the input at fault.
enum class ErrorCode {
  kInvalidArgument,  // bad input from a caller, user or config
  kNotFound,
  kAlreadyExists,
  kIo,           // a system call failed (errno in the message)
  kCorruption,   // stored data fails its checks
  kUnavailable,  // try again later (overload, not ready, closed)
  kTimeout,
  kPermissionDenied,
  kInternal,  // a bug: an invariant did not hold
};

const char* ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  std::string ToString() const;
};

template <typename T, typename E = Error>
using Result = tl::expected<T, E>;

// Builds the unexpected side: `return Fail(ErrorCode::kIo, "open " + path + ": " + strerror)`.
inline tl::unexpected<Error> Fail(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error{code, std::move(message)});
}

// Result<void> success value.
inline Result<void> Ok() {
  return {};
}

}  // namespace felix
