#include "catalog/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace felix::catalog {

namespace {

tl::unexpected<Error> IoError(const std::string& what, const std::string& path, int err) {
  return Fail(ErrorCode::kIo, what + " " + path + ": " + std::strerror(err));
}

}  // namespace

Result<void> WriteFileAtomically(const std::string& path, std::string_view content, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return IoError("create", tmp, errno);
  // O_CREAT applies the umask and leaves an existing file's mode alone: set it explicitly.
  if (::fchmod(fd, mode) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("chmod", tmp, err);
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return IoError("write", tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return IoError("fsync", tmp, err);
  }
  if (::close(fd) != 0) return IoError("close", tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return IoError("rename", tmp, errno);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return IoError("open", dir, errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) return IoError("fsync", dir, err);
  return Ok();
}

Result<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Fail(ErrorCode::kNotFound, path + " does not exist");
    return IoError("open", path, errno);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return IoError("read", path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace felix::catalog
