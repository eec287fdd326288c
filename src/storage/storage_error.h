// StorageError: the typed failure of every storage call (Result<T, StorageError>).
//
// `code` says what kind of failure it is; corruption errors name the file and the byte
// position of the damage, `Trimmed` carries the oldest readable offset, `OffsetMismatch`
// carries the log's tail, `Poisoned` repeats the fsync failure that froze the log.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/strong_types.h"

namespace felix::storage {

enum class StorageErrc {
  kIo,               // a system call failed (errno in sys_errno and message)
  kCorruption,       // stored bytes fail their checks; file + position say where
  kPoisoned,         // an fsync failed earlier: durability of this log is in doubt
  kTrimmed,          // read below the base offset; `oldest` is the first readable offset
  kBelowCommit,      // a truncation/reset would discard records below the commit offset
  kOffsetMismatch,   // AppendAt: the caller's offset is not the tail; `tail` says where it is
  kInvalidArgument,  // bad input (empty batch, record too large, offset past tail ...)
  kClosed,           // the log is closed
};

const char* StorageErrcName(StorageErrc code);

struct StorageError {
  StorageErrc code = StorageErrc::kIo;
  std::string message;
  std::string file;       // for kCorruption (and kIo when a file is involved)
  uint64_t position = 0;  // byte position in `file` for kCorruption
  Offset oldest;          // kTrimmed: the oldest readable offset
  Offset requested;       // kTrimmed: the offset asked for
  Offset tail;            // kOffsetMismatch: the log's tail (next offset)
  int sys_errno = 0;

  std::string ToString() const;
  // A write refused because the disk or quota is full (kIo with ENOSPC or EDQUOT): what
  // felix_storage_full_total counts, wherever the write was made.
  bool NoSpace() const;
  // Maps to the broad felix::Error for callers that do not need the detail.
  Error ToError() const;
};

template <typename T>
using StorageResult = Result<T, StorageError>;

inline tl::unexpected<StorageError> StorageFail(StorageErrc code, std::string message) {
  StorageError e;
  e.code = code;
  e.message = std::move(message);
  return tl::unexpected<StorageError>(std::move(e));
}

inline tl::unexpected<StorageError> StorageFail(StorageError e) {
  return tl::unexpected<StorageError>(std::move(e));
}

// An kIo error for `what` on `file` from errno value `err`.
StorageError IoError(const std::string& what, const std::string& file, int err);
StorageError CorruptionError(const std::string& what, const std::string& file, uint64_t position);

}  // namespace felix::storage
