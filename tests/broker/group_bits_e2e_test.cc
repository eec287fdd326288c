// End to end through the real felix-broker process: the "other group bits" the reference
// broker advertises with durable storage (client-protocol.md §7) — GROUP_SKIPPED
// (`skipped_before` on group records), GROUP_PUBLISHER (`publisher`, only if stored: with
// FELIX_RECORD_PUBLISHERS, also on event batches as flag 0x2000) and RECORD_TIMESTAMPS
// (`timestamp_micros` on group records and the `offset_for_time` request) — each optional
// field only to a client that offered its bit.
#include <chrono>
#include <functional>
#include <thread>

#include "e2e_broker.h"

namespace felix::broker {
namespace {

using namespace e2e;  // NOLINT: the shared end-to-end fixture
using namespace std::chrono_literals;

constexpr uint32_t kOfferedBits = flx1::kFeatureErrorCodes | flx1::kFeatureGroupSkipped |
                                  flx1::kFeatureGroupPublisher | flx1::kFeatureRecordTimestamps;

flx1::GroupPoll Poll(const std::string& stream, const std::string& group, uint32_t max,
                     uint64_t request_id) {
  flx1::GroupPoll poll;
  poll.tenant_id = "default";
  poll.namespace_ = "default";
  poll.stream = stream;
  poll.group = group;
  poll.max_records = max;
  poll.request_id = request_id;
  return poll;
}

flx1::OffsetForTime AtTime(const std::string& stream, uint64_t at_micros, uint64_t request_id) {
  flx1::OffsetForTime request;
  request.tenant_id = "default";
  request.namespace_ = "default";
  request.stream = stream;
  request.at_micros = at_micros;
  request.request_id = request_id;
  return request;
}

// The JSON text of the next frame (empty when none came).
std::string NextJson(TestStream& s) {
  auto bytes = s.ReadFrameBytes();
  if (!bytes || bytes->size() < flx1::kHeaderSize) return "";
  return std::string(bytes->begin() + flx1::kHeaderSize, bytes->end());
}

uint64_t NowMicros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

struct GroupBitsE2E : ::testing::Test {
  std::string dir = MakeTempDir("felix-group-bits");
  // Small segments and a size bound so retention removes records before a group reads them.
  std::unique_ptr<Broker> broker = std::make_unique<Broker>(
      dir + "/data",
      std::map<std::string, std::string>{{"FELIX_DURABLE_SEGMENT_BYTES", "4096"},
                                         {"FELIX_DURABLE_RETENTION_BYTES", "8192"},
                                         {"FELIX_DURABLE_RETENTION_INTERVAL_SECONDS", "1"}});
};

TEST_F(GroupBitsE2E, DurableBrokerAdvertisesTheGroupRecordBits) {
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  stream->SendMessage(AuthMessage("default", broker->AllToken()));
  auto ok = stream->Read<flx1::AuthOk>();
  ASSERT_TRUE(ok && ok->server_features);
  for (uint32_t bit :
       {flx1::kFeatureGroupSkipped, flx1::kFeatureGroupPublisher, flx1::kFeatureRecordTimestamps}) {
    EXPECT_NE(*ok->server_features & bit, 0u) << std::hex << bit;
  }
}

// consumer-groups.md §2 step 3 and §5.2 presence rules: records retention removed before the
// group reached them are settled without delivery and reported as `skipped_before` on the
// record above the hole — only to a client offering GROUP_SKIPPED; `timestamp_micros` only with
// RECORD_TIMESTAMPS; never a `publisher` (none stored).
TEST_F(GroupBitsE2E, SkippedAndTimestampsOnlyToOfferers) {
  broker->CreateStream("default", "events", /*durable=*/true);
  std::string token = broker->FullToken();
  auto client = broker->Connect();
  auto publisher = Authed(*client, token);
  const uint64_t before = NowMicros() / 1000 * 1000;  // stored append times are whole ms
  constexpr int kRecords = 240;                       // ~140 bytes each: many 4 KiB segments
  for (int i = 0; i < kRecords; ++i) {
    publisher->Send(BinaryPublish(i + 1, "events", {std::string(100, 'r')}));
  }
  for (int i = 0; i < kRecords; ++i) {
    ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk);
  }
  const uint64_t after = NowMicros();
  ASSERT_TRUE(WaitFor([&] {
    return broker->Metric("felix_storage_retention_segments_deleted_total") > 0;
  })) << "the retention timer never deleted a segment";

  // The oldest retained offset, as a subscriber starting at earliest sees it.
  auto sub = Authed(*client, token);
  sub->SendMessage(SubscribeEarliest("events"));
  auto subscribed = sub->Read<flx1::Subscribed>();
  ASSERT_TRUE(subscribed && subscribed->start_offset);
  const uint64_t oldest = *subscribed->start_offset;
  ASSERT_GT(oldest, 0u);

  // No bit offered: the record above the hole, with none of the optional fields.
  auto plain = Authed(*client, token, "default", flx1::kFeatureErrorCodes);
  plain->SendMessage(Poll("events", "plain", 1, 1));
  std::string json = NextJson(*plain);
  std::string expected_payload;  // base64 of 100 'r' bytes
  for (int i = 0; i < 33; ++i) expected_payload += "cnJy";
  expected_payload += "cg==";
  EXPECT_EQ(json, R"({"type":"group_records","records":[{"offset":)" + std::to_string(oldest) +
                      R"(,"payload":")" + expected_payload + R"(","attempts":1}],"request_id":1})");

  // Every bit offered: skipped_before on the first record only, a timestamp on each.
  auto offered = Authed(*client, token, "default", kOfferedBits);
  offered->SendMessage(Poll("events", "offered", 2, 2));
  auto records = offered->Read<flx1::GroupRecords>();
  ASSERT_TRUE(records);
  ASSERT_EQ(records->records.size(), 2u);
  const auto& first = records->records[0];
  const auto& second = records->records[1];
  EXPECT_EQ(first.offset, oldest);
  EXPECT_EQ(first.skipped_before, std::optional<uint64_t>(oldest));  // offsets 0..oldest-1
  EXPECT_EQ(second.offset, oldest + 1);
  EXPECT_EQ(second.skipped_before, std::nullopt);  // omitted when 0
  for (const auto& r : records->records) {
    EXPECT_EQ(r.publisher, std::nullopt);
    ASSERT_TRUE(r.timestamp_micros);
    EXPECT_GE(*r.timestamp_micros, before);
    EXPECT_LE(*r.timestamp_micros, after);
  }
  // A redelivery of the record above the hole reports the same hole.
  flx1::GroupNack nack;
  nack.tenant_id = "default";
  nack.namespace_ = "default";
  nack.stream = "events";
  nack.group = "offered";
  nack.offset = oldest;
  nack.request_id = 3;
  offered->SendMessage(nack);
  ASSERT_TRUE(offered->Read<flx1::CacheOk>());
  offered->SendMessage(Poll("events", "offered", 1, 4));
  auto again = offered->Read<flx1::GroupRecords>();
  ASSERT_TRUE(again && again->records.size() == 1u);
  EXPECT_EQ(again->records[0].offset, oldest);
  EXPECT_EQ(again->records[0].attempts, 2u);
  EXPECT_EQ(again->records[0].skipped_before, std::optional<uint64_t>(oldest));
  EXPECT_EQ(broker->Stop(), 0);
}

// client-protocol.md §6.4: offset_for_time answers the lowest offset whose append time is at
// or after `at_micros` (absent when no record is that recent); stream.subscribe, durable
// streams only; the stream goes on after a refusal other than forbidden.
TEST_F(GroupBitsE2E, OffsetForTimeAnswersAndRefusals) {
  broker->CreateStream("default", "timed", /*durable=*/true);
  broker->CreateStream("default", "mem", /*durable=*/false);
  std::string token = broker->FullToken();
  auto client = broker->Connect();
  // Acks after the write, so the group poll below finds every record committed.
  auto s = Authed(*client, token, "default", kOfferedBits | flx1::kFeatureAckOnCommit);
  constexpr int kRecords = 6;
  for (int i = 0; i < kRecords; ++i) {
    s->Send(BinaryPublish(i + 1, "timed", {"t" + std::to_string(i)}));
    ASSERT_EQ(ReadAck(*s).status, flx1::BinaryPublishAck::Status::kOk);
  }
  // The stored append times, read back through a group.
  s->SendMessage(Poll("timed", "clock", kRecords, 10));
  auto records = s->Read<flx1::GroupRecords>();
  ASSERT_TRUE(records);
  ASSERT_EQ(records->records.size(), static_cast<size_t>(kRecords));
  std::vector<uint64_t> times;
  for (const auto& r : records->records) times.push_back(r.timestamp_micros.value_or(0));
  for (size_t i = 1; i < times.size(); ++i) ASSERT_LE(times[i - 1], times[i]);

  auto expected = [&](uint64_t at) -> std::string {
    for (size_t i = 0; i < times.size(); ++i) {
      if (times[i] >= at) return R"("offset":)" + std::to_string(i) + ",";
    }
    return "";
  };
  uint64_t id = 20;
  for (uint64_t at :
       {uint64_t{0}, times[0], times[0] + 1, times[3], times[3] + 1, times[5], times[5] + 1}) {
    s->SendMessage(AtTime("timed", at, ++id));
    EXPECT_EQ(NextJson(*s), R"({"type":"offset_value",)" + expected(at) + R"("request_id":)" +
                                std::to_string(id) + "}")
        << "at_micros=" << at;
  }

  // Refusals: an in-memory stream, an unknown stream, a shard out of range; the stream goes on.
  s->SendMessage(AtTime("mem", 0, 40));
  auto mem = s->Read<flx1::Error>();
  ASSERT_TRUE(mem);
  EXPECT_EQ(mem->code, "invalid_request") << mem->message;
  s->SendMessage(AtTime("nope", 0, 41));
  auto missing = s->Read<flx1::Error>();
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->code, "not_found") << missing->message;
  auto out_of_range = AtTime("timed", 0, 42);
  out_of_range.shard = 7;
  s->SendMessage(out_of_range);
  auto bad_shard = s->Read<flx1::Error>();
  ASSERT_TRUE(bad_shard);
  EXPECT_TRUE(bad_shard->code.has_value()) << bad_shard->message;
  s->SendMessage(AtTime("timed", 0, 43));
  EXPECT_EQ(NextJson(*s), R"({"type":"offset_value","offset":0,"request_id":43})");

  // Without stream.subscribe: forbidden, and the stream ends (§8.3).
  std::string publish_only = broker->Token("default", {"stream.publish:stream:default/*/*"});
  auto denied = Authed(*client, publish_only, "default", kOfferedBits);
  denied->SendMessage(AtTime("timed", 0, 50));
  auto forbidden = denied->Read<flx1::Error>();
  ASSERT_TRUE(forbidden);
  EXPECT_EQ(forbidden->code, "forbidden");
  EXPECT_TRUE(denied->WaitEnded());
  EXPECT_EQ(broker->Stop(), 0);
}

// FELIX_RECORD_PUBLISHERS: each durable record keeps its publisher (the token's `sub`) on
// disk; group records carry it to clients that offered GROUP_PUBLISHER and event batches to
// subscribers that offered flag 0x2000, from the log after a restart too; in-memory streams
// store none.
TEST(GroupBitsPublishersE2E, StoredPublishersReachOnlyOfferersAndSurviveARestart) {
  std::string dir = MakeTempDir("felix-publishers");
  Broker broker(dir + "/data", {{"FELIX_RECORD_PUBLISHERS", "true"}});
  broker.CreateStream("default", "signed", /*durable=*/true);
  broker.CreateStream("default", "scratch", /*durable=*/false);
  const std::string token = broker.FullToken();  // subject "tester"
  auto client = broker.Connect();
  auto publisher = Authed(*client, token);
  publisher->Send(BinaryPublish(1, "signed", {"a", "b"}));
  publisher->Send(BinaryPublish(2, "signed", {"c"}));
  publisher->Send(BinaryPublish(3, "scratch", {"m"}));
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk);

  // Every event of the history names its publisher to a subscriber that offered 0x2000, and
  // none to one that did not.
  auto history = [&](Flx1TestClient& c, uint16_t flags) {
    auto s = c.OpenStream();
    s->SendMessage(AuthMessage("default", token, flags, kDefaultFeatures));
    EXPECT_TRUE(s->Read<flx1::AuthOk>());
    s->SendMessage(SubscribeEarliest("signed"));
    auto events = c.AcceptEventStream();
    EXPECT_TRUE(events && events->Read<flx1::EventStreamHello>());
    std::vector<std::pair<std::optional<std::string>, std::string>> seen;
    while (events && seen.size() < 3) {
      auto frame = events->ReadFrame();
      auto* batch = frame ? std::get_if<flx1::BinaryEventBatch>(&*frame) : nullptr;
      if (batch == nullptr) break;
      for (const auto& e : batch->events) {
        seen.emplace_back(
            batch->publisher ? std::optional<std::string>(*batch->publisher) : std::nullopt,
            std::string(e.payload));
      }
    }
    return seen;
  };
  using Seen = std::vector<std::pair<std::optional<std::string>, std::string>>;
  const Seen named{{"tester", "a"}, {"tester", "b"}, {"tester", "c"}};
  const Seen anonymous{{std::nullopt, "a"}, {std::nullopt, "b"}, {std::nullopt, "c"}};
  EXPECT_EQ(history(*client, kAllClientFlags), named);
  EXPECT_EQ(history(*client, kAllClientFlags & ~flx1::kFlagEventBatchPublisher), anonymous);

  auto poll = [&](Flx1TestClient& c, uint32_t features, const std::string& group,
                  const std::string& stream) {
    auto s = Authed(c, token, "default", features);
    s->SendMessage(Poll(stream, group, 10, 1));
    auto records = s->Read<flx1::GroupRecords>();
    EXPECT_TRUE(records);
    std::vector<std::optional<std::string>> publishers;
    if (records) {
      for (const auto& r : records->records) publishers.push_back(r.publisher);
    }
    return publishers;
  };
  using Publishers = std::vector<std::optional<std::string>>;
  EXPECT_EQ(poll(*client, kOfferedBits, "g1", "signed"),
            (Publishers{"tester", "tester", "tester"}));
  EXPECT_EQ(poll(*client, kOfferedBits & ~flx1::kFeatureGroupPublisher, "g2", "signed"),
            (Publishers{std::nullopt, std::nullopt, std::nullopt}));

  // From the log alone: a restarted broker serves the stored publishers.
  client.reset();
  broker.Restart();
  auto again = broker.Connect();
  EXPECT_EQ(poll(*again, kOfferedBits, "g3", "signed"), (Publishers{"tester", "tester", "tester"}));
  EXPECT_EQ(history(*again, kAllClientFlags), named);
  EXPECT_EQ(broker.Stop(), 0);
}

}  // namespace
}  // namespace felix::broker
