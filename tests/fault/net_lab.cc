#include "fault/net_lab.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <regex>
#include <sstream>

#include "fault/shell.h"

namespace felix::fault {
namespace {

// Cut rules all share one priority, so healing deletes that priority until none is left.
constexpr char kCutPref[] = "100";

std::string Tool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string path = std::string(dir) + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// A run prefix "fx<pid>" is stale when its process is gone, or is this process (a lab it made
// earlier and did not remove).
bool Stale(const std::string& pid_text) {
  pid_t pid = static_cast<pid_t>(std::stol(pid_text));
  if (pid == getpid()) return true;
  return kill(pid, 0) != 0 && errno == ESRCH;
}

void KillProcessesIn(const std::string& ip, const std::string& ns) {
  std::string pids;
  if (RunShell(ip + " netns pids " + ns, &pids) != 0) return;
  std::istringstream in(pids);
  pid_t pid = 0;
  while (in >> pid) {
    if (pid > 1 && pid != getpid()) kill(pid, SIGKILL);
  }
}

}  // namespace

std::string SweepStaleNetLabs() {
  std::string ip = Tool("ip");
  if (ip.empty()) return "";
  std::string removed;
  // Runs `remove` on the name (group 1) of each line of `list` whose pid (group 2) is stale.
  auto sweep = [&](const std::string& list, const std::regex& name, const std::string& remove,
                   bool kill_inside) {
    std::string text;
    if (RunShell(ip + " " + list, &text) != 0) return;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, name) || !Stale(m[2])) continue;
      if (kill_inside) KillProcessesIn(ip, m[1]);
      if (RunShell(ip + " " + remove + " " + m[1].str()) == 0) removed += m[1].str() + "\n";
    }
  };
  sweep("netns list", std::regex(R"(^(fx([0-9]+)-[a-z0-9]+)\b)"), "netns del", true);
  sweep("-o link show", std::regex(R"(^[0-9]+: (fx([0-9]+)r)[@:])"), "link del", false);
  return removed;
}

std::unique_ptr<NetLab> NetLab::Create(int brokers, std::string* why) {
  if (geteuid() != 0) {
    *why = "not root (network namespaces need CAP_NET_ADMIN)";
    return nullptr;
  }
  if (Tool("ip").empty() || Tool("tc").empty()) {
    *why = "ip or tc missing (iproute2; scripts/setup installs it)";
    return nullptr;
  }
  SweepStaleNetLabs();
  // A /16 of 10/8 that no address or route of this machine touches.
  std::string used;
  RunShell(Tool("ip") + " -4 -o addr show; " + Tool("ip") + " -4 route show", &used);
  int subnet = 0;
  for (int i = 0; i < 150 && subnet == 0; ++i) {
    int s = 100 + static_cast<int>((getpid() + i) % 150);
    if (used.find("10." + std::to_string(s) + ".") == std::string::npos) subnet = s;
  }
  if (subnet == 0) {
    *why = "no free 10.x.0.0/16 subnet";
    return nullptr;
  }
  std::unique_ptr<NetLab> lab(new NetLab("fx" + std::to_string(getpid()), subnet, brokers));
  if (!lab->Build()) {
    *why = "building the namespaces failed: " + lab->error();
    return nullptr;  // the destructor removed what was built
  }
  return lab;
}

NetLab::NetLab(std::string prefix, int subnet, int brokers)
    : prefix_(std::move(prefix)), subnet_(subnet), brokers_(brokers) {}

NetLab::~NetLab() {
  std::string ip = Tool("ip");
  for (int n = 1; n <= brokers_; ++n) {
    KillProcessesIn(ip, node_ns(n));
    RunShell(ip + " netns del " + node_ns(n), nullptr);
  }
  RunShell(ip + " netns del " + hub(), nullptr);         // takes the hub ends of every veth with it
  RunShell(ip + " link del " + prefix_ + "r", nullptr);  // gone already unless the hub lingered
}

std::string NetLab::address(int endpoint) const {
  std::string net = "10." + std::to_string(subnet_) + ".";
  return endpoint == 0 ? net + "0.3" : net + std::to_string(endpoint) + ".2";
}

std::string NetLab::etcd_host() const {
  return address(0);
}

std::string NetLab::broker_host(int n) const {
  return address(n);
}

std::vector<std::string> NetLab::LaunchPrefix(int n) const {
  return {Tool("ip"), "netns", "exec", node_ns(n)};
}

bool NetLab::Run(const std::string& command, std::string* output) {
  std::string out;
  if (RunShell(command, &out) == 0) {
    if (output != nullptr) *output = std::move(out);
    return true;
  }
  error_ = command + ": " + out;
  return false;
}

bool NetLab::Build() {
  std::string ip = Tool("ip");
  std::string tc = Tool("tc");
  std::string net = "10." + std::to_string(subnet_) + ".";
  std::string root_link = prefix_ + "r";
  std::vector<std::string> steps = {
      ip + " netns add " + hub(),
      ip + " -n " + hub() + " link set lo up",
      ip + " netns exec " + hub() + " sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'",
      ip + " link add " + root_link + " type veth peer name " + hub_link(0),
      ip + " link set " + hub_link(0) + " netns " + hub(),
      ip + " addr add " + net + "0.2/24 dev " + root_link,
      ip + " addr add " + net + "0.3/24 dev " + root_link,
      ip + " link set " + root_link + " up",
      ip + " -n " + hub() + " addr add " + net + "0.1/24 dev " + hub_link(0),
      ip + " -n " + hub() + " link set " + hub_link(0) + " up",
      ip + " route add " + net + "0.0/16 via " + net + "0.1",
  };
  for (int n = 1; n <= brokers_; ++n) {
    std::string ns = node_ns(n);
    std::string sub = net + std::to_string(n);
    std::vector<std::string> node = {
        ip + " netns add " + ns,
        ip + " -n " + ns + " link set lo up",
        ip + " link add " + node_link(n) + " type veth peer name " + hub_link(n),
        ip + " link set " + node_link(n) + " netns " + ns,
        ip + " link set " + hub_link(n) + " netns " + hub(),
        ip + " -n " + ns + " addr add " + sub + ".2/24 dev " + node_link(n),
        ip + " -n " + ns + " link set " + node_link(n) + " up",
        ip + " -n " + hub() + " addr add " + sub + ".1/24 dev " + hub_link(n),
        ip + " -n " + hub() + " link set " + hub_link(n) + " up",
        ip + " -n " + ns + " route add default via " + sub + ".1",
    };
    steps.insert(steps.end(), node.begin(), node.end());
  }
  for (const auto& step : steps) {
    if (!Run(step)) return false;
  }
  // netem where the kernel has it (probed on the hub's harness link, then removed).
  std::string probe =
      tc + " -n " + hub() + " qdisc add dev " + hub_link(0) + " root netem delay 1ms";
  netem_ = RunShell(probe, nullptr) == 0;
  RunShell(tc + " -n " + hub() + " qdisc del dev " + hub_link(0) + " root", nullptr);
  return true;
}

std::string NetLab::Describe() const {
  return "network namespaces " + prefix_ + "-n1.." + std::to_string(brokers_) + " routed by " +
         hub() + " (10." + std::to_string(subnet_) + ".0.0/16; etcd " + etcd_host() +
         "); partitions: ip rule blackhole; slow link: " +
         (netem_ ? "tc netem (delay 150±50 ms, loss 10%)"
                 : "tc tbf 200 kbit, latency 200 ms (this kernel has no netem)");
}

bool NetLab::Cut(int from, int to) {
  return Run(Tool("ip") + " -n " + hub() + " rule add from " + address(from) + " to " +
             address(to) + " blackhole pref " + kCutPref);
}

bool NetLab::Slow(int n) {
  std::string tc = Tool("tc");
  std::string qdisc = netem_ ? " root netem delay 150ms 50ms loss 10%"
                             : " root tbf rate 200kbit burst 8kb latency 200ms";
  return Run(tc + " -n " + hub() + " qdisc add dev " + hub_link(n) + qdisc) &&
         Run(tc + " -n " + node_ns(n) + " qdisc add dev " + node_link(n) + qdisc);
}

std::optional<QdiscStats> NetLab::LinkStats(int n) {
  std::string tc = Tool("tc");
  QdiscStats total;
  std::regex counters(R"(Sent [0-9]+ bytes ([0-9]+) pkt \(dropped ([0-9]+), overlimits ([0-9]+))");
  for (const auto& [ns, link] :
       {std::pair{hub(), hub_link(n)}, std::pair{node_ns(n), node_link(n)}}) {
    std::string out;
    if (!Run(tc + " -n " + ns + " -s qdisc show dev " + link, &out)) return std::nullopt;
    std::smatch m;
    if (!std::regex_search(out, m, counters)) return std::nullopt;
    total.sent_packets += std::stoull(m[1]);
    total.dropped += std::stoull(m[2]);
    total.overlimits += std::stoull(m[3]);
  }
  return total;
}

std::string NetLab::Faults() {
  std::string ip = Tool("ip");
  std::string tc = Tool("tc");
  std::string out;
  std::string rules;
  RunShell(ip + " -n " + hub() + " rule show pref " + kCutPref, &rules);
  out += rules;
  for (int n = 1; n <= brokers_; ++n) {
    for (const auto& [ns, link] :
         {std::pair{hub(), hub_link(n)}, std::pair{node_ns(n), node_link(n)}}) {
      std::string q;
      RunShell(tc + " -n " + ns + " qdisc show dev " + link, &q);
      if (q.find("netem") != std::string::npos || q.find("tbf") != std::string::npos) out += q;
    }
  }
  return out;
}

bool NetLab::HealAll() {
  std::string ip = Tool("ip");
  std::string tc = Tool("tc");
  // One deletion per rule; bounded so a rule that will not go cannot loop forever.
  for (int i = 0; i < 256; ++i) {
    if (RunShell(ip + " -n " + hub() + " rule del pref " + kCutPref, nullptr) != 0) break;
  }
  for (int n = 1; n <= brokers_; ++n) {
    RunShell(tc + " -n " + hub() + " qdisc del dev " + hub_link(n) + " root", nullptr);
    RunShell(tc + " -n " + node_ns(n) + " qdisc del dev " + node_link(n) + " root", nullptr);
  }
  std::string left = Faults();
  if (!left.empty()) error_ = "still in place after the heal: " + left;
  return left.empty();
}

}  // namespace felix::fault
