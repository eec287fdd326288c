// FsyncMode: when a durable log's appends reach stable storage — the one definition the
// catalog (per-stream override), the broker configuration and storage share.
#pragma once

#include <optional>
#include <string_view>

namespace felix::storage {

// kNone: never fsync (the OS decides); kPeriodic: a flush every fsync interval;
// kOnCommit: an append is answered only after an fsync covered it (group commit).
enum class FsyncMode : unsigned char { kNone, kPeriodic, kOnCommit };

// "none" | "periodic" | "on_commit"
const char* FsyncModeName(FsyncMode mode);
std::optional<FsyncMode> ParseFsyncMode(std::string_view text);

}  // namespace felix::storage
