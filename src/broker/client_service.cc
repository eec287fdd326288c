#include "broker/client_service.h"

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
      metrics_(std::make_unique<ClientMetrics>(metrics)) {}

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

void ClientService::OnConnection(const std::shared_ptr<transport::Connection>& connection) {
  metrics_->connections.Add(1);
  auto state = std::make_shared<ClientConnectionState>();
  {
    MutexLock lock(mu_);
    std::erase_if(connections_, [](const auto& weak) { return weak.expired(); });
    connections_.push_back(state);
  }
  transport::ConnectionHandlers handlers;
  handlers.on_stream = [this, state](const std::shared_ptr<transport::Stream>& stream) {
    if (stream->is_local()) return;
    auto session = std::make_shared<ClientSession>(*this, state, stream);
    std::erase_if(state->sessions, [](const auto& weak) { return weak.expired(); });
    state->sessions.push_back(session);
    session->Start();
  };
  // The state is captured weakly: the handlers are the connection's, and the state's sessions
  // hold the connection's streams.
  std::weak_ptr<ClientConnectionState> weak_state = state;
  handlers.on_closed = [this, weak_state](transport::Connection&, const transport::CloseInfo&) {
    metrics_->connections.Add(-1);
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
