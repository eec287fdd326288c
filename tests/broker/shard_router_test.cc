#include "broker/shard_router.h"
#include "broker/static_router.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace felix::broker {
namespace {

TEST(SingleNodeRouter, EveryShardIsLocalAtGenerationZero) {
  SingleNodeRouter router;
  for (uint32_t shard : {0u, 1u, 7u}) {
    for (ShardKind kind : {ShardKind::kStream, ShardKind::kCache}) {
      Route r = router.RouteShard(ShardId{"t", "ns", "orders", kind, shard});
      EXPECT_TRUE(r.is_local());
      EXPECT_EQ(r.generation, Generation(0));
      EXPECT_TRUE(r.owner_node_id.empty());
    }
  }
}

TEST(ShardId, PrintsKindAndShard) {
  EXPECT_EQ((ShardId{"t", "ns", "orders", ShardKind::kStream, 3}).ToString(), "t/ns/orders#3");
  EXPECT_EQ((ShardId{"t", "ns", "users", ShardKind::kCache, 0}).ToString(), "cache:t/ns/users#0");
}

// BrokerCore finds an open shard by its id (ShardKeyLess) without building the key: every
// comparison must agree with comparing ToString(), or a request would open a shard twice or
// reach another's.
TEST(ShardId, ComparesWithKeysAsItsStringWould) {
  std::vector<ShardId> ids;
  for (const char* tenant : {"", "a", "ab", "a/b"}) {
    for (const char* ns : {"", "n", "n#1"}) {
      for (const char* name : {"", "s", "s#1", "cache:x"}) {
        for (uint32_t shard : {0u, 1u, 10u, 4294967295u}) {
          for (ShardKind kind : {ShardKind::kStream, ShardKind::kCache}) {
            ids.push_back(ShardId{tenant, ns, name, kind, shard});
          }
        }
      }
    }
  }
  std::vector<std::string> keys;
  for (const auto& id : ids) keys.push_back(id.ToString());
  keys.push_back("");
  keys.push_back("cache:");
  keys.push_back("a/n/s#");
  keys.push_back("a/n/s#10x");
  auto sign = [](int v) { return (v > 0) - (v < 0); };
  for (const auto& key : keys) {
    for (const auto& id : ids) {
      ASSERT_EQ(sign(id.CompareKey(key)), sign(key.compare(id.ToString())))
          << key << " vs " << id.ToString();
    }
  }

  std::map<std::string, int, ShardKeyLess> open;
  for (size_t i = 0; i < ids.size(); ++i) open.emplace(ids[i].ToString(), int(i));
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = open.find(ids[i]);
    ASSERT_NE(it, open.end()) << ids[i].ToString();
    EXPECT_EQ(it->first, ids[i].ToString());
  }
  EXPECT_EQ(open.find(ShardId{"zz", "n", "s", ShardKind::kStream, 2}), open.end());
}

TEST(StaticRouter, ListedShardsAreRemoteWithOwnerAddressAndGeneration) {
  auto router = StaticRouter::Parse("t/ns/orders#1=n2@10.0.0.2:5000@7;cache:t/ns/users#0=n3@@9;");
  ASSERT_TRUE(router.has_value()) << router.error().message;
  Route remote = router->RouteShard(ShardId{"t", "ns", "orders", ShardKind::kStream, 1});
  EXPECT_FALSE(remote.is_local());
  EXPECT_EQ(remote.owner_node_id, "n2");
  EXPECT_EQ(remote.owner_client_addr, "10.0.0.2:5000");
  EXPECT_EQ(remote.generation, Generation(7));
  Route cache = router->RouteShard(ShardId{"t", "ns", "users", ShardKind::kCache, 0});
  EXPECT_EQ(cache.owner_node_id, "n3");
  EXPECT_TRUE(cache.owner_client_addr.empty());
  EXPECT_EQ(cache.generation, Generation(9));
  // Another shard of the same stream, and the stream shard of the same name as the cache.
  EXPECT_TRUE(router->RouteShard(ShardId{"t", "ns", "orders", ShardKind::kStream, 0}).is_local());
  EXPECT_TRUE(router->RouteShard(ShardId{"t", "ns", "users", ShardKind::kStream, 0}).is_local());
}

TEST(StaticRouter, RefusesEntriesThatDoNotParse) {
  for (const char* bad :
       {"t/ns/orders#1", "t/ns/orders#1=n2", "t/ns/orders#1=n2@a", "t/ns/orders#1=@a@1", "=n2@a@1",
        "t/ns/orders#1=n2@a@x", "t/ns/orders#1=n2@a@", "t/ns/orders#1=n2@a@1x"}) {
    auto router = StaticRouter::Parse(bad);
    ASSERT_FALSE(router.has_value()) << bad;
    EXPECT_EQ(router.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(router.error().message.find(bad), std::string::npos) << router.error().message;
  }
}

}  // namespace
}  // namespace felix::broker
