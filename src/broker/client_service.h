// ClientService: the FLX1 protocol on the broker's client QUIC port.
//
// Every client-opened bidirectional (or publish-only unidirectional) stream gets a session
// that reads FLX1 frames, requires `auth` first, checks each request's permission, and serves
// publishes, subscriptions and discovery through the BrokerCore; answers go back on the same
// stream. Each subscription gets a broker-opened unidirectional event stream fed from its
// SubscriberQueue. Error handling follows client-protocol.md §8.3 (which failures answer and
// continue, which end the stream).
//
// Threading: sessions live on the client endpoint's loop thread. Work for a shard is posted to
// the shard's executor and its completion is posted back to the loop. The service, the core,
// the catalog and the metrics registry must outlive the endpoint whose handlers it supplies.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "broker/broker_core.h"
#include "catalog/catalog.h"
#include "common/metrics.h"
#include "transport/endpoint.h"

namespace felix::broker {

struct ClientServiceOptions {
  uint32_t max_frame_bytes = 16u << 20;
  uint32_t preauth_max_frame_bytes = 64u << 10;
  std::chrono::milliseconds auth_timeout{10000};  // 0: off
  size_t max_subscriptions_per_conn = 4096;
  // Publish payload bytes a stream may have in flight; beyond it acked publishes are answered
  // `overloaded` and fire-and-forget ones are shed (semantics.md §6).
  size_t max_inflight_bytes_per_stream = 16u << 20;
  bool durable_storage = true;  // advertises the features that need it
  // FELIX_ACK_ON_COMMIT: answer every acked publish after the write (with its offset). Off, a
  // publish is answered once queued to its shard unless the client offered ACK_ON_COMMIT
  // (semantics.md §2.3).
  bool ack_on_commit = false;
  // FELIX_BROKER_PUBLISH_WINDOW: unanswered pipelined publishes per stream; 0 serves no
  // pipelining (PUBLISH_PIPELINE and STREAM_PUBLISH_WINDOW are then not advertised).
  uint32_t publish_window = 256;
};

struct ClientMetrics;

class ClientService {
 public:
  ClientService(ClientServiceOptions options, BrokerCore& core, const catalog::Catalog& catalog,
                MetricsRegistry& metrics);
  ~ClientService();
  ClientService(const ClientService&) = delete;
  ClientService& operator=(const ClientService&) = delete;

  // Handlers for transport::Endpoint::Create on the client port.
  transport::ListenHandlers Handlers();

  // After the client endpoint has stopped: ends every session and subscription writer (their
  // stream handlers hold them), so nothing outlives the transport.
  void ReleaseAll();

  const ClientServiceOptions& options() const { return options_; }
  BrokerCore& core() { return core_; }
  const catalog::Catalog& catalog() const { return catalog_; }
  ClientMetrics& metrics() { return *metrics_; }

 private:
  void OnConnection(const std::shared_ptr<transport::Connection>& connection);

  ClientServiceOptions options_;
  BrokerCore& core_;
  const catalog::Catalog& catalog_;
  std::unique_ptr<ClientMetrics> metrics_;
  std::mutex mu_;
  std::vector<std::weak_ptr<struct ClientConnectionState>> connections_;
};

}  // namespace felix::broker
