#include "support/etcd_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/process_state.h"

namespace felix::testing {

EtcdProcess::EtcdProcess(std::string host)
    : dir_(MakeTempDir("felix-etcd")), host_(std::move(host)) {
  client_port_ = FreeLoopbackPort();
  do {
    peer_port_ = FreeLoopbackPort();
  } while (peer_port_ == client_port_);
  do {
    other_port_ = FreeLoopbackPort();
  } while (other_port_ == client_port_ || other_port_ == peer_port_);
}

EtcdProcess::~EtcdProcess() {
  if (child_) Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string EtcdProcess::endpoint() const {
  return "http://" + host_ + ":" + std::to_string(client_port_);
}

std::string EtcdProcess::other_endpoint() const {
  return "http://127.0.0.1:" + std::to_string(other_port_);
}

void EtcdProcess::JoinCluster(std::string name, std::string initial_cluster) {
  name_ = std::move(name);
  initial_cluster_ = std::move(initial_cluster);
}

std::string EtcdProcess::peer_url() const {
  return "http://127.0.0.1:" + std::to_string(peer_port_);
}

bool EtcdProcess::Start(std::chrono::milliseconds timeout) {
  return Spawn(client_port_) && WaitHealthy(timeout);
}

bool EtcdProcess::StartNoWait() {
  return Spawn(client_port_);
}

bool EtcdProcess::StartOnOtherPort(std::chrono::milliseconds timeout) {
  return Spawn(other_port_) && WaitHealthy(timeout);
}

bool EtcdProcess::Spawn(int client_port) {
  if (child_) {
    error_ = "etcd is already running";
    return false;
  }
  running_port_ = client_port;
  std::string client = "http://127.0.0.1:" + std::to_string(client_port);
  // Healthy() asks on loopback; brokers in other network namespaces use host_.
  std::string advertised = "http://" + host_ + ":" + std::to_string(client_port);
  std::string listen = host_ == "127.0.0.1" ? client : client + "," + advertised;
  std::string peer = peer_url();
  std::string initial = initial_cluster_.empty() ? name_ + "=" + peer : initial_cluster_;
  child_ = std::make_unique<ChildProcess>("/usr/bin/etcd",
                                          std::vector<std::string>{"--name",
                                                                   name_,
                                                                   "--data-dir",
                                                                   dir_ + "/data",
                                                                   "--listen-client-urls",
                                                                   listen,
                                                                   "--advertise-client-urls",
                                                                   advertised,
                                                                   "--listen-peer-urls",
                                                                   peer,
                                                                   "--initial-advertise-peer-urls",
                                                                   peer,
                                                                   "--initial-cluster",
                                                                   initial,
                                                                   "--initial-cluster-state",
                                                                   "new",
                                                                   "--logger",
                                                                   "zap",
                                                                   "--log-outputs",
                                                                   dir_ + "/etcd.log"});
  return true;
}

bool EtcdProcess::WaitHealthy(std::chrono::milliseconds timeout) {
  if (!child_) {
    error_ = "etcd is not running";
    return false;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Healthy(std::chrono::milliseconds(200))) return true;
    // Exited already (bad flags, port taken)? Wait() with a short bound also paces the poll.
    if (child_->Wait(std::chrono::milliseconds(20)) != -1) {
      error_ = "etcd exited during start: " + LogTail();
      child_.reset();
      return false;
    }
  }
  error_ = "etcd did not become healthy in time: " + LogTail();
  return false;
}

bool EtcdProcess::Healthy(std::chrono::milliseconds timeout) const {
  // A minimal HTTP/1.0 GET over a non-blocking socket, every step bounded by `timeout`.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    return static_cast<int>(std::max<int64_t>(ms, 0));
  };
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(running_port_ != 0 ? running_port_ : client_port_));
  std::string reply;
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 || errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, left_ms()) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
        err == 0) {
      const std::string request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
        char buf[4096];
        while (true) {
          pollfd r{fd, POLLIN, 0};
          if (poll(&r, 1, left_ms()) != 1) break;
          ssize_t n = recv(fd, buf, sizeof buf, 0);
          if (n <= 0) break;
          reply.append(buf, static_cast<size_t>(n));
        }
        ok = reply.starts_with("HTTP/1.") && reply.find(" 200 ") != std::string::npos &&
             reply.find("\"health\":\"true\"") != std::string::npos;
      }
    }
  }
  close(fd);
  return ok;
}

void EtcdProcess::Kill() {
  if (!child_) return;
  Resume();  // a stopped process still dies of SIGKILL, but keep the state simple
  child_->Stop(SIGKILL);
  child_.reset();
}

void EtcdProcess::Stop() {
  if (!child_) return;
  Resume();
  child_->Stop(SIGTERM);
  child_.reset();
}

void EtcdProcess::Pause() {
  if (child_) StopAndWaitStopped(child_->pid());
}

void EtcdProcess::Resume() {
  if (child_) kill(child_->pid(), SIGCONT);
}

std::string EtcdProcess::LogTail(size_t bytes) const {
  std::ifstream in(dir_ + "/etcd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

}  // namespace felix::testing
