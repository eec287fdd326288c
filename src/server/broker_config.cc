#include "server/broker_config.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <sstream>

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "cluster/etcd_keys.h"
#include "etcd/grpc_etcd_client.h"

namespace felix::server {
namespace {

// One configurable setting: where it comes from and how it is parsed and printed.
struct Setting {
  const char* env;   // FELIX_* variable
  const char* yaml;  // YAML key, or nullptr when environment-only
  bool secret;       // printed as <redacted>/<unset>
  std::function<Result<void>(BrokerConfig&, const std::string&)> parse;
  std::function<std::string(const BrokerConfig&)> print;
};

Result<uint64_t> ParseUnsigned(const std::string& text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return Fail(ErrorCode::kInvalidArgument, "'" + text + "' is not a non-negative whole number");
  }
  return value;
}

Result<bool> ParseBool(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  if (lower == "1" || lower == "true" || lower == "yes") return true;
  if (lower == "0" || lower == "false" || lower == "no") return false;
  return Fail(ErrorCode::kInvalidArgument,
              "'" + text + "' is not a boolean (true/false/1/0/yes/no)");
}

Setting U64(const char* env, const char* yaml, uint64_t BrokerConfig::*member) {
  return {env, yaml, false,
          [member](BrokerConfig& c, const std::string& v) -> Result<void> {
            auto n = ParseUnsigned(v);
            if (!n) return tl::unexpected(n.error());
            c.*member = *n;
            return Ok();
          },
          [member](const BrokerConfig& c) { return std::to_string(c.*member); }};
}

Setting Bool(const char* env, const char* yaml, bool BrokerConfig::*member) {
  return {env, yaml, false,
          [member](BrokerConfig& c, const std::string& v) -> Result<void> {
            auto b = ParseBool(v);
            if (!b) return tl::unexpected(b.error());
            c.*member = *b;
            return Ok();
          },
          [member](const BrokerConfig& c) { return std::string(c.*member ? "true" : "false"); }};
}

Setting Str(const char* env, const char* yaml, std::string BrokerConfig::*member,
            bool secret = false) {
  return {env, yaml, secret,
          [member](BrokerConfig& c, const std::string& v) -> Result<void> {
            c.*member = v;
            return Ok();
          },
          [member](const BrokerConfig& c) { return c.*member; }};
}

Setting Addr(const char* env, const char* yaml, HostPort BrokerConfig::*member) {
  return {env, yaml, false,
          [member](BrokerConfig& c, const std::string& v) -> Result<void> {
            auto a = ParseHostPort(v);
            if (!a) return tl::unexpected(a.error());
            c.*member = *a;
            return Ok();
          },
          [member](const BrokerConfig& c) { return (c.*member).ToString(); }};
}

const char* QueuePolicyName(SubscriberQueuePolicy p) {
  switch (p) {
    case SubscriberQueuePolicy::kBlock:
      return "block";
    case SubscriberQueuePolicy::kDropNew:
      return "drop_new";
    case SubscriberQueuePolicy::kDropOld:
      return "drop_old";
  }
  return "?";
}

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> settings = [] {
    using C = BrokerConfig;
    std::vector<Setting> s = {
        Addr("FELIX_QUIC_BIND", "quic_bind", &C::quic_bind),
        Addr("FELIX_INTERNAL_BIND", nullptr, &C::internal_bind),
        U64("FELIX_QUIC_LOOPS", "quic_loops", &C::quic_loops),
        U64("FELIX_FORWARD_POLL_US", "forward_poll_us", &C::forward_poll_us),
        U64("FELIX_FOLLOWER_INLINE_APPLY_US", "follower_inline_apply_us",
            &C::follower_inline_apply_us),
        Addr("FELIX_BROKER_METRICS_BIND", "metrics_bind", &C::metrics_bind),
        Str("FELIX_TLS_CERT", nullptr, &C::tls_cert),
        Str("FELIX_TLS_KEY", nullptr, &C::tls_key),
        Str("FELIX_TLS_CLIENT_CA", nullptr, &C::tls_client_ca),
        Str("FELIX_INTERNAL_TLS_CERT", nullptr, &C::internal_tls_cert),
        Str("FELIX_INTERNAL_TLS_KEY", nullptr, &C::internal_tls_key),
        Str("FELIX_INTERNAL_TLS_CA", nullptr, &C::internal_tls_ca),
        Bool("FELIX_INTERNAL_ALLOW_UNAUTHENTICATED", nullptr, &C::internal_allow_unauthenticated),
        Str("FELIX_NODE_ID", nullptr, &C::node_id),
        Str("FELIX_NODE_ADVERTISE_ADDR", nullptr, &C::node_advertise_addr),
        Str("FELIX_CLUSTER_NAME", "cluster_name", &C::cluster_name),
        Str("FELIX_CLIENT_ADVERTISE_ADDR", nullptr, &C::client_advertise_addr),
        Str("FELIX_NODE_ZONE", "node_zone", &C::node_zone),
        U64("FELIX_NODE_LEASE_MS", "node_lease_ms", &C::node_lease_ms),
        U64("FELIX_SHARD_RESTORE_AFTER_MS", "shard_restore_after_ms", &C::shard_restore_after_ms),
        U64("FELIX_REPLICATION_REBUILD_MAX_CONCURRENT", "replication_rebuild_max_concurrent",
            &C::replication_rebuild_max_concurrent),
        U64("FELIX_REPLICATION_REBUILD_BYTES_PER_SEC", "replication_rebuild_bytes_per_sec",
            &C::replication_rebuild_bytes_per_sec),
        U64("FELIX_PUBLISH_QUORUM_TIMEOUT_MS", "publish_quorum_timeout_ms",
            &C::publish_quorum_timeout_ms),
        {"FELIX_ETCD_ENDPOINTS", "etcd_endpoints", false,
         [](C& c, const std::string& v) -> Result<void> {
           c.etcd_endpoints.clear();
           std::stringstream ss(v);
           std::string item;
           while (std::getline(ss, item, ',')) {
             if (item.empty()) continue;
             // http://HOST:PORT (or HOST:PORT); https is refused (no TLS to etcd yet).
             auto parsed = etcd::ParseEtcdEndpoints(item);
             if (!parsed) return Fail(ErrorCode::kInvalidArgument, parsed.error().message);
             c.etcd_endpoints.push_back(item);
           }
           return Ok();
         },
         [](const C& c) {
           std::string out;
           for (const auto& e : c.etcd_endpoints) out += (out.empty() ? "" : ",") + e;
           return out;
         }},
        Str("FELIX_DATA_DIR", "data_dir", &C::data_dir),
        Str("FELIX_DURABLE_STORAGE_DIR", "durable_storage_dir", &C::durable_storage_dir),
        U64("FELIX_MAX_FRAME_BYTES", "max_frame_bytes", &C::max_frame_bytes),
        U64("FELIX_PREAUTH_MAX_FRAME_BYTES", "preauth_max_frame_bytes",
            &C::preauth_max_frame_bytes),
        U64("FELIX_AUTH_TIMEOUT_MS", "auth_timeout_ms", &C::auth_timeout_ms),
        U64("FELIX_MAX_CLIENT_CONNECTIONS", "max_client_connections", &C::max_client_connections),
        U64("FELIX_MAX_CONNECTIONS_PER_IP", nullptr, &C::max_connections_per_ip),
        Bool("FELIX_ACK_ON_COMMIT", "ack_on_commit", &C::ack_on_commit),
        U64("FELIX_PUBLISH_QUEUE_WAIT_MS", "publish_queue_wait_timeout_ms",
            &C::publish_queue_wait_ms),
        U64("FELIX_ACK_WAIT_TIMEOUT_MS", "ack_wait_timeout_ms", &C::ack_wait_timeout_ms),
        Bool("FELIX_PUB_INGRESS_WAIT", "pub_ingress_wait", &C::pub_ingress_wait),
        U64("FELIX_BROKER_PUBLISH_INFLIGHT_BYTES", "pub_inflight_bytes", &C::pub_inflight_bytes),
        U64("FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES", "pub_conn_inflight_bytes",
            &C::pub_conn_inflight_bytes),
        U64("FELIX_BROKER_PUBLISH_WINDOW", nullptr, &C::publish_window),
        Bool("FELIX_RECORD_PUBLISHERS", "record_publishers", &C::record_publishers),
        U64("FELIX_EVENT_BATCH_MAX_EVENTS", "event_batch_max_events", &C::event_batch_max_events),
        U64("FELIX_EVENT_BATCH_MAX_BYTES", "event_batch_max_bytes", &C::event_batch_max_bytes),
        U64("FELIX_EVENT_BATCH_MAX_DELAY_US", "event_batch_max_delay_us",
            &C::event_batch_max_delay_us),
        U64("FELIX_SUBSCRIBER_QUEUE_CAPACITY", "subscriber_queue_capacity",
            &C::subscriber_queue_capacity),
        U64("FELIX_SUBSCRIBER_QUEUE_CAPACITY_MAX", nullptr, &C::subscriber_queue_capacity_max),
        {"FELIX_SUB_QUEUE_POLICY", "subscriber_queue_policy", false,
         [](C& c, const std::string& v) -> Result<void> {
           if (v == "block")
             c.subscriber_queue_policy = SubscriberQueuePolicy::kBlock;
           else if (v == "drop_new")
             c.subscriber_queue_policy = SubscriberQueuePolicy::kDropNew;
           else if (v == "drop_old")
             c.subscriber_queue_policy = SubscriberQueuePolicy::kDropOld;
           else
             return Fail(ErrorCode::kInvalidArgument,
                         "'" + v + "' is not one of block, drop_new, drop_old");
           return Ok();
         },
         [](const C& c) { return std::string(QueuePolicyName(c.subscriber_queue_policy)); }},
        U64("FELIX_MAX_SUBSCRIPTIONS_PER_CONN", "max_subscriptions_per_conn",
            &C::max_subscriptions_per_conn),
        U64("FELIX_GROUP_VISIBILITY_TIMEOUT_MS", nullptr, &C::group_visibility_timeout_ms),
        U64("FELIX_GROUP_MAX_ATTEMPTS", nullptr, &C::group_max_attempts),
        U64("FELIX_GROUP_MAX_WAIT_MS", nullptr, &C::group_max_wait_ms),
        U64("FELIX_GROUP_MAX_IN_FLIGHT", nullptr, &C::group_max_in_flight),
        {"FELIX_DURABLE_FSYNC_MODE", "durable_fsync_mode", false,
         [](C& c, const std::string& v) -> Result<void> {
           if (v == "none")
             c.durable_fsync_mode = FsyncMode::kNone;
           else if (v == "periodic")
             c.durable_fsync_mode = FsyncMode::kPeriodic;
           else if (v == "on_commit")
             c.durable_fsync_mode = FsyncMode::kOnCommit;
           else
             return Fail(ErrorCode::kInvalidArgument,
                         "'" + v + "' is not one of none, periodic, on_commit");
           return Ok();
         },
         [](const C& c) { return std::string(FsyncModeName(c.durable_fsync_mode)); }},
        U64("FELIX_DURABLE_FSYNC_INTERVAL_MS", "durable_fsync_interval_ms",
            &C::durable_fsync_interval_ms),
        U64("FELIX_DURABLE_SEGMENT_BYTES", "durable_segment_bytes", &C::durable_segment_bytes),
        U64("FELIX_DURABLE_PREALLOCATE_BYTES", "durable_preallocate_bytes",
            &C::durable_preallocate_bytes),
        U64("FELIX_DURABLE_RETENTION_BYTES", "durable_retention_bytes",
            &C::durable_retention_bytes),
        U64("FELIX_DURABLE_RETENTION_SECONDS", "durable_retention_seconds",
            &C::durable_retention_seconds),
        U64("FELIX_DURABLE_RETENTION_INTERVAL_SECONDS", "durable_retention_interval_seconds",
            &C::durable_retention_interval_seconds),
        U64("FELIX_DURABLE_INDEX_SPACING_BYTES", "durable_index_spacing_bytes",
            &C::durable_index_spacing_bytes),
        U64("FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS", "shutdown_drain_timeout_ms",
            &C::shutdown_drain_timeout_ms),
        U64("FELIX_SHUTDOWN_HANDOFF_TIMEOUT_MS", "shutdown_handoff_timeout_ms",
            &C::shutdown_handoff_timeout_ms),
        Str("FELIX_LOG", "log", &C::log_level),
        Str("FELIX_ADMIN_TOKEN", nullptr, &C::admin_token, /*secret=*/true),
    };
    return s;
  }();
  return settings;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Variables the broker reads outside the settings table (or that belong to other programs).
bool IsKnownNonSetting(const std::string& name) {
  static const char* kOthers[] = {"FELIX_BROKER_CONFIG",
                                  "FELIX_CLIENT_CONFIG",
                                  "FELIX_STORAGE_FAULT_FILE",
                                  "FELIX_TEST_REMOTE_SHARDS",
                                  "FELIX_TEST_HOLD_SHARD_OPEN",
                                  "FELIX_TEST_TIMEOUT_SCALE",
                                  "FELIX_TEST_DROP_ACKED_EVERY",
                                  "FELIX_TEST_DUPLICATE_EVERY",
                                  "FELIX_TEST_STALE_GET_EVERY",
                                  "FELIX_TEST_CLEAR_POISON",
                                  "FELIX_BINARY_DIR",
                                  "FELIX_SOURCE_DIR",
                                  "FELIX_URL",
                                  "FELIX_TOKEN",
                                  "FELIX_CREDENTIALS"};
  return std::any_of(std::begin(kOthers), std::end(kOthers),
                     [&](const char* o) { return name == o; });
}

Result<void> Apply(BrokerConfig& config, const Setting& s, const std::string& value,
                   const std::string& where) {
  auto r = s.parse(config, value);
  if (!r) return Fail(ErrorCode::kInvalidArgument, where + ": " + r.error().message);
  return Ok();
}

}  // namespace

std::string BrokerConfig::EffectiveStorageDir() const {
  if (!durable_storage_dir.empty()) return durable_storage_dir;
  return (std::filesystem::path(data_dir) / "shards").string();
}

EnvironmentMap ProcessEnvironment() {
  EnvironmentMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

Result<LoadedConfig> LoadBrokerConfig(const EnvironmentMap& env, const std::string& yaml_path) {
  LoadedConfig loaded;
  BrokerConfig& config = loaded.config;

  for (const auto& entry : env) {
    const std::string& name = entry.first;
    const std::string& value = entry.second;
    if (name.rfind("FELIX_", 0) != 0) continue;
    auto it = std::find_if(Settings().begin(), Settings().end(),
                           [&](const Setting& s) { return name == s.env; });
    if (it != Settings().end()) {
      if (auto r = Apply(config, *it, value, name); !r) return tl::unexpected(r.error());
      continue;
    }
    if (IsKnownNonSetting(name)) continue;
    std::string best;
    size_t best_distance = 4;
    for (const Setting& s : Settings()) {
      size_t d = EditDistance(name, s.env);
      if (d < best_distance) best_distance = d, best = s.env;
    }
    loaded.warnings.push_back(
        "unknown environment variable " + name +
        (best.empty() ? std::string(" (ignored)") : " (ignored; did you mean " + best + "?)"));
  }
  // Setting the interval alone implies periodic flushing (broker-config.md §2.10).
  if (env.count("FELIX_DURABLE_FSYNC_INTERVAL_MS") && !env.count("FELIX_DURABLE_FSYNC_MODE")) {
    config.durable_fsync_mode = FsyncMode::kPeriodic;
  }

  std::string path = yaml_path;
  bool explicit_path = !path.empty();
  if (!explicit_path) {
    auto named = env.find("FELIX_BROKER_CONFIG");
    if (named != env.end() && !named->second.empty()) {
      path = named->second;
      explicit_path = true;
    }
  }
  if (!explicit_path && std::filesystem::exists("/usr/local/felix/config.yml")) {
    path = "/usr/local/felix/config.yml";
  }
  if (!path.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      return Fail(ErrorCode::kInvalidArgument, "config file " + path + ": not found");
    }
    YAML::Node root;
    try {
      root = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
      return Fail(ErrorCode::kInvalidArgument, "config file " + path + ": " + e.what());
    }
    if (!root.IsNull() && !root.IsMap()) {
      return Fail(ErrorCode::kInvalidArgument,
                  "config file " + path + ": top level must be a mapping of settings");
    }
    for (const auto& entry : root) {
      std::string key = entry.first.as<std::string>();
      auto it = std::find_if(Settings().begin(), Settings().end(),
                             [&](const Setting& s) { return s.yaml != nullptr && key == s.yaml; });
      if (it == Settings().end()) {
        return Fail(ErrorCode::kInvalidArgument,
                    "config file " + path + ": unknown key '" + key + "'");
      }
      if (!entry.second.IsScalar()) {
        return Fail(ErrorCode::kInvalidArgument,
                    "config file " + path + ": " + key + ": must be a single value");
      }
      if (auto r = Apply(config, *it, entry.second.Scalar(), "config file " + path + ": " + key);
          !r) {
        return tl::unexpected(r.error());
      }
    }
  }

  // Accepted so that a reference broker's configuration loads, but nothing reads them yet:
  // setting one says so instead of silently doing nothing (docs/operations.md).
  const BrokerConfig defaults;
  auto inert = [&](const char* name, bool changed) {
    if (changed) {
      loaded.warnings.push_back(std::string(name) +
                                " is accepted for compatibility with the reference broker and "
                                "has no effect in this version");
    }
  };
  inert("FELIX_ACK_WAIT_TIMEOUT_MS", config.ack_wait_timeout_ms != defaults.ack_wait_timeout_ms);
  inert("FELIX_EVENT_BATCH_MAX_DELAY_US",
        config.event_batch_max_delay_us != defaults.event_batch_max_delay_us);
  inert("FELIX_SUB_QUEUE_POLICY",
        config.subscriber_queue_policy != defaults.subscriber_queue_policy);

  if (auto r = ValidateBrokerConfig(config); !r) return tl::unexpected(r.error());
  return loaded;
}

Result<void> ValidateBrokerConfig(const BrokerConfig& c) {
  auto refuse = [](std::string message) {
    return Fail(ErrorCode::kInvalidArgument, std::move(message));
  };
  if (c.quic_bind.port != 0 && c.quic_bind.port == c.internal_bind.port) {
    return refuse("FELIX_INTERNAL_BIND (" + c.internal_bind.ToString() +
                  ") shares its port with FELIX_QUIC_BIND (" + c.quic_bind.ToString() +
                  "): peer and client traffic must not share a listener");
  }
  if (c.forward_poll_us > 10000) {
    return refuse(
        "FELIX_FORWARD_POLL_US must be at most 10000 (µs the ingress polls for an owner's "
        "answer), not " +
        std::to_string(c.forward_poll_us));
  }
  if (c.follower_inline_apply_us > 100000) {
    return refuse(
        "FELIX_FOLLOWER_INLINE_APPLY_US must be at most 100000 (µs a follower's apply may take "
        "for its loop to apply the next small Quorum batch itself), not " +
        std::to_string(c.follower_inline_apply_us));
  }
  if (c.quic_loops < 1 || c.quic_loops > 2) {
    return refuse(
        "FELIX_QUIC_LOOPS must be 1 (client and internal ports on one thread) or 2 (a thread "
        "each)");
  }
  if (c.max_frame_bytes == 0) return refuse("FELIX_MAX_FRAME_BYTES must be greater than 0");
  if (c.max_frame_bytes > UINT32_MAX) {
    return refuse("FELIX_MAX_FRAME_BYTES (" + std::to_string(c.max_frame_bytes) +
                  ") exceeds 4294967295, the largest length an FLX1 frame header can express");
  }
  if (c.max_client_connections == 0) {
    return refuse(
        "FELIX_MAX_CLIENT_CONNECTIONS must be at least 1 (0 would refuse every client; there is "
        "no 'unlimited' value)");
  }
  if (c.preauth_max_frame_bytes > c.max_frame_bytes) {
    return refuse("FELIX_PREAUTH_MAX_FRAME_BYTES (" + std::to_string(c.preauth_max_frame_bytes) +
                  ") exceeds FELIX_MAX_FRAME_BYTES (" + std::to_string(c.max_frame_bytes) + ")");
  }
  if (c.event_batch_max_bytes > c.max_frame_bytes) {
    return refuse("FELIX_EVENT_BATCH_MAX_BYTES (" + std::to_string(c.event_batch_max_bytes) +
                  ") exceeds FELIX_MAX_FRAME_BYTES (" + std::to_string(c.max_frame_bytes) +
                  "): the broker would emit frames larger than it accepts");
  }
  if (c.event_batch_max_events == 0) {
    return refuse("FELIX_EVENT_BATCH_MAX_EVENTS must be greater than 0");
  }
  if (c.subscriber_queue_capacity == 0) {
    return refuse("FELIX_SUBSCRIBER_QUEUE_CAPACITY must be greater than 0");
  }
  if (c.durable_fsync_interval_ms == 0) {
    return refuse("FELIX_DURABLE_FSYNC_INTERVAL_MS must be greater than 0 (0 would busy-loop)");
  }
  if (c.durable_segment_bytes < 4096) {
    return refuse("FELIX_DURABLE_SEGMENT_BYTES must be at least 4096");
  }
  if (c.durable_retention_interval_seconds == 0) {
    return refuse("FELIX_DURABLE_RETENTION_INTERVAL_SECONDS must be greater than 0");
  }
  if (c.group_max_attempts == 0) return refuse("FELIX_GROUP_MAX_ATTEMPTS must be at least 1");
  if (c.pub_conn_inflight_bytes == 0 || c.pub_inflight_bytes == 0) {
    return refuse(
        "FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES and FELIX_BROKER_PUBLISH_INFLIGHT_BYTES must be "
        "greater than 0 (no publish could be admitted)");
  }
  if (c.pub_conn_inflight_bytes > c.pub_inflight_bytes) {
    return refuse("FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES (" +
                  std::to_string(c.pub_conn_inflight_bytes) +
                  ") exceeds FELIX_BROKER_PUBLISH_INFLIGHT_BYTES (" +
                  std::to_string(c.pub_inflight_bytes) + "): the per-stream cap could never apply");
  }
  if (c.publish_window > UINT32_MAX) {
    return refuse("FELIX_BROKER_PUBLISH_WINDOW must fit in 32 bits (auth_ok.publish_window)");
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    return refuse("FELIX_TLS_CERT and FELIX_TLS_KEY must be set together");
  }
  if (!c.tls_client_ca.empty() && c.tls_cert.empty()) {
    return refuse("FELIX_TLS_CLIENT_CA needs FELIX_TLS_CERT and FELIX_TLS_KEY");
  }
  int internal_tls =
      !c.internal_tls_cert.empty() + !c.internal_tls_key.empty() + !c.internal_tls_ca.empty();
  if (internal_tls != 0 && internal_tls != 3) {
    return refuse(
        "FELIX_INTERNAL_TLS_CERT, FELIX_INTERNAL_TLS_KEY and FELIX_INTERNAL_TLS_CA must be set "
        "all three or none");
  }
  if (!c.node_id.empty()) {
    if (c.record_publishers) {
      return refuse(
          "FELIX_RECORD_PUBLISHERS is for a standalone broker: replication does not ship "
          "publishers yet (the cluster's publisher_principal feature), so a follower could "
          "not hold the leader's records byte for byte");
    }
    if (!IsValidDnsName(c.node_id)) {
      return refuse("FELIX_NODE_ID '" + c.node_id +
                    "' is not a valid DNS name (letters, digits, hyphens and dots): peer "
                    "certificates carry the node id as their DNS name");
    }
    if (c.node_advertise_addr.empty()) {
      return refuse(
          "FELIX_NODE_ID is set but FELIX_NODE_ADVERTISE_ADDR is not: peers could "
          "not dial this broker");
    }
    if (auto a = ParseHostPort(c.node_advertise_addr); !a) {
      return refuse("FELIX_NODE_ADVERTISE_ADDR: " + a.error().message);
    }
    if (c.etcd_endpoints.empty()) {
      return refuse(
          "FELIX_NODE_ID is set but FELIX_ETCD_ENDPOINTS is not: a cluster member "
          "needs the etcd catalog");
    }
    if (!c.client_advertise_addr.empty()) {
      if (auto a = ParseHostPort(c.client_advertise_addr); !a || a->port == 0) {
        return refuse("FELIX_CLIENT_ADVERTISE_ADDR '" + c.client_advertise_addr +
                      "' is not a host:port clients can dial");
      }
    }
    if (auto a = ParseHostPort(c.node_advertise_addr); a && a->port == 0) {
      return refuse("FELIX_NODE_ADVERTISE_ADDR '" + c.node_advertise_addr +
                    "' has port 0: peers need the port they dial");
    }
    if (auto r = cluster::ValidateClusterName(c.cluster_name); !r) {
      return refuse("FELIX_CLUSTER_NAME: " + r.error().message);
    }
    if (!c.node_zone.empty() && !IsValidDnsName(c.node_zone)) {
      return refuse("FELIX_NODE_ZONE '" + c.node_zone +
                    "' is not a valid zone name (letters, digits, hyphens and dots)");
    }
    if (c.node_lease_ms < 1000 || c.node_lease_ms > 60000) {
      return refuse(
          "FELIX_NODE_LEASE_MS must be between 1000 and 60000 (etcd leases are whole "
          "seconds)");
    }
    if (c.shard_restore_after_ms > 86400000) {
      return refuse(
          "FELIX_SHARD_RESTORE_AFTER_MS must be at most 86400000 (one day; 0 turns restoring "
          "off)");
    }
    if (internal_tls == 0 && !c.internal_allow_unauthenticated) {
      return refuse(
          "FELIX_NODE_ID is set without peer mTLS (FELIX_INTERNAL_TLS_CERT/_KEY/_CA); "
          "set FELIX_INTERNAL_ALLOW_UNAUTHENTICATED=true to run unauthenticated");
    }
  }
  if (c.node_id.empty()) {
    if (!c.etcd_endpoints.empty()) {
      return refuse(
          "FELIX_ETCD_ENDPOINTS is set but FELIX_NODE_ID is not: a cluster member needs a "
          "node id (unset both for a single node)");
    }
    if (!c.client_advertise_addr.empty()) {
      return refuse("FELIX_CLIENT_ADVERTISE_ADDR is set but FELIX_NODE_ID is not (cluster only)");
    }
    if (!c.node_zone.empty()) {
      return refuse("FELIX_NODE_ZONE is set but FELIX_NODE_ID is not (cluster only)");
    }
  }
  if (c.replication_rebuild_max_concurrent > 64) {
    return refuse("FELIX_REPLICATION_REBUILD_MAX_CONCURRENT must be between 0 and 64");
  }
  if (c.publish_quorum_timeout_ms < 1 || c.publish_quorum_timeout_ms > 600000) {
    return refuse("FELIX_PUBLISH_QUORUM_TIMEOUT_MS must be between 1 and 600000");
  }
  if (c.data_dir.empty()) return refuse("FELIX_DATA_DIR must not be empty");
  return Ok();
}

std::string RenderBrokerConfigYaml(const BrokerConfig& config) {
  std::string out;
  for (const Setting& s : Settings()) {
    std::string value = s.print(config);
    if (s.secret) value = value.empty() ? "<unset>" : "<redacted>";
    if (s.yaml != nullptr) {
      out += std::string(s.yaml) + ": \"" + value + "\"  # " + s.env + "\n";
    } else {
      out += std::string("# ") + s.env + "=\"" + value + "\"  (environment only)\n";
    }
  }
  return out;
}

}  // namespace felix::server
