#include "server/broker_config.h"

#include <fstream>

#include <algorithm>

#include <gtest/gtest.h>

#include <map>

#include "support/child_process.h"

namespace felix::server {
namespace {

// Loads with only the given environment and no YAML file.
Result<LoadedConfig> Load(const EnvironmentMap& env, const std::string& yaml = {}) {
  return LoadBrokerConfig(env, yaml);
}

std::string WriteYaml(const std::string& text) {
  std::string dir = felix::testing::MakeTempDir("felix-config");
  std::string path = dir + "/config.yml";
  std::ofstream(path) << text;
  return path;
}

// The load fails and its message names `setting`.
void ExpectRefusedNaming(const Result<LoadedConfig>& r, const std::string& setting) {
  ASSERT_FALSE(r) << "expected a refusal naming " << setting;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find(setting), std::string::npos) << r.error().message;
}

TEST(BrokerConfig, DefaultsMatchTheEmbeddedSingleNode) {
  auto r = Load({});
  ASSERT_TRUE(r) << r.error().message;
  const BrokerConfig& c = r->config;
  EXPECT_EQ(c.quic_bind, (HostPort{"0.0.0.0", 5000}));
  EXPECT_EQ(c.internal_bind, (HostPort{"0.0.0.0", 5001}));
  EXPECT_EQ(c.metrics_bind, (HostPort{"0.0.0.0", 8080}));
  EXPECT_EQ(c.data_dir, "./felix-data");
  EXPECT_EQ(c.EffectiveStorageDir(), "./felix-data/shards");
  EXPECT_EQ(c.durable_fsync_mode, FsyncMode::kPeriodic);
  EXPECT_EQ(c.max_frame_bytes, 16u << 20);
  EXPECT_TRUE(c.node_id.empty());
  EXPECT_TRUE(r->warnings.empty());
}

TEST(BrokerConfig, EnvironmentOverridesDefaults) {
  auto r = Load({{"FELIX_QUIC_BIND", "127.0.0.1:7000"},
                 {"FELIX_DURABLE_FSYNC_MODE", "on_commit"},
                 {"FELIX_ACK_ON_COMMIT", "YES"},
                 {"FELIX_SUB_QUEUE_POLICY", "block"},
                 {"PATH", "/bin"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->config.quic_bind, (HostPort{"127.0.0.1", 7000}));
  EXPECT_EQ(r->config.durable_fsync_mode, FsyncMode::kOnCommit);
  EXPECT_TRUE(r->config.ack_on_commit);
  EXPECT_EQ(r->config.subscriber_queue_policy, SubscriberQueuePolicy::kBlock);
}

TEST(BrokerConfig, YamlOverridesEnvironment) {
  std::string path = WriteYaml("quic_bind: 127.0.0.1:7100\nevent_batch_max_events: 8\n");
  auto r = Load({{"FELIX_QUIC_BIND", "127.0.0.1:7000"}}, path);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->config.quic_bind.port, 7100);
  EXPECT_EQ(r->config.event_batch_max_events, 8u);
}

TEST(BrokerConfig, FsyncIntervalAloneImpliesPeriodic) {
  auto r = Load({{"FELIX_DURABLE_FSYNC_INTERVAL_MS", "50"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->config.durable_fsync_mode, FsyncMode::kPeriodic);
  EXPECT_EQ(r->config.durable_fsync_interval_ms, 50u);
}

TEST(BrokerConfig, BadValuesNameTheVariable) {
  ExpectRefusedNaming(Load({{"FELIX_QUIC_BIND", "nonsense"}}), "FELIX_QUIC_BIND");
  ExpectRefusedNaming(Load({{"FELIX_MAX_FRAME_BYTES", "-1"}}), "FELIX_MAX_FRAME_BYTES");
  ExpectRefusedNaming(Load({{"FELIX_MAX_FRAME_BYTES", "12abc"}}), "FELIX_MAX_FRAME_BYTES");
  ExpectRefusedNaming(Load({{"FELIX_ACK_ON_COMMIT", "maybe"}}), "FELIX_ACK_ON_COMMIT");
  ExpectRefusedNaming(Load({{"FELIX_DURABLE_FSYNC_MODE", "always"}}), "FELIX_DURABLE_FSYNC_MODE");
  ExpectRefusedNaming(Load({{"FELIX_SUB_QUEUE_POLICY", "drop"}}), "FELIX_SUB_QUEUE_POLICY");
  ExpectRefusedNaming(Load({{"FELIX_ETCD_ENDPOINTS", "a:1,b"}}), "FELIX_ETCD_ENDPOINTS");
  ExpectRefusedNaming(Load({{"FELIX_QUIC_LOOPS", "0"}}), "FELIX_QUIC_LOOPS");
  ExpectRefusedNaming(Load({{"FELIX_QUIC_LOOPS", "3"}}), "FELIX_QUIC_LOOPS");
  ExpectRefusedNaming(Load({{"FELIX_FORWARD_POLL_US", "10001"}}), "FELIX_FORWARD_POLL_US");
  ExpectRefusedNaming(Load({{"FELIX_FOLLOWER_INLINE_APPLY_US", "100001"}}),
                      "FELIX_FOLLOWER_INLINE_APPLY_US");
}

TEST(BrokerConfig, ImpossibleCombinationsAreRefused) {
  ExpectRefusedNaming(
      Load({{"FELIX_QUIC_BIND", "0.0.0.0:6000"}, {"FELIX_INTERNAL_BIND", "127.0.0.1:6000"}}),
      "FELIX_INTERNAL_BIND");
  ExpectRefusedNaming(Load({{"FELIX_EVENT_BATCH_MAX_BYTES", "2000"},
                            {"FELIX_MAX_FRAME_BYTES", "1000"},
                            {"FELIX_PREAUTH_MAX_FRAME_BYTES", "1000"}}),
                      "FELIX_EVENT_BATCH_MAX_BYTES");
  ExpectRefusedNaming(Load({{"FELIX_PREAUTH_MAX_FRAME_BYTES", "99999999"}}),
                      "FELIX_PREAUTH_MAX_FRAME_BYTES");
  ExpectRefusedNaming(Load({{"FELIX_DURABLE_FSYNC_INTERVAL_MS", "0"}}),
                      "FELIX_DURABLE_FSYNC_INTERVAL_MS");
  ExpectRefusedNaming(Load({{"FELIX_DURABLE_RETENTION_INTERVAL_SECONDS", "0"}}),
                      "FELIX_DURABLE_RETENTION_INTERVAL_SECONDS");
  ExpectRefusedNaming(Load({{"FELIX_TLS_CERT", "/c.pem"}}), "FELIX_TLS_KEY");
  ExpectRefusedNaming(
      Load({{"FELIX_INTERNAL_TLS_CERT", "/c.pem"}, {"FELIX_INTERNAL_TLS_KEY", "/k.pem"}}),
      "FELIX_INTERNAL_TLS_CA");
  ExpectRefusedNaming(Load({{"FELIX_BROKER_PUBLISH_WINDOW", "4294967296"}}),
                      "FELIX_BROKER_PUBLISH_WINDOW");
  ExpectRefusedNaming(Load({{"FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES", "0"}}),
                      "FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES");
  ExpectRefusedNaming(Load({{"FELIX_BROKER_PUBLISH_INFLIGHT_BYTES", "1048576"}}),
                      "exceeds FELIX_BROKER_PUBLISH_INFLIGHT_BYTES");
  ExpectRefusedNaming(Load({{"FELIX_NODE_ID", "bad_name"}}), "FELIX_NODE_ID");
  ExpectRefusedNaming(Load({{"FELIX_NODE_ID", "broker-1"}}), "FELIX_NODE_ADVERTISE_ADDR");
  ExpectRefusedNaming(Load({{"FELIX_NODE_ID", "broker-1"},
                            {"FELIX_NODE_ADVERTISE_ADDR", "127.0.0.1:5001"},
                            {"FELIX_ETCD_ENDPOINTS", "127.0.0.1:2379"}}),
                      "FELIX_INTERNAL_ALLOW_UNAUTHENTICATED");
}

// Issue 12 item 12: limits a frame header cannot carry, and a connection limit of 0.
TEST(BrokerConfig, FrameLimitAboveTheHeaderAndZeroConnectionsAreRefused) {
  ExpectRefusedNaming(Load({{"FELIX_MAX_FRAME_BYTES", "4294967296"}}), "FELIX_MAX_FRAME_BYTES");
  auto at_limit = Load({{"FELIX_MAX_FRAME_BYTES", "4294967295"}});
  ASSERT_TRUE(at_limit) << at_limit.error().message;
  EXPECT_EQ(at_limit->config.max_frame_bytes, 4294967295u);
  ExpectRefusedNaming(Load({{"FELIX_MAX_CLIENT_CONNECTIONS", "0"}}),
                      "FELIX_MAX_CLIENT_CONNECTIONS");
  auto one = Load({{"FELIX_MAX_CLIENT_CONNECTIONS", "1"}});
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->config.max_client_connections, 1u);
}

// Issue 12 items 7 and 10: the drain bound and the per-address connection limit.
TEST(BrokerConfig, DrainTimeoutAndPerIpLimitLoadWithTheirDefaults) {
  auto defaults = Load({});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->config.shutdown_drain_timeout_ms, 25000u);
  EXPECT_EQ(defaults->config.max_connections_per_ip, 512u);
  auto set =
      Load({{"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS", "1500"}, {"FELIX_MAX_CONNECTIONS_PER_IP", "0"}});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->config.shutdown_drain_timeout_ms, 1500u);
  EXPECT_EQ(set->config.max_connections_per_ip, 0u);  // 0 = unlimited
  EXPECT_TRUE(set->warnings.empty());
}

TEST(BrokerConfig, ClusterMemberWithWaiverLoads) {
  auto r = Load({{"FELIX_NODE_ID", "broker-1"},
                 {"FELIX_NODE_ADVERTISE_ADDR", "127.0.0.1:5001"},
                 {"FELIX_ETCD_ENDPOINTS", "127.0.0.1:2379,127.0.0.1:2380"},
                 {"FELIX_INTERNAL_ALLOW_UNAUTHENTICATED", "true"}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->config.etcd_endpoints.size(), 2u);
}

// Issue 14: every partial or contradictory cluster combination is refused naming the setting.
TEST(BrokerConfig, ClusterSettingsAreCheckedTogether) {
  const std::map<std::string, std::string> member = {
      {"FELIX_NODE_ID", "n1"},
      {"FELIX_NODE_ADVERTISE_ADDR", "127.0.0.1:5001"},
      {"FELIX_ETCD_ENDPOINTS", "http://127.0.0.1:2379"},
      {"FELIX_INTERNAL_ALLOW_UNAUTHENTICATED", "true"}};
  auto with = [&member](std::map<std::string, std::string> extra) {
    auto env = member;
    for (auto& [k, v] : extra) env[k] = v;
    return Load(env);
  };
  auto ok = with({{"FELIX_NODE_ZONE", "zone-a"},
                  {"FELIX_CLIENT_ADVERTISE_ADDR", "10.0.0.1:5000"},
                  {"FELIX_CLUSTER_NAME", "prod"},
                  {"FELIX_NODE_LEASE_MS", "3000"}});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->config.cluster_mode());
  EXPECT_EQ(ok->config.cluster_name, "prod");
  EXPECT_EQ(ok->config.node_lease_ms, 3000u);
  auto defaults = with({});
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->config.cluster_name, "felix");
  EXPECT_EQ(defaults->config.node_lease_ms, 2000u);
  EXPECT_FALSE(Load({})->config.cluster_mode());

  ExpectRefusedNaming(with({{"FELIX_ETCD_ENDPOINTS", "https://127.0.0.1:2379"}}),
                      "FELIX_ETCD_ENDPOINTS");
  ExpectRefusedNaming(with({{"FELIX_CLUSTER_NAME", "Bad_Name"}}), "FELIX_CLUSTER_NAME");
  ExpectRefusedNaming(with({{"FELIX_NODE_ZONE", "zone a"}}), "FELIX_NODE_ZONE");
  ExpectRefusedNaming(with({{"FELIX_NODE_LEASE_MS", "500"}}), "FELIX_NODE_LEASE_MS");
  ExpectRefusedNaming(with({{"FELIX_CLIENT_ADVERTISE_ADDR", "nohost"}}),
                      "FELIX_CLIENT_ADVERTISE_ADDR");
  ExpectRefusedNaming(with({{"FELIX_NODE_ADVERTISE_ADDR", "127.0.0.1:0"}}),
                      "FELIX_NODE_ADVERTISE_ADDR");
  ExpectRefusedNaming(Load({{"FELIX_ETCD_ENDPOINTS", "http://127.0.0.1:2379"}}), "FELIX_NODE_ID");
  ExpectRefusedNaming(Load({{"FELIX_NODE_ZONE", "a"}}), "FELIX_NODE_ZONE");
  ExpectRefusedNaming(Load({{"FELIX_CLIENT_ADVERTISE_ADDR", "127.0.0.1:5000"}}),
                      "FELIX_CLIENT_ADVERTISE_ADDR");
}

TEST(BrokerConfig, ReplicationSettingsDefaultAndValidate) {
  auto defaults = Load({});
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->config.replication_rebuild_max_concurrent, 1u);
  EXPECT_EQ(defaults->config.replication_rebuild_bytes_per_sec, 0u);
  EXPECT_EQ(defaults->config.publish_quorum_timeout_ms, 5000u);
  EXPECT_TRUE(defaults->warnings.empty());
  auto set = Load({{"FELIX_REPLICATION_REBUILD_MAX_CONCURRENT", "0"},
                   {"FELIX_REPLICATION_REBUILD_BYTES_PER_SEC", "1048576"},
                   {"FELIX_PUBLISH_QUORUM_TIMEOUT_MS", "250"}});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->config.replication_rebuild_max_concurrent, 0u);
  EXPECT_EQ(set->config.replication_rebuild_bytes_per_sec, 1048576u);
  EXPECT_EQ(set->config.publish_quorum_timeout_ms, 250u);
  // Both are live (rebuild pacing in the replicator, the quorum timeout in the commit gate):
  // neither warns.
  auto warned = [&](const char* name) {
    return std::any_of(set->warnings.begin(), set->warnings.end(), [&](const std::string& w) {
      return w.find(name) != std::string::npos && w.find("no effect") != std::string::npos;
    });
  };
  EXPECT_FALSE(warned("FELIX_REPLICATION_REBUILD_BYTES_PER_SEC"));
  EXPECT_FALSE(warned("FELIX_PUBLISH_QUORUM_TIMEOUT_MS"));
  ExpectRefusedNaming(Load({{"FELIX_REPLICATION_REBUILD_MAX_CONCURRENT", "65"}}),
                      "FELIX_REPLICATION_REBUILD_MAX_CONCURRENT");
  ExpectRefusedNaming(Load({{"FELIX_REPLICATION_REBUILD_MAX_CONCURRENT", "x"}}),
                      "FELIX_REPLICATION_REBUILD_MAX_CONCURRENT");
  ExpectRefusedNaming(Load({{"FELIX_PUBLISH_QUORUM_TIMEOUT_MS", "0"}}),
                      "FELIX_PUBLISH_QUORUM_TIMEOUT_MS");
  ExpectRefusedNaming(Load({{"FELIX_REPLICATION_REBUILD_BYTES_PER_SEC", "-1"}}),
                      "FELIX_REPLICATION_REBUILD_BYTES_PER_SEC");
}

TEST(BrokerConfig, SettingsWithNoEffectYetSaySoWhenSet) {
  auto quiet = Load({{"FELIX_ACK_WAIT_TIMEOUT_MS", "2000"}});  // the default: nothing to say
  ASSERT_TRUE(quiet);
  EXPECT_TRUE(quiet->warnings.empty());
  auto r = Load({{"FELIX_ACK_WAIT_TIMEOUT_MS", "10"},
                 {"FELIX_EVENT_BATCH_MAX_DELAY_US", "10"},
                 {"FELIX_SUB_QUEUE_POLICY", "block"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->warnings.size(), 3u);
  for (const char* name : {"FELIX_ACK_WAIT_TIMEOUT_MS", "FELIX_EVENT_BATCH_MAX_DELAY_US"}) {
    bool named = std::any_of(r->warnings.begin(), r->warnings.end(), [&](const std::string& w) {
      return w.find(name) != std::string::npos && w.find("no effect") != std::string::npos;
    });
    EXPECT_TRUE(named) << name;
  }
}

TEST(BrokerConfig, UnknownEnvironmentVariableWarnsWithSuggestion) {
  auto r = Load({{"FELIX_QUIC_BND", "0.0.0.0:5000"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("did you mean FELIX_QUIC_BIND"), std::string::npos);
}

TEST(BrokerConfig, YamlErrorsNameTheKey) {
  ExpectRefusedNaming(Load({}, WriteYaml("quic_bnd: 1.2.3.4:5\n")), "unknown key 'quic_bnd'");
  ExpectRefusedNaming(Load({}, WriteYaml("max_frame_bytes: lots\n")), "max_frame_bytes");
  ExpectRefusedNaming(Load({}, WriteYaml("quic_bind: [1, 2]\n")), "quic_bind");
  ExpectRefusedNaming(Load({}, WriteYaml("- a\n- b\n")), "mapping");
  ExpectRefusedNaming(Load({}, WriteYaml("quic_bind: \"unclosed\n")), "config file");
  // Environment-only settings are not YAML keys.
  ExpectRefusedNaming(Load({}, WriteYaml("internal_bind: 0.0.0.0:5001\n")), "internal_bind");
}

TEST(BrokerConfig, ExplicitMissingFileIsAnError) {
  ExpectRefusedNaming(Load({}, "/nonexistent/felix.yml"), "/nonexistent/felix.yml");
  ExpectRefusedNaming(Load({{"FELIX_BROKER_CONFIG", "/nonexistent/b.yml"}}), "/nonexistent/b.yml");
}

TEST(BrokerConfig, PrintConfigRedactsSecrets) {
  auto r = Load({{"FELIX_ADMIN_TOKEN", "s3cret"}});
  ASSERT_TRUE(r);
  std::string yaml = RenderBrokerConfigYaml(r->config);
  EXPECT_EQ(yaml.find("s3cret"), std::string::npos);
  EXPECT_NE(yaml.find("<redacted>"), std::string::npos);
  EXPECT_NE(yaml.find("quic_bind: \"0.0.0.0:5000\""), std::string::npos);
}

}  // namespace
}  // namespace felix::server
