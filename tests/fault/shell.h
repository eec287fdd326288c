// RunShell: runs one command line through /bin/sh and collects what it printed, for the fault
// harness's calls to system tools (ip, tc) and to the cache checker (porcupine/). Blocks until
// the command exits; any thread.
#pragma once

#include <string>

namespace felix::fault {

// The command's exit status (-1 when it could not be run or died of a signal); its stdout and
// stderr, interleaved, in *output when given.
int RunShell(const std::string& command, std::string* output = nullptr);

}  // namespace felix::fault
