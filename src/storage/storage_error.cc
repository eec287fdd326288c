#include "storage/storage_error.h"

#include <cerrno>
#include <cstring>

namespace felix::storage {

const char* StorageErrcName(StorageErrc code) {
  switch (code) {
    case StorageErrc::kIo:
      return "io";
    case StorageErrc::kCorruption:
      return "corruption";
    case StorageErrc::kPoisoned:
      return "poisoned";
    case StorageErrc::kTrimmed:
      return "trimmed";
    case StorageErrc::kBelowCommit:
      return "below_commit";
    case StorageErrc::kOffsetMismatch:
      return "offset_mismatch";
    case StorageErrc::kInvalidArgument:
      return "invalid_argument";
    case StorageErrc::kClosed:
      return "closed";
  }
  return "unknown";
}

std::string StorageError::ToString() const {
  std::string out = StorageErrcName(code);
  out += ": ";
  out += message;
  if (code == StorageErrc::kCorruption) {
    out += " (file=" + file + ", position=" + std::to_string(position) + ")";
  } else if (code == StorageErrc::kTrimmed) {
    out += " (requested=" + to_string(requested) + ", oldest=" + to_string(oldest) + ")";
  } else if (code == StorageErrc::kOffsetMismatch) {
    out += " (tail=" + to_string(tail) + ")";
  }
  return out;
}

Error StorageError::ToError() const {
  ErrorCode c = ErrorCode::kInternal;
  switch (code) {
    case StorageErrc::kIo:
    case StorageErrc::kPoisoned:
      c = ErrorCode::kIo;
      break;
    case StorageErrc::kCorruption:
      c = ErrorCode::kCorruption;
      break;
    case StorageErrc::kTrimmed:
      c = ErrorCode::kNotFound;
      break;
    case StorageErrc::kBelowCommit:
    case StorageErrc::kOffsetMismatch:
    case StorageErrc::kInvalidArgument:
      c = ErrorCode::kInvalidArgument;
      break;
    case StorageErrc::kClosed:
      c = ErrorCode::kUnavailable;
      break;
  }
  return Error{c, ToString()};
}

StorageError IoError(const std::string& what, const std::string& file, int err) {
  StorageError e;
  e.code = StorageErrc::kIo;
  e.file = file;
  e.sys_errno = err;
  e.message = what + " " + file + ": " + std::strerror(err);
  return e;
}

StorageError CorruptionError(const std::string& what, const std::string& file, uint64_t position) {
  StorageError e;
  e.code = StorageErrc::kCorruption;
  e.file = file;
  e.position = position;
  e.message = what;
  return e;
}

bool StorageError::NoSpace() const {
  return code == StorageErrc::kIo && (sys_errno == ENOSPC || sys_errno == EDQUOT);
}

}  // namespace felix::storage
