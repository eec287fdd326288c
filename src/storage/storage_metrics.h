// The storage series registered on a MetricsRegistry (one set per log kind label). The
// referenced series live as long as the registry; updating them is lock-free.
#pragma once

#include <memory>
#include <string_view>

#include "common/metrics.h"

namespace felix::storage {

struct StorageMetrics {
  Histogram* append_duration = nullptr;     // felix_storage_append_duration_seconds
  Histogram* sync_duration = nullptr;       // felix_storage_sync_duration_seconds
  Histogram* sync_batch_appends = nullptr;  // felix_storage_sync_batch_appends
  Histogram* sync_batch_records = nullptr;  // felix_storage_sync_batch_records
  Counter* sync_failures = nullptr;         // felix_storage_sync_failures_total
  Counter* write_failures = nullptr;        // felix_storage_write_failures_total
  Counter* torn_tails_repaired = nullptr;   // felix_storage_recovery_torn_tails_total
  Counter* truncated_bytes = nullptr;       // felix_storage_recovery_truncated_bytes_total
  Counter* index_rebuilds = nullptr;        // felix_storage_recovery_index_rebuilds_total
  Counter* segment_rolls = nullptr;         // felix_storage_segment_roll_total
  Counter* retention_segments = nullptr;    // felix_storage_retention_segments_deleted_total
  Counter* retention_bytes = nullptr;       // felix_storage_retention_bytes_reclaimed_total
  Counter* read_bytes = nullptr;            // felix_storage_read_bytes_total

  // Registers (or finds) the series labelled log="<log_label>".
  static StorageMetrics Register(MetricsRegistry& registry, std::string_view log_label);
};

}  // namespace felix::storage
