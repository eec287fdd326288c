// Loopback ports for test processes that must know each other's addresses before they start
// (a cluster's brokers, etcd's client and peer ports), so they cannot bind port 0 themselves.
//
// A port is chosen free and then released for the process to bind, so something else may
// take it meanwhile. Ports the kernel hands out for port-0 binds and outgoing connections (the
// ephemeral range, /proc/sys/net/ipv4/ip_local_port_range, 32768–60999 by default) are taken
// all the time by every test running in parallel — each QUIC client socket is one — so these
// are drawn at random from below that range, where only another test's explicit choice could
// collide; and each port handed out is claimed for the life of the test process (an abstract
// unix socket named after it), so no two test processes — nor two calls in one — hand out the
// same port, whatever the timing. Thread-safe.
#pragma once

#include <vector>

namespace felix::testing {

// A loopback TCP port that was free a moment ago.
int FreeLoopbackPort();

// `count` distinct loopback ports that were free for both TCP and UDP a moment ago (QUIC
// listens on UDP, HTTP on TCP).
std::vector<int> FreeLoopbackPorts(int count);

}  // namespace felix::testing
