// ServerFeatures: the group record bits (GROUP_SKIPPED, GROUP_PUBLISHER, RECORD_TIMESTAMPS)
// are advertised with durable storage only, like the other group bits (client-protocol.md §7).
#include <gtest/gtest.h>

#include "broker/client_session.h"

namespace felix::broker {
namespace {

namespace flx1 = felix::wire::flx1;

constexpr uint32_t kGroupRecordBits =
    flx1::kFeatureGroupSkipped | flx1::kFeatureGroupPublisher | flx1::kFeatureRecordTimestamps;

TEST(ServerFeatures, GroupRecordBitsFollowDurableStorage) {
  ClientServiceOptions options;
  options.durable_storage = true;
  EXPECT_EQ(ServerFeatures(options) & kGroupRecordBits, kGroupRecordBits);
  EXPECT_NE(ServerFeatures(options) & flx1::kFeatureConsumerGroup, 0u);
  options.durable_storage = false;
  EXPECT_EQ(ServerFeatures(options) & kGroupRecordBits, 0u);
  EXPECT_EQ(ServerFeatures(options) & flx1::kFeatureConsumerGroup, 0u);
}

}  // namespace
}  // namespace felix::broker
