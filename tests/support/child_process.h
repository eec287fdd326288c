// ChildProcess: runs a real program (the broker, the CLI, a crash-test writer) for end-to-end
// tests, with its stdout and stderr captured through pipes.
//
// Waiting is event-driven: WaitForLine polls the pipe until a matching line arrives, the child
// exits, or the deadline passes (a failure, never a synchronisation sleep). The destructor
// kills a child still running. Not thread-safe: one test thread drives one ChildProcess.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace felix::testing {

class ChildProcess {
 public:
  // `env` entries are added to (or replace) the inherited environment.
  ChildProcess(std::string program, std::vector<std::string> args,
               std::map<std::string, std::string> env = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // First stdout line containing `needle`, or nullopt on exit/timeout.
  std::optional<std::string> WaitForLine(
      const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Sends `sig` and waits for exit; returns the exit code (128+signal if killed by one).
  int Stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Waits for a child that exits on its own; returns its exit code as Stop() does.
  int Wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  pid_t pid() const { return pid_; }
  const std::string& stdout_text() const { return out_; }
  // Everything written to stderr so far (drained on each call).
  const std::string& stderr_text();

 private:
  void Drain(int timeout_ms);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  size_t scanned_ = 0;
  std::optional<int> exit_code_;
};

// Path of a built program (the build directory comes from ctest's FELIX_BINARY_DIR).
std::string BuiltProgram(const std::string& relative);

// A fresh empty directory under this test process's temp root ($TMPDIR/felix-test-XXXXXX). The
// root and everything in it is removed after a run in which every test passed; it is kept when
// a test failed, or when FELIX_TEST_KEEP_TMP is set.
std::string MakeTempDir(const std::string& prefix);

// Runs a program to completion, capturing stdout+stderr; returns {exit code, output}.
std::pair<int, std::string> RunProgram(const std::string& program,
                                       const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env = {});

}  // namespace felix::testing
