#include "broker/client_service.h"

#include <algorithm>
#include <cstdint>
#include <future>
#include <thread>

#include "broker/client_metrics.h"
#include "broker/client_session.h"

namespace felix::broker {

ClientService::ClientService(ClientServiceOptions options, BrokerCore& core,
                             const ShardRouter& router, const catalog::Catalog& catalog,
                             MetricsRegistry& metrics)
    : options_(options),
      core_(core),
      resolver_(core, router),
      catalog_(catalog),
      metrics_(std::make_unique<ClientMetrics>(metrics)),
      memory_trimmer_(inflight_total_, metrics, options_.max_inflight_bytes_total / 16) {}

ClientService::~ClientService() = default;

transport::ListenHandlers ClientService::Handlers() {
  transport::ListenHandlers handlers;
  handlers.on_connection = [this](const std::shared_ptr<transport::Connection>& connection) {
    OnConnection(connection);
  };
  return handlers;
}

void ClientService::ReleaseAll() {
  std::vector<std::weak_ptr<ClientConnectionState>> connections;
  {
    MutexLock lock(mu_);
    connections.swap(connections_);
  }
  for (auto& weak : connections) {
    if (auto state = weak.lock()) state->ReleaseAll();
  }
}

void ClientService::AwaitPublishRoom(std::weak_ptr<ClientSession> session) {
  room_waiters_.push_back(std::move(session));
}

void ClientService::NotePublishRoom() {
  if (room_waiters_.empty()) return;
  // TryEndRoomWait posts the resumed reading (never reads inline), so the list is not changed
  // while it is walked.
  std::erase_if(room_waiters_, [](const std::weak_ptr<ClientSession>& weak) {
    auto session = weak.lock();
    return !session || session->TryEndRoomWait();
  });
}

namespace {

// The admission key of a peer: its IP, IPv4-mapped IPv6 counted as IPv4 (§1.1).
std::string AdmissionKey(const HostPort& remote) {
  std::string host = remote.host;
  constexpr std::string_view kMapped = "::ffff:";
  if (host.size() > kMapped.size() && host.compare(0, kMapped.size(), kMapped) == 0 &&
      host.find('.') != std::string::npos) {
    host = host.substr(kMapped.size());
  }
  return host;
}

// Application close code for a refused connection (QUIC's CONNECTION_REFUSED value).
constexpr uint64_t kConnectionRefused = 0x2;

}  // namespace

size_t ClientService::BusySessions() {
  size_t busy = 0;
  MutexLock lock(mu_);
  for (auto& weak : connections_) {
    auto state = weak.lock();
    if (!state) continue;
    for (auto& ws : state->sessions) {
      if (auto session = ws.lock(); session && !session->Drained()) ++busy;
    }
  }
  return busy;
}

bool ClientService::WaitDrained(transport::Endpoint& endpoint,
                                std::chrono::steady_clock::time_point deadline,
                                size_t* unfinished) {
  while (true) {
    auto promise = std::make_shared<std::promise<size_t>>();
    auto future = promise->get_future();
    endpoint.Post([this, promise] { promise->set_value(BusySessions()); });
    if (future.wait_until(deadline) != std::future_status::ready) {
      *unfinished = SIZE_MAX;  // the loop itself did not answer
      return false;
    }
    size_t busy = future.get();
    const auto last_refusal = std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(last_draining_refusal_ns_.load()));
    if (busy == 0 && std::chrono::steady_clock::now() - last_refusal >= kDrainQuiet) return true;
    if (std::chrono::steady_clock::now() >= deadline) {
      *unfinished = busy;
      return false;
    }
    // Shutdown only: a short poll of the loop's state (acks need network round trips).
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ClientService::OnConnection(const std::shared_ptr<transport::Connection>& connection) {
  if (draining()) {
    metrics_->refused_draining.Increment();
    connection->Close(0, "broker shutting down");  // §1.1 close code 0
    return;
  }
  std::string ip = AdmissionKey(connection->remote_address());
  if (open_connections_ >= options_.max_connections) {
    metrics_->refused_limit.Increment();
    connection->Close(kConnectionRefused, "max_client_connections reached");
    return;
  }
  if (options_.max_connections_per_ip != 0 && per_ip_[ip] >= options_.max_connections_per_ip) {
    metrics_->refused_per_ip.Increment();
    // A literal: the transport keeps the reason's pointer until the close is written.
    connection->Close(kConnectionRefused, "FELIX_MAX_CONNECTIONS_PER_IP reached");
    return;
  }
  ++per_ip_[ip];
  ++open_connections_;
  metrics_->connections.Add(1);
  auto state = std::make_shared<ClientConnectionState>();
  state->id = next_connection_id_++;
  {
    MutexLock lock(mu_);
    std::erase_if(connections_, [](const auto& weak) { return weak.expired(); });
    connections_.push_back(state);
  }
  transport::ConnectionHandlers handlers;
  handlers.on_stream = [this, state](const std::shared_ptr<transport::Stream>& stream) {
    if (stream->is_local()) return;
    auto session = std::make_shared<ClientSession>(*this, state, stream);
    if (state->sessions.size() >= state->sessions_sweep_at) {
      std::erase_if(state->sessions, [](const auto& weak) { return weak.expired(); });
      state->sessions_sweep_at = std::max<size_t>(64, 2 * state->sessions.size());
    }
    state->sessions.push_back(session);
    session->Start();
  };
  // The state is captured weakly: the handlers are the connection's, and the state's sessions
  // hold the connection's streams.
  std::weak_ptr<ClientConnectionState> weak_state = state;
  handlers.on_closed = [this, weak_state, ip](transport::Connection&, const transport::CloseInfo&) {
    metrics_->connections.Add(-1);
    --open_connections_;
    if (auto it = per_ip_.find(ip); it != per_ip_.end() && --it->second == 0) per_ip_.erase(it);
    // Every stream is over: drop what their handlers still hold (a release they posted may
    // not run when the endpoint is shutting down).
    if (auto s = weak_state.lock()) s->ReleaseAll();
  };
  connection->SetHandlers(std::move(handlers));
  if (options_.auth_timeout.count() > 0) {
    std::weak_ptr<transport::Connection> weak = connection;
    ClientMetrics* metrics = metrics_.get();
    connection->endpoint().RunAfter(options_.auth_timeout, [weak, state, metrics] {
      auto c = weak.lock();
      if (c && c->is_open() && !state->any_stream_authenticated) {
        metrics->auth_timeouts.Increment();
        c->Close(1, "authentication timeout");  // client-protocol §1.1 close code 1
      }
    });
  }
}

}  // namespace felix::broker
