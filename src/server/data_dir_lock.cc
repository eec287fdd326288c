#include "server/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace felix::server {
namespace {

// The PID the holder wrote ("unknown" if it has not written it yet).
std::string HolderPid(int fd) {
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

Result<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(const std::string& data_dir) {
  std::string path = (std::filesystem::path(data_dir) / kDataDirLockFile).string();
  // Never truncated on open: a running holder's PID must stay readable.
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Fail(ErrorCode::kIo,
                "cannot open the data directory lock " + path + ": " + std::strerror(errno));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string holder = HolderPid(fd);
    close(fd);
    if (err == EWOULDBLOCK) {
      return Fail(ErrorCode::kUnavailable,
                  "data directory " + data_dir + " is in use by another broker (pid " + holder +
                      ", lock file " + path + "); one data directory serves one broker");
    }
    return Fail(ErrorCode::kIo, "cannot lock " + path + ": " + std::strerror(err));
  }
  std::string pid = std::to_string(getpid()) + "\n";
  // Best effort: on a full disk the lock still holds; only the PID in the message is lost.
  if (ftruncate(fd, 0) == 0) (void)pwrite(fd, pid.data(), pid.size(), 0);
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() {
  close(fd_);  // releases the lock
}

}  // namespace felix::server
