// felix-broker: the Felix daemon. With no configuration it runs a single-node broker on the
// embedded catalog in ./felix-data (README, command 1).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "broker/broker_core.h"
#include "broker/client_service.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "felix/version.h"
#include "server/admin_api.h"
#include "server/broker_config.h"
#include "server/http_endpoint.h"
#include "transport/endpoint.h"
#include "transport/tls_context.h"

namespace {

namespace broker = felix::broker;
namespace transport = felix::transport;
using felix::server::BrokerConfig;

felix::storage::FsyncMode StorageFsyncMode(felix::server::FsyncMode mode) {
  switch (mode) {
    case felix::server::FsyncMode::kNone:
      return felix::storage::FsyncMode::kNone;
    case felix::server::FsyncMode::kPeriodic:
      return felix::storage::FsyncMode::kPeriodic;
    case felix::server::FsyncMode::kOnCommit:
      return felix::storage::FsyncMode::kOnCommit;
  }
  return felix::storage::FsyncMode::kPeriodic;
}

broker::BrokerCoreOptions CoreOptions(const BrokerConfig& config) {
  broker::BrokerCoreOptions o;
  o.storage_dir = config.EffectiveStorageDir();
  o.log_defaults.fsync_mode = StorageFsyncMode(config.durable_fsync_mode);
  o.log_defaults.fsync_interval = std::chrono::milliseconds(config.durable_fsync_interval_ms);
  o.log_defaults.segment_bytes = config.durable_segment_bytes;
  o.log_defaults.index_spacing_bytes = config.durable_index_spacing_bytes;
  o.log_defaults.retention_bytes = config.durable_retention_bytes;
  o.log_defaults.retention_age = std::chrono::seconds(config.durable_retention_seconds);
  o.shard.default_queue_capacity = config.subscriber_queue_capacity;
  o.shard.max_queue_capacity = config.subscriber_queue_capacity_max;
  o.shard.event_batch_max_records = config.event_batch_max_events;
  o.shard.event_batch_max_bytes = config.event_batch_max_bytes;
  return o;
}

broker::ClientServiceOptions ServiceOptions(const BrokerConfig& config) {
  broker::ClientServiceOptions o;
  o.max_frame_bytes = static_cast<uint32_t>(config.max_frame_bytes);
  o.preauth_max_frame_bytes = static_cast<uint32_t>(config.preauth_max_frame_bytes);
  o.auth_timeout = std::chrono::milliseconds(config.auth_timeout_ms);
  o.max_subscriptions_per_conn = config.max_subscriptions_per_conn;
  return o;
}

// The client port's TLS: the operator's certificate, or a self-signed `localhost` one whose
// PEM is written to <data_dir>/tls/broker-cert.pem so local clients can verify the broker.
felix::Result<std::pair<std::shared_ptr<transport::TlsContext>, std::string>> ClientTls(
    const BrokerConfig& config) {
  transport::TlsOptions options;
  options.role = transport::Role::kClient;
  options.cert_file = config.tls_cert;
  options.key_file = config.tls_key;
  options.ca_file = config.tls_client_ca;
  std::vector<std::string> warnings;
  auto tls = transport::TlsContext::Create(options, &warnings);
  if (!tls) return tl::unexpected(tls.error());
  for (const auto& w : warnings) spdlog::warn("{}", w);
  if (!(*tls)->self_signed()) return std::make_pair(*tls, config.tls_cert);
  std::filesystem::path dir = std::filesystem::path(config.data_dir) / "tls";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = std::filesystem::absolute(dir / "broker-cert.pem").string();
  std::ofstream out(path, std::ios::trunc);
  out << (*tls)->self_signed_cert_pem();
  if (!out.flush()) {
    return felix::Fail(felix::ErrorCode::kIo, "cannot write the dev certificate to " + path);
  }
  return std::make_pair(*tls, path);
}

// The broker-to-broker port. A single node has no peers yet; the listener exists so the port
// is held and the ALPN/mTLS rules apply from the first day.
felix::Result<std::shared_ptr<transport::TlsContext>> InternalTls(const BrokerConfig& config) {
  transport::TlsOptions options;
  options.role = transport::Role::kInternal;
  options.cert_file = config.internal_tls_cert;
  options.key_file = config.internal_tls_key;
  options.ca_file = config.internal_tls_ca;
  options.cert_var = "FELIX_INTERNAL_TLS_CERT";
  options.key_var = "FELIX_INTERNAL_TLS_KEY";
  options.ca_var = "FELIX_INTERNAL_TLS_CA";
  options.self_signed_name = config.node_id.empty() ? "localhost" : config.node_id;
  std::vector<std::string> warnings;
  auto tls = transport::TlsContext::Create(options, &warnings);
  for (const auto& w : warnings) spdlog::warn("{}", w);
  return tls;
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

  felix::MetricsRegistry metrics;
  // Embedded catalog + admin API, declared before (so destroyed after) everything that uses it.
  auto admin = felix::server::AdminApi::Open(config, metrics);
  if (!admin) {
    std::cerr << "felix-broker: " << admin.error().message << "\n";
    return 1;
  }
  auto client_tls = ClientTls(config);
  if (!client_tls) {
    std::cerr << "felix-broker: " << client_tls.error().message << "\n";
    return 1;
  }
  auto internal_tls = InternalTls(config);
  if (!internal_tls) {
    std::cerr << "felix-broker: " << internal_tls.error().message << "\n";
    return 1;
  }

  // Shutdown order is the reverse: endpoints stop first, then the core drains its executors
  // (whose completions still post to the stopped endpoints), then everything is destroyed.
  broker::BrokerCore core(CoreOptions(config), (*admin)->catalog(), metrics);
  broker::ClientService service(ServiceOptions(config), core, (*admin)->catalog(), metrics);

  transport::EndpointOptions client_options;
  client_options.tls = client_tls->first;
  client_options.name = "client";
  auto client_endpoint =
      transport::Endpoint::Create(config.quic_bind, client_options, metrics, service.Handlers());
  if (!client_endpoint) {
    std::cerr << "felix-broker: FELIX_QUIC_BIND: " << client_endpoint.error().message << "\n";
    return 1;
  }
  transport::EndpointOptions internal_options;
  internal_options.tls = *internal_tls;
  internal_options.name = "internal";
  transport::ListenHandlers internal_handlers;
  internal_handlers.on_connection = [](const std::shared_ptr<transport::Connection>& c) {
    // No peer protocol on a single node yet: refuse politely.
    c->Close(0, "this broker serves no peers yet");
  };
  auto internal_endpoint = transport::Endpoint::Create(config.internal_bind, internal_options,
                                                       metrics, internal_handlers);
  if (!internal_endpoint) {
    std::cerr << "felix-broker: FELIX_INTERNAL_BIND: " << internal_endpoint.error().message << "\n";
    return 1;
  }

  felix::server::HttpEndpoint http(metrics);
  (*admin)->Register(http);
  auto http_addr = http.Start(config.metrics_bind);
  if (!http_addr) {
    std::cerr << "felix-broker: " << http_addr.error().message << "\n";
    return 1;
  }
  felix::HostPort quic_addr = (*client_endpoint)->local_address();
  felix::HostPort internal_addr = (*internal_endpoint)->local_address();
  if (auto written = (*admin)->WriteCredentials(*http_addr, quic_addr, client_tls->second);
      !written) {
    std::cerr << "felix-broker: " << written.error().message << "\n";
    return 1;
  }
  http.SetReady(true);
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
  http.SetReady(false);
  (*client_endpoint)->Stop();
  (*internal_endpoint)->Stop();
  core.Stop();
  http.Stop();
  spdlog::info("drain complete");
  return 0;
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
