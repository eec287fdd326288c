// Recovery planning: reads a log directory (without changing it) and decides what opening it
// will do — which segments exist, where the newest one's valid data ends, whether its tail is
// torn (to be cut) or corrupt (refuse), which indexes must be rebuilt, which blank segments
// must go. DurableLog::Open applies the plan; `felix log inspect/verify` only prints it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/record_format.h"
#include "storage/storage_error.h"

namespace felix::storage {

inline constexpr char kMarkFileName[] = "durable.mark";
inline constexpr char kPoisonFileName[] = "POISONED";

std::string SegmentFileName(uint64_t base);  // 20-digit base + ".log"
std::string IndexFileName(uint64_t base);    // 20-digit base + ".index"

struct SegmentPlan {
  uint64_t base = 0;
  std::string log_path;
  std::string index_path;
  uint64_t file_bytes = 0;   // size on disk now
  uint64_t valid_bytes = 0;  // bytes to keep (header + intact records)
  uint64_t end_offset = 0;   // offset after the last record
  uint64_t last_timestamp_ms = 0;
  bool fully_scanned = false;  // every record verified (active segment, or verify_all)
  std::vector<IndexEntry> index;
  bool index_rebuilt = false;  // the on-disk index was missing/damaged/stale: rewrite it
};

struct RecoveryPlan {
  bool exists = false;  // the directory exists
  bool fresh = false;   // no segment: a new log starts at `fresh_base`
  uint64_t fresh_base = 0;
  std::vector<SegmentPlan> segments;         // oldest first; the last is the active segment
  std::vector<std::string> files_to_delete;  // blank (never installed) segment files
  std::optional<DurableMark> mark;
  bool torn_tail = false;
  std::string torn_reason;
  uint64_t truncated_bytes = 0;
  uint64_t preallocated_bytes = 0;  // zeros after the newest segment's last record (cut too)
  uint64_t records_scanned = 0;
  uint64_t bytes_scanned = 0;
  std::optional<std::string> poison;  // message left by a failed fsync in an earlier run
};

// Plans the recovery of the log in `dir`. `fresh_base` is the base of a new log. With
// `verify_all` every record of every segment is checked (otherwise sealed segments are checked
// from their last index entry on, and fully only when their index must be rebuilt).
// Refuses (kCorruption naming file and byte position) on damage that is not a provable torn
// tail of the newest segment.
StorageResult<RecoveryPlan> PlanRecovery(const std::string& dir, uint64_t index_spacing,
                                         bool verify_all, uint64_t fresh_base = 0);

}  // namespace felix::storage
