// The replication host's pure pieces: step 1 of the follower's checks (the role from the
// routing view), which shard and log a replication frame addresses, the store custody's
// handover rule, and the shard store layout BrokerCore and the host share.
#include <gtest/gtest.h>

#include <string>

#include "broker/shard_store_layout.h"
#include "broker/store_custody.h"
#include "cluster/cluster_view.h"
#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "cluster/replica_role.h"
#include "cluster/replication_host.h"
#include "common/metrics.h"
#include "storage/shard_store.h"
#include "support/child_process.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;

Assignment At(uint64_t generation, std::string leader, std::vector<std::string> replicas) {
  Assignment a;
  a.generation = generation;
  a.leader = std::move(leader);
  a.replicas = std::move(replicas);
  return a;
}

TEST(ReplicationRole, FromTheViewsAssignmentAgainstTheMessagesGeneration) {
  auto a = At(5, "n1", {"n1", "n2", "n3"});
  EXPECT_EQ(FollowerRoleFor(a, 5, "n2"), FollowerRole::kFollower);
  EXPECT_EQ(FollowerRoleFor(a, 4, "n2"), FollowerRole::kViewNewer);   // FencedEpoch
  EXPECT_EQ(FollowerRoleFor(a, 6, "n2"), FollowerRole::kViewOlder);   // StaleRoute
  EXPECT_EQ(FollowerRoleFor(a, 5, "n1"), FollowerRole::kNotReplica);  // the leader itself
  EXPECT_EQ(FollowerRoleFor(a, 5, "n4"), FollowerRole::kNotReplica);  // not in the set
  EXPECT_EQ(FollowerRoleFor(std::nullopt, 5, "n2"), FollowerRole::kNotReplica);
  // A newer view fences even a broker it no longer names.
  EXPECT_EQ(FollowerRoleFor(a, 4, "n4"), FollowerRole::kViewNewer);
}

TEST(ReplicationRole, TheFramesShardAndLogPickTheStreamOrCacheShard) {
  flxi::Records records;
  records.shard = flxi::ShardRef{"t", "ns", "orders", 2, 7};
  auto stream = ReplicaTargetOf(flxi::Frame{flxi::Kind::kReplicateRecords, records});
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->shard, (ShardRef{ShardKind::kStream, "t", "ns", "orders", 2}));
  EXPECT_EQ(stream->log, flxi::ReplicaLog::kStream);
  EXPECT_EQ(stream->generation, 7u);
  auto cursors = ReplicaTargetOf(flxi::Frame{flxi::Kind::kReplicateGroupRecords, records});
  ASSERT_TRUE(cursors);
  EXPECT_EQ(cursors->shard.kind, ShardKind::kStream);  // cursors belong to the stream shard
  EXPECT_EQ(cursors->log, flxi::ReplicaLog::kGroupCursors);
  auto counters = ReplicaTargetOf(flxi::Frame{flxi::Kind::kReplicateCounterRecords, records});
  ASSERT_TRUE(counters);
  EXPECT_EQ(counters->shard.kind, ShardKind::kCache);  // counters belong to the cache shard
  flxi::Bootstrap bootstrap;
  bootstrap.shard = flxi::ShardRef{"t", "ns", "c", 0, 3};
  auto cache = ReplicaTargetOf(flxi::Frame{flxi::Kind::kReplicateCacheBootstrap, bootstrap});
  ASSERT_TRUE(cache);
  EXPECT_EQ(cache->shard, (ShardRef{ShardKind::kCache, "t", "ns", "c", 0}));
  EXPECT_EQ(cache->log, flxi::ReplicaLog::kCache);
  flxi::Rebuild rebuild;
  rebuild.shard = flxi::ShardRef{"t", "ns", "c", 1, 3};
  rebuild.log = flxi::ReplicaLog::kGroupDeadLetters;
  auto dead = ReplicaTargetOf(flxi::Frame{flxi::Kind::kReplicateRebuild, rebuild});
  ASSERT_TRUE(dead);
  EXPECT_EQ(dead->shard.kind, ShardKind::kStream);
  EXPECT_EQ(dead->log, flxi::ReplicaLog::kGroupDeadLetters);
  EXPECT_FALSE(ReplicaTargetOf(flxi::Frame{flxi::Kind::kPing, flxi::PingPong{}}));
}

TEST(StoreCustody, OneHolderPerDirectoryNeverStolen) {
  broker::StoreCustody custody;
  EXPECT_TRUE(custody.Claim("/d/1", broker::StoreHolder::kFollower));
  // One claim per open store, even to its own side (a second open beside the first is refused).
  EXPECT_FALSE(custody.Claim("/d/1", broker::StoreHolder::kFollower));
  EXPECT_FALSE(custody.Claim("/d/1", broker::StoreHolder::kCore));
  custody.Release("/d/1", broker::StoreHolder::kCore);  // not the holder: nothing changes
  EXPECT_EQ(custody.HolderOf("/d/1"), broker::StoreHolder::kFollower);
  custody.Release("/d/1", broker::StoreHolder::kFollower);
  EXPECT_FALSE(custody.HolderOf("/d/1"));
  EXPECT_TRUE(custody.Claim("/d/1", broker::StoreHolder::kCore));
  EXPECT_FALSE(custody.Claim("/d/1", broker::StoreHolder::kFollower));
  EXPECT_TRUE(custody.Claim("/d/2", broker::StoreHolder::kFollower));
}

TEST(ShardStoreLayout, StreamAndCacheShardsWhereTheCoreKeepsThem) {
  storage::LogOptions defaults;
  defaults.retention_bytes = 100;
  defaults.fsync_mode = storage::FsyncMode::kPeriodic;
  catalog::Stream s;
  s.tenant_id = "t";
  s.namespace_name = "ns";
  s.name = "orders";
  s.fsync_mode = storage::FsyncMode::kOnCommit;
  s.retention.max_size_bytes = 4096;
  auto stream = broker::StreamStoreLayout("/data", defaults, s, 3);
  EXPECT_EQ(stream.dir, "/data/t/ns/orders/3");
  EXPECT_EQ(stream.log_options.fsync_mode, storage::FsyncMode::kOnCommit);
  EXPECT_EQ(stream.log_options.retention_bytes, 4096u);
  catalog::Cache c;
  c.tenant_id = "t";
  c.namespace_name = "ns";
  c.name = "sessions";
  auto cache = broker::CacheStoreLayout("/data", defaults, c, 0);
  EXPECT_EQ(cache.dir, "/data/_caches/t/ns/sessions/0");
  EXPECT_EQ(cache.log_options.retention_bytes, 0u);  // only compaction reclaims a cache log
  EXPECT_EQ(cache.log_options.fsync_mode, storage::FsyncMode::kPeriodic);
}

broker::ShardId Alone() {
  return {"t", "ns", "alone", broker::ShardKind::kStream, 0};
}
broker::ShardId Replicated() {
  return {"t", "ns", "replicated", broker::ShardKind::kStream, 0};
}

TEST(ReplicationHostHold, AShardLedAloneLiftsItsSavedHoldOneWithFollowersKeepsIt) {
  // replication.md §20: with no replicator to raise its commit offset, a saved hold would stop
  // retention and compaction for good; with followers the replicator decides when it starts.
  auto keys = ClusterKeys::Create("felix");
  ASSERT_TRUE(keys);
  ClusterView view(*keys);
  ShardRef alone{ShardKind::kStream, "t", "ns", "alone", 0};
  ShardRef replicated{ShardKind::kStream, "t", "ns", "replicated", 0};
  view.ReplaceAssignments(
      {{keys->Assign(alone), EncodeAssignment(At(3, "n1", {"n1"})), 1, 1, 1, 0},
       {keys->Assign(replicated), EncodeAssignment(At(3, "n1", {"n1", "n2", "n3"})), 1, 1, 1, 0}});
  MetricsRegistry metrics;
  ReplicationHostOptions o;
  o.own_node_id = "n1";
  ReplicationHost host(view, o, metrics);
  auto opened_held = [](const std::string& dir) {
    auto store = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform({}));
    EXPECT_TRUE(store) << store.error().ToString();
    EXPECT_TRUE((*store)->SetRetentionHold(true));
    return std::move(*store);
  };
  auto alone_store = opened_held(felix::testing::MakeTempDir("hold-alone"));
  host.OnStoreOpened(Alone(), *alone_store);
  EXPECT_FALSE(alone_store->replica_state().retention_held);
  EXPECT_FALSE(alone_store->log(storage::LogKind::kStream).RetentionHeld());
  auto replicated_store = opened_held(felix::testing::MakeTempDir("hold-replicated"));
  host.OnStoreOpened(Replicated(), *replicated_store);
  EXPECT_TRUE(replicated_store->replica_state().retention_held);
  EXPECT_TRUE(replicated_store->log(storage::LogKind::kStream).RetentionHeld());
  host.OnStoreClosing(Alone());
  host.OnStoreClosing(Replicated());
}

}  // namespace
}  // namespace felix::cluster
