#include "broker/shard_router.h"
#include "broker/static_router.h"

#include <gtest/gtest.h>

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
