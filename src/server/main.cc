// felix-broker: the Felix daemon. With no configuration it runs a single-node broker on the
// embedded catalog in ./felix-data (README, command 1).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/logging.h"
#include "common/metrics.h"
#include "felix/version.h"
#include "server/admin_api.h"
#include "server/broker_config.h"
#include "server/http_endpoint.h"

namespace {

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
  // Embedded catalog + admin API, declared before (so destroyed after) the HTTP endpoint
  // that serves it; the credential file is written once the HTTP address is known.
  auto admin = felix::server::AdminApi::Open(config, metrics);
  if (!admin) {
    std::cerr << "felix-broker: " << admin.error().message << "\n";
    return 1;
  }
  felix::server::HttpEndpoint http(metrics);
  (*admin)->Register(http);
  auto http_addr = http.Start(config.metrics_bind);
  if (!http_addr) {
    std::cerr << "felix-broker: " << http_addr.error().message << "\n";
    return 1;
  }
  if (auto written = (*admin)->WriteCredentials(*http_addr); !written) {
    std::cerr << "felix-broker: " << written.error().message << "\n";
    return 1;
  }
  http.SetReady(true);
  spdlog::info("broker started version={} data_dir={} http={}", felix::kVersion,
               std::filesystem::absolute(config.data_dir).string(), http_addr->ToString());
  // Machine-readable line on stdout: tests and scripts wait for it.
  std::printf("felix-broker listening http=%s data_dir=%s\n", http_addr->ToString().c_str(),
              config.data_dir.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("shutdown signal={}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  http.SetReady(false);
  http.Stop();
  spdlog::info("drain complete");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
