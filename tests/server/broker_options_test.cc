// Every setting docs/operations.md documents reaches the code it configures (issue 13 item 5).
//
// The documented settings are read from the docs themselves, so a setting added to the table
// without an entry here fails this test. Each entry sets the variable to a value other than
// its default, loads the configuration the way the daemon does, and checks the place the
// setting lands: the broker core's or the client service's options (server/broker_options.h),
// or — for settings the daemon hands to a component directly (listeners, TLS, cluster
// membership) — the configuration field that component is built from. The end-to-end tests
// that exercise those components through the real daemon are named in `consumer`.
#include "server/broker_options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace felix::server {
namespace {

struct Mapped {
  const BrokerConfig& config;
  const broker::BrokerCoreOptions& core;
  const broker::ClientServiceOptions& service;
};

struct SettingCheck {
  std::string value;     // differs from the default
  std::string consumer;  // what reads it
  std::function<void(const Mapped&)> expect;
  EnvironmentMap also = {};  // settings this one needs to load (cross-field rules)
};

using ms = std::chrono::milliseconds;

const EnvironmentMap kCluster = {{"FELIX_NODE_ID", "n1"},
                                 {"FELIX_NODE_ADVERTISE_ADDR", "127.0.0.1:7001"},
                                 {"FELIX_ETCD_ENDPOINTS", "http://127.0.0.1:2379"},
                                 {"FELIX_INTERNAL_ALLOW_UNAUTHENTICATED", "true"}};

EnvironmentMap With(EnvironmentMap base, const EnvironmentMap& more) {
  for (const auto& [k, v] : more) base[k] = v;
  return base;
}

std::map<std::string, SettingCheck> Checks() {
  std::map<std::string, SettingCheck> c;
  // Listeners and TLS: the daemon binds and loads exactly these (broker_process_test,
  // admin_api_test, tls_test, cluster_harness-based tests run the daemon with them).
  c["FELIX_QUIC_BIND"] = {"127.0.0.1:6000", "client listener", [](const Mapped& m) {
                            EXPECT_EQ(m.config.quic_bind, (HostPort{"127.0.0.1", 6000}));
                          }};
  c["FELIX_INTERNAL_BIND"] = {"127.0.0.1:6001", "internal listener", [](const Mapped& m) {
                                EXPECT_EQ(m.config.internal_bind, (HostPort{"127.0.0.1", 6001}));
                              }};
  c["FELIX_QUIC_LOOPS"] = {"2", "listeners (one loop thread or two; cluster forward tests)",
                           [](const Mapped& m) { EXPECT_EQ(m.config.quic_loops, 2u); }};
  c["FELIX_FORWARD_POLL_US"] = {"200", "internal listener (poll while peers' answers are due)",
                                [](const Mapped& m) { EXPECT_EQ(m.config.forward_poll_us, 200u); }};
  c["FELIX_FOLLOWER_INLINE_APPLY_US"] = {
      "0", "replication host (a follower's loop applies small Quorum batches itself)",
      [](const Mapped& m) { EXPECT_EQ(m.config.follower_inline_apply_us, 0u); }};
  c["FELIX_BROKER_METRICS_BIND"] = {
      "127.0.0.1:6002", "HTTP listener", [](const Mapped& m) {
        EXPECT_EQ(m.config.metrics_bind, (HostPort{"127.0.0.1", 6002}));
      }};
  c["FELIX_TLS_CERT"] = {"/c.pem",
                         "client TLS",
                         [](const Mapped& m) { EXPECT_EQ(m.config.tls_cert, "/c.pem"); },
                         {{"FELIX_TLS_KEY", "/k.pem"}}};
  c["FELIX_TLS_KEY"] = {"/k.pem",
                        "client TLS",
                        [](const Mapped& m) { EXPECT_EQ(m.config.tls_key, "/k.pem"); },
                        {{"FELIX_TLS_CERT", "/c.pem"}}};
  c["FELIX_TLS_CLIENT_CA"] = {"/ca.pem",
                              "client TLS (tls_test)",
                              [](const Mapped& m) { EXPECT_EQ(m.config.tls_client_ca, "/ca.pem"); },
                              {{"FELIX_TLS_CERT", "/c.pem"}, {"FELIX_TLS_KEY", "/k.pem"}}};
  const EnvironmentMap internal_tls = {{"FELIX_INTERNAL_TLS_CERT", "/ic.pem"},
                                       {"FELIX_INTERNAL_TLS_KEY", "/ik.pem"},
                                       {"FELIX_INTERNAL_TLS_CA", "/ica.pem"}};
  c["FELIX_INTERNAL_TLS_CERT"] = {
      "/ic.pem", "peer mTLS",
      [](const Mapped& m) { EXPECT_EQ(m.config.internal_tls_cert, "/ic.pem"); }, internal_tls};
  c["FELIX_INTERNAL_TLS_KEY"] = {
      "/ik.pem", "peer mTLS",
      [](const Mapped& m) { EXPECT_EQ(m.config.internal_tls_key, "/ik.pem"); }, internal_tls};
  c["FELIX_INTERNAL_TLS_CA"] = {
      "/ica.pem", "peer mTLS",
      [](const Mapped& m) { EXPECT_EQ(m.config.internal_tls_ca, "/ica.pem"); }, internal_tls};
  c["FELIX_INTERNAL_ALLOW_UNAUTHENTICATED"] = {
      "true", "cluster start check (BrokerConfig.ClusterMemberWithWaiverLoads)",
      [](const Mapped& m) { EXPECT_TRUE(m.config.internal_allow_unauthenticated); }, kCluster};
  // Cluster membership: ClusterServices is built from these fields (cluster e2e tests).
  c["FELIX_NODE_ID"] = {"n1", "cluster membership",
                        [](const Mapped& m) {
                          EXPECT_EQ(m.config.node_id, "n1");
                          EXPECT_TRUE(m.service.cluster);  // advertises TOPOLOGY | REDIRECT
                        },
                        kCluster};
  c["FELIX_NODE_ADVERTISE_ADDR"] = {
      "127.0.0.1:7001", "nodes/<id> internal_addr",
      [](const Mapped& m) { EXPECT_EQ(m.config.node_advertise_addr, "127.0.0.1:7001"); }, kCluster};
  c["FELIX_ETCD_ENDPOINTS"] = {"http://127.0.0.1:2379", "etcd client",
                               [](const Mapped& m) {
                                 EXPECT_EQ(m.config.etcd_endpoints,
                                           std::vector<std::string>{"http://127.0.0.1:2379"});
                               },
                               kCluster};
  c["FELIX_CLUSTER_NAME"] = {"blue", "etcd key prefix",
                             [](const Mapped& m) { EXPECT_EQ(m.config.cluster_name, "blue"); },
                             kCluster};
  c["FELIX_CLIENT_ADVERTISE_ADDR"] = {
      "127.0.0.1:7000", "nodes/<id> client_addr",
      [](const Mapped& m) { EXPECT_EQ(m.config.client_advertise_addr, "127.0.0.1:7000"); },
      kCluster};
  c["FELIX_NODE_ZONE"] = {"z1", "placement zones",
                          [](const Mapped& m) { EXPECT_EQ(m.config.node_zone, "z1"); }, kCluster};
  c["FELIX_NODE_LEASE_MS"] = {"5000", "node lease",
                              [](const Mapped& m) { EXPECT_EQ(m.config.node_lease_ms, 5000u); },
                              kCluster};
  c["FELIX_SHARD_RESTORE_AFTER_MS"] = {
      "1500", "controller restore grace",
      [](const Mapped& m) { EXPECT_EQ(m.config.shard_restore_after_ms, 1500u); }, kCluster};
  // Replication (ClusterServices builds the replication host from these fields).
  c["FELIX_REPLICATION_REBUILD_MAX_CONCURRENT"] = {
      "3", "replication host",
      [](const Mapped& m) { EXPECT_EQ(m.config.replication_rebuild_max_concurrent, 3u); },
      kCluster};
  c["FELIX_REPLICATION_REBUILD_BYTES_PER_SEC"] = {
      "1000000", "replication host: rebuild pacing (ShardReplicatorTest.RebuildBatchesArePaced)",
      [](const Mapped& m) { EXPECT_EQ(m.config.replication_rebuild_bytes_per_sec, 1000000u); },
      kCluster};
  c["FELIX_PUBLISH_QUORUM_TIMEOUT_MS"] = {
      "700", "Quorum commit gate (quorum_e2e_test)",
      [](const Mapped& m) { EXPECT_EQ(m.core.commit_gate.timeout, ms(700)); }, kCluster};
  // Storage.
  c["FELIX_DATA_DIR"] = {"/srv/felix", "data directory", [](const Mapped& m) {
                           EXPECT_EQ(m.config.data_dir, "/srv/felix");
                           EXPECT_EQ(m.core.storage_dir, "/srv/felix/shards");
                         }};
  c["FELIX_DURABLE_STORAGE_DIR"] = {"/srv/logs", "broker core", [](const Mapped& m) {
                                      EXPECT_EQ(m.core.storage_dir, "/srv/logs");
                                    }};
  c["FELIX_DURABLE_FSYNC_MODE"] = {"on_commit", "every log", [](const Mapped& m) {
                                     EXPECT_EQ(m.core.log_defaults.fsync_mode,
                                               storage::FsyncMode::kOnCommit);
                                   }};
  c["FELIX_DURABLE_FSYNC_INTERVAL_MS"] = {"40", "every log", [](const Mapped& m) {
                                            EXPECT_EQ(m.core.log_defaults.fsync_interval, ms(40));
                                          }};
  c["FELIX_DURABLE_SEGMENT_BYTES"] = {"1048576", "every log", [](const Mapped& m) {
                                        EXPECT_EQ(m.core.log_defaults.segment_bytes, 1048576u);
                                      }};
  c["FELIX_DURABLE_PREALLOCATE_BYTES"] = {
      "65536", "every on_commit log",
      [](const Mapped& m) { EXPECT_EQ(m.core.log_defaults.preallocate_bytes, 65536u); }};
  c["FELIX_DURABLE_RETENTION_BYTES"] = {"2097152", "every stream log", [](const Mapped& m) {
                                          EXPECT_EQ(m.core.log_defaults.retention_bytes, 2097152u);
                                        }};
  c["FELIX_DURABLE_RETENTION_SECONDS"] = {"3600", "every stream log", [](const Mapped& m) {
                                            EXPECT_EQ(m.core.log_defaults.retention_age,
                                                      std::chrono::seconds(3600));
                                          }};
  c["FELIX_DURABLE_RETENTION_INTERVAL_SECONDS"] = {
      "7", "retention timer",
      [](const Mapped& m) { EXPECT_EQ(m.core.retention_interval, std::chrono::seconds(7)); }};
  c["FELIX_DURABLE_INDEX_SPACING_BYTES"] = {
      "8192", "every log",
      [](const Mapped& m) { EXPECT_EQ(m.core.log_defaults.index_spacing_bytes, 8192u); }};
  // Client service.
  c["FELIX_MAX_FRAME_BYTES"] = {"1048576", "frame reader", [](const Mapped& m) {
                                  EXPECT_EQ(m.service.max_frame_bytes, 1048576u);
                                  EXPECT_LT(m.core.groups.max_bytes_per_poll, 1048576u);
                                }};
  c["FELIX_PREAUTH_MAX_FRAME_BYTES"] = {"4096", "frame reader before auth", [](const Mapped& m) {
                                          EXPECT_EQ(m.service.preauth_max_frame_bytes, 4096u);
                                        }};
  c["FELIX_AUTH_TIMEOUT_MS"] = {"1500", "client sessions", [](const Mapped& m) {
                                  EXPECT_EQ(m.service.auth_timeout, ms(1500));
                                }};
  c["FELIX_MAX_CLIENT_CONNECTIONS"] = {
      "17", "admission", [](const Mapped& m) { EXPECT_EQ(m.service.max_connections, 17u); }};
  c["FELIX_MAX_CONNECTIONS_PER_IP"] = {
      "3", "admission", [](const Mapped& m) { EXPECT_EQ(m.service.max_connections_per_ip, 3u); }};
  c["FELIX_ACK_ON_COMMIT"] = {"true", "publish acks",
                              [](const Mapped& m) { EXPECT_TRUE(m.service.ack_on_commit); }};
  c["FELIX_BROKER_PUBLISH_WINDOW"] = {"9", "auth_ok.publish_window", [](const Mapped& m) {
                                        EXPECT_EQ(m.service.publish_window, 9u);
                                      }};
  c["FELIX_PUBLISH_QUEUE_WAIT_MS"] = {"10", "publish admission", [](const Mapped& m) {
                                        EXPECT_EQ(m.service.publish_room_wait, ms(10));
                                      }};
  c["FELIX_PUB_INGRESS_WAIT"] = {"true", "publish admission", [](const Mapped& m) {
                                   EXPECT_TRUE(m.service.publish_ingress_wait);
                                 }};
  c["FELIX_BROKER_PUBLISH_INFLIGHT_BYTES"] = {
      "33554432", "publish admission",
      [](const Mapped& m) { EXPECT_EQ(m.service.max_inflight_bytes_total, 32u << 20); }};
  c["FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES"] = {
      "1048576", "publish admission",
      [](const Mapped& m) { EXPECT_EQ(m.service.max_inflight_bytes_per_stream, 1u << 20); }};
  c["FELIX_RECORD_PUBLISHERS"] = {"true", "publish path (durable streams)", [](const Mapped& m) {
                                    EXPECT_TRUE(m.service.record_publishers);
                                  }};
  c["FELIX_MAX_SUBSCRIPTIONS_PER_CONN"] = {"5", "client sessions", [](const Mapped& m) {
                                             EXPECT_EQ(m.service.max_subscriptions_per_conn, 5u);
                                           }};
  // Subscribers and groups.
  c["FELIX_EVENT_BATCH_MAX_EVENTS"] = {"16", "stream shards", [](const Mapped& m) {
                                         EXPECT_EQ(m.core.shard.event_batch_max_records, 16u);
                                       }};
  c["FELIX_EVENT_BATCH_MAX_BYTES"] = {"4096", "stream shards", [](const Mapped& m) {
                                        EXPECT_EQ(m.core.shard.event_batch_max_bytes, 4096u);
                                      }};
  c["FELIX_SUBSCRIBER_QUEUE_CAPACITY"] = {"64", "stream shards", [](const Mapped& m) {
                                            EXPECT_EQ(m.core.shard.default_queue_capacity, 64u);
                                          }};
  c["FELIX_SUBSCRIBER_QUEUE_CAPACITY_MAX"] = {"128", "stream shards", [](const Mapped& m) {
                                                EXPECT_EQ(m.core.shard.max_queue_capacity, 128u);
                                              }};
  c["FELIX_GROUP_VISIBILITY_TIMEOUT_MS"] = {"2500", "consumer groups", [](const Mapped& m) {
                                              EXPECT_EQ(m.core.groups.visibility_timeout, ms(2500));
                                            }};
  c["FELIX_GROUP_MAX_ATTEMPTS"] = {
      "3", "consumer groups", [](const Mapped& m) { EXPECT_EQ(m.core.groups.max_attempts, 3u); }};
  c["FELIX_GROUP_MAX_WAIT_MS"] = {"700", "consumer groups", [](const Mapped& m) {
                                    EXPECT_EQ(m.core.groups.max_wait, ms(700));
                                  }};
  c["FELIX_GROUP_MAX_IN_FLIGHT"] = {"11", "consumer groups", [](const Mapped& m) {
                                      EXPECT_EQ(m.core.groups.max_in_flight, 11u);
                                    }};
  // Daemon.
  c["FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS"] = {"900", "SIGTERM drain", [](const Mapped& m) {
                                            EXPECT_EQ(m.config.shutdown_drain_timeout_ms, 900u);
                                          }};
  c["FELIX_SHUTDOWN_HANDOFF_TIMEOUT_MS"] = {"700", "SIGTERM handoff", [](const Mapped& m) {
                                              EXPECT_EQ(m.config.shutdown_handoff_timeout_ms, 700u);
                                            }};
  c["FELIX_LOG"] = {"debug", "logging",
                    [](const Mapped& m) { EXPECT_EQ(m.config.log_level, "debug"); }};
  c["FELIX_ADMIN_TOKEN"] = {"s3cret-token-value", "admin API", [](const Mapped& m) {
                              EXPECT_EQ(m.config.admin_token, "s3cret-token-value");
                            }};
  // Accepted for the reference's files but not used (they warn when set:
  // BrokerConfig.SettingsWithNoEffectYetSaySoWhenSet).
  c["FELIX_ACK_WAIT_TIMEOUT_MS"] = {"10", "not used (warns)", [](const Mapped& m) {
                                      EXPECT_EQ(m.config.ack_wait_timeout_ms, 10u);
                                    }};
  c["FELIX_EVENT_BATCH_MAX_DELAY_US"] = {"10", "not used (warns)", [](const Mapped& m) {
                                           EXPECT_EQ(m.config.event_batch_max_delay_us, 10u);
                                         }};
  c["FELIX_SUB_QUEUE_POLICY"] = {"block", "not used (warns)", [](const Mapped& m) {
                                   EXPECT_EQ(m.config.subscriber_queue_policy,
                                             SubscriberQueuePolicy::kBlock);
                                 }};
  return c;
}

// The settings named in the first column of docs/operations.md's tables; "`FELIX_X_CERT`,
// `_KEY`" names FELIX_X_KEY too.
std::set<std::string> DocumentedSettings() {
  std::ifstream in(std::string(FELIX_DOCS_DIR) + "/operations.md");
  EXPECT_TRUE(in.good()) << "cannot read docs/operations.md";
  std::set<std::string> names;
  std::string line;
  const std::regex cell("`(FELIX_[A-Z0-9_]+|_[A-Z0-9_]+)`");
  while (std::getline(in, line)) {
    if (line.rfind("| `FELIX_", 0) != 0) continue;
    std::string first = line.substr(1, line.find('|', 1) - 1);
    std::string prefix;
    for (std::sregex_iterator it(first.begin(), first.end(), cell), end; it != end; ++it) {
      std::string name = (*it)[1];
      if (name[0] == '_') {
        name = prefix + name;
      } else {
        prefix = name.substr(0, name.rfind('_'));
      }
      names.insert(name);
    }
  }
  return names;
}

TEST(BrokerOptions, EveryDocumentedSettingReachesWhatItConfigures) {
  const auto documented = DocumentedSettings();
  ASSERT_GT(documented.size(), 40u) << "the settings table was not found";
  const auto checks = Checks();
  for (const std::string& name : documented) {
    SCOPED_TRACE(name);
    auto check = checks.find(name);
    ASSERT_NE(check, checks.end()) << name << " is documented but nothing here shows it is used";
    EnvironmentMap env = With(check->second.also, {{name, check->second.value}});
    auto loaded = LoadBrokerConfig(env, "");
    ASSERT_TRUE(loaded) << loaded.error().message;
    const auto core = CoreOptionsFromConfig(loaded->config);
    const auto service = ServiceOptionsFromConfig(loaded->config);
    check->second.expect(Mapped{loaded->config, core, service});
  }
  for (const auto& [name, check] : checks) {
    EXPECT_TRUE(documented.count(name)) << name << " is checked here but not documented";
  }
}

TEST(BrokerOptions, DefaultsMapToTheComponentDefaults) {
  auto loaded = LoadBrokerConfig({}, "");
  ASSERT_TRUE(loaded) << loaded.error().message;
  const auto core = CoreOptionsFromConfig(loaded->config);
  const auto service = ServiceOptionsFromConfig(loaded->config);
  const broker::StreamShardOptions shard_defaults;
  EXPECT_EQ(core.shard.default_queue_capacity, shard_defaults.default_queue_capacity);
  EXPECT_EQ(core.shard.max_queue_capacity, shard_defaults.max_queue_capacity);
  EXPECT_EQ(core.shard.event_batch_max_records, shard_defaults.event_batch_max_records);
  EXPECT_EQ(core.storage_dir, "./felix-data/shards");
  EXPECT_FALSE(service.cluster);
  EXPECT_FALSE(service.ack_on_commit);
}

}  // namespace
}  // namespace felix::server
