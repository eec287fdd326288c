// End to end through the real stack: the felix-broker process, real QUIC, real disk. The
// client side is Flx1TestClient, which sends and checks exact FLX1 bytes.
#include "e2e_broker.h"

namespace felix::broker {
namespace {

using namespace e2e;  // NOLINT: the shared end-to-end fixture
using testing::FromHex;
using testing::ToHex;

struct BrokerE2E : ::testing::Test {
  std::string dir = MakeTempDir("felix-e2e");
  std::unique_ptr<Broker> broker = std::make_unique<Broker>(dir + "/data");
};

TEST_F(BrokerE2E, AuthWithoutClientFlagsIsAnsweredWithTheGoldenOkFrame) {
  auto client = broker->Connect();
  ASSERT_TRUE(client);
  auto stream = client->OpenStream();
  stream->SendMessage(AuthMessage("default", broker->AllToken(), std::nullopt, std::nullopt));
  auto bytes = stream->ReadFrameBytes();
  ASSERT_TRUE(bytes);
  EXPECT_EQ(ToHex(*bytes), "464c5831000100000000000d7b2274797065223a226f6b227d");  // V7
}

TEST_F(BrokerE2E, AuthWithClientFlagsNegotiatesFlagsAndFeatures) {
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  stream->SendMessage(AuthMessage("default", broker->AllToken()));
  auto ok = stream->Read<flx1::AuthOk>();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->server_flags, flx1::kKnownFlags);  // the whole mask, as the reference (§3)
  ASSERT_TRUE(ok->server_features);
  EXPECT_NE(*ok->server_features & flx1::kFeatureStreamShards, 0u);
  EXPECT_NE(*ok->server_features & flx1::kFeatureErrorCodes, 0u);
}

TEST_F(BrokerE2E, BadTokenIsRefusedAndTheStreamEnds) {
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  std::string token = broker->AllToken();
  token.back() = token.back() == 'A' ? 'B' : 'A';  // break the signature
  stream->SendMessage(AuthMessage("default", token));
  auto error = stream->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "auth failed");
  EXPECT_EQ(error->code, "unauthenticated");
  EXPECT_EQ(error->retry, "fatal");
  EXPECT_TRUE(stream->WaitEnded());
  // A token of another tenant is refused the same way.
  broker->CreateTenant("other");
  auto second = client->OpenStream();
  second->SendMessage(AuthMessage("default", broker->AllToken("other")));
  auto refused = second->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->message, "auth failed");
}

// A token verified once is not verified again on every stream (catalog/verified_credentials.h;
// on one connection the same `auth` bytes reuse what they verified to while the catalog is
// unchanged, performance.md change 67) but it answers only while its tenant's keys are the ones
// it was verified with: once the tenant is deleted, and again once it is recreated with a new
// signing key, the same token is refused on the next stream of the same connection.
TEST_F(BrokerE2E, AVerifiedTokenIsRefusedOnTheNextStreamOnceItsTenantsKeysChange) {
  broker->CreateTenant("acme");
  std::string token = broker->AllToken("acme");
  auto client = broker->Connect();
  ASSERT_TRUE(client);
  for (int i = 0; i < 3; ++i) {  // the first verifies, the next ones are answered from the table
    auto stream = client->OpenStream();
    stream->SendMessage(AuthMessage("acme", token));
    ASSERT_TRUE(stream->Read<flx1::AuthOk>()) << "stream " << i;
  }
  ASSERT_EQ(broker->Admin("DELETE", "/v1/tenants/acme").first, 204);
  auto gone = client->OpenStream();
  gone->SendMessage(AuthMessage("acme", token));
  auto refused = gone->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, "unauthenticated");
  broker->CreateTenant("acme");  // same name, a new signing key
  auto rekeyed = client->OpenStream();
  rekeyed->SendMessage(AuthMessage("acme", token));
  auto still_refused = rekeyed->Read<flx1::Error>();
  ASSERT_TRUE(still_refused);
  EXPECT_EQ(still_refused->code, "unauthenticated");
  auto fresh = client->OpenStream();
  fresh->SendMessage(AuthMessage("acme", broker->AllToken("acme")));
  EXPECT_TRUE(fresh->Read<flx1::AuthOk>());
}

TEST_F(BrokerE2E, RequestsBeforeAuthAreRefused) {
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = "x";
  stream->SendMessage(subscribe);
  auto error = stream->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "auth required");
  EXPECT_TRUE(stream->WaitEnded());
  // Binary publish before auth, too.
  auto publisher = client->OpenStream();
  publisher->Send(BinaryPublish(1, "x", {"a"}));
  auto refused = publisher->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->message, "auth required");
}

TEST_F(BrokerE2E, GoldenPublishAndAckFramesHoldOnTheWire) {
  broker->CreateTenant("t1");
  broker->CreateStream("t1", "demo", /*durable=*/true);
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  // client_flags 25 as in vector V9: no ack offset, no ack codes.
  stream->SendMessage(AuthMessage("t1", broker->AllToken("t1"), 25, std::nullopt));
  ASSERT_TRUE(stream->Read<flx1::AuthOk>());
  // V13 sent verbatim is answered with V16 verbatim.
  stream->Send(
      FromHex("464c5831000100090000002900000000000000070200027431000764656661756c74000464"
              "656d6f000000010000000568656c6c6f"));
  auto ack = stream->ReadFrameBytes();
  ASSERT_TRUE(ack);
  EXPECT_EQ(ToHex(*ack), "464c5831000100100000000b0000000000000000070000");  // V16
  // A publish to a stream that does not exist: V17 verbatim.
  stream->Send(BinaryPublish(9, "missing", {"x"}, "t1"));
  auto error = stream->ReadFrameBytes();
  ASSERT_TRUE(error);
  EXPECT_EQ(ToHex(*error),
            "464c5831000100100000001b010000000000000009001073747265616d206e6f7420666f756e64");
  // With ack codes offered the same refusal is D3 (code 3 not_found, retry 2).
  auto coded = client->OpenStream();
  coded->SendMessage(AuthMessage("t1", broker->AllToken("t1"), 25 | 0x0200, std::nullopt));
  ASSERT_TRUE(coded->Read<flx1::AuthOk>());
  coded->Send(BinaryPublish(9, "missing", {"x"}, "t1"));
  auto d3 = coded->ReadFrameBytes();
  ASSERT_TRUE(d3);
  EXPECT_EQ(ToHex(*d3),
            "464c5831000102100000001e010000000000000009001073747265616d206e6f7420666f756e64000302");
}

TEST_F(BrokerE2E, DurablePublishThenSubscribeEarliestReplaysHistoryThenLive) {
  broker->CreateStream("default", "orders", /*durable=*/true);
  auto client = broker->Connect();
  std::string token = broker->AllToken();
  auto publisher = Authed(*client, token);
  for (uint64_t i = 0; i < 5; ++i) {
    publisher->Send(BinaryPublish(i + 1, "orders", {"h" + std::to_string(i)}));
    auto ack = ReadAck(*publisher);
    EXPECT_EQ(ack.status, flx1::BinaryPublishAck::Status::kOk);
    EXPECT_EQ(ack.request_id, i + 1);
    EXPECT_EQ(ack.offset, i);  // offered 0x1000: the first record's offset
  }
  auto sub_stream = Authed(*client, token);
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = "orders";
  subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kEarliest, 0};
  sub_stream->SendMessage(subscribe);
  auto events = client->AcceptEventStream();
  ASSERT_TRUE(events);
  auto hello = events->Read<flx1::EventStreamHello>();
  ASSERT_TRUE(hello);
  auto subscribed = sub_stream->Read<flx1::Subscribed>();
  ASSERT_TRUE(subscribed);
  EXPECT_EQ(subscribed->subscription_id, hello->subscription_id);
  EXPECT_EQ(subscribed->start_offset, 0u);
  EXPECT_EQ(subscribed->live_offset, 5u);
  EXPECT_TRUE(sub_stream->WaitEnded());  // the broker finishes the subscribe stream
  auto history = ReadEvents(*events, 5);
  ASSERT_EQ(history.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(history[i].first, i);
    EXPECT_EQ(history[i].second, "h" + std::to_string(i));
  }
  publisher->Send(BinaryPublish(99, "orders", {"live-a", "live-b"}));
  EXPECT_EQ(ReadAck(*publisher).offset, 5u);
  auto live = ReadEvents(*events, 2);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0], (std::pair<uint64_t, std::string>{5, "live-a"}));
  EXPECT_EQ(live[1], (std::pair<uint64_t, std::string>{6, "live-b"}));
}

TEST_F(BrokerE2E, JsonPublishIsAnsweredWithPublishOk) {
  broker->CreateStream("default", "json", /*durable=*/true);
  auto client = broker->Connect();
  auto stream = Authed(*client, broker->AllToken());
  flx1::PublishBatch publish;
  publish.tenant_id = "default";
  publish.namespace_ = "default";
  publish.stream = "json";
  publish.payloads = {{'a'}, {'b'}};
  publish.request_id = 7;
  stream->SendMessage(publish);
  auto ok = stream->Read<flx1::PublishOk>();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->request_id, 7u);
  EXPECT_EQ(ok->offset, 0u);
  // Acked without a request id: refused, the stream goes on.
  publish.request_id.reset();
  stream->SendMessage(publish);
  auto error = stream->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "missing request_id for acked publish batch");
  publish.request_id = 8;
  stream->SendMessage(publish);
  auto again = stream->Read<flx1::PublishOk>();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->offset, 2u);
}

TEST_F(BrokerE2E, RestartKeepsTheLogAndSubscriptionsResumeAtTheStoredOffset) {
  broker->CreateStream("default", "keep", /*durable=*/true);
  {
    auto client = broker->Connect();
    auto publisher = Authed(*client, broker->AllToken());
    for (uint64_t i = 0; i < 10; ++i) {
      publisher->Send(BinaryPublish(i, "keep", {"r" + std::to_string(i)}));
      ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk);
    }
  }
  broker->Restart();
  auto client = broker->Connect();
  std::string token = broker->AllToken();
  auto sub_stream = Authed(*client, token);
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = "keep";
  subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kOffset, 7};
  sub_stream->SendMessage(subscribe);
  auto events = client->AcceptEventStream();
  ASSERT_TRUE(events);
  ASSERT_TRUE(events->Read<flx1::EventStreamHello>());
  auto subscribed = sub_stream->Read<flx1::Subscribed>();
  ASSERT_TRUE(subscribed);
  EXPECT_EQ(subscribed->start_offset, 7u);
  EXPECT_EQ(subscribed->live_offset, 10u);
  auto publisher = Authed(*client, token);
  publisher->Send(BinaryPublish(50, "keep", {"after-restart"}));
  EXPECT_EQ(ReadAck(*publisher).offset, 10u);
  auto got = ReadEvents(*events, 4);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0], (std::pair<uint64_t, std::string>{7, "r7"}));
  EXPECT_EQ(got[2], (std::pair<uint64_t, std::string>{9, "r9"}));
  EXPECT_EQ(got[3], (std::pair<uint64_t, std::string>{10, "after-restart"}));
  // Offsets outside the log are cursor errors, never a silent restart.
  auto too_far = Authed(*client, token);
  subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kOffset, 500};
  too_far->SendMessage(subscribe);
  auto cursor = too_far->Read<flx1::SubscribeCursorError>();
  ASSERT_TRUE(cursor);
  EXPECT_EQ(cursor->reason, flx1::CursorErrorReason::kInFuture);
  EXPECT_EQ(cursor->available, 11u);
}

TEST_F(BrokerE2E, MissingPermissionIsForbiddenAndEndsTheStream) {
  broker->CreateStream("default", "guarded", /*durable=*/false);
  auto client = broker->Connect();
  auto stream = Authed(*client, broker->Token("default", {"stream.subscribe:stream:default/*/*"}));
  stream->Send(BinaryPublish(3, "guarded", {"x"}));
  auto ack = ReadAck(*stream);
  EXPECT_EQ(ack.status, flx1::BinaryPublishAck::Status::kError);
  EXPECT_EQ(ack.request_id, 3u);
  EXPECT_EQ(ack.message, "forbidden");
  ASSERT_TRUE(ack.code);
  EXPECT_EQ(ack.code->code, 2u);
  EXPECT_TRUE(stream->WaitEnded());
  // The subscribe permission alone does allow subscribing.
  auto sub_stream =
      Authed(*client, broker->Token("default", {"stream.subscribe:stream:default/*/*"}));
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = "guarded";
  sub_stream->SendMessage(subscribe);
  ASSERT_TRUE(client->AcceptEventStream());
  EXPECT_TRUE(sub_stream->Read<flx1::Subscribed>());
}

TEST_F(BrokerE2E, UnknownFlagsAreRefusedAndTheStreamSurvives) {
  broker->CreateStream("default", "flags", /*durable=*/true);
  auto client = broker->Connect();
  auto stream = Authed(*client, broker->AllToken());
  // flags 0x8000 (unknown) with a 3-byte payload the broker must skip.
  stream->Send(
      FromHex("464c5831000180000000000361626"
              "3"));
  auto error = stream->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->message, "unsupported frame flags");
  EXPECT_EQ(error->code, "invalid_request");
  stream->Send(BinaryPublish(1, "flags", {"still-here"}));
  EXPECT_EQ(ReadAck(*stream).status, flx1::BinaryPublishAck::Status::kOk);
}

TEST_F(BrokerE2E, OversizedFrameBeforeAuthEndsTheStreamOnItsHeader) {
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  stream->Send(
      FromHex("464c583100010000"
              "00100000"));  // 1 MiB JSON frame, no payload sent
  auto error = stream->Read<flx1::Error>();
  ASSERT_TRUE(error);
  EXPECT_TRUE(stream->WaitEnded());
  EXPECT_TRUE(client->connection_open());  // only the stream ends
}

TEST_F(BrokerE2E, UndecodableJsonDropsTheStreamWithoutAnswer) {
  auto client = broker->Connect();
  auto stream = Authed(*client, broker->AllToken());
  std::string junk = "{not json";
  std::vector<uint8_t> frame = FromHex(
      "464c583100010000000000"
      "09");
  frame.insert(frame.end(), junk.begin(), junk.end());
  stream->Send(frame);
  EXPECT_TRUE(stream->WaitEnded());
  EXPECT_TRUE(stream->was_reset());
  EXPECT_FALSE(stream->ReadFrameBytes(std::chrono::milliseconds(100)));
  EXPECT_TRUE(client->connection_open());
}

// Issue 12 item 2: on a durable stream a slow subscriber is never dropped from silently. A
// client that did not offer SUBSCRIPTION_LAGGED is slowed down and replayed from the log; one
// that did is ended with subscription_lagged naming where to resume. Publishers never wait.
struct SlowSubscriber {
  std::unique_ptr<Flx1TestClient> client;
  std::shared_ptr<TestStream> events;
};

SlowSubscriber SubscribePaused(Broker& broker, const std::string& token, const std::string& stream,
                               uint32_t features) {
  SlowSubscriber out;
  out.client = broker.Connect();
  auto control = out.client->OpenStream();
  control->SendMessage(AuthMessage("default", token, kAllClientFlags, features));
  EXPECT_TRUE(control->Read<flx1::AuthOk>());
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = stream;
  subscribe.queue_capacity = 2;
  control->SendMessage(subscribe);
  out.events = out.client->AcceptEventStream();
  EXPECT_TRUE(out.events);
  if (!out.events) return out;
  EXPECT_TRUE(out.events->Read<flx1::EventStreamHello>());
  EXPECT_TRUE(control->Read<flx1::Subscribed>());
  out.events->SetPaused(true);  // stops reading: QUIC flow control backs up into its queue
  return out;
}

// Publishes `count` 32 KiB records (6.4 MB for 200: far beyond one stream window); every ack
// arrives although the subscriber reads nothing.
void PublishBig(Broker& broker, const std::string& token, const std::string& stream, int count) {
  auto client = broker.Connect();
  auto publisher = Authed(*client, token);
  const std::string payload(32 * 1024, 'p');
  for (int i = 0; i < count; ++i) publisher->Send(BinaryPublish(i, stream, {payload}));
  for (int i = 0; i < count; ++i) {
    ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk) << i;
  }
}

TEST_F(BrokerE2E, SlowDurableSubscriberIsReplayedFromTheLogAndLosesNothing) {
  // No fsync: the test is about fanout, and must outrun QUIC's idle timeout while paused.
  broker->CreateStream("default", "fan", /*durable=*/true, 1, "none");
  std::string token = broker->AllToken();
  SlowSubscriber slow = SubscribePaused(*broker, token, "fan", flx1::kFeatureErrorCodes);
  ASSERT_TRUE(slow.events);
  constexpr int kRecords = 200;
  PublishBig(*broker, token, "fan", kRecords);
  slow.events->SetPaused(false);
  auto got = ReadEvents(*slow.events, kRecords);
  ASSERT_EQ(got.size(), static_cast<size_t>(kRecords));
  for (int i = 0; i < kRecords; ++i) ASSERT_EQ(got[i].first, static_cast<uint64_t>(i));
  // Live again after the replay: the next record follows directly.
  auto client = broker->Connect();
  auto publisher = Authed(*client, token);
  publisher->Send(BinaryPublish(7, "fan", {"after"}));
  ASSERT_EQ(ReadAck(*publisher).status, flx1::BinaryPublishAck::Status::kOk);
  auto after = ReadEvents(*slow.events, 1);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0], (std::pair<uint64_t, std::string>{kRecords, "after"}));
}

TEST_F(BrokerE2E, SlowDurableSubscriberThatOfferedLaggedIsEndedWithResumeFrom) {
  broker->CreateStream("default", "lag", /*durable=*/true, 1, "none");
  std::string token = broker->AllToken();
  SlowSubscriber slow = SubscribePaused(
      *broker, token, "lag", flx1::kFeatureErrorCodes | flx1::kFeatureSubscriptionLagged);
  ASSERT_TRUE(slow.events);
  constexpr int kRecords = 200;
  PublishBig(*broker, token, "lag", kRecords);
  slow.events->SetPaused(false);
  // Contiguous from 0, then subscription_lagged naming the first offset not sent, then FIN.
  auto end = ReadToLastFrame(*slow.events);
  EXPECT_TRUE(end.contiguous);
  uint64_t next = end.next;
  auto* lagged = end.last ? std::get_if<flx1::SubscriptionLagged>(&*end.last) : nullptr;
  ASSERT_NE(lagged, nullptr);
  EXPECT_LT(next, static_cast<uint64_t>(kRecords));  // it did overflow...
  EXPECT_EQ(lagged->resume_from, next);              // ...and says exactly where to resume
  EXPECT_TRUE(slow.events->WaitEnded());
  EXPECT_NE(broker->Metrics().find("felix_sub_lagged_total 1"), std::string::npos);
}

TEST_F(BrokerE2E, AuthOkAdvertisesSubscriptionLagged) {
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  stream->SendMessage(AuthMessage("default", broker->AllToken()));
  auto ok = stream->Read<flx1::AuthOk>();
  ASSERT_TRUE(ok && ok->server_features);
  EXPECT_NE(*ok->server_features & flx1::kFeatureSubscriptionLagged, 0u);
}

TEST_F(BrokerE2E, StreamShardsReportsTheCatalogShardCount) {
  broker->CreateStream("default", "wide", /*durable=*/false, 4);
  auto client = broker->Connect();
  auto stream = Authed(*client, broker->AllToken());
  flx1::StreamShards request;
  request.tenant_id = "default";
  request.namespace_ = "default";
  request.stream = "wide";
  request.request_id = 5;
  stream->SendMessage(request);
  auto view = stream->Read<flx1::StreamShardsView>();
  ASSERT_TRUE(view);
  EXPECT_EQ(view->shards, 4u);
  EXPECT_EQ(view->request_id, 5u);
  request.stream = "unknown";
  stream->SendMessage(request);
  auto none = stream->Read<flx1::StreamShardsView>();
  ASSERT_TRUE(none);
  EXPECT_EQ(none->shards, 0u);
}

// ---- Publish acknowledgements on the wire (semantics.md §2.3–2.4, client-protocol §9.3) ----

flx1::PublishBatch JsonPublish(const std::string& stream, uint64_t request_id) {
  flx1::PublishBatch publish;
  publish.tenant_id = "default";
  publish.namespace_ = "default";
  publish.stream = stream;
  publish.payloads = {{'j'}};
  publish.request_id = request_id;
  return publish;
}

TEST_F(BrokerE2E, InMemoryPublishAcksCarryNoOffsetEvenWhenWritten) {
  broker->CreateStream("default", "mem", /*durable=*/false);
  broker->CreateStream("default", "disk", /*durable=*/true);
  auto client = broker->Connect();
  // Commit acks and 0x1000 offered: a log's offset is told, an in-memory position never is.
  auto stream = Authed(*client, broker->AllToken());
  stream->Send(BinaryPublish(7, "mem", {"hello"}));
  auto bytes = stream->ReadFrameBytes();
  ASSERT_TRUE(bytes);
  EXPECT_EQ(ToHex(*bytes), "464c5831000100100000000b0000000000000000070000");  // V16
  stream->SendMessage(JsonPublish("mem", 8));
  auto ok = stream->Read<flx1::PublishOk>();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->request_id, 8u);
  EXPECT_FALSE(ok->offset.has_value());
  // The same session on a durable stream does get offsets (D5 for request 9 at offset 0).
  stream->Send(BinaryPublish(9, "disk", {"hello"}));
  auto with_offset = stream->ReadFrameBytes();
  ASSERT_TRUE(with_offset);
  EXPECT_EQ(ToHex(*with_offset), "464c5831000110100000001300000000000000000900000000000000000000");
}

TEST_F(BrokerE2E, UnsupportedAnswersKeepRequestIdAndExtension) {
  auto client = broker->Connect();
  auto stream = Authed(*client, broker->AllToken(), "default",
                       flx1::kFeatureErrorCodes | flx1::kFeatureUnsupported);
  flx1::Extension extension;
  extension.name = "acme.ping";
  extension.request_id = 41;
  stream->SendMessage(extension);
  auto bytes = stream->ReadFrameBytes();
  ASSERT_TRUE(bytes);
  std::string json(bytes->begin() + flx1::kHeaderSize, bytes->end());
  EXPECT_EQ(json, R"({"type":"unsupported","request_type":"extension","extension":"acme.ping",)"
                  R"("request_id":41})");
  // A request type this broker decodes but does not serve (STREAM_READ).
  flx1::StreamRead read;
  read.tenant_id = "default";
  read.namespace_ = "default";
  read.stream = "x";
  read.request_id = 42;
  stream->SendMessage(read);
  auto known = stream->Read<flx1::Unsupported>();
  ASSERT_TRUE(known);
  EXPECT_EQ(known->request_type, "stream_read");
  EXPECT_EQ(known->request_id, 42u);
  EXPECT_FALSE(known->extension.has_value());
  // A type no one knows, with a numeric request_id.
  std::string unknown = R"({"type":"frobnicate","request_id":43})";
  std::vector<uint8_t> frame = FromHex("464c58310001000000000025");
  frame.insert(frame.end(), unknown.begin(), unknown.end());
  ASSERT_EQ(frame.size(), flx1::kHeaderSize + 0x25);
  stream->Send(frame);
  auto unknown_answer = stream->Read<flx1::Unsupported>();
  ASSERT_TRUE(unknown_answer);
  EXPECT_EQ(unknown_answer->request_type, "frobnicate");
  EXPECT_EQ(unknown_answer->request_id, 43u);
  // The stream goes on.
  flx1::StreamShards shards;
  shards.tenant_id = "default";
  shards.namespace_ = "default";
  shards.stream = "x";
  shards.request_id = 44;
  stream->SendMessage(shards);
  auto view = stream->Read<flx1::StreamShardsView>();
  ASSERT_TRUE(view);
  EXPECT_EQ(view->request_id, 44u);
}

TEST_F(BrokerE2E, AcksComeAtEnqueueWithoutOffsetUnlessTheClientAsksForCommitAcks) {
  broker->CreateStream("default", "orders", /*durable=*/true);
  auto client = broker->Connect();
  // 0x1000 offered, ACK_ON_COMMIT not: acks at enqueue, never an invented offset.
  auto queued = Authed(*client, broker->AllToken(), "default", flx1::kFeatureErrorCodes);
  queued->Send(BinaryPublish(7, "orders", {"a"}));
  auto bytes = queued->ReadFrameBytes();
  ASSERT_TRUE(bytes);
  EXPECT_EQ(ToHex(*bytes), "464c5831000100100000000b0000000000000000070000");  // V16
  queued->SendMessage(JsonPublish("orders", 8));
  auto ok = queued->Read<flx1::PublishOk>();
  ASSERT_TRUE(ok);
  EXPECT_FALSE(ok->offset.has_value());
  // Offering ACK_ON_COMMIT: answered after the write, with the first record's offset. The two
  // queued publishes are written by then (one shard, in order), so this one lands at 2.
  auto committed = Authed(*client, broker->AllToken());
  committed->Send(BinaryPublish(9, "orders", {"b", "c"}));
  auto ack = ReadAck(*committed);
  EXPECT_EQ(ack.offset, 2u);
  committed->SendMessage(JsonPublish("orders", 10));
  auto json_ok = committed->Read<flx1::PublishOk>();
  ASSERT_TRUE(json_ok);
  EXPECT_EQ(json_ok->offset, 4u);
}

TEST_F(BrokerE2E, PipeliningIsGrantedAndAnswersFollowTheStreamOrder) {
  broker->CreateStream("default", "piped", /*durable=*/true);
  auto client = broker->Connect();
  auto plain = client->OpenStream();
  plain->SendMessage(AuthMessage("default", broker->AllToken()));
  auto plain_ok = plain->Read<flx1::AuthOk>();
  ASSERT_TRUE(plain_ok);
  EXPECT_FALSE(plain_ok->publish_window.has_value());  // not offered: not granted
  uint32_t wanted = flx1::kFeaturePublishPipeline | flx1::kFeatureStreamPublishWindow;
  EXPECT_EQ(*plain_ok->server_features & wanted, wanted);

  auto piped = client->OpenStream();
  piped->SendMessage(AuthMessage("default", broker->AllToken(), kAllClientFlags,
                                 kDefaultFeatures | flx1::kFeaturePublishPipeline));
  auto piped_ok = piped->Read<flx1::AuthOk>();
  ASSERT_TRUE(piped_ok);
  EXPECT_EQ(piped_ok->publish_window, 256u);  // FELIX_BROKER_PUBLISH_WINDOW default
  // A publish waiting for its fsync, then one refused at once: the refusal waits its turn.
  std::vector<uint8_t> both = BinaryPublish(1, "piped", {"x"});
  std::vector<uint8_t> missing = BinaryPublish(2, "missing", {"y"});
  both.insert(both.end(), missing.begin(), missing.end());
  piped->Send(both);
  auto first = ReadAck(*piped);
  EXPECT_EQ(first.request_id, 1u);
  EXPECT_EQ(first.status, flx1::BinaryPublishAck::Status::kOk);
  EXPECT_EQ(first.offset, 0u);
  auto second = ReadAck(*piped);
  EXPECT_EQ(second.request_id, 2u);
  EXPECT_EQ(second.status, flx1::BinaryPublishAck::Status::kError);
}

TEST_F(BrokerE2E, ShardOwnersListsEveryShardOfAStandaloneBrokerAtGenerationZero) {
  broker->CreateStream("default", "owned", /*durable=*/false, 3);
  auto client = broker->Connect();
  auto stream = Authed(*client, broker->AllToken());
  flx1::ShardOwners request;
  request.tenant_id = "default";
  request.namespace_ = "default";
  request.name = "owned";
  request.kind = flx1::ShardKind::kStream;
  request.request_id = 5;
  stream->SendMessage(request);
  auto bytes = stream->ReadFrameBytes();
  ASSERT_TRUE(bytes);
  EXPECT_EQ(std::string(bytes->begin() + flx1::kHeaderSize, bytes->end()),
            R"({"type":"shard_owners_view","owners":[{"shard":0,"generation":0},)"
            R"({"shard":1,"generation":0},{"shard":2,"generation":0}],"request_id":5})");
  request.name = "unknown";
  request.request_id = 6;
  stream->SendMessage(request);
  auto none = stream->Read<flx1::ShardOwnersView>();
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->owners.empty());
  EXPECT_EQ(none->request_id, 6u);
  request.tenant_id = "other";
  stream->SendMessage(request);
  auto refused = stream->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->message, "tenant mismatch");
  EXPECT_TRUE(stream->WaitEnded());
}

// ---- Idempotent producers (semantics.md §7) ----

flx1::PublishIdempotent Idempotent(uint64_t request_id, uint64_t producer, uint64_t sequence,
                                   std::vector<std::string> payloads) {
  flx1::PublishIdempotent p;
  p.tenant_id = "default";
  p.namespace_ = "default";
  p.stream = "exactly";
  for (const auto& payload : payloads) p.payloads.emplace_back(payload.begin(), payload.end());
  p.request_id = request_id;
  p.producer_id = producer;
  p.sequence = sequence;
  return p;
}

TEST_F(BrokerE2E, IdempotentProducersAnswerResendsWithTheOriginalOffsetsAcrossARestart) {
  broker->CreateStream("default", "exactly", /*durable=*/true);
  uint64_t producer = 0;
  {
    auto client = broker->Connect();
    auto stream = Authed(
        *client, broker->AllToken(), "default",
        flx1::kFeatureErrorCodes | flx1::kFeatureIdempotentProducer | flx1::kFeatureSequenceReused);
    flx1::ProducerInit init;
    init.request_id = 1;
    stream->SendMessage(init);
    auto id = stream->Read<flx1::ProducerInitOk>();
    ASSERT_TRUE(id);
    EXPECT_EQ(id->request_id, 1u);
    EXPECT_NE(id->producer_id, 0u);
    producer = id->producer_id;
    stream->SendMessage(Idempotent(2, producer, 0, {"a", "b"}));
    auto first = stream->Read<flx1::PublishOk>();
    ASSERT_TRUE(first);
    EXPECT_EQ(first->offset, 0u);  // always after the write, with the offset
    // The same batch again: the original answer, nothing appended.
    stream->SendMessage(Idempotent(3, producer, 0, {"a", "b"}));
    auto resend = stream->Read<flx1::PublishOk>();
    ASSERT_TRUE(resend);
    EXPECT_EQ(resend->request_id, 3u);
    EXPECT_EQ(resend->offset, 0u);
    // The same sequence for other payloads.
    stream->SendMessage(Idempotent(4, producer, 0, {"x"}));
    auto reused = stream->Read<flx1::PublishRefused>();
    ASSERT_TRUE(reused);
    EXPECT_EQ(reused->reason.kind, flx1::PublishRefusalReason::Kind::kSequenceReused);
    // Ahead of the next expected sequence.
    stream->SendMessage(Idempotent(5, producer, 2, {"c"}));
    auto gap = stream->Read<flx1::PublishRefused>();
    ASSERT_TRUE(gap);
    EXPECT_EQ(gap->reason.kind, flx1::PublishRefusalReason::Kind::kSequenceGap);
    EXPECT_EQ(gap->reason.expected, 1u);
    // A producer the shard never saw, not starting at 0.
    stream->SendMessage(Idempotent(6, producer + 1, 7, {"d"}));
    auto unknown = stream->Read<flx1::PublishRefused>();
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->reason.kind, flx1::PublishRefusalReason::Kind::kUnknownProducer);
    // The binary form (0x0109, vector D2's layout) is answered in JSON.
    flx1::BinaryPublishBatch binary;
    binary.acked = flx1::BinaryPublishBatch::Acked{7, flx1::AckMode::kPerBatch};
    binary.idempotent = flx1::BinaryPublishBatch::Idempotent{producer, 1};
    binary.tenant_id = "default";
    binary.namespace_ = "default";
    binary.stream = "exactly";
    binary.payloads = {"c"};
    std::vector<uint8_t> frame;
    ASSERT_TRUE(flx1::AppendFrame(flx1::Flx1Frame{binary}, frame));
    stream->Send(frame);
    auto second = stream->Read<flx1::PublishOk>();
    ASSERT_TRUE(second);
    EXPECT_EQ(second->request_id, 7u);
    EXPECT_EQ(second->offset, 2u);
  }
  broker->Restart();
  auto client = broker->Connect();
  // Without SEQUENCE_REUSED offered, a reused sequence is answered ok and not written.
  auto stream = Authed(*client, broker->AllToken(), "default",
                       flx1::kFeatureErrorCodes | flx1::kFeatureIdempotentProducer);
  stream->SendMessage(Idempotent(8, producer, 1, {"c"}));
  auto after_restart = stream->Read<flx1::PublishOk>();
  ASSERT_TRUE(after_restart);
  EXPECT_EQ(after_restart->offset, 2u);  // the marks survived the restart
  stream->SendMessage(Idempotent(9, producer, 1, {"changed"}));
  auto silently = stream->Read<flx1::PublishOk>();
  ASSERT_TRUE(silently);
  EXPECT_FALSE(silently->offset.has_value());
  stream->SendMessage(Idempotent(10, producer, 2, {"d"}));
  auto next = stream->Read<flx1::PublishOk>();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->offset, 3u);  // "changed" was not written
}

TEST(BrokerSettingsE2E, AckOnCommitSettingAndASmallWindowHoldForEveryClient) {
  std::string dir = MakeTempDir("felix-e2e-settings");
  Broker broker(dir + "/data",
                {{"FELIX_ACK_ON_COMMIT", "true"}, {"FELIX_BROKER_PUBLISH_WINDOW", "2"}});
  broker.CreateStream("default", "orders", /*durable=*/true);
  auto client = broker.Connect();
  // ACK_ON_COMMIT not offered, yet the setting makes every ack come after the write.
  auto stream = client->OpenStream();
  stream->SendMessage(AuthMessage("default", broker.AllToken(), kAllClientFlags,
                                  flx1::kFeatureErrorCodes | flx1::kFeaturePublishPipeline));
  auto ok = stream->Read<flx1::AuthOk>();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->publish_window, 2u);
  // Ten publishes in one go through a window of two: the broker reads two, waits for their
  // answers, reads on; every answer arrives, in order, with its offset.
  std::vector<uint8_t> all;
  for (uint64_t i = 0; i < 10; ++i) {
    auto frame = BinaryPublish(100 + i, "orders", {"r" + std::to_string(i)});
    all.insert(all.end(), frame.begin(), frame.end());
  }
  stream->Send(all);
  for (uint64_t i = 0; i < 10; ++i) {
    auto ack = ReadAck(*stream);
    EXPECT_EQ(ack.request_id, 100 + i);
    EXPECT_EQ(ack.offset, i);
  }
  EXPECT_EQ(broker.Stop(), 0);
}

TEST(BrokerSettingsE2E, WindowZeroAdvertisesNoPipelining) {
  std::string dir = MakeTempDir("felix-e2e-window0");
  Broker broker(dir + "/data", {{"FELIX_BROKER_PUBLISH_WINDOW", "0"}});
  auto client = broker.Connect();
  auto stream = client->OpenStream();
  stream->SendMessage(AuthMessage("default", broker.AllToken(), kAllClientFlags,
                                  kDefaultFeatures | flx1::kFeaturePublishPipeline));
  auto ok = stream->Read<flx1::AuthOk>();
  ASSERT_TRUE(ok);
  EXPECT_FALSE(ok->publish_window.has_value());
  EXPECT_EQ(*ok->server_features & flx1::kFeaturePublishPipeline, 0u);
  EXPECT_EQ(broker.Stop(), 0);
}

}  // namespace
}  // namespace felix::broker
