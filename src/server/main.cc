// felix-broker: the Felix daemon. With no configuration it runs a single-node broker on the
// embedded catalog in ./felix-data (README, command 1).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <variant>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "broker/broker_core.h"
#include "broker/client_service.h"
#include "broker/shard_router.h"
#include "broker/static_router.h"
#include "cluster/forward_cache_handler.h"
#include "cluster/forward_publish_handler.h"
#include "cluster/forward_publisher.h"
#include "cluster/peer_pool.h"
#include "common/health.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "felix/version.h"
#include "server/admin_api.h"
#include "server/broker_config.h"
#include "server/broker_options.h"
#include "server/cluster_services.h"
#include "server/data_dir_lock.h"
#include "server/fault_file.h"
#include "server/http_endpoint.h"
#include "server/internal_listener.h"
#include "transport/broker_listeners.h"

namespace {

namespace broker = felix::broker;
namespace transport = felix::transport;
using felix::server::BrokerConfig;

#if FELIX_FAULT_INJECTION
// Test seam FELIX_TEST_HOLD_SHARD_OPEN=<shard id>@<file>: the opener holds that shard's open
// until <file> exists, so a test can show that a slow open stalls nothing else.
void HoldShardOpenSeam(broker::BrokerCoreOptions& o) {
  const char* spec = std::getenv("FELIX_TEST_HOLD_SHARD_OPEN");
  if (spec == nullptr || *spec == 0) return;
  std::string text = spec;
  size_t at = text.rfind('@');
  if (at == std::string::npos) return;
  o.before_open = [shard = text.substr(0, at), file = text.substr(at + 1)](const std::string& key) {
    if (key != shard) return;
    spdlog::warn("test seam: holding the open of shard={} until {} exists", key, file);
    while (!std::filesystem::exists(file)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
}
#endif

#if FELIX_FAULT_INJECTION
// Test seam FELIX_TEST_DROP_ACKED_EVERY=<N>: a broken broker that acknowledges every Nth publish
// batch of each stream shard without writing it (StreamShardOptions::drop_acked_every).
void DropAckedSeam(broker::BrokerCoreOptions& o) {
  const char* every = std::getenv("FELIX_TEST_DROP_ACKED_EVERY");
  if (every == nullptr || *every == 0) return;
  o.shard.drop_acked_every = static_cast<uint32_t>(std::strtoul(every, nullptr, 10));
  spdlog::warn("test seam: acknowledging every {}th publish batch without writing it",
               o.shard.drop_acked_every);
}
#endif

#if FELIX_FAULT_INJECTION
// Test seam FELIX_TEST_CLEAR_POISON=1: logs poisoned by a failed fsync (an injected EIO) open
// again after a restart (LogOptions::clear_poison) — how the fault harness heals its fsync-EIO
// fault. (FELIX_TEST_DUPLICATE_EVERY and FELIX_TEST_STALE_GET_EVERY, the fault harness's other
// broken builds, are read where they act: stream_shard.cc, cache_shard.cc.)
void ClearPoisonSeam(broker::BrokerCoreOptions& o) {
  const char* clear = std::getenv("FELIX_TEST_CLEAR_POISON");
  if (clear == nullptr || std::string(clear) != "1") return;
  o.log_defaults.clear_poison = true;
  spdlog::warn("test seam: opening logs poisoned by a failed fsync");
}
#endif

broker::BrokerCoreOptions CoreOptions(const BrokerConfig& config, felix::HealthRegistry& health) {
  broker::BrokerCoreOptions o = CoreOptionsFromConfig(config);
  o.health = &health;
#if FELIX_FAULT_INJECTION
  HoldShardOpenSeam(o);
  DropAckedSeam(o);
  ClearPoisonSeam(o);
#endif
  return o;
}

// With no operator certificate the client port presents a self-signed `localhost` one; its PEM
// goes to <data_dir>/tls/broker-cert.pem so local clients (the CLI) can verify the broker.
// Returns the file clients should trust.
felix::Result<std::string> ExportClientCertificate(const BrokerConfig& config,
                                                   const transport::TlsContext& tls) {
  if (!tls.self_signed()) return config.tls_cert;
  std::filesystem::path dir = std::filesystem::path(config.data_dir) / "tls";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = std::filesystem::absolute(dir / "broker-cert.pem").string();
  std::ofstream out(path, std::ios::trunc);
  out << tls.self_signed_cert_pem();
  if (!out.flush()) {
    return felix::Fail(felix::ErrorCode::kIo, "cannot write the dev certificate to " + path);
  }
  return path;
}

// Who serves which shard. A single node serves every shard. Builds with fault seams also read
// FELIX_TEST_REMOTE_SHARDS (StaticRouter::Parse's table): the routing tests of every request
// path name shards "served elsewhere" through it.
felix::Result<std::unique_ptr<broker::ShardRouter>> MakeRouter() {
#if FELIX_FAULT_INJECTION
  if (const char* table = std::getenv("FELIX_TEST_REMOTE_SHARDS"); table && *table) {
    auto router = broker::StaticRouter::Parse(table);
    if (!router) return tl::unexpected(router.error());
    return std::make_unique<broker::StaticRouter>(std::move(*router));
  }
#endif
  return std::make_unique<broker::SingleNodeRouter>();
}

// Where the cluster's readiness goes: held until the listeners are up (Attach), dropped once
// the drain began (Detach). Set runs on the cluster node's thread.
class ReadyHook {
 public:
  void Set(bool ready) {
    std::lock_guard lock(mu_);
    last_ = ready;
    if (sink_) sink_(ready);
  }
  void Attach(std::function<void(bool)> sink) {
    std::lock_guard lock(mu_);
    sink_ = std::move(sink);
    if (last_) sink_(*last_);
  }
  void Detach() {
    std::lock_guard lock(mu_);
    sink_ = nullptr;
  }

 private:
  std::mutex mu_;
  std::function<void(bool)> sink_;
  std::optional<bool> last_;
};

// The graceful shutdown's handoff (control-plane.md §12.6): /ready off, drains/<self> written, then
// the broker keeps serving while the controller moves the shards it leads (RF > 1) to caught-up
// replicas, until it leads none, `timeout_ms` passed, or a second signal came. Skipped when it
// leads none.
void HandOffLeaderships(felix::server::ClusterServices& cluster, felix::server::HttpEndpoint& http,
                        const sigset_t& signals, uint64_t timeout_ms,
                        felix::MetricsRegistry& metrics) {
  const char* help = "graceful shutdowns that handed this broker's shard leaderships over";
  auto count = [&](const char* outcome) {
    metrics
        .AddCounter("felix_broker_shutdown_handoffs_total", help,
                    std::string("outcome=\"") + outcome + "\"")
        .Increment();
  };
  const size_t led = cluster.LedReplicatedShards();
  http.SetReady(false);
  if (!cluster.BeginHandoff()) {
    spdlog::info(
        "shutdown handoff skipped: {}",
        led == 0 ? "no shard it leads has another registered replica" : "drains/ not written");
    count("skipped");
    return;
  }
  spdlog::info("shutdown handoff: moving the {} replicated shards this broker leads", led);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  const char* outcome = "completed";
  while (cluster.LedReplicatedShards() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      outcome = "timed_out";
      break;
    }
    timespec poll{0, 50 * 1000 * 1000};
    if (sigtimedwait(&signals, nullptr, &poll) > 0) {
      outcome = "interrupted";
      break;
    }
  }
  count(outcome);
  spdlog::info("shutdown handoff {}: {} shards still led here, {} ms", outcome,
               cluster.LedReplicatedShards(),
               std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count());
}

// Blocks SIGINT/SIGTERM in every thread (call before starting any) and waits for one.
sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int Run(int argc, char** argv) {
  CLI::App app{"felix-broker: Felix streams, queues and cache over QUIC"};
  std::string config_path;
  bool print_config = false;
  bool version = false;
  app.add_option("--config", config_path, "YAML configuration file (overrides FELIX_* variables)");
  app.add_flag("--print-config", print_config,
               "print the merged, validated configuration as YAML and exit");
  app.add_flag("--version", version, "print the version and exit");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    std::cout << "felix-broker " << felix::kVersion << "\n";
    return 0;
  }

  auto loaded = felix::server::LoadBrokerConfig(felix::server::ProcessEnvironment(), config_path);
  if (!loaded) {
    std::cerr << "felix-broker: configuration refused: " << loaded.error().message << "\n";
    return 2;
  }
  const felix::server::BrokerConfig& config = loaded->config;
  for (const auto& w : loaded->warnings) std::cerr << "felix-broker: warning: " << w << "\n";
  if (print_config) {
    std::cout << felix::server::RenderBrokerConfigYaml(config);
    return 0;
  }
  if (auto r = felix::InitLogging(config.log_level); !r) {
    std::cerr << "felix-broker: " << r.error().message << "\n";
    return 2;
  }

  sigset_t signals = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    std::cerr << "felix-broker: FELIX_DATA_DIR: cannot create " << config.data_dir << ": "
              << ec.message() << "\n";
    return 1;
  }

  // One broker per data directory (and per storage directory when it lies elsewhere), taken
  // before anything in it is read or written.
  std::vector<std::unique_ptr<felix::server::DataDirLock>> dir_locks;
  std::vector<std::string> lock_dirs{config.data_dir};
  if (!config.durable_storage_dir.empty()) {
    std::filesystem::create_directories(config.durable_storage_dir, ec);
    lock_dirs.push_back(config.durable_storage_dir);
  }
  for (const auto& dir : lock_dirs) {
    auto lock = felix::server::DataDirLock::Acquire(dir);
    if (!lock) {
      std::cerr << "felix-broker: " << lock.error().message << "\n";
      return 1;
    }
    dir_locks.push_back(std::move(*lock));
  }

  felix::MetricsRegistry metrics;
  felix::HealthRegistry health(metrics);
  broker::BrokerCoreOptions core_options = CoreOptions(config, health);
#if FELIX_FAULT_INJECTION
  // Test seam: storage faults driven by a file the test rewrites (outlives every log).
  std::unique_ptr<felix::server::FaultFile> fault_file;
  if (const char* file = std::getenv("FELIX_STORAGE_FAULT_FILE"); file != nullptr && *file) {
    core_options.log_defaults.faults = std::make_shared<felix::storage::FaultInjector>();
    fault_file = std::make_unique<felix::server::FaultFile>(file, core_options.log_defaults.faults);
    // clock_offset_ms= steps the caches' wall clock (TTLs); the lease clock is monotonic.
    core_options.cache.now_ms = [faults = fault_file.get()] {
      auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
      return static_cast<uint64_t>(now + faults->clock_offset_ms());
    };
  }
#endif
  // /ready follows the cluster's readiness once the listeners are up (ReadyHook), never after
  // the drain began.
  felix::server::HttpEndpoint http(metrics, &health);
  ReadyHook ready_hook;
  std::atomic<bool> fatal{false};
  // Cluster mode: the catalog on etcd, membership, routing and the controller
  // (server/cluster_services.h). Declared before everything that uses them.
  std::unique_ptr<felix::server::ClusterServices> cluster;
  if (config.cluster_mode()) {
    felix::server::ClusterServices::Callbacks callbacks;
    callbacks.on_ready_change = [&ready_hook](bool ready) { ready_hook.Set(ready); };
    callbacks.on_fatal = [&fatal](const std::string& why) {
      std::cerr << "felix-broker: cluster: " << why << "\n";
      fatal = true;
      kill(getpid(), SIGTERM);
    };
    auto created = felix::server::ClusterServices::Create(config, metrics, std::move(callbacks));
    if (!created) {
      std::cerr << "felix-broker: " << created.error().message << "\n";
      return 2;
    }
    cluster = std::move(*created);
    core_options.lease_valid = cluster->LeaseCheck();
    cluster->SetReplicationHooks(core_options);
  }
  // Catalog (embedded, or the cluster's) + admin API, declared before (so destroyed after)
  // everything that uses it.
  auto admin =
      felix::server::AdminApi::Open(config, metrics, cluster ? &cluster->catalog() : nullptr);
  if (!admin) {
    std::cerr << "felix-broker: " << admin.error().message << "\n";
    return 1;
  }
  // Shutdown runs in reverse: listeners stop first, then the core drains its executors (whose
  // completions still post to the stopped endpoints), then everything is destroyed.
  auto router = MakeRouter();
  if (!router) {
    std::cerr << "felix-broker: FELIX_TEST_REMOTE_SHARDS: " << router.error().message << "\n";
    return 2;
  }
  broker::BrokerCore core(std::move(core_options), (*admin)->catalog(), metrics);
  const broker::ShardRouter& shard_router = cluster ? cluster->router() : **router;
  broker::ClientService service(ServiceOptionsFromConfig(config), core, shard_router,
                                (*admin)->catalog(), metrics);
  // Delete means delete on every broker: a stream or cache deleted through any broker is
  // dropped here when the deletion arrives from etcd (single node: the admin API's hooks).
  if (cluster) {
    (*admin)->catalog().AddListener([&core](const felix::catalog::CatalogChange& change) {
      if (change.op != felix::catalog::CatalogChange::Op::kDeleted) return;
      if (auto* s = std::get_if<felix::catalog::Stream>(&change.entity)) {
        core.DropStream(s->tenant_id, s->namespace_name, s->name);
      } else if (auto* c = std::get_if<felix::catalog::Cache>(&change.entity)) {
        core.DropCache(c->tenant_id, c->namespace_name, c->name);
      }
    });
  }
  // Cluster mode: the owner's side of a forwarded publish, served on the internal listener.
  std::unique_ptr<felix::cluster::ForwardPublishHandler> forward_handler;
  std::unique_ptr<felix::cluster::ForwardCacheHandler> forward_cache_handler;
  if (cluster) {
    felix::cluster::ForwardPublishHandler::Options fo;
    fo.own_node_id = config.node_id;
    fo.own_internal_addr = config.node_advertise_addr;
    fo.internal_addr_of = [&cluster](std::string_view node) {
      auto addr = cluster->InternalAddrOf(node);
      return addr ? addr->ToString() : std::string();
    };
    forward_cache_handler = std::make_unique<felix::cluster::ForwardCacheHandler>(
        fo, service.resolver(), (*admin)->catalog(), metrics);
    forward_handler = std::make_unique<felix::cluster::ForwardPublishHandler>(
        std::move(fo), service.resolver(), (*admin)->catalog(), metrics);
  }
  // The internal listener's FLXI service: handshake plus the registered internal handlers.
  auto internal_service = felix::server::MakeInternalService(
      config, metrics, forward_handler.get(), cluster ? &cluster->replication() : nullptr);
  if (internal_service && forward_cache_handler) {
    if (auto r = forward_cache_handler->RegisterOn(**internal_service); !r) {
      internal_service = tl::unexpected(r.error());
    }
  }
  if (!internal_service) {
    std::cerr << "felix-broker: " << internal_service.error().message << "\n";
    return 1;
  }

  transport::ListenerConfig lc;
  lc.client_bind = config.quic_bind;
  lc.internal_bind = config.internal_bind;
  lc.tls_cert = config.tls_cert;
  lc.tls_key = config.tls_key;
  lc.tls_client_ca = config.tls_client_ca;
  lc.internal_tls_cert = config.internal_tls_cert;
  lc.internal_tls_key = config.internal_tls_key;
  lc.internal_tls_ca = config.internal_tls_ca;
  lc.node_id = config.node_id;
  lc.shared_loop = config.quic_loops == 1;
  lc.internal_poll_while_awaiting = std::chrono::microseconds(config.forward_poll_us);
  lc.client_handlers = service.Handlers();
  lc.internal_handlers = (*internal_service)->listen_handlers();
  std::vector<std::string> tls_warnings;
  auto quic = transport::BrokerListeners::Start(lc, metrics, &tls_warnings);
  for (const auto& w : tls_warnings) spdlog::warn("{}", w);
  if (!quic) {
    std::cerr << "felix-broker: " << quic.error().message << "\n";
    return 1;
  }
  // Cluster mode: the ingress side of a forwarded publish. Peers are dialled from the internal
  // endpoint (its TLS identity is this node's); shut down before the listeners stop.
  std::unique_ptr<felix::cluster::PeerPool> peer_pool;
  std::unique_ptr<felix::cluster::ForwardPublisher> forwarder;
  std::unique_ptr<felix::cluster::PeerPoolTransport> replica_transport;
  // Replication stops (its replicators let go of the transport) before the pool goes, on every
  // way out of Run.
  struct StopReplicationFirst {
    felix::server::ClusterServices* cluster = nullptr;
    ~StopReplicationFirst() {
      if (cluster != nullptr) cluster->StopReplication();
    }
  } stop_replication_first;
  if (cluster) {
    felix::cluster::PeerPoolOptions po;
    po.own_node_id = config.node_id;
    po.capabilities = felix::server::InternalServerOptions(config).capabilities;
    peer_pool = std::make_unique<felix::cluster::PeerPool>((*quic)->internal_endpoint(),
                                                           std::move(po), metrics);
    felix::cluster::ForwardPublisherOptions fo;
    fo.internal_addr_of = [&cluster](std::string_view node) {
      return cluster->InternalAddrOf(node);
    };
    forwarder = std::make_unique<felix::cluster::ForwardPublisher>(
        *peer_pool, (*quic)->internal_endpoint(), std::move(fo), metrics);
    service.SetPublishForwarder(forwarder.get());
    service.SetCacheForwarder(forwarder.get());
    // Replication: follower custody, the leader's replicators (cluster/replication_host.h).
    replica_transport = std::make_unique<felix::cluster::PeerPoolTransport>(*peer_pool);
    cluster->StartReplication(core, *replica_transport);
    stop_replication_first.cluster = cluster.get();
  }
  auto ca_file = ExportClientCertificate(config, (*quic)->client_tls());
  if (!ca_file) {
    std::cerr << "felix-broker: " << ca_file.error().message << "\n";
    return 1;
  }

  if (!cluster) {
    (*admin)->SetDataHooks(
        {.drop_stream = [&core](const std::string& t, const std::string& ns,
                                const std::string& name) { core.DropStream(t, ns, name); },
         .drop_cache = [&core](const std::string& t, const std::string& ns,
                               const std::string& name) { core.DropCache(t, ns, name); }});
  }
  (*admin)->Register(http);
  if (cluster) {
    (*admin)->RegisterGuardedGet(http, "/v1/cluster", [&cluster] { return cluster->Status(); });
    (*admin)->RegisterGuardedGet(http, "/replication",
                                 [&cluster] { return cluster->ReplicationStatus(); });
    (*admin)->RegisterGuardedPost(http, "/v1/shard-moves", [&cluster](const auto& body) {
      return cluster->RequestMove(body);
    });
  }
  auto http_addr = http.Start(config.metrics_bind);
  if (!http_addr) {
    std::cerr << "felix-broker: " << http_addr.error().message << "\n";
    return 1;
  }
  felix::HostPort quic_addr = (*quic)->client_address();
  felix::HostPort internal_addr = (*quic)->internal_address();
  if (auto written = (*admin)->WriteCredentials(*http_addr, quic_addr, *ca_file); !written) {
    std::cerr << "felix-broker: " << written.error().message << "\n";
    return 1;
  }
  if (cluster) {
    // Ready once registered and synced; the credential file is written again then, with the
    // default tenant's signing key from the shared catalog.
    ready_hook.Attach(
        [&http, &admin, addrs = std::make_tuple(*http_addr, quic_addr, *ca_file)](bool ready) {
          if (ready) {
            auto [h, q, ca] = addrs;
            if (auto w = (*admin)->WriteCredentials(h, q, ca); !w) {
              spdlog::error("{}", w.error().message);
            }
          }
          http.SetReady(ready);
        });
    cluster->Start(quic_addr);
  } else {
    http.SetReady(true);
  }
  spdlog::info("broker started version={} data_dir={} quic={} internal={} http={}", felix::kVersion,
               std::filesystem::absolute(config.data_dir).string(), quic_addr.ToString(),
               internal_addr.ToString(), http_addr->ToString());
  // Machine-readable line on stdout: tests and scripts wait for it.
  std::printf("felix-broker listening quic=%s internal=%s http=%s data_dir=%s\n",
              quic_addr.ToString().c_str(), internal_addr.ToString().c_str(),
              http_addr->ToString().c_str(), config.data_dir.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("shutdown signal={}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  if (cluster && signal_number == SIGTERM && config.shutdown_handoff_timeout_ms > 0) {
    HandOffLeaderships(*cluster, http, signals, config.shutdown_handoff_timeout_ms, metrics);
  }
  // Drain (issue 12 item 7): admit nothing new, answer everything admitted (publishes with
  // their offsets, group and cache operations), wait until clients acknowledged the answers,
  // then close. Bounded by FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS. Admission stops before /ready
  // flips, so a 503 from /ready means "nothing new is admitted".
  auto drain_start = std::chrono::steady_clock::now();
  service.BeginDrain();
  ready_hook.Detach();
  http.SetReady(false);
  size_t unfinished = 0;
  if (service.WaitDrained((*quic)->client_endpoint(),
                          drain_start + std::chrono::milliseconds(config.shutdown_drain_timeout_ms),
                          &unfinished)) {
    spdlog::info("drain answered every admitted request elapsed_ms={}",
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - drain_start)
                     .count());
  } else {
    spdlog::warn("drain deadline expired after {} ms unfinished_sessions={}",
                 config.shutdown_drain_timeout_ms, unfinished);
  }
  // Replication first: its replicators stop before the pool fails their exchanges, and the
  // follower stores close before the core's.
  if (cluster) cluster->StopReplication();
  if (peer_pool) peer_pool->Shutdown();  // fails what is still forwarding (kStopped)
  // Answers sent meanwhile (refusals of requests that raced `draining`) reach their clients
  // before the close: a short last pass.
  (void)service.WaitDrained(
      (*quic)->client_endpoint(),
      std::chrono::steady_clock::now() +
          std::chrono::milliseconds(std::min<uint64_t>(1000, config.shutdown_drain_timeout_ms)),
      &unfinished);
  (*quic)->Stop();
  service.ReleaseAll();
  if (cluster) cluster->Stop();  // leaves the cluster: the lease is revoked, nodes/<id> goes
  core.Stop();
  http.Stop();
  spdlog::info("drain complete");
  return fatal ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    // Library code returns errors as values; this only catches a third-party surprise.
    std::cerr << "felix-broker: fatal: " << e.what() << "\n";
    return 1;
  }
}
