#include "transport/broker_listeners.h"

namespace felix::transport {
namespace {

// Accepts connections and streams and resets every stream: nothing is served on this port.
ListenHandlers NotServed() {
  ListenHandlers h;
  h.on_connection = [](const std::shared_ptr<Connection>& c) {
    c->SetHandlers(ConnectionHandlers{
        [](const std::shared_ptr<Stream>& s) { s->Reset(kStreamNotServedCode); }, nullptr});
  };
  return h;
}

}  // namespace

Result<std::unique_ptr<BrokerListeners>> BrokerListeners::Start(
    const ListenerConfig& config, MetricsRegistry& metrics, std::vector<std::string>* warnings) {
  TlsOptions client_tls;
  client_tls.role = Role::kClient;
  client_tls.cert_file = config.tls_cert;
  client_tls.key_file = config.tls_key;
  client_tls.ca_file = config.tls_client_ca;
  auto client_ctx = TlsContext::Create(client_tls, warnings);
  if (!client_ctx) return tl::unexpected(client_ctx.error());

  TlsOptions internal_tls;
  internal_tls.role = Role::kInternal;
  internal_tls.cert_file = config.internal_tls_cert;
  internal_tls.key_file = config.internal_tls_key;
  internal_tls.ca_file = config.internal_tls_ca;
  internal_tls.cert_var = "FELIX_INTERNAL_TLS_CERT";
  internal_tls.key_var = "FELIX_INTERNAL_TLS_KEY";
  internal_tls.ca_var = "FELIX_INTERNAL_TLS_CA";
  internal_tls.self_signed_name = config.node_id.empty() ? "localhost" : config.node_id;
  auto internal_ctx = TlsContext::Create(internal_tls, warnings);
  if (!internal_ctx) return tl::unexpected(internal_ctx.error());

  std::unique_ptr<BrokerListeners> l(new BrokerListeners());
  EndpointOptions co;
  co.tls = *client_ctx;
  co.name = "client";
  co.idle_timeout = config.idle_timeout;
  auto client = Endpoint::Create(config.client_bind, co, metrics,
                                 config.client_handlers.value_or(NotServed()));
  if (!client) return Fail(client.error().code, "FELIX_QUIC_BIND: " + client.error().message);
  l->client_ = std::move(*client);

  EndpointOptions io;
  io.tls = *internal_ctx;
  io.name = "internal";
  io.poll_while_awaiting = config.internal_poll_while_awaiting;
  if (config.shared_loop) io.share_loop_of = l->client_.get();
  auto internal = Endpoint::Create(config.internal_bind, io, metrics,
                                   config.internal_handlers.value_or(NotServed()));
  if (!internal)
    return Fail(internal.error().code, "FELIX_INTERNAL_BIND: " + internal.error().message);
  l->internal_ = std::move(*internal);
  return l;
}

BrokerListeners::~BrokerListeners() {
  Stop();
}

void BrokerListeners::Stop() {
  if (client_) client_->Stop();
  if (internal_) internal_->Stop();
}

}  // namespace felix::transport
