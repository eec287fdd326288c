// HttpEndpoint: the broker's HTTP listener (FELIX_BROKER_METRICS_BIND) serving /live, /ready,
// /health (faults the broker runs through, as JSON) and /metrics, and any routes other
// subsystems add (the admin API) before Start().
//
// Start() binds and serves on a thread of its own; Stop() is idempotent and joins it. The
// MetricsRegistry must outlive the endpoint. SetReady may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/health.h"
#include "common/metrics.h"
#include "common/net_address.h"
#include "common/result.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace felix::server {

class HttpEndpoint {
 public:
  // `health` (optional; must outlive the endpoint) feeds /health.
  explicit HttpEndpoint(MetricsRegistry& metrics, const HealthRegistry* health = nullptr);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  void Get(const std::string& pattern, Handler handler);
  void Post(const std::string& pattern, Handler handler);
  void Delete(const std::string& pattern, Handler handler);

  // Binds `bind` (port 0 picks a free port) and starts serving. Returns the bound address.
  Result<HostPort> Start(const HostPort& bind);
  void Stop();

  // /ready answers 200 "ok" while ready, 503 "draining" otherwise. Starts not ready.
  void SetReady(bool ready) { ready_.store(ready); }

 private:
  MetricsRegistry& metrics_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> loop_finished_{false};
  Gauge& ready_gauge_;
};

}  // namespace felix::server
