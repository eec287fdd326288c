// FaultFile: the storage fault seam of test builds (FELIX_FAULT_INJECTION; broker-config.md §6
// FELIX_STORAGE_FAULT_FILE), so end-to-end tests can make a real broker's disk full or its
// fsyncs hang or fail, or step its wall clock. A thread re-reads the file every 10 ms and applies
// it to one FaultInjector that every log of the broker shares. Lines `key=value`:
//   write_errno=N      every log data write fails with errno N (28 = ENOSPC: a full disk)
//   hold_syncs=1       every log fdatasync blocks until the line (or the file) is gone
//   sync_errno=N       every log data fdatasync fails with errno N (5 = EIO); each failure
//                      poisons its log (durable_log.h) until a restart clears it
//   clock_offset_ms=N  the wall clock of the cache shards (TTL expiry, clock_offset_ms()) runs N
//                      ms ahead (negative: behind) — a step of the system clock. Never the
//                      monotonic clock of leases and timeouts, which Linux never steps
// A missing file means no fault. Each change applied is announced on stdout as
// `felix-broker faults write_errno=N hold_syncs=0|1 sync_errno=N clock_offset_ms=N`. Compiled
// out of release builds.
//
// Threading: owns its thread; the destructor releases held syncs and joins it. Declare it
// before the broker core so that it outlives every log.
#pragma once

#if FELIX_FAULT_INJECTION

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "storage/io_util.h"

namespace felix::server {

class FaultFile {
 public:
  FaultFile(std::string path, std::shared_ptr<storage::FaultInjector> faults);
  ~FaultFile();
  FaultFile(const FaultFile&) = delete;
  FaultFile& operator=(const FaultFile&) = delete;

  // The current wall-clock step (clock_offset_ms=); any thread.
  int64_t clock_offset_ms() const { return clock_offset_ms_.load(); }

 private:
  void Apply();

  const std::string path_;
  std::shared_ptr<storage::FaultInjector> faults_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string applied_;  // the content last applied
  std::atomic<int64_t> clock_offset_ms_{0};
  std::thread thread_;
};

}  // namespace felix::server

#endif
