#include "broker/shard_router.h"

#include <gtest/gtest.h>

namespace felix::broker {
namespace {

TEST(SingleNodeRouter, EveryShardIsLocalAtGenerationZero) {
  SingleNodeRouter router;
  for (uint32_t shard : {0u, 1u, 7u}) {
    for (ShardKind kind : {ShardKind::kStream, ShardKind::kCache}) {
      Route r = router.RouteShard(ShardId{"t", "ns", "orders", kind, shard});
      EXPECT_TRUE(r.is_local());
      EXPECT_EQ(r.generation, 0u);
      EXPECT_TRUE(r.owner_node_id.empty());
    }
  }
}

TEST(ShardId, PrintsKindAndShard) {
  EXPECT_EQ((ShardId{"t", "ns", "orders", ShardKind::kStream, 3}).ToString(), "t/ns/orders#3");
  EXPECT_EQ((ShardId{"t", "ns", "users", ShardKind::kCache, 0}).ToString(), "cache:t/ns/users#0");
}

}  // namespace
}  // namespace felix::broker
