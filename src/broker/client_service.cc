#include "broker/client_service.h"

#include "broker/client_metrics.h"
#include "broker/client_session.h"

namespace felix::broker {

ClientService::ClientService(ClientServiceOptions options, BrokerCore& core,
                             const catalog::Catalog& catalog, MetricsRegistry& metrics)
    : options_(options),
      core_(core),
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

void ClientService::OnConnection(const std::shared_ptr<transport::Connection>& connection) {
  metrics_->connections.Add(1);
  auto state = std::make_shared<ClientConnectionState>();
  transport::ConnectionHandlers handlers;
  handlers.on_stream = [this, state](const std::shared_ptr<transport::Stream>& stream) {
    if (stream->is_local()) return;
    std::make_shared<ClientSession>(*this, state, stream)->Start();
  };
  handlers.on_closed = [this](transport::Connection&, const transport::CloseInfo&) {
    metrics_->connections.Add(-1);
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
