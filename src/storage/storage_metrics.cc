#include "storage/storage_metrics.h"

#include <string>

namespace felix::storage {

StorageMetrics StorageMetrics::Register(MetricsRegistry& r, std::string_view log_label) {
  std::string labels = "log=\"" + std::string(log_label) + "\"";
  std::vector<double> batch = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
  StorageMetrics m;
  m.append_duration = &r.AddHistogram("felix_storage_append_duration_seconds",
                                      "Time from append call to acknowledgement (incl. fsync wait)",
                                      LatencyBucketsSeconds(), labels);
  m.sync_duration =
      &r.AddHistogram("felix_storage_sync_duration_seconds",
                      "Duration of one fdatasync of log data", LatencyBucketsSeconds(), labels);
  m.sync_batch_appends =
      &r.AddHistogram("felix_storage_sync_batch_appends",
                      "Append calls acknowledged by one group-commit flush", batch, labels);
  m.sync_batch_records = &r.AddHistogram("felix_storage_sync_batch_records",
                                         "Records made durable by one flush", batch, labels);
  m.sync_failures = &r.AddCounter("felix_storage_sync_failures_total",
                                  "Failed fsyncs (each poisons its log)", labels);
  m.write_failures = &r.AddCounter("felix_storage_write_failures_total",
                                   "Failed data writes (no offsets consumed)", labels);
  m.torn_tails_repaired = &r.AddCounter("felix_storage_recovery_torn_tails_total",
                                        "Torn tails cut off at open", labels);
  m.truncated_bytes = &r.AddCounter("felix_storage_recovery_truncated_bytes_total",
                                    "Bytes cut off torn tails at open", labels);
  m.index_rebuilds = &r.AddCounter("felix_storage_recovery_index_rebuilds_total",
                                   "Sparse indexes rebuilt at open", labels);
  m.segment_rolls = &r.AddCounter("felix_storage_segment_roll_total", "Segment rollovers", labels);
  m.retention_segments = &r.AddCounter("felix_storage_retention_segments_deleted_total",
                                       "Sealed segments deleted by retention", labels);
  m.retention_bytes = &r.AddCounter("felix_storage_retention_bytes_reclaimed_total",
                                    "Bytes reclaimed by retention", labels);
  m.read_bytes = &r.AddCounter("felix_storage_read_bytes_total",
                               "Bytes read from segment files (records, and record headers "
                               "scanned to find an offset)",
                               labels);
  return m;
}

}  // namespace felix::storage
