// The key layout of cluster-etcd.md §2: builders and the parsers' refusals.
#include "cluster/etcd_keys.h"

#include <gtest/gtest.h>

namespace felix::cluster {
namespace {

ClusterKeys Keys() {
  auto k = ClusterKeys::Create("felix");
  if (!k) throw std::runtime_error(k.error().ToString());
  return *k;
}

TEST(ClusterKeys, BuildsTheDocumentedLayout) {
  auto k = Keys();
  EXPECT_EQ(k.prefix(), "/felix/felix/");
  EXPECT_EQ(k.Node("n1"), "/felix/felix/nodes/n1");
  EXPECT_EQ(k.NodeIncarnation("n1"), "/felix/felix/nodes-incarnation/n1");
  EXPECT_EQ(k.Controller(), "/felix/felix/controller");
  EXPECT_EQ(k.ConfigCadence(), "/felix/felix/config/cadence");
  EXPECT_EQ(k.CatalogTenant("acme"), "/felix/felix/catalog/tenants/acme");
  EXPECT_EQ(k.CatalogNamespace("acme", "prod"), "/felix/felix/catalog/namespaces/acme/prod");
  EXPECT_EQ(k.CatalogStream("acme", "prod", "orders"),
            "/felix/felix/catalog/streams/acme/prod/orders");
  EXPECT_EQ(k.CatalogCache("acme", "prod", "c"), "/felix/felix/catalog/caches/acme/prod/c");
  EXPECT_EQ(k.CatalogKey("acme", "k1"), "/felix/felix/catalog/keys/acme/k1");
  ShardRef shard{ShardKind::kStream, "acme", "prod", "orders", 3};
  EXPECT_EQ(k.Assign(shard), "/felix/felix/assign/stream/acme/prod/orders/3");
  EXPECT_EQ(k.Report(shard), "/felix/felix/reports/stream/acme/prod/orders/3");
  EXPECT_EQ(k.Suspect("n2", "n1"), "/felix/felix/suspects/n2/n1");
  // "nodes/" must not cover "nodes-incarnation/" (prefix watches would mix them).
  EXPECT_FALSE(k.NodeIncarnation("n1").starts_with(k.NodesPrefix()));
}

TEST(ClusterKeys, ParsesWhatItBuilds) {
  auto k = Keys();
  ShardRef shard{ShardKind::kCache, "t", "ns", "name", 4294967295u};
  auto a = k.ParseAssign(k.Assign(shard));
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(*a, shard);
  auto r = k.ParseReport(k.Report(shard));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, shard);
  auto n = k.ParseNode(k.Node("broker-1.zone-a"));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, "broker-1.zone-a");
  auto s = k.ParseSuspect(k.Suspect("n2", "n1"));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first, "n2");
  EXPECT_EQ(s->second, "n1");
}

TEST(ClusterKeys, RefusesMalformedKeys) {
  auto k = Keys();
  for (const char* bad :
       {"/felix/other/assign/stream/t/ns/n/1", "/felix/felix/assign/queue/t/ns/n/1",
        "/felix/felix/assign/stream/t/ns/n", "/felix/felix/assign/stream/t/ns/n/1/2",
        "/felix/felix/assign/stream/t//n/1", "/felix/felix/assign/stream/t/ns/n/01",
        "/felix/felix/assign/stream/t/ns/n/-1", "/felix/felix/assign/stream/t/ns/n/4294967296",
        "/felix/felix/assign/stream/t/ns/n/x", "/felix/felix/assign/stream/t/ns/n/"}) {
    auto r = k.ParseAssign(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(k.ParseNode("/felix/felix/nodes/Bad_Id"));
  EXPECT_FALSE(k.ParseNode("/felix/felix/nodes/"));
  EXPECT_FALSE(k.ParseSuspect("/felix/felix/suspects/n2"));
  EXPECT_FALSE(k.ParseSuspect("/felix/felix/suspects/n2/n1/x"));
}

TEST(NodeId, IsADnsName) {
  for (const std::string& ok :
       {std::string("n1"), std::string("broker-7"), std::string("a.b.c"), std::string(63, 'a')}) {
    EXPECT_TRUE(ValidateNodeId(ok)) << ok;
  }
  for (const std::string& bad : {std::string(), std::string("-n1"), std::string("n1-"),
                                 std::string("N1"), std::string("n_1"), std::string("a..b"),
                                 std::string(".a"), std::string("a."), std::string(64, 'a')}) {
    auto r = ValidateNodeId(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_FALSE(ClusterKeys::Create("Bad/Name"));
  EXPECT_FALSE(ClusterKeys::Create(""));
}

}  // namespace
}  // namespace felix::cluster
