// BrokerConfig: the broker's effective settings, merged from built-in defaults, then `FELIX_*`
// environment variables, then an optional YAML file (highest priority), and validated as a
// whole. Names, defaults and cross-field rules follow ../shared/spec/broker-config.md; every
// refusal names the setting at fault (the env variable or YAML key).
//
// Loading takes the environment as a value (EnvironmentMap) so tests never touch the process
// environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/net_address.h"
#include "common/result.h"
#include "storage/fsync_mode.h"

namespace felix::server {

using FsyncMode = storage::FsyncMode;  // one definition (storage/fsync_mode.h)
enum class SubscriberQueuePolicy { kBlock, kDropNew, kDropOld };

struct BrokerConfig {
  // Listeners (§2.1).
  HostPort quic_bind{"0.0.0.0", 5000};
  // QUIC event-loop threads: 1 serves the client and internal ports on one thread (a forwarded
  // request crosses no thread on the broker it entered), 2 gives each port its own.
  uint64_t quic_loops = 1;
  // µs the loop serving the internal port polls instead of sleeping while forwarded requests
  // await their owners' answers (0: it sleeps at once).
  uint64_t forward_poll_us = 300;
  // A follower's loop applies a small `Quorum` batch itself while its applies take at most
  // this many µs (0: the shard's executor always applies; cluster::ReplicationHostOptions).
  uint64_t follower_inline_apply_us = 1000;
  HostPort internal_bind{"0.0.0.0", 5001};
  HostPort metrics_bind{"0.0.0.0", 8080};
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string internal_tls_cert;
  std::string internal_tls_key;
  std::string internal_tls_ca;
  bool internal_allow_unauthenticated = false;

  // Identity (§2.2). Unset node id: single node on the embedded catalog.
  std::string node_id;
  std::string node_advertise_addr;
  std::vector<std::string> etcd_endpoints;
  // Cluster mode (FELIX_NODE_ID + FELIX_ETCD_ENDPOINTS; docs/cluster.md).
  std::string cluster_name = "felix";
  std::string client_advertise_addr;  // empty: the bound client address (loopback for a wildcard)
  std::string node_zone;
  uint64_t node_lease_ms = 2000;
  // How long a follower stays down (after the controller's down rule) before the controller
  // replaces it with a live broker (restore_plan.h); 0 turns restoring off.
  uint64_t shard_restore_after_ms = 300000;
  // Replication (docs/cluster.md "Replication"). Rebuilds of halted followers a leader runs at
  // once (0: never rebuild); the rebuild byte rate (0: unpaced; accepted and validated, not
  // enforced yet); how long a Quorum publish waits for a majority (the commit gate's timeout,
  // broker/commit_gate.h).
  uint64_t replication_rebuild_max_concurrent = 1;
  uint64_t replication_rebuild_bytes_per_sec = 0;
  uint64_t publish_quorum_timeout_ms = 5000;

  bool cluster_mode() const { return !node_id.empty(); }

  // Data directory: catalog, credentials, and (unless overridden) durable shard logs.
  std::string data_dir = "./felix-data";
  std::string durable_storage_dir;  // empty: <data_dir>/shards

  // Frames and pre-auth limits (§2.3).
  uint64_t max_frame_bytes = 16u << 20;
  uint64_t preauth_max_frame_bytes = 64u << 10;
  uint64_t auth_timeout_ms = 10000;
  uint64_t max_client_connections = 8192;  // >= 1 (0 is refused)
  uint64_t max_connections_per_ip = 512;   // FELIX_MAX_CONNECTIONS_PER_IP; 0 = unlimited

  // Publish path (§2.4).
  bool ack_on_commit = false;
  // How long a stream's next publish waits for room in the in-flight budgets below before it
  // is refused `overloaded` (acked) or shed (fire-and-forget); 0: at once.
  uint64_t publish_queue_wait_ms = 2000;
  // FELIX_PUB_INGRESS_WAIT: a stream waits for room as long as it takes (nothing is shed).
  bool pub_ingress_wait = false;
  // In-flight publish bytes (payload plus a per-record overhead): broker-wide, and per client
  // stream (the spec's per-identity-per-connection budget: auth is per stream here).
  uint64_t pub_inflight_bytes = 64u << 20;
  uint64_t pub_conn_inflight_bytes = 16u << 20;
  uint64_t ack_wait_timeout_ms = 2000;
  uint64_t publish_window = 256;
  // FELIX_RECORD_PUBLISHERS: store each durable record's publisher (token `sub`) with it and
  // serve it (group records, event batches with 0x2000). Standalone only.
  bool record_publishers = false;

  // Subscriber delivery (§2.6).
  uint64_t event_batch_max_events = 64;
  uint64_t event_batch_max_bytes = 65536;
  uint64_t event_batch_max_delay_us = 250;
  uint64_t subscriber_queue_capacity = 512;
  uint64_t subscriber_queue_capacity_max = 4096;
  SubscriberQueuePolicy subscriber_queue_policy = SubscriberQueuePolicy::kDropNew;
  uint64_t max_subscriptions_per_conn = 4096;

  // Consumer groups (§2.9).
  uint64_t group_visibility_timeout_ms = 30000;
  uint64_t group_max_attempts = 5;
  uint64_t group_max_wait_ms = 30000;
  uint64_t group_max_in_flight = 10000;

  // Durable storage (§2.10).
  FsyncMode durable_fsync_mode = FsyncMode::kPeriodic;
  uint64_t durable_fsync_interval_ms = 250;
  uint64_t durable_segment_bytes = 256u << 20;
  // on_commit logs: zeroed space kept ahead of the active segment (0: none; DurableLog).
  uint64_t durable_preallocate_bytes = 1u << 20;
  uint64_t durable_retention_bytes = 0;    // 0: unbounded
  uint64_t durable_retention_seconds = 0;  // 0: unbounded
  uint64_t durable_retention_interval_seconds = 60;
  uint64_t durable_index_spacing_bytes = 4096;

  // Shutdown (§2.12) and logging (§2.14).
  uint64_t shutdown_drain_timeout_ms = 25000;
  // Cluster: on SIGTERM, how long the broker waits for the shards it leads to move away
  // (control-plane.md §12.6) before it drains; 0: no handoff.
  uint64_t shutdown_handoff_timeout_ms = 30000;
  std::string log_level = "info";

  // Admin API token; empty: generated on first start and kept in the data directory.
  std::string admin_token;

  std::string EffectiveStorageDir() const;
};

using EnvironmentMap = std::map<std::string, std::string>;

// The process environment as a map (called once, in main()).
EnvironmentMap ProcessEnvironment();

struct LoadedConfig {
  BrokerConfig config;
  std::vector<std::string> warnings;  // e.g. unknown FELIX_* variable with a "did you mean"
};

// `yaml_path`: the file named by --config or FELIX_BROKER_CONFIG (missing = error); when empty,
// /usr/local/felix/config.yml is read if present.
Result<LoadedConfig> LoadBrokerConfig(const EnvironmentMap& env, const std::string& yaml_path);

// Every cross-field rule; called by LoadBrokerConfig, exposed for tests.
Result<void> ValidateBrokerConfig(const BrokerConfig& config);

// The merged configuration as YAML (`--print-config`); credentials print as <redacted>/<unset>.
std::string RenderBrokerConfigYaml(const BrokerConfig& config);

}  // namespace felix::server
