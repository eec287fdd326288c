#include "storage/io_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace felix::storage {

#if FELIX_FAULT_INJECTION
void FaultInjector::FailSyncs(int count, int err) {
  std::lock_guard<std::mutex> l(mu_);
  sync_failures_left_ = count;
  sync_errno_ = err;
}
void FaultInjector::FailWrites(int count, int err, size_t partial_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  write_failures_left_ = count;
  write_errno_ = err;
  write_partial_ = partial_bytes;
}
void FaultInjector::HoldSyncs(bool hold) {
  std::lock_guard<std::mutex> l(mu_);
  hold_ = hold;
  held_cv_.notify_all();
}
int FaultInjector::OnSync() {
  std::unique_lock<std::mutex> l(mu_);
  ++syncs_started_;
  ++held_;
  held_cv_.wait(l, [&] { return !hold_; });
  --held_;
  if (sync_failures_left_ <= 0) return 0;
  --sync_failures_left_;
  ++syncs_failed_;
  return sync_errno_;
}
int FaultInjector::OnWrite(size_t* partial_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  if (write_failures_left_ <= 0) return 0;
  --write_failures_left_;
  *partial_bytes = write_partial_;
  return write_errno_;
}
int FaultInjector::syncs_failed() const {
  std::lock_guard<std::mutex> l(mu_);
  return syncs_failed_;
}
int FaultInjector::syncs_started() const {
  std::lock_guard<std::mutex> l(mu_);
  return syncs_started_;
}
int FaultInjector::syncs_held() const {
  std::lock_guard<std::mutex> l(mu_);
  return held_;
}
#endif

int WriteFullAt(int fd, const uint8_t* data, size_t len, uint64_t pos) {
  while (len > 0) {
    ssize_t n = ::pwrite(fd, data, len, off_t(pos));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    data += n;
    len -= size_t(n);
    pos += uint64_t(n);
  }
  return 0;
}

int64_t ReadAt(int fd, uint8_t* data, size_t len, uint64_t pos) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, data + done, len - done, off_t(pos + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -int64_t(errno);
    }
    if (n == 0) break;
    done += size_t(n);
  }
  return int64_t(done);
}

int DataSync(int fd) {
  while (::fdatasync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

StorageResult<void> SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return StorageFail(IoError("open directory", dir, errno));
  int rc = 0;
  while (::fsync(fd) != 0) {
    if (errno != EINTR) {
      rc = errno;
      break;
    }
  }
  ::close(fd);
  if (rc != 0) return StorageFail(IoError("fsync directory", dir, rc));
  return {};
}

StorageResult<void> MakeDirectories(const std::string& dir) {
  if (dir.empty()) return StorageFail(StorageErrc::kInvalidArgument, "empty directory path");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return StorageFail(StorageErrc::kInvalidArgument, dir + " is not a directory");
    }
    return {};
  }
  std::string parent = dir;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  auto slash = parent.rfind('/');
  parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : parent.substr(0, slash));
  if (auto r = MakeDirectories(parent); !r) return r;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return StorageFail(IoError("mkdir", dir, errno));
  }
  return SyncDirectory(parent);
}

StorageResult<std::vector<uint8_t>> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StorageFail(IoError("open", path, errno));
  std::vector<uint8_t> out;
  uint8_t buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return StorageFail(IoError("read", path, err));
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

StorageResult<void> WriteFileAtomic(const std::string& dir, const std::string& name,
                                    std::span<const uint8_t> bytes, bool sync) {
  std::string tmp = dir + "/" + name + ".tmp";
  std::string path = dir + "/" + name;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return StorageFail(IoError("create", tmp, errno));
  int rc = WriteFullAt(fd, bytes.data(), bytes.size(), 0);
  if (rc == 0 && sync) rc = DataSync(fd);
  ::close(fd);
  if (rc != 0) return StorageFail(IoError("write", tmp, rc));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return StorageFail(IoError("rename", tmp, errno));
  if (sync) return SyncDirectory(dir);
  return {};
}

StorageResult<void> OverwriteFileInPlace(const std::string& dir, const std::string& name,
                                         std::span<const uint8_t> bytes) {
  if (bytes.size() > kAtomicOverwriteBytes) return WriteFileAtomic(dir, name, bytes, true);
  std::string path = dir + "/" + name;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return WriteFileAtomic(dir, name, bytes, true);  // first write: create it
  struct stat st {};
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) != bytes.size()) {
    ::close(fd);
    return WriteFileAtomic(dir, name, bytes, true);  // another size: replace it whole
  }
  int rc = WriteFullAt(fd, bytes.data(), bytes.size(), 0);
  if (rc == 0) rc = DataSync(fd);
  ::close(fd);
  if (rc != 0) return StorageFail(IoError("overwrite", path, rc));
  return {};
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

StorageResult<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return StorageFail(IoError("open", path, errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return StorageFail(IoError("stat", path, err));
  }
  MappedFile m;
  if (st.st_size > 0) {
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return StorageFail(IoError("mmap", path, err));
    }
    ::madvise(p, size_t(st.st_size), MADV_SEQUENTIAL);
    m.data_ = static_cast<const uint8_t*>(p);
    m.size_ = size_t(st.st_size);
  }
  ::close(fd);
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace felix::storage
