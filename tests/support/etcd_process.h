// EtcdProcess: a real etcd (Debian etcd-server, /usr/bin/etcd) for tests — a single member, or
// (JoinCluster) one member of a multi-member cluster — on free loopback ports with its data in a
// fresh temp directory (removed by the destructor).
//
// Start() launches it and waits (deadline, polling /health) until it serves; Kill() is SIGKILL,
// Restart() starts it again on the same ports and data; Pause()/Resume() are SIGSTOP/SIGCONT;
// Stop() is SIGTERM. The destructor kills a running etcd. etcd's log goes to etcd.log in the
// data directory (a pipe nobody reads would block it). Not thread-safe: one test thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "support/child_process.h"
#include "support/free_ports.h"

namespace felix::testing {

class EtcdProcess {
 public:
  // `host`: an address etcd listens on and advertises besides loopback (endpoint() names it);
  // the default serves loopback only.
  explicit EtcdProcess(std::string host = "127.0.0.1");
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Makes this process member `name` of the cluster `initial_cluster` ("e1=<peer url>,…", each
  // member's peer_url()) instead of a cluster of its own. Before the first Start.
  void JoinCluster(std::string name, std::string initial_cluster);
  std::string peer_url() const;  // "http://127.0.0.1:<peer port>"
  const std::string& name() const { return name_; }

  // Each returns false (with the reason in error()) instead of throwing.
  bool Start(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Launches without waiting: the members of a cluster only become healthy together.
  bool StartNoWait();
  // Polls /health until it answers (a member: once the cluster has a quorum and a leader).
  bool WaitHealthy(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  bool running() const { return child_ != nullptr; }
  bool Restart(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return Start(timeout);
  }
  // Starts on a second client port (same data) that clients of endpoint() cannot reach: lets a
  // test change etcd (compact, write) while its watchers stay disconnected.
  bool StartOnOtherPort(std::chrono::milliseconds timeout = std::chrono::seconds(20));
  std::string other_endpoint() const;
  void Kill();    // SIGKILL and reap
  void Stop();    // SIGTERM and reap
  void Pause();   // SIGSTOP; returns once every thread is stopped
  void Resume();  // SIGCONT

  // True when GET /health answers {"health":"true"} within `timeout`.
  bool Healthy(std::chrono::milliseconds timeout = std::chrono::milliseconds(500)) const;

  std::string endpoint() const;  // "http://<host>:<client port>"
  int client_port() const { return client_port_; }
  const std::string& dir() const { return dir_; }
  const std::string& error() const { return error_; }
  // The tail of etcd's log, for failure messages.
  std::string LogTail(size_t bytes = 4000) const;

 private:
  std::string dir_;
  std::string host_;
  std::string name_ = "test";
  std::string initial_cluster_;  // empty: a cluster of this one member
  bool Spawn(int client_port);

  int client_port_ = 0;
  int other_port_ = 0;
  int running_port_ = 0;
  int peer_port_ = 0;
  std::unique_ptr<ChildProcess> child_;
  std::string error_;
};

}  // namespace felix::testing
