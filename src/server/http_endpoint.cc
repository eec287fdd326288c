#include "server/http_endpoint.h"

#include <sys/socket.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace felix::server {

HttpEndpoint::HttpEndpoint(MetricsRegistry& metrics, const HealthRegistry* health)
    : metrics_(metrics),
      server_(std::make_unique<httplib::Server>()),
      ready_gauge_(metrics.AddGauge("felix_ready_state", "1 while the broker is ready")) {
  // httplib's default also sets SO_REUSEPORT, which would let a second broker share the port.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server_->Get("/live", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  server_->Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    if (ready_.load()) {
      res.set_content("ok", "text/plain");
    } else {
      res.status = 503;
      res.set_content("draining", "text/plain");
    }
  });
  // Faults the broker runs through (a shard refused at open, failing writes): 200 when there
  // are none, 503 listing them otherwise. /ready stays about admission (drain).
  server_->Get("/health", [health](const httplib::Request&, httplib::Response& res) {
    nlohmann::json problems = nlohmann::json::array();
    if (health != nullptr) {
      for (const auto& p : health->Problems()) {
        problems.push_back(
            {{"kind", HealthKindName(p.kind)}, {"key", p.key}, {"detail", p.detail}});
      }
    }
    if (!problems.empty()) res.status = 503;
    nlohmann::json body{{"status", problems.empty() ? "ok" : "degraded"}, {"problems", problems}};
    res.set_content(body.dump(), "application/json");
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    ready_gauge_.Set(ready_.load() ? 1 : 0);
    res.set_content(metrics_.RenderPrometheus(), "text/plain; version=0.0.4");
  });
}

HttpEndpoint::~HttpEndpoint() {
  Stop();
}

void HttpEndpoint::Get(const std::string& pattern, Handler handler) {
  server_->Get(pattern, std::move(handler));
}
void HttpEndpoint::Post(const std::string& pattern, Handler handler) {
  server_->Post(pattern, std::move(handler));
}
void HttpEndpoint::Delete(const std::string& pattern, Handler handler) {
  server_->Delete(pattern, std::move(handler));
}

Result<HostPort> HttpEndpoint::Start(const HostPort& bind) {
  HostPort bound = bind;
  if (bind.port == 0) {
    int port = server_->bind_to_any_port(bind.host);
    if (port <= 0) {
      return Fail(ErrorCode::kIo, "FELIX_BROKER_METRICS_BIND: cannot bind " + bind.ToString());
    }
    bound.port = static_cast<uint16_t>(port);
  } else if (!server_->bind_to_port(bind.host, bind.port)) {
    return Fail(ErrorCode::kIo, "FELIX_BROKER_METRICS_BIND: cannot bind " + bind.ToString() +
                                    " (in use, or not a local address)");
  }
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    loop_finished_.store(true);
  });
  // stop() is a no-op until the accept loop runs, so a Stop() racing a fresh Start() would
  // hang in join(); wait for the loop (it starts at once: the socket is already bound).
  while (!server_->is_running() && !loop_finished_.load()) std::this_thread::yield();
  if (loop_finished_.load()) {
    thread_.join();
    return Fail(ErrorCode::kIo,
                "FELIX_BROKER_METRICS_BIND: listener on " + bound.ToString() + " stopped at once");
  }
  return bound;
}

void HttpEndpoint::Stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

}  // namespace felix::server
