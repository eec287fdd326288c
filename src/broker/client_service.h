// ClientService: the FLX1 protocol on the broker's client QUIC port.
//
// Every client-opened bidirectional (or publish-only unidirectional) stream gets a session
// that reads FLX1 frames, requires `auth` first, checks each request's permission, and serves
// publishes, subscriptions and discovery through the ShardResolver; answers go back on the same
// stream. Each subscription gets a broker-opened unidirectional event stream fed from its
// SubscriberQueue. Error handling follows client-protocol.md §8.3 (which failures answer and
// continue, which end the stream).
//
// Threading: sessions live on the client endpoint's loop thread. Work for a shard is posted to
// the shard's executor and its completion is posted back to the loop. The service, the core,
// the catalog and the metrics registry must outlive the endpoint whose handlers it supplies.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/broker_core.h"
#include "broker/cache_forwarder.h"
#include "broker/memory_trimmer.h"
#include "broker/publish_forwarder.h"
#include "broker/shard_resolver.h"
#include "broker/shard_router.h"
#include "catalog/catalog.h"
#include "catalog/verified_credentials.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "transport/endpoint.h"

namespace felix::broker {

struct ClientServiceOptions {
  uint32_t max_frame_bytes = 16u << 20;
  uint32_t preauth_max_frame_bytes = 64u << 10;
  std::chrono::milliseconds auth_timeout{10000};  // 0: off
  size_t max_subscriptions_per_conn = 4096;
  // Connection admission (client-protocol.md §1.1): beyond these, a new connection is closed
  // at once (felix_quic_connections_refused_total{reason}). 0 per IP = unlimited.
  size_t max_connections = 8192;
  size_t max_connections_per_ip = 512;
  // Publish payload bytes a stream may have in flight (FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES)
  // and the same summed over every stream of the broker (FELIX_BROKER_PUBLISH_INFLIGHT_BYTES;
  // semantics.md §6). A binary publish that finds no room waits for it, its stream not read
  // further (QUIC flow control then slows the client), for at most publish_room_wait; then an
  // acked one is answered `overloaded` and a fire-and-forget one is shed (counted in
  // felix_publish_dropped_total). With publish_ingress_wait a fire-and-forget one waits as long
  // as it takes.
  size_t max_inflight_bytes_per_stream = 16u << 20;
  size_t max_inflight_bytes_total = 64u << 20;
  std::chrono::milliseconds publish_room_wait{2000};  // FELIX_PUBLISH_QUEUE_WAIT_MS; 0: none
  bool publish_ingress_wait = false;                  // FELIX_PUB_INGRESS_WAIT
  // What one record costs beyond its payload while in flight (its views in the request, the
  // log's append record, the fanout batch), charged to both budgets: without it a frame of a
  // million empty records would cost nothing (issue 12 item 11).
  size_t inflight_record_overhead = 64;
  bool durable_storage = true;  // advertises the features that need it
  // A cluster broker answers `topology` and advertises TOPOLOGY | REDIRECT.
  bool cluster = false;
  // FELIX_ACK_ON_COMMIT: answer every acked publish after the write (with its offset). Off, a
  // publish is answered once queued to its shard unless the client offered ACK_ON_COMMIT
  // (semantics.md §2.3).
  bool ack_on_commit = false;
  // FELIX_BROKER_PUBLISH_WINDOW: unanswered pipelined publishes per stream; 0 serves no
  // pipelining (PUBLISH_PIPELINE and STREAM_PUBLISH_WINDOW are then not advertised).
  uint32_t publish_window = 256;
  // FELIX_RECORD_PUBLISHERS: a publish to a durable stream stores its principal (the token's
  // `sub`, when ≤ 255 bytes) with each record (storage.md §3 bit 27), served as `publisher`.
  bool record_publishers = false;
};

struct ClientMetrics;
class ClientSession;

class ClientService {
 public:
  // `router` decides which shards this broker serves (SingleNodeRouter on a single node); it
  // must outlive the service.
  ClientService(ClientServiceOptions options, BrokerCore& core, const ShardRouter& router,
                const catalog::Catalog& catalog, MetricsRegistry& metrics);
  ~ClientService();
  ClientService(const ClientService&) = delete;
  ClientService& operator=(const ClientService&) = delete;

  // Handlers for transport::Endpoint::Create on the client port.
  transport::ListenHandlers Handlers();

  // After the client endpoint has stopped: ends every session and subscription writer (their
  // stream handlers hold them), so nothing outlives the transport.
  void ReleaseAll();

  // Shutdown drain (SIGTERM; issue 12 item 7). BeginDrain (any thread): from now on new
  // connections are closed (code 0), `auth` and new requests are answered `draining`, and
  // publishes are refused `draining` (retry class: nothing was written). Requests admitted
  // before keep running. WaitDrained (any thread but the endpoint's loop) returns true once
  // every admitted request was answered and every answer acknowledged by its client, and no
  // request was refused `draining` for kDrainQuiet (a client sends nothing more on a connection
  // that answered `draining`; one racing that answer is refused too, and its refusal must reach
  // it before the close, or its publish would end "outcome unknown"), false if `deadline` passed
  // first (`*unfinished` = sessions still busy).
  void BeginDrain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  // A request was refused `draining` (any thread).
  void NoteDrainingRefusal() {
    last_draining_refusal_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                    std::memory_order_relaxed);
  }
  static constexpr std::chrono::milliseconds kDrainQuiet{100};
  bool WaitDrained(transport::Endpoint& endpoint, std::chrono::steady_clock::time_point deadline,
                   size_t* unfinished);

  const ClientServiceOptions& options() const { return options_; }
  BrokerCore& core() { return core_; }
  // Every request path resolves its shard here (one routing authority).
  ShardResolver& resolver() { return resolver_; }
  // Cluster mode: publishes to a shard another broker owns are forwarded through `forwarder`
  // (which must outlive the service). Set once, from any thread; without one they are refused
  // `not_leader`.
  void SetPublishForwarder(PublishForwarder* forwarder) { forwarder_.store(forwarder); }
  PublishForwarder* forwarder() const { return forwarder_.load(std::memory_order_acquire); }
  // The same for cache and counter operations on a key another broker owns.
  void SetCacheForwarder(CacheForwarder* forwarder) { cache_forwarder_.store(forwarder); }
  CacheForwarder* cache_forwarder() const {
    return cache_forwarder_.load(std::memory_order_acquire);
  }
  const catalog::Catalog& catalog() const { return catalog_; }
  // Tokens already verified, shared by every session: a client opens a stream per consumer-
  // group call, and each stream's `auth` would otherwise redo the signature check. Any thread.
  catalog::VerifiedCredentials& verified_credentials() { return verified_credentials_; }
  ClientMetrics& metrics() { return *metrics_; }

 private:
  void OnConnection(const std::shared_ptr<transport::Connection>& connection);

  ClientServiceOptions options_;
  BrokerCore& core_;
  ShardResolver resolver_;
  std::atomic<PublishForwarder*> forwarder_{nullptr};
  std::atomic<CacheForwarder*> cache_forwarder_{nullptr};
  const catalog::Catalog& catalog_;
  catalog::VerifiedCredentials verified_credentials_;
  std::unique_ptr<ClientMetrics> metrics_;
  // Loop thread: sessions still answering or with unacknowledged answers.
  size_t BusySessions();

 public:
  // Broker-wide in-flight publish cost (atomic: a completion may run after the loop stopped).
  std::atomic<size_t>& inflight_total() { return inflight_total_; }

  MemoryTrimmer& memory_trimmer() { return memory_trimmer_; }

  // Loop thread. A session whose next publish waits for room in the in-flight budgets is
  // kept here until NotePublishRoom, called whenever a publish's cost is released (any
  // session's), finds that its publish fits (ClientSession::TryEndRoomWait).
  void AwaitPublishRoom(std::weak_ptr<ClientSession> session);
  void NotePublishRoom();

 private:
  std::vector<std::weak_ptr<ClientSession>> room_waiters_;  // loop thread
  std::atomic<size_t> inflight_total_{0};
  // Returns memory after bursts: once in flight drops to zero after 1/16 of the broker budget.
  MemoryTrimmer memory_trimmer_;

  std::atomic<bool> draining_{false};
  std::atomic<std::chrono::steady_clock::rep> last_draining_refusal_ns_{0};
  Mutex mu_;
  std::vector<std::weak_ptr<struct ClientConnectionState>> connections_ GUARDED_BY(mu_);
  std::map<std::string, size_t> per_ip_;  // loop thread: open connections by source address
  size_t open_connections_ = 0;           // loop thread
  uint64_t next_connection_id_ = 1;       // loop thread: ClientConnectionState::id
};

}  // namespace felix::broker
