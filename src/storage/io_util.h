// Small POSIX helpers for the storage library: positioned full writes/reads, fdatasync,
// directory sync, recursive mkdir with parent syncs, read-only file mapping, and the
// fault-injection seam (FaultInjector, only with FELIX_FAULT_INJECTION).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "storage/storage_error.h"

namespace felix::storage {

#if FELIX_FAULT_INJECTION
// Per-log fault plan handed in through LogOptions (tests only; compiled out of release).
// Thread-safe: the log consults it from appender and flusher threads.
class FaultInjector {
 public:
  // The next `count` fdatasync calls on log data fail with `err` (nothing is synced).
  void FailSyncs(int count, int err = 5 /*EIO*/);
  // The next `count` data writes fail with `err` after writing `partial_bytes` of the batch.
  void FailWrites(int count, int err = 28 /*ENOSPC*/, size_t partial_bytes = 0);
  // While held, every data fdatasync blocks before starting (tests use this to line up
  // concurrent appenders behind one flush). Releasing lets them all proceed.
  void HoldSyncs(bool hold);
  // Hooks used by the log: 0 = proceed, else the errno to report.
  int OnSync();
  int OnWrite(size_t* partial_bytes);
  int syncs_failed() const;
  int syncs_started() const;  // data fdatasyncs attempted (including failed ones)
  int syncs_held() const;     // fdatasyncs currently blocked by HoldSyncs

 private:
  mutable std::mutex mu_;
  std::condition_variable held_cv_;
  bool hold_ = false;
  int held_ = 0;
  int syncs_started_ = 0;
  int sync_failures_left_ = 0;
  int sync_errno_ = 0;
  int syncs_failed_ = 0;
  int write_failures_left_ = 0;
  int write_errno_ = 0;
  size_t write_partial_ = 0;
};
#endif

// pwrite until done; returns 0 or errno.
int WriteFullAt(int fd, const uint8_t* data, size_t len, uint64_t pos);
// pread until `len` bytes or EOF; returns bytes read or -errno.
int64_t ReadAt(int fd, uint8_t* data, size_t len, uint64_t pos);
int DataSync(int fd);
StorageResult<void> SyncDirectory(const std::string& dir);
// mkdir -p, syncing each parent whose entry was created.
StorageResult<void> MakeDirectories(const std::string& dir);
StorageResult<std::vector<uint8_t>> ReadWholeFile(const std::string& path);
// Atomically replaces `path` (temp + fsync + rename + dir sync).
StorageResult<void> WriteFileAtomic(const std::string& dir, const std::string& name,
                                    std::span<const uint8_t> bytes, bool sync);
// Durably overwrites `dir/name` in place (pwrite at 0 + fdatasync) when it exists and already
// has exactly bytes.size() bytes; otherwise WriteFileAtomic. For small fixed-size state files
// rewritten often: no temp file, rename or directory sync, so no journal commit, and one flush.
// Only for files of at most kAtomicOverwriteBytes, which a device writes whole or not at all
// (one sector; the assumption PostgreSQL makes for pg_control); the file's own checksum would
// name a torn write rather than hide it.
inline constexpr size_t kAtomicOverwriteBytes = 512;
StorageResult<void> OverwriteFileInPlace(const std::string& dir, const std::string& name,
                                         std::span<const uint8_t> bytes);
bool FileExists(const std::string& path);

// A read-only mapping of a whole file (empty span for an empty file).
class MappedFile {
 public:
  static StorageResult<MappedFile> Open(const std::string& path);
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace felix::storage
