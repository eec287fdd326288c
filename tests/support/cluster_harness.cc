#include "support/cluster_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <httplib.h>

#include "support/process_state.h"
#include "transport/x509_gen.h"

namespace felix::testing {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(100);

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string RandomToken() {
  std::random_device rd;
  std::string token;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 64; ++i) token += hex[rd() % 16];
  return token;
}

}  // namespace

ClusterHarness::ClusterHarness(ClusterOptions options)
    : options_(std::move(options)),
      dir_(MakeTempDir("felix-cluster")),
      admin_token_(RandomToken()),
      etcd_(options_.etcd_host) {
  if (options_.nodes < 1) throw std::invalid_argument("a cluster needs at least one node");
  if (options_.etcd_members > 1) {
    for (int m = 2; m <= options_.etcd_members; ++m) {
      etcd_more_.push_back(std::make_unique<EtcdProcess>(options_.etcd_host));
    }
    std::string initial;
    for (int m = 1; m <= etcd_members(); ++m) {
      initial += (m > 1 ? "," : "") + std::string("e") + std::to_string(m) + "=" +
                 etcd_member(m).peer_url();
    }
    for (int m = 1; m <= etcd_members(); ++m) {
      etcd_member(m).JoinCluster("e" + std::to_string(m), initial);
    }
  }
  std::filesystem::create_directories(dir_ + "/certs");
  transport::CertSpec ca_spec;
  ca_spec.common_name = "felix test cluster CA";
  ca_spec.is_ca = true;
  auto ca = transport::GenerateCertificate(ca_spec);
  if (!ca) throw std::runtime_error("CA generation failed: " + ca.error().message);
  WriteFile(ca_file(), ca->cert_pem);

  std::vector<int> ports = FreeLoopbackPorts(3 * options_.nodes);
  nodes_.resize(static_cast<size_t>(options_.nodes));
  for (int n = 1; n <= options_.nodes; ++n) {
    Node& nd = node(n);
    nd.quic_port = ports[static_cast<size_t>(3 * (n - 1))];
    nd.internal_port = ports[static_cast<size_t>(3 * (n - 1) + 1)];
    nd.http_port = ports[static_cast<size_t>(3 * (n - 1) + 2)];
    std::string id = node_id(n);
    transport::CertSpec spec;
    spec.common_name = id;
    spec.dns_names = {id, "localhost"};
    auto cert = transport::GenerateCertificate(spec, &*ca);
    if (!cert)
      throw std::runtime_error("node certificate generation failed: " + cert.error().message);
    std::string cert_file = dir_ + "/certs/" + id + ".pem";
    std::string key_file = dir_ + "/certs/" + id + "-key.pem";
    WriteFile(cert_file, cert->cert_pem);
    WriteFile(key_file, cert->key_pem);
    std::filesystem::create_directories(data_dir(n));

    nd.env = options_.env;
    std::map<std::string, std::string> own = {
        {"FELIX_NODE_ID", id},
        {"FELIX_CLUSTER_NAME", options_.cluster_name},
        {"FELIX_ETCD_ENDPOINTS", etcd_endpoints()},
        {"FELIX_NODE_ADVERTISE_ADDR", internal_addr(n)},
        {"FELIX_CLIENT_ADVERTISE_ADDR", client_addr(n)},
        {"FELIX_DATA_DIR", data_dir(n)},
        {"FELIX_QUIC_BIND", client_addr(n)},
        {"FELIX_INTERNAL_BIND", internal_addr(n)},
        {"FELIX_BROKER_METRICS_BIND", http_addr(n)},
        {"FELIX_TLS_CERT", cert_file},
        {"FELIX_TLS_KEY", key_file},
        {"FELIX_INTERNAL_TLS_CERT", cert_file},
        {"FELIX_INTERNAL_TLS_KEY", key_file},
        {"FELIX_INTERNAL_TLS_CA", ca_file()},
        {"FELIX_ADMIN_TOKEN", admin_token_},
    };
    for (auto& [k, v] : own) nd.env.emplace(k, v);  // options_.env may override
  }
}

ClusterHarness::~ClusterHarness() {
  for (auto& nd : nodes_) {
    if (nd.process) {
      kill(nd.process->pid(), SIGCONT);
      nd.process->Stop(SIGKILL);
    }
  }
  nodes_.clear();
  etcd_.Kill();
  for (auto& member : etcd_more_) member->Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

EtcdProcess& ClusterHarness::etcd_member(int m) {
  if (m < 1 || m > etcd_members()) throw std::out_of_range("no etcd member " + std::to_string(m));
  return m == 1 ? etcd_ : *etcd_more_[static_cast<size_t>(m - 2)];
}

std::string ClusterHarness::etcd_endpoints() const {
  std::string out = etcd_.endpoint();
  for (const auto& member : etcd_more_) out += "," + member->endpoint();
  return out;
}

ClusterHarness::Node& ClusterHarness::node(int n) {
  if (n < 1 || n > size()) throw std::out_of_range("no node " + std::to_string(n));
  return nodes_[static_cast<size_t>(n - 1)];
}

const ClusterHarness::Node& ClusterHarness::node(int n) const {
  if (n < 1 || n > size()) throw std::out_of_range("no node " + std::to_string(n));
  return nodes_[static_cast<size_t>(n - 1)];
}

bool ClusterHarness::Fail(std::string message) {
  error_ = std::move(message);
  return false;
}

bool ClusterHarness::StartAll(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // Every member first: a member is healthy only once a quorum of them runs.
  for (int m = 1; m <= etcd_members(); ++m) {
    if (!etcd_member(m).StartNoWait()) return Fail("etcd: " + etcd_member(m).error());
  }
  for (int m = 1; m <= etcd_members(); ++m) {
    if (!etcd_member(m).WaitHealthy(timeout)) {
      return Fail("etcd member " + std::to_string(m) + ": " + etcd_member(m).error());
    }
  }
  for (int n = 1; n <= size(); ++n) {
    if (!Start(n)) return false;
  }
  for (int n = 1; n <= size(); ++n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!WaitReady(n, std::max(left, std::chrono::milliseconds(0)))) return false;
  }
  return true;
}

bool ClusterHarness::Start(int n) {
  Node& nd = node(n);
  if (nd.process && nd.process->Wait(std::chrono::milliseconds(1)) == -1)
    return Fail(node_id(n) + " is already running");
  // The shell only redirects and execs, so the child's pid is the broker's; its output goes to
  // the log file (a pipe nobody drains would stall a chatty broker).
  std::vector<std::string> args = {"-c", "exec \"$@\" >>\"$FELIX_HARNESS_LOG\" 2>&1",
                                   "felix-harness"};
  if (static_cast<size_t>(n) <= options_.node_launch_prefix.size()) {
    const auto& prefix = options_.node_launch_prefix[static_cast<size_t>(n - 1)];
    args.insert(args.end(), prefix.begin(), prefix.end());
  }
  args.push_back(BuiltProgram("src/server/felix-broker"));
  std::map<std::string, std::string> env = nd.env;
  env["FELIX_HARNESS_LOG"] = log_file(n);
  nd.process = std::make_unique<ChildProcess>("/bin/sh", args, env);
  return true;
}

bool ClusterHarness::WaitReady(int n, std::chrono::milliseconds timeout) {
  Node& nd = node(n);
  if (!nd.process) return Fail(node_id(n) + " was not started");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  httplib::Client client(host(n), nd.http_port);
  client.set_connection_timeout(std::chrono::milliseconds(200));
  client.set_read_timeout(std::chrono::seconds(1));
  while (true) {
    auto res = client.Get("/ready");
    if (res && res->status == 200) return true;
    // Exited? Wait() with the poll interval also paces the loop.
    if (int code = nd.process->Wait(kPollInterval); code != -1) {
      return Fail(node_id(n) + " exited with " + std::to_string(code) +
                  " before it was ready; log:\n" + LogTail(n));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(node_id(n) + " was not ready in time (GET /ready: " +
                  (res ? "HTTP " + std::to_string(res->status) : httplib::to_string(res.error())) +
                  "); log:\n" + LogTail(n));
    }
  }
}

bool ClusterHarness::StartReady(int n, std::chrono::milliseconds timeout) {
  return Start(n) && WaitReady(n, timeout);
}

void ClusterHarness::Kill(int n) {
  Node& nd = node(n);
  if (!nd.process) return;
  kill(nd.process->pid(), SIGCONT);
  nd.process->Stop(SIGKILL);
  nd.process.reset();
}

int ClusterHarness::Stop(int n, std::chrono::milliseconds timeout) {
  Node& nd = node(n);
  if (!nd.process) return -1;
  kill(nd.process->pid(), SIGCONT);
  int code = nd.process->Stop(SIGTERM, timeout);
  if (code != -1) nd.process.reset();
  return code;
}

void ClusterHarness::Pause(int n) {
  if (node(n).process) StopAndWaitStopped(node(n).process->pid());
}

void ClusterHarness::Resume(int n) {
  if (node(n).process) kill(node(n).process->pid(), SIGCONT);
}

bool ClusterHarness::Running(int n) {
  Node& nd = node(n);
  return nd.process && nd.process->Wait(std::chrono::milliseconds(1)) == -1;
}

void ClusterHarness::SetNodeEnv(int n, const std::string& name, std::optional<std::string> value) {
  if (value) {
    node(n).env[name] = *value;
  } else {
    node(n).env.erase(name);
  }
}

std::map<std::string, std::string> ClusterHarness::NodeEnv(int n) const {
  return node(n).env;
}

std::optional<std::string> ClusterHarness::AdminGet(int n, const std::string& path,
                                                    int* status) const {
  httplib::Client client(host(n), node(n).http_port);
  client.set_connection_timeout(std::chrono::seconds(1));
  client.set_read_timeout(std::chrono::seconds(5));
  auto res = client.Get(path, {{"Authorization", "Bearer " + admin_token_}});
  if (status) *status = res ? res->status : 0;
  if (!res || res->status != 200) return std::nullopt;
  return res->body;
}

std::string ClusterHarness::host(int n) const {
  node(n);  // range check
  auto i = static_cast<size_t>(n - 1);
  return i < options_.node_hosts.size() ? options_.node_hosts[i] : "127.0.0.1";
}

std::string ClusterHarness::client_addr(int n) const {
  return host(n) + ":" + std::to_string(node(n).quic_port);
}

std::string ClusterHarness::internal_addr(int n) const {
  return host(n) + ":" + std::to_string(node(n).internal_port);
}

std::string ClusterHarness::http_addr(int n) const {
  return host(n) + ":" + std::to_string(node(n).http_port);
}

std::string ClusterHarness::data_dir(int n) const {
  return dir_ + "/" + node_id(n) + "/data";
}

std::string ClusterHarness::log_file(int n) const {
  return dir_ + "/" + node_id(n) + "/broker.log";
}

std::string ClusterHarness::brokers() const {
  std::string out;
  for (int n = 1; n <= size(); ++n) out += (n > 1 ? "," : "") + client_addr(n);
  return out;
}

std::string ClusterHarness::LogTail(int n, size_t bytes) const {
  std::ifstream in(log_file(n));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

}  // namespace felix::testing
