// DataDirLock: one broker per data directory (issue 12 item 3).
//
// Two brokers on one directory would both append to the same logs (which then no longer
// verify) and rewrite each other's certificate and credential file. At startup the broker
// takes an exclusive flock(2) on <data_dir>/felix.lock, before it reads or writes anything
// else there, and writes its PID into the file. The kernel drops the lock when the process
// exits, however it exits (SIGKILL included), so a stale file never blocks a restart.
//
// Threading: created once in main(); the lock is held for the object's lifetime.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"

namespace felix::server {

inline constexpr char kDataDirLockFile[] = "felix.lock";

class DataDirLock {
 public:
  // kUnavailable when another process holds the lock; the message names the directory and
  // the holder's PID (as written in the file). kIo when the file cannot be opened.
  static Result<std::unique_ptr<DataDirLock>> Acquire(const std::string& data_dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace felix::server
