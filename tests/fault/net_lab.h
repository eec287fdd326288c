// NetLab: a real network for a fault run (issue 17) in which partitions are real packet loss.
// Each broker lives in its own network namespace, joined by a veth pair to a hub namespace that
// routes between them; the harness (the test process and etcd, in the root namespace) is joined
// to the hub by one more veth pair. Faults are made in the hub and on the links:
//   - Cut(from, to): "ip rule ... blackhole" in the hub, so the hub silently drops every packet
//     it would forward from one endpoint to the other (one direction; cut both for a partition);
//   - Slow(n): a queueing discipline on both ends of broker n's link — netem (delay + loss) when
//     the kernel has it, else a token bucket (tbf: packets queue up to a latency bound, the
//     excess is dropped), since some kernels (e.g. this project's CI VM) ship without netem.
// Endpoints are numbered: 0 is etcd, 1..N the brokers. The harness's own traffic to a broker
// (client requests, admin HTTP) is never cut, so a run can always observe an isolated broker.
//
// Layout, for the run prefix P = "fx<pid>" and a free subnet 10.S.0.0/16:
//   root namespace  veth P r: 10.S.0.2 (harness) and 10.S.0.3 (etcd); 10.S/16 via 10.S.0.1
//   P-hub           veth P h0: 10.S.0.1; veth P h<n>: 10.S.n.1; forwarding on
//   P-n<n>          veth P n<n>: 10.S.n.2, lo; default route via 10.S.n.1      (broker n)
// Create() first sweeps what a dead run left behind (namespaces and links named fx<pid> whose
// process is gone, or this process's own: their processes are killed, then they are deleted);
// the destructor deletes everything it made, so a failed test leaves nothing, and a killed one
// is swept by the next run.
//
// Needs root and iproute2 (ip, tc); Create() says why not otherwise, and the fault run then
// falls back to process faults only. Not thread-safe: the run's driving thread uses it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace felix::fault {

struct QdiscStats {
  uint64_t sent_packets = 0;
  uint64_t dropped = 0;
  uint64_t overlimits = 0;
};

class NetLab {
 public:
  // Builds the namespaces and links for `brokers` brokers; nullptr with the reason in *why when
  // this machine cannot (not root, no ip/tc, no network namespaces).
  static std::unique_ptr<NetLab> Create(int brokers, std::string* why);
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  std::string etcd_host() const;         // 10.S.0.3
  std::string broker_host(int n) const;  // 10.S.n.2
  // argv that runs a command inside broker n's namespace (it execs: the pid stays the child's).
  std::vector<std::string> LaunchPrefix(int n) const;
  std::string prefix() const { return prefix_; }
  std::string Describe() const;  // one line for the run's verdict
  bool netem() const { return netem_; }

  // Drops every packet from endpoint `from` to endpoint `to` (0 = etcd, 1..N brokers).
  bool Cut(int from, int to);
  // Queueing discipline on both ends of broker n's link (see above).
  bool Slow(int n);
  // Both ends' qdisc counters of broker n's link, summed; nullopt when they cannot be read.
  std::optional<QdiscStats> LinkStats(int n);
  // Removes every cut and every qdisc; true when none is left (checked, not assumed).
  bool HealAll();
  // The rules and qdiscs in place, for proofs and verdicts ("" when healed).
  std::string Faults();

  const std::string& error() const { return error_; }

 private:
  NetLab(std::string prefix, int subnet, int brokers);
  bool Build();
  bool Run(const std::string& command, std::string* output = nullptr);
  std::string hub() const { return prefix_ + "-hub"; }
  std::string node_ns(int n) const { return prefix_ + "-n" + std::to_string(n); }
  std::string hub_link(int n) const { return prefix_ + "h" + std::to_string(n); }
  std::string node_link(int n) const { return prefix_ + "n" + std::to_string(n); }
  std::string address(int endpoint) const;

  std::string prefix_;
  int subnet_;
  int brokers_;
  bool netem_ = false;
  std::string error_;
};

// Deletes namespaces and root links named fx<pid>… whose process is gone (or is this one),
// killing processes still inside them. Returns what it removed (one name a line).
std::string SweepStaleNetLabs();

}  // namespace felix::fault
