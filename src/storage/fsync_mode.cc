#include "storage/fsync_mode.h"

namespace felix::storage {

const char* FsyncModeName(FsyncMode mode) {
  switch (mode) {
    case FsyncMode::kNone:
      return "none";
    case FsyncMode::kPeriodic:
      return "periodic";
    case FsyncMode::kOnCommit:
      return "on_commit";
  }
  return "unknown";
}

std::optional<FsyncMode> ParseFsyncMode(std::string_view text) {
  if (text == "none") return FsyncMode::kNone;
  if (text == "periodic") return FsyncMode::kPeriodic;
  if (text == "on_commit") return FsyncMode::kOnCommit;
  return std::nullopt;
}

}  // namespace felix::storage
