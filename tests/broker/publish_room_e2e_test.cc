// Publishes that find no room in the in-flight budgets wait for it (client_session_publish.cc,
// RoomForFrame): through the real broker with a per-stream budget smaller than two of the
// records sent, every record of a burst is stored, in order — none is shed, none refused
// `overloaded` — and the broker counts the waits. Mutation-checked: with RoomForFrame letting
// every frame on (the behaviour before), fire-and-forget records are shed and acked ones are
// answered `overloaded`.
#include "e2e_broker.h"

namespace felix::broker {
namespace {

using namespace e2e;  // NOLINT: the shared end-to-end fixture

// The value of felix_publish_requests_total{result="<result>"} (0 when absent).
double PublishRequests(Broker& broker, const std::string& result) {
  const std::string series = "felix_publish_requests_total{result=\"" + result + "\"} ";
  std::string text = broker.Metrics();
  size_t at = text.find(series);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size()));
}

// Records of 30,000 bytes against a budget of 40,000 a stream: a second one never fits beside
// the first, so every record read while the one before is still being written waits.
constexpr size_t kRecordBytes = 30000;
constexpr int kRecords = 120;
const std::map<std::string, std::string> kSmallBudget{
    {"FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES", "40000"}};

std::string Record(int i) {
  std::string r = "r" + std::to_string(i) + "/";
  r.resize(kRecordBytes, 'x');
  return r;
}

// The frames of a burst: frame(i) for every record i, one after another.
std::vector<uint8_t> Burst(const std::function<std::vector<uint8_t>(int)>& frame) {
  std::vector<uint8_t> burst;
  for (int i = 0; i < kRecords; ++i) {
    auto f = frame(i);
    burst.insert(burst.end(), f.begin(), f.end());
  }
  return burst;
}

// Every record i at offset i (a mismatch named by its offset, not printed whole).
void ExpectEveryRecord(const std::vector<std::pair<uint64_t, std::string>>& stored) {
  ASSERT_EQ(stored.size(), size_t(kRecords));
  for (int i = 0; i < kRecords; ++i) {
    ASSERT_EQ(stored[i].first, uint64_t(i));
    ASSERT_TRUE(stored[i].second == Record(i))
        << "offset " << i << " holds " << stored[i].second.substr(0, 12) << "…";
  }
}

// A broker with the small budget and `more` settings, durable stream "s", and a publisher
// stream authenticated on one connection (null publisher: the setup failed).
struct RoomSetup {
  std::unique_ptr<Broker> broker;
  std::unique_ptr<Flx1TestClient> client;
  std::shared_ptr<TestStream> publisher;
};
RoomSetup StartRoomBroker(const std::map<std::string, std::string>& more) {
  auto env = kSmallBudget;
  env.insert(more.begin(), more.end());
  RoomSetup setup;
  setup.broker = std::make_unique<Broker>(MakeTempDir("felix-e2e-room") + "/data", env);
  setup.broker->CreateStream("default", "s", /*durable=*/true);
  setup.client = setup.broker->Connect();
  EXPECT_TRUE(setup.client);
  if (setup.client) setup.publisher = Authed(*setup.client, setup.broker->AllToken());
  return setup;
}

// Every record fire-and-forget, then an acked "end" (request 1) whose answer says every one
// before it was handled.
std::vector<uint8_t> FireAndForgetThenEnd() {
  auto burst = Burst([](int i) { return PublishFrame(std::nullopt, "s", {Record(i)}); });
  auto last = BinaryPublish(1, "s", {"end"});
  burst.insert(burst.end(), last.begin(), last.end());
  return burst;
}

// FELIX_PUB_INGRESS_WAIT: fire-and-forget records wait for room however long it takes — past
// FELIX_PUBLISH_QUEUE_WAIT_MS, 1 ms here, which would shed some of them otherwise (the next
// test; with the setting ignored here, mutation-checked).
TEST(PublishRoomE2E, FireAndForgetPublishesBeyondTheBudgetWaitForRoomWithIngressWait) {
  auto [broker, client, publisher] =
      StartRoomBroker({{"FELIX_PUB_INGRESS_WAIT", "true"}, {"FELIX_PUBLISH_QUEUE_WAIT_MS", "1"}});
  ASSERT_TRUE(publisher);
  publisher->Send(FireAndForgetThenEnd());
  auto ack = ReadAck(*publisher);
  EXPECT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk);
  EXPECT_EQ(ack.offset, uint64_t(kRecords));
  auto stored = StoredRecords(*broker, *client, "s", kRecords + 1);
  ASSERT_EQ(stored.size(), size_t(kRecords + 1));
  EXPECT_EQ(stored.back(), std::make_pair(uint64_t(kRecords), std::string("end")));
  stored.pop_back();
  ExpectEveryRecord(stored);
  EXPECT_EQ(PublishRequests(*broker, "dropped"), 0);
  EXPECT_GT(broker->Metric("felix_publish_room_waits_total"), 0);
}

// A wait that outlasts FELIX_PUBLISH_QUEUE_WAIT_MS (1 ms here: the durable write of the record
// before nearly always takes longer) sheds the fire-and-forget record it held, and the stream
// reads on: every record sent is either stored, in the order sent, or counted dropped, and the
// acked publish after them (small enough to fit beside any one record in flight, so it never
// waits) is stored after them and answered. A deadline that did not resume reading leaves that
// answer unsent (mutation-checked).
TEST(PublishRoomE2E, AWaitPastItsDeadlineShedsTheRecordAndTheStreamReadsOn) {
  auto [broker, client, publisher] = StartRoomBroker({{"FELIX_PUBLISH_QUEUE_WAIT_MS", "1"}});
  ASSERT_TRUE(publisher);
  publisher->Send(FireAndForgetThenEnd());
  auto ack = ReadAck(*publisher);
  ASSERT_EQ(ack.request_id, 1u) << "the stream was not read on";
  ASSERT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk);
  const auto dropped = size_t(PublishRequests(*broker, "dropped"));
  ASSERT_LE(dropped, size_t(kRecords));
  const size_t kept = kRecords - dropped;
  EXPECT_EQ(ack.offset, uint64_t(kept));
  auto stored = StoredRecords(*broker, *client, "s", kept + 1);
  ASSERT_EQ(stored.size(), kept + 1);
  int previous = -1;
  for (size_t at = 0; at < kept; ++at) {
    ASSERT_EQ(stored[at].first, uint64_t(at));
    const int index = std::atoi(stored[at].second.c_str() + 1);  // "r<index>/xxx…"
    ASSERT_GT(index, previous) << "offset " << at << ": out of order";
    ASSERT_TRUE(stored[at].second == Record(index)) << "offset " << at;
    previous = index;
  }
  EXPECT_EQ(stored.back(), std::make_pair(uint64_t(kept), std::string("end")));
  EXPECT_GT(broker->Metric("felix_publish_room_waits_total"), 0);
}

// The default wait (here long enough never to end): acked publishes pipelined beyond the
// budget are all answered ok, in order, none `overloaded`.
TEST(PublishRoomE2E, AckedPublishesBeyondTheBudgetWaitForRoomInsteadOfOverloaded) {
  auto [broker, client, publisher] = StartRoomBroker({{"FELIX_PUBLISH_QUEUE_WAIT_MS", "600000"}});
  ASSERT_TRUE(publisher);
  publisher->Send(Burst([](int i) { return BinaryPublish(uint64_t(100 + i), "s", {Record(i)}); }));
  for (int i = 0; i < kRecords; ++i) {
    auto ack = ReadAck(*publisher);
    ASSERT_EQ(ack.request_id, uint64_t(100 + i));
    ASSERT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk) << "publish " << i;
    EXPECT_EQ(ack.offset, uint64_t(i));
  }
  ExpectEveryRecord(StoredRecords(*broker, *client, "s", kRecords));
  EXPECT_GT(broker->Metric("felix_publish_room_waits_total"), 0);
}

}  // namespace
}  // namespace felix::broker
