// Retention on the real broker: a durable stream with a size bound loses its oldest sealed
// segments to the retention timer (FELIX_DURABLE_RETENTION_INTERVAL_SECONDS), a subscriber
// asking below the new start gets `subscribe_cursor_error too_old` naming it, and a durable
// cache under the same broker-wide bound keeps every key (caches are reclaimed by compaction
// only).
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "e2e_broker.h"
#include "support/child_process.h"
#include "wire/flx1/constants.h"

namespace felix::broker {
namespace {

namespace flx1 = felix::wire::flx1;
using e2e::Broker;
using e2e::WaitFor;
using testing::TestStream;
using namespace std::chrono_literals;

constexpr int kRecords = 240;

// Publishes `count` acked 100-byte records to `stream`, one batch each, and waits for the acks.
void PublishRecords(TestStream& publisher, const std::string& tenant, const std::string& stream,
                    int count) {
  std::string payload(100, 'r');
  for (int i = 0; i < count; ++i) {
    flx1::BinaryPublishBatch batch;
    batch.acked =
        flx1::BinaryPublishBatch::Acked{static_cast<uint64_t>(i + 1), flx1::AckMode::kPerBatch};
    batch.tenant_id = tenant;
    batch.namespace_ = "default";
    batch.stream = stream;
    batch.payloads.push_back(payload);
    std::vector<uint8_t> frame;
    ASSERT_TRUE(flx1::AppendFrame(flx1::Flx1Frame{batch}, frame));
    publisher.Send(frame);
  }
  for (int i = 0; i < count; ++i) {
    auto answer = publisher.ReadFrame();
    ASSERT_TRUE(answer);
    auto* ack = std::get_if<flx1::BinaryPublishAck>(&*answer);
    ASSERT_NE(ack, nullptr);
    ASSERT_EQ(ack->status, flx1::BinaryPublishAck::Status::kOk) << ack->message;
  }
}

TEST(RetentionE2E, SizeBoundDropsOldSegmentsAndOldCursorsAreTooOldWhileCachesKeepEveryKey) {
  Broker broker(felix::testing::MakeTempDir("retention-e2e"),
                {{"FELIX_DURABLE_SEGMENT_BYTES", "4096"},
                 {"FELIX_DURABLE_RETENTION_BYTES", "8192"},
                 {"FELIX_DURABLE_RETENTION_INTERVAL_SECONDS", "1"}});
  broker.CreateStream("default", "events", /*durable=*/true);
  broker.CreateCache("default", "profiles", /*durable=*/true);
  std::string token = broker.FullToken();
  auto client = broker.Connect();
  ASSERT_TRUE(client);

  // ~240 records of ~140 bytes on disk: several 4 KiB segments, far over the 8 KiB bound.
  auto publisher = e2e::Authed(*client, token, "default", flx1::kFeatureErrorCodes);
  PublishRecords(*publisher, std::string("default"), "events", kRecords);
  auto cache = e2e::Authed(*client, token, "default", flx1::kFeatureErrorCodes);
  for (int i = 0; i < kRecords; ++i) {
    std::string key = "p" + std::to_string(i);
    cache->SendMessage(flx1::CachePut{std::string("default"), "default", "profiles", key,
                                      flx1::Bytes(100, 'v'), static_cast<uint64_t>(i + 1),
                                      std::nullopt});
  }
  for (int i = 0; i < kRecords; ++i) ASSERT_TRUE(cache->Read<flx1::CacheOk>().has_value());

  ASSERT_TRUE(WaitFor([&] {
    return broker.Metric("felix_storage_retention_segments_deleted_total") > 0;
  })) << "the retention timer never deleted a segment";

  // A cursor at offset 0 is below the new start: too_old, naming the oldest retained offset.
  auto old_cursor = e2e::Authed(*client, token, "default", flx1::kFeatureErrorCodes);
  flx1::Subscribe subscribe;
  subscribe.tenant_id = std::string("default");
  subscribe.namespace_ = "default";
  subscribe.stream = "events";
  subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kOffset, 0};
  old_cursor->SendMessage(subscribe);
  auto too_old = old_cursor->Read<flx1::SubscribeCursorError>();
  ASSERT_TRUE(too_old);
  EXPECT_EQ(too_old->reason, flx1::CursorErrorReason::kTooOld);
  EXPECT_EQ(too_old->requested, 0u);
  EXPECT_GT(too_old->available, 0u);
  EXPECT_LT(too_old->available, static_cast<uint64_t>(kRecords));

  // Earliest now starts at that offset.
  auto earliest = e2e::Authed(*client, token, "default", flx1::kFeatureErrorCodes);
  subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kEarliest, 0};
  earliest->SendMessage(subscribe);
  auto subscribed = earliest->Read<flx1::Subscribed>();
  ASSERT_TRUE(subscribed);
  EXPECT_EQ(subscribed->start_offset, too_old->available);

  // The cache under the same bound kept every key.
  for (int i = 0; i < kRecords; ++i) {
    std::string key = "p" + std::to_string(i);
    cache->SendMessage(flx1::CacheGet{std::string("default"), "default", "profiles", key,
                                      static_cast<uint64_t>(i + 1)});
    auto value = cache->Read<flx1::CacheValue>();
    ASSERT_TRUE(value);
    ASSERT_TRUE(value->value.has_value()) << key << " was dropped";
  }
  EXPECT_EQ(broker.Stop(), 0);
}

}  // namespace
}  // namespace felix::broker
