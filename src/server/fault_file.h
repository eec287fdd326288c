// FaultFile: the storage fault seam of test builds (FELIX_FAULT_INJECTION; broker-config.md §6
// FELIX_STORAGE_FAULT_FILE), so end-to-end tests can make a real broker's disk full or its
// fsyncs hang. A thread re-reads the file every 10 ms and applies it to one FaultInjector that
// every log of the broker shares. Lines `key=value`:
//   write_errno=N  every log data write fails with errno N (28 = ENOSPC: a full disk)
//   hold_syncs=1   every log fdatasync blocks until the line (or the file) is gone
// A missing file means no fault. Each change applied is announced on stdout as
// `felix-broker faults write_errno=N hold_syncs=0|1`. Compiled out of release builds.
//
// Threading: owns its thread; the destructor releases held syncs and joins it. Declare it
// before the broker core so that it outlives every log.
#pragma once

#if FELIX_FAULT_INJECTION

#include <atomic>
#include <condition_variable>
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

 private:
  void Apply();

  const std::string path_;
  std::shared_ptr<storage::FaultInjector> faults_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string applied_;  // the content last applied
  std::thread thread_;
};

}  // namespace felix::server

#endif
