#include "support/process_state.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace felix::testing {
namespace {

// The state letter of /proc/<pid>/task/<tid>/stat (after the command's closing parenthesis);
// 0 when unreadable (the thread is gone).
char TaskState(const std::filesystem::path& stat) {
  std::ifstream in(stat);
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return 0;
  return line[close + 2];
}

bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return false;
  for (const auto& task : tasks) {
    char state = TaskState(task.path() / "stat");
    if (state != 0 && state != 'T' && state != 't') return false;
  }
  return true;
}

}  // namespace

bool StopAndWaitStopped(pid_t pid, std::chrono::milliseconds limit) {
  if (kill(pid, SIGSTOP) != 0) return false;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!AllThreadsStopped(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();  // the kernel is finishing the group stop
  }
  return true;
}

}  // namespace felix::testing
