#include "support/free_ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>

namespace felix::testing {
namespace {

// Binds a loopback socket of `type` to `port`; the fd, or -1 when the port is taken.
int BindLoopback(int type, int port) {
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Claims `port` for this process until it exits: binds the abstract unix socket
// "felix-test-port-<port>" and never closes it. Between choosing a port and the child
// process binding it, another test process (ctest -j) or this one's next choice (an etcd's
// ports chosen before a cluster's brokers', each released for its process to bind) could
// choose the same port; a claim no other test process can make closes that window, and the
// kernel drops it when the process exits. false when someone holds the claim already.
bool ClaimForThisProcess(int port) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // no claim possible: fall back to the bind probe alone
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL, no file, gone with the last descriptor.
  const int length =
      std::snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "felix-test-port-%d", port);
  const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + length);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), size) != 0) {
    close(fd);
    return false;
  }
  return true;  // fd stays open: the claim lasts as long as the process
}

// The lowest ephemeral port: ports from here up are handed out by the kernel.
int EphemeralLow() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (range >> low >> high && low > 12000) return low;
  return 32768;
}

// Ports below the ephemeral range, at random (tests choosing at once rarely pick the same).
int CandidatePort() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(10000, EphemeralLow() - 1);
  return pick(rng);
}

}  // namespace

int FreeLoopbackPort() {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = CandidatePort();
    if (int fd = BindLoopback(SOCK_STREAM, port); fd >= 0) {
      close(fd);
      if (ClaimForThisProcess(port)) return port;
    }
  }
  throw std::runtime_error("no free loopback TCP port below the ephemeral range");
}

std::vector<int> FreeLoopbackPorts(int count) {
  // Every socket stays open until all ports are chosen, so the ports are distinct.
  std::vector<int> held;
  std::vector<int> ports;
  for (int attempt = 0; static_cast<int>(ports.size()) < count; ++attempt) {
    if (attempt == 1000 * count) {
      for (int fd : held) close(fd);
      throw std::runtime_error("no free loopback TCP+UDP ports below the ephemeral range");
    }
    const int port = CandidatePort();
    int tcp = BindLoopback(SOCK_STREAM, port);
    if (tcp < 0) continue;
    int udp = BindLoopback(SOCK_DGRAM, port);
    if (udp < 0) {
      close(tcp);
      continue;
    }
    held.push_back(tcp);
    held.push_back(udp);
    if (!ClaimForThisProcess(port)) continue;
    ports.push_back(port);
  }
  for (int fd : held) close(fd);
  return ports;
}

}  // namespace felix::testing
