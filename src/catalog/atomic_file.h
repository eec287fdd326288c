// Crash-safe whole-file replacement: write `path.tmp` with `mode`, fsync it, rename it over
// `path`, fsync the directory. After a crash the file holds either the old or the new content.
#pragma once

#include <sys/types.h>
#include <string>
#include <string_view>

#include "common/result.h"

namespace felix::catalog {

Result<void> WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode);

// Whole file; kNotFound if it does not exist, kIo otherwise.
Result<std::string> ReadWholeFile(const std::string& path);

}  // namespace felix::catalog
