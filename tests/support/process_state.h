// What the kernel says about a test's child process.
#pragma once

#include <sys/types.h>

#include <chrono>

namespace felix::testing {

// Sends SIGSTOP to `pid` and waits (up to `limit`) until the kernel reports every one of its
// threads stopped: a group stop reaches the threads asynchronously, so without the wait a
// request sent right after the signal can still be served. False if the wait ran out.
bool StopAndWaitStopped(pid_t pid,
                        std::chrono::milliseconds limit = std::chrono::milliseconds(2000));

}  // namespace felix::testing
