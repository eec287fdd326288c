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
  return PublishFrame(std::nullopt, stream, payloads, key);
}

// {0, "<prefix>0"}, {1, "<prefix>1"}, …: what a stream holds after records named so.
std::vector<std::pair<uint64_t, std::string>> Numbered(const std::string& prefix, uint64_t count) {
  std::vector<std::pair<uint64_t, std::string>> out;
  for (uint64_t i = 0; i < count; ++i) out.emplace_back(i, prefix + std::to_string(i));
  return out;
}

void Append(std::vector<uint8_t>& to, const std::vector<uint8_t>& frame) {
  to.insert(to.end(), frame.begin(), frame.end());
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

  EXPECT_EQ(StoredRecords(*broker, *client, "a", 8), Numbered("a", 8));
  EXPECT_EQ(StoredRecords(*broker, *client, "b", 3), Numbered("b", 3));
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
  EXPECT_EQ(StoredRecords(*broker, *client, "d", 3), Numbered("d", 3));
}

}  // namespace
}  // namespace felix::broker
