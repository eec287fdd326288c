// ClusterHarness: a real Felix cluster for end-to-end tests — one etcd (EtcdProcess) and N real
// `felix-broker` processes in cluster mode on loopback, as `scripts/cluster` runs them (or, with
// ClusterOptions::node_hosts / node_launch_prefix, on other addresses and in other network
// namespaces — the fault harness's partitions).
//
// The constructor lays everything out without starting anything: a temp directory, a cluster CA
// and one certificate per node (transport/x509_gen, DNS names <node id> and localhost, used for
// both the client port and peer mTLS), ports free for TCP and UDP, one shared admin token, and
// each node's environment (FELIX_NODE_ID, FELIX_ETCD_ENDPOINTS, FELIX_CLUSTER_NAME, advertise
// addresses, binds, data dir, certificates, FELIX_ADMIN_TOKEN). Nodes are numbered 1..N and their
// ids are "n1".."nN". Ports, data and certificates stay the same across Stop/Kill and Start, so
// a restarted node comes back as itself.
//
// StartAll() starts etcd and every node and waits until each /ready answers 200. Start(n)
// launches one node without waiting; WaitReady(n, timeout) polls its /ready under a deadline
// (failing early when the process exits). Each broker's stdout and stderr go to a log file
// (LogTail(n) for failure messages) rather than a pipe nobody reads. Failures return false with
// the reason (and the node's log tail) in error().
//
// The destructor kills every broker and etcd and removes the directory. Not thread-safe: one
// test thread drives it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/child_process.h"
#include "support/etcd_process.h"

namespace felix::testing {

struct ClusterOptions {
  int nodes = 3;
  std::string cluster_name = "felix";
  // Added to every node's environment (per-node entries from SetNodeEnv win).
  std::map<std::string, std::string> env;
  // Per node (index n-1), optional: the IPv4 address node n binds and advertises (default
  // 127.0.0.1), and an argv prefix its broker is launched through (e.g. `ip netns exec NS`,
  // which execs, so the process id stays the broker's). Used by the fault harness to put each
  // broker in its own network namespace (tests/fault/net_lab.h).
  std::vector<std::string> node_hosts;
  std::vector<std::vector<std::string>> node_launch_prefix;
  // The address etcd also listens on and advertises to the brokers (default: loopback only).
  std::string etcd_host = "127.0.0.1";
  // etcd members (1, or 3 for the etcd-fault tests): e1..eN on the same host, brokers given
  // every member's endpoint.
  int etcd_members = 1;
};

class ClusterHarness {
 public:
  explicit ClusterHarness(ClusterOptions options = {});
  ~ClusterHarness();
  ClusterHarness(const ClusterHarness&) = delete;
  ClusterHarness& operator=(const ClusterHarness&) = delete;

  // etcd, then every node, then waits until all are ready within `timeout` (in total).
  bool StartAll(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Launches node n (1..N) with its environment; does not wait for readiness.
  bool Start(int n);
  // Polls GET /ready until 200, the process exits, or `timeout` passes.
  bool WaitReady(int n, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Start + WaitReady.
  bool StartReady(int n, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGKILL and reap. No-op when not running.
  void Kill(int n);
  // SIGTERM and wait for exit; the exit code (128+signal when killed by one), -1 on timeout or
  // when not running.
  int Stop(int n, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGSTOP / SIGCONT (a hung broker). Pause returns once every thread is stopped.
  void Pause(int n);
  void Resume(int n);
  bool Running(int n);

  // Sets (or with nullopt removes) one variable of node n's environment, for its next Start.
  void SetNodeEnv(int n, const std::string& name, std::optional<std::string> value);
  // Node n's environment as it would be started.
  std::map<std::string, std::string> NodeEnv(int n) const;

  // GET `path` on node n's admin HTTP with the admin token: the body when the status is 200,
  // nullopt otherwise (status, if wanted, in *status; 0 when unreachable).
  std::optional<std::string> AdminGet(int n, const std::string& path, int* status = nullptr) const;

  int size() const { return static_cast<int>(nodes_.size()); }
  std::string node_id(int n) const { return "n" + std::to_string(n); }
  std::string host(int n) const;           // node n's address, 127.0.0.1 unless node_hosts
  std::string client_addr(int n) const;    // "<host>:<quic port>"
  std::string internal_addr(int n) const;  // "<host>:<internal port>"
  std::string http_addr(int n) const;      // "<host>:<admin/metrics port>"
  std::string data_dir(int n) const;
  std::string log_file(int n) const;
  // FELIX_BROKERS-style comma list of the client addresses of n1..nN.
  std::string brokers() const;
  const std::string& admin_token() const { return admin_token_; }
  std::string ca_file() const { return dir_ + "/certs/ca.pem"; }  // verifies every node
  const std::string& dir() const { return dir_; }
  EtcdProcess& etcd() { return etcd_; }
  // etcd member m (1..etcd_members(); 1 is etcd()).
  EtcdProcess& etcd_member(int m);
  int etcd_members() const { return 1 + static_cast<int>(etcd_more_.size()); }
  // FELIX_ETCD_ENDPOINTS: every member's client URL, comma-separated.
  std::string etcd_endpoints() const;
  const std::string& error() const { return error_; }
  std::string LogTail(int n, size_t bytes = 4000) const;

 private:
  struct Node {
    int quic_port = 0;
    int internal_port = 0;
    int http_port = 0;
    std::map<std::string, std::string> env;
    std::unique_ptr<ChildProcess> process;
  };
  Node& node(int n);
  const Node& node(int n) const;
  bool Fail(std::string message);

  ClusterOptions options_;
  std::string dir_;
  std::string admin_token_;
  EtcdProcess etcd_;
  std::vector<std::unique_ptr<EtcdProcess>> etcd_more_;  // members 2..N
  std::vector<Node> nodes_;
  std::string error_;
};

}  // namespace felix::testing
