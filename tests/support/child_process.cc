#include "support/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <gtest/gtest.h>

extern char** environ;

namespace felix::testing {
namespace {

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ChildProcess::ChildProcess(std::string program, std::vector<std::string> args,
                           std::map<std::string, std::string> env) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  args.insert(args.begin(), program);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execve(program.c_str(), argv.data(), envp.data());
    std::fprintf(stderr, "execve %s: %s\n", program.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
}

ChildProcess::~ChildProcess() {
  if (!exit_code_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void ChildProcess::Drain(int timeout_ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) <= 0) return;
  char buf[65536];
  for (int i = 0; i < 2; ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
    ssize_t n = read(fds[i].fd, buf, sizeof buf);
    if (n > 0) (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    if (n == 0) {  // closed: stop polling it
      close(fds[i].fd);
      (i == 0 ? out_fd_ : err_fd_) = -1;
      return;
    }
  }
}

std::optional<std::string> ChildProcess::WaitForLine(const std::string& needle,
                                                     std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    size_t nl;
    while ((nl = out_.find('\n', scanned_)) != std::string::npos) {
      std::string line = out_.substr(scanned_, nl - scanned_);
      scanned_ = nl + 1;
      if (line.find(needle) != std::string::npos) return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || out_fd_ < 0) return std::nullopt;
    Drain(static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
}

int ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return *exit_code_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = ExitCodeOf(status);
      // poll() ignores a closed (-1) side, so this drains whatever is still open.
      while (out_fd_ >= 0 || err_fd_ >= 0) Drain(100);
      return *exit_code_;
    }
    // Reading the pipes both keeps the child from blocking on a full pipe and paces the loop.
    if (out_fd_ >= 0 || err_fd_ >= 0) {
      Drain(20);
    } else {
      pollfd none{};
      poll(&none, 0, 20);
    }
  }
  return -1;
}

int ChildProcess::Stop(int sig, std::chrono::milliseconds timeout) {
  if (!exit_code_) kill(pid_, sig);
  return Wait(timeout);
}

const std::string& ChildProcess::stderr_text() {
  if (err_fd_ >= 0) Drain(0);
  return err_;
}

std::string BuiltProgram(const std::string& relative) {
  const char* dir = std::getenv("FELIX_BINARY_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/" + relative;
}

namespace {

std::string MakeDirFromPattern(std::string pattern) {
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
  }
  return pattern;
}

// One root per test process for every directory MakeTempDir makes. Brokers, etcd and logs
// under it weigh tens of megabytes per test, so a CI run that left them behind filled the
// disk; the root is removed once every test of the process passed, and kept (for inspection)
// when one failed.
std::atomic<bool> temp_root_made{false};

const std::string& ProcessTempRoot() {
  static const std::string root =
      MakeDirFromPattern((std::filesystem::temp_directory_path() / "felix-test-XXXXXX").string());
  temp_root_made.store(true);
  return root;
}

class TempRootCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    if (std::getenv("FELIX_TEST_KEEP_TMP") != nullptr) return;
    if (!temp_root_made.load()) return;  // no test made a directory: nothing to remove
    std::error_code ignored;             // a child still writing must not turn a pass into a crash
    std::filesystem::remove_all(ProcessTempRoot(), ignored);
  }
};

// Registered before main() runs (the gtest main runs every environment's TearDown at the end).
[[maybe_unused]] ::testing::Environment* const temp_root_cleanup =
    ::testing::AddGlobalTestEnvironment(new TempRootCleanup);

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  return MakeDirFromPattern(ProcessTempRoot() + "/" + prefix + "-XXXXXX");
}

std::pair<int, std::string> RunProgram(const std::string& program,
                                       const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env) {
  ChildProcess child(program, args, env);
  int code = child.Wait();
  return {code, child.stdout_text() + child.stderr_text()};
}

}  // namespace felix::testing
