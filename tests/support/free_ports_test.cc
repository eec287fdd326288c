// FreeLoopbackPorts hands a port out at most once among all test processes: each is claimed
// for the life of the process that chose it (an abstract unix socket named after it).
#include "support/free_ports.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <set>
#include <string>

namespace felix::testing {
namespace {

// Whether another process could claim `port` now (binding the name the claim holds).
bool ClaimableElsewhere(int port) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const int length =
      std::snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "felix-test-port-%d", port);
  const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), size) == 0;
  close(fd);
  return bound;
}

TEST(FreeLoopbackPorts, APortHandedOutIsClaimedAndNeverHandedOutAgain) {
  std::set<int> seen;
  for (int round = 0; round < 20; ++round) {
    for (int port : FreeLoopbackPorts(5)) {
      EXPECT_TRUE(seen.insert(port).second) << "port " << port << " handed out twice";
      EXPECT_FALSE(ClaimableElsewhere(port)) << "port " << port << " is not claimed";
    }
    const int single = FreeLoopbackPort();
    EXPECT_TRUE(seen.insert(single).second) << "port " << single << " handed out twice";
    EXPECT_FALSE(ClaimableElsewhere(single)) << "port " << single << " is not claimed";
  }
  EXPECT_EQ(seen.size(), 20u * 6u);
}

}  // namespace
}  // namespace felix::testing
