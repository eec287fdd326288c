// A shard's logs are opened off the QUIC loop thread: while one shard's open is held (test seam
// FELIX_TEST_HOLD_SHARD_OPEN, released by creating a file — no timing involved), a publish to
// another stream on the same connection is answered, and the held publishes are answered in
// order, with dense offsets, once the open completes.
#include <fstream>

#include <gtest/gtest.h>

#include "e2e_broker.h"
#include "support/child_process.h"
#include "wire/flx1/constants.h"

namespace felix::broker {
namespace {

namespace flx1 = felix::wire::flx1;
using e2e::Broker;

flx1::Publish JsonPublish(const std::string& stream, uint64_t request_id) {
  flx1::Publish publish;
  publish.tenant_id = "default";
  publish.namespace_ = "default";
  publish.stream = stream;
  publish.payload = flx1::Bytes{'p'};
  publish.request_id = request_id;
  return publish;
}

TEST(ShardOpenE2E, AHeldOpenStallsOnlyItsOwnShardAndKeepsItsRequestOrder) {
  std::string dir = felix::testing::MakeTempDir("shard-open-e2e");
  std::string release = dir + "/release";
  Broker broker(dir + "/data",
                {{"FELIX_TEST_HOLD_SHARD_OPEN", "default/default/slow#0@" + release}});
  broker.CreateStream("default", "slow", /*durable=*/true);
  broker.CreateStream("default", "fast", /*durable=*/true);
  auto client = broker.Connect();
  ASSERT_TRUE(client);
  std::string token = broker.FullToken();

  // Acks after the write, with offsets, so the order of the writes shows.
  constexpr uint32_t kFeatures = flx1::kFeatureErrorCodes | flx1::kFeatureAckOnCommit;
  auto held = e2e::Authed(*client, token, "default", kFeatures);
  for (uint64_t id = 1; id <= 3; ++id) held->SendMessage(JsonPublish("slow", id));

  // Another stream, on another QUIC stream of the same connection, is served meanwhile.
  auto other = e2e::Authed(*client, token, "default", kFeatures);
  other->SendMessage(JsonPublish("fast", 9));
  auto fast_ok = other->Read<flx1::PublishOk>();
  ASSERT_TRUE(fast_ok) << "a held open of another shard stalled this publish";
  EXPECT_EQ(fast_ok->request_id, 9u);
  EXPECT_EQ(fast_ok->offset, 0u);
  EXPECT_FALSE(held->ReadFrame(std::chrono::milliseconds(0)).has_value())
      << "the held shard answered before its open completed";

  std::ofstream(release).put('\n');
  for (uint64_t id = 1; id <= 3; ++id) {
    auto ok = held->Read<flx1::PublishOk>();
    ASSERT_TRUE(ok) << "publish " << id;
    EXPECT_EQ(ok->request_id, id);
    EXPECT_EQ(ok->offset, id - 1) << "requests waiting for the open keep their order";
  }
  EXPECT_EQ(broker.Stop(), 0);
}

}  // namespace
}  // namespace felix::broker
