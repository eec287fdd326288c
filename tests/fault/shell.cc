#include "fault/shell.h"

#include <sys/wait.h>

#include <cstdio>

namespace felix::fault {

int RunShell(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::string out;
  char buf[4096];
  size_t got = 0;
  while ((got = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, got);
  int status = pclose(pipe);
  if (output != nullptr) *output = std::move(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace felix::fault
