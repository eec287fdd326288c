// Fire-and-forget publishes that reach the broker together are appended together
// (client_session_unacked_run.cc): through the real broker, what a mix of unacked, acked,
// keyed, refused and oversized publishes sent in one write leaves in each stream — every
// record a lone frame would have stored, at the offsets and in the order it would have had.
#include "e2e_broker.h"

namespace felix::broker {
namespace {

using namespace e2e;  // NOLINT: the shared end-to-end fixture

std::vector<uint8_t> UnackedPublish(const std::string& stream, std::vector<std::string> payloads,
                                    std::optional<std::string> key = std::nullopt) {
  flx1::BinaryPublishBatch batch;
  batch.tenant_id = "default";
  batch.namespace_ = "default";
  batch.stream = stream;
  if (key) batch.key = *key;
  for (const auto& p : payloads) batch.payloads.push_back(p);
  std::vector<uint8_t> out;
  EXPECT_TRUE(flx1::AppendFrame(flx1::Flx1Frame{batch}, out));
  return out;
}

void Append(std::vector<uint8_t>& to, const std::vector<uint8_t>& frame) {
  to.insert(to.end(), frame.begin(), frame.end());
}

// Every record of `stream` (durable, shard 0) from the earliest: {offset, payload}.
std::vector<std::pair<uint64_t, std::string>> Records(Broker& broker, Flx1TestClient& client,
                                                      const std::string& stream, size_t count) {
  auto sub_stream = Authed(client, broker.AllToken());
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = stream;
  subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kEarliest, 0};
  sub_stream->SendMessage(subscribe);
  auto events = client.AcceptEventStream();
  EXPECT_TRUE(events);
  if (!events) return {};
  EXPECT_TRUE(events->Read<flx1::EventStreamHello>());
  auto subscribed = sub_stream->Read<flx1::Subscribed>();
  EXPECT_TRUE(subscribed);
  if (subscribed) {
    EXPECT_EQ(subscribed->live_offset, count);
  }
  return ReadEvents(*events, count);
}

TEST(UnackedRunE2E, UnackedPublishesSentTogetherKeepTheirOrderAndTheirStreamAmongOthers) {
  auto broker = std::make_unique<Broker>(MakeTempDir("felix-e2e-run") + "/data");
  broker->CreateStream("default", "a", /*durable=*/true);
  broker->CreateStream("default", "b", /*durable=*/true);
  auto client = broker->Connect();
  ASSERT_TRUE(client);
  auto publisher = Authed(*client, broker->AllToken());
  std::vector<uint8_t> burst;
  Append(burst, UnackedPublish("a", {"a0"}));
  Append(burst, UnackedPublish("a", {"a1", "a2"}));
  Append(burst, UnackedPublish("b", {"b0"}));
  Append(burst, UnackedPublish("missing", {"lost"}));  // refused without an answer
  Append(burst, UnackedPublish("a", {"a3"}));
  Append(burst, UnackedPublish("a", {"a4"}, "k"));  // another key: another batch
  Append(burst, UnackedPublish("a", {"a5"}, "k"));
  Append(burst, BinaryPublish(9, "a", {"a6"}));  // acked: answered after everything before it
  Append(burst, UnackedPublish("a", {"a7"}));
  Append(burst, UnackedPublish("b", {"b1"}));
  publisher->Send(burst);
  auto ack = ReadAck(*publisher);
  EXPECT_EQ(ack.request_id, 9u);
  EXPECT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk);
  EXPECT_EQ(ack.offset, 6u);  // a0…a5 went first, in the order sent
  // The stream goes on after the refused publish and the burst: one more acked publish.
  publisher->Send(BinaryPublish(10, "b", {"b2"}));
  auto last = ReadAck(*publisher);
  EXPECT_EQ(last.request_id, 10u);
  EXPECT_EQ(last.offset, 2u);

  auto a = Records(*broker, *client, "a", 8);
  ASSERT_EQ(a.size(), 8u);
  for (uint64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(a[i], (std::pair<uint64_t, std::string>{i, "a" + std::to_string(i)}));
  }
  auto b = Records(*broker, *client, "b", 3);
  ASSERT_EQ(b.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b[i], (std::pair<uint64_t, std::string>{i, "b" + std::to_string(i)}));
  }
}

// A record no consumer group could deliver is refused on its own: the unacked records around
// it are stored.
TEST(UnackedRunE2E, AnOversizedRecordAmongUnackedPublishesIsRefusedAloneAndTheOthersStay) {
  auto broker = std::make_unique<Broker>(MakeTempDir("felix-e2e-run") + "/data",
                                         std::map<std::string, std::string>{
                                             {"FELIX_MAX_FRAME_BYTES", "65536"},
                                         });
  broker->CreateStream("default", "d", /*durable=*/true);
  auto client = broker->Connect();
  ASSERT_TRUE(client);
  auto publisher = Authed(*client, broker->AllToken());
  std::vector<uint8_t> burst;
  Append(burst, UnackedPublish("d", {"d0"}));
  Append(burst, UnackedPublish("d", {std::string(60000, 'x')}));  // fits a frame, not a group
  Append(burst, UnackedPublish("d", {"d1"}));
  Append(burst, BinaryPublish(3, "d", {"d2"}));
  publisher->Send(burst);
  auto ack = ReadAck(*publisher);
  EXPECT_EQ(ack.request_id, 3u);
  EXPECT_EQ(ack.offset, 2u);
  auto d = Records(*broker, *client, "d", 3);
  ASSERT_EQ(d.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(d[i], (std::pair<uint64_t, std::string>{i, "d" + std::to_string(i)}));
  }
}

}  // namespace
}  // namespace felix::broker
