// Unit tests of the client library's pieces that need no broker: frame cutting with
// consume-driven flow control, request-id matching, event-stream routing before `subscribed`,
// error mapping and option parsing.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "client/answer_wait.h"
#include "client/error_mapping.h"
#include "client/event_router.h"
#include "client/frame_reader.h"
#include "client/pending_requests.h"
#include "felix/client.h"
#include "wire/flx1/frame.h"

namespace felix {
namespace {

namespace flx1 = wire::flx1;
using client_impl::EventRouter;
using client_impl::FrameReader;
using client_impl::PendingRequests;
using Verdict = FrameReader::Verdict;

std::vector<uint8_t> Frame(const flx1::Message& m) {
  auto f = flx1::EncodeMessageFrame(m);
  EXPECT_TRUE(f);
  return *f;
}

std::vector<uint8_t> Hello(uint64_t id) {
  return Frame(flx1::Message(flx1::EventStreamHello{.subscription_id = id}));
}

std::vector<uint8_t> Cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// A fake transport receive buffer: bytes arrive, the reader consumes from the front.
struct FakeRx {
  std::vector<uint8_t> buffered;
  void Arrive(const std::vector<uint8_t>& bytes) {
    buffered.insert(buffered.end(), bytes.begin(), bytes.end());
  }
  FrameReader::FeedResult Feed(FrameReader& r, const FrameReader::Handler& h) {
    auto res = r.Feed(buffered, h);
    buffered.erase(buffered.begin(), buffered.begin() + long(res.consume));
    return res;
  }
};

uint64_t HelloId(uint16_t flags, std::span<const uint8_t> payload) {
  auto f = flx1::DecodePayload(flags, payload);
  EXPECT_TRUE(f);
  return std::get<flx1::EventStreamHello>(std::get<flx1::Message>(*f)).subscription_id;
}

TEST(FrameReader, CutsWholeFramesAndLeavesAPartialHeader) {
  FrameReader reader(1 << 20);
  FakeRx rx;
  auto two = Cat({Hello(1), Hello(2)});
  rx.Arrive(two);
  rx.Arrive({0x46, 0x4c, 0x58});  // 3 bytes of the next header
  std::vector<uint64_t> ids;
  auto res = rx.Feed(reader, [&](uint16_t f, std::span<const uint8_t> p) {
    ids.push_back(HelloId(f, p));
    return Verdict::kAccept;
  });
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(res.consume, two.size());
  EXPECT_EQ(rx.buffered.size(), 3u);  // a partial header stays in the transport
  EXPECT_FALSE(res.error);
}

TEST(FrameReader, AssemblesAFrameArrivingInPiecesAndReturnsItsCredit) {
  FrameReader reader(1 << 20);
  FakeRx rx;
  auto frame = Hello(77);
  std::vector<uint64_t> ids;
  auto handler = [&](uint16_t f, std::span<const uint8_t> p) {
    ids.push_back(HelloId(f, p));
    return Verdict::kAccept;
  };
  for (size_t i = 0; i < frame.size(); i += 15) {
    size_t end = std::min(frame.size(), i + 15);
    rx.Arrive(std::vector<uint8_t>(frame.begin() + long(i), frame.begin() + long(end)));
    rx.Feed(reader, handler);
    if (end >= 12) {
      EXPECT_TRUE(rx.buffered.empty()) << "partial payload bytes are consumed";
    }
  }
  EXPECT_EQ(ids, std::vector<uint64_t>{77});
  EXPECT_EQ(reader.held(), 0u);
}

TEST(FrameReader, PauseLeavesTheFrameUnconsumedUntilFedAgain) {
  FrameReader reader(1 << 20);
  FakeRx rx;
  rx.Arrive(Cat({Hello(1), Hello(2), Hello(3)}));
  std::vector<uint64_t> ids;
  bool full = false;
  auto handler = [&](uint16_t f, std::span<const uint8_t> p) {
    if (full) return Verdict::kPause;
    ids.push_back(HelloId(f, p));
    if (ids.size() == 1) full = true;
    return Verdict::kAccept;
  };
  auto res = rx.Feed(reader, handler);
  EXPECT_TRUE(res.paused);
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(rx.buffered.size(), 2 * Hello(2).size());  // flow control holds the rest
  full = false;
  res = rx.Feed(reader, handler);
  EXPECT_FALSE(res.paused);
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_TRUE(rx.buffered.empty());
}

TEST(FrameReader, PausedAssembledFrameIsRetriedWithNoNewBytes) {
  FrameReader reader(1 << 20);
  FakeRx rx;
  auto frame = Hello(5);
  rx.Arrive(std::vector<uint8_t>(frame.begin(), frame.begin() + 20));
  bool full = true;
  std::vector<uint64_t> ids;
  auto handler = [&](uint16_t f, std::span<const uint8_t> p) {
    if (full) return Verdict::kPause;
    ids.push_back(HelloId(f, p));
    return Verdict::kAccept;
  };
  rx.Feed(reader, handler);
  rx.Arrive(std::vector<uint8_t>(frame.begin() + 20, frame.end()));
  auto res = rx.Feed(reader, handler);
  EXPECT_TRUE(res.paused);
  EXPECT_TRUE(rx.buffered.empty());  // the reader holds the whole frame
  full = false;
  res = rx.Feed(reader, handler);  // nothing new from the transport
  EXPECT_EQ(ids, std::vector<uint64_t>{5});
  EXPECT_EQ(reader.held(), 0u);
}

TEST(FrameReader, RefusesBadMagicAndOversizedFrames) {
  FrameReader small(16);
  FakeRx rx;
  rx.Arrive(Hello(1));  // payload is longer than 16 bytes
  auto res = rx.Feed(small, [](uint16_t, std::span<const uint8_t>) { return Verdict::kAccept; });
  ASSERT_TRUE(res.error);
  EXPECT_EQ(res.error->code, ClientErrorCode::kProtocol);

  FrameReader reader(1 << 20);
  FakeRx bad;
  bad.Arrive(std::vector<uint8_t>(12, 0xAB));
  res = bad.Feed(reader, [](uint16_t, std::span<const uint8_t>) { return Verdict::kAccept; });
  ASSERT_TRUE(res.error);
}

TEST(PendingRequests, MatchesAnswersByRequestIdInAnyOrder) {
  PendingRequests<int> pending;
  std::vector<std::pair<uint64_t, int>> got;
  for (uint64_t id : {7, 8, 9})
    ASSERT_TRUE(pending.Add(id, [&got, id](int v) { got.emplace_back(id, v); }));
  EXPECT_FALSE(pending.Add(8, [](int) {}));  // ids are unique
  EXPECT_TRUE(pending.Complete(9, 90));
  EXPECT_TRUE(pending.Complete(7, 70));
  EXPECT_FALSE(pending.Complete(7, 71));  // answered once
  EXPECT_FALSE(pending.Complete(42, 0));  // unknown id
  EXPECT_EQ(pending.size(), 1u);
  pending.FailAll([] { return -1; });
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(got, (std::vector<std::pair<uint64_t, int>>{{9, 90}, {7, 70}, {8, -1}}));
}

TEST(PendingRequests, FailAllLeavesRequestsAddedByCallbacks) {
  PendingRequests<int> pending;
  pending.Add(1, [&](int) { pending.Add(2, [](int) {}); });
  pending.FailAll([] { return 0; });
  EXPECT_TRUE(pending.contains(2));
}

TEST(EventRouter, EventStreamBeforeSubscribedWaitsForIt) {
  EventRouter<std::string, int> router;
  std::optional<std::string> evicted;
  EXPECT_FALSE(router.OnHello(5, "stream-5", &evicted));  // the usual order (§1.3)
  EXPECT_EQ(router.waiting_streams(), 1u);
  auto stream = router.OnSubscribed(5, 500);
  ASSERT_TRUE(stream);
  EXPECT_EQ(*stream, "stream-5");
  EXPECT_EQ(router.waiting_streams(), 0u);
  EXPECT_EQ(router.waiting_subscriptions(), 0u);
}

TEST(EventRouter, SubscribedBeforeEventStreamWaitsForIt) {
  EventRouter<std::string, int> router;
  EXPECT_FALSE(router.OnSubscribed(6, 600));
  std::optional<std::string> evicted;
  auto sink = router.OnHello(6, "stream-6", &evicted);
  ASSERT_TRUE(sink);
  EXPECT_EQ(*sink, 600);
  EXPECT_FALSE(router.OnHello(7, "stream-7", &evicted));  // other ids do not match
}

TEST(EventRouter, BoundsWaitingStreamsAndForgets) {
  EventRouter<std::string, int> router(2);
  std::optional<std::string> evicted;
  router.OnHello(1, "a", &evicted);
  router.OnHello(2, "b", &evicted);
  EXPECT_FALSE(evicted);
  router.OnHello(3, "c", &evicted);
  ASSERT_TRUE(evicted);
  EXPECT_EQ(*evicted, "a");
  EXPECT_FALSE(router.OnSubscribed(1, 1));  // evicted
  router.Forget(2);
  EXPECT_FALSE(router.OnSubscribed(2, 2));
  EXPECT_TRUE(router.OnSubscribed(3, 3));
}

TEST(ErrorMapping, BinaryAckCarriesCodeClassAndDetail) {
  flx1::BinaryPublishAck ack;
  ack.status = flx1::BinaryPublishAck::Status::kError;
  ack.request_id = 9;
  ack.message = "moving";
  ack.code = flx1::BinaryPublishAck::Code{5, 1};
  ack.detail = flx1::BinaryPublishAck::Detail{"moving", 250};
  ClientError e = client_impl::FromBinaryAck(ack);
  EXPECT_EQ(e.code, ClientErrorCode::kShardUnavailable);
  EXPECT_EQ(e.retry, RetryClass::kRetry);
  EXPECT_EQ(e.reason, "moving");
  EXPECT_EQ(e.retry_after_ms, 250u);
  EXPECT_EQ(e.code_name, "shard_unavailable");
}

TEST(ErrorMapping, UnknownCodesKeepTheirNameAndTheClassSent) {
  flx1::BinaryPublishAck ack;
  ack.status = flx1::BinaryPublishAck::Status::kError;
  ack.code = flx1::BinaryPublishAck::Code{42, 2};
  ClientError e = client_impl::FromBinaryAck(ack);
  EXPECT_EQ(e.code, ClientErrorCode::kUnknown);
  EXPECT_EQ(e.code_name, "code_42");
  EXPECT_EQ(e.retry, RetryClass::kRetryAfter);

  ack.code = flx1::BinaryPublishAck::Code{3, 99};  // unknown retry byte reads as fatal
  EXPECT_EQ(client_impl::FromBinaryAck(ack).retry, RetryClass::kFatal);

  flx1::Error json{.message = "x", .code = "brand_new", .retry = std::nullopt, .detail = {}};
  e = client_impl::FromErrorMessage(json, RetryClass::kRetry);
  EXPECT_EQ(e.code, ClientErrorCode::kUnknown);
  EXPECT_EQ(e.code_name, "brand_new");
  EXPECT_EQ(e.retry, RetryClass::kFatal);
}

TEST(ErrorMapping, JsonErrorsUseTheSentClassOverTheDefault) {
  flx1::PublishError pe;
  pe.request_id = 3;
  pe.message = "ingress overloaded";
  pe.code = "overloaded";
  pe.retry = "outcome_unknown";
  pe.detail = flx1::ErrorDetail{"publish_queue_full", 100};
  ClientError e = client_impl::FromPublishError(pe);
  EXPECT_EQ(e.code, ClientErrorCode::kOverloaded);
  EXPECT_EQ(e.retry, RetryClass::kOutcomeUnknown);
  EXPECT_EQ(e.retry_after_ms, 100u);

  pe.retry.reset();  // no class: the code's default
  EXPECT_EQ(client_impl::FromPublishError(pe).retry, RetryClass::kRetryAfter);

  flx1::Error plain{.message = "auth failed", .code = {}, .retry = {}, .detail = {}};
  e = client_impl::FromErrorMessage(plain, RetryClass::kFatal);  // a broker without codes
  EXPECT_EQ(e.code, ClientErrorCode::kUnknown);
  EXPECT_EQ(e.retry, RetryClass::kFatal);
  EXPECT_NE(e.ToString().find("auth failed"), std::string::npos);
}

TEST(ErrorMapping, CursorErrorsNameTheAvailableOffset) {
  flx1::SubscribeCursorError too_old{
      .reason = flx1::CursorErrorReason::kTooOld, .requested = 3, .available = 10};
  ClientError e = client_impl::FromCursorError(too_old);
  EXPECT_EQ(e.code, ClientErrorCode::kCursorTooOld);
  EXPECT_EQ(e.requested, 3u);
  EXPECT_EQ(e.available, 10u);
  flx1::SubscribeCursorError future{
      .reason = flx1::CursorErrorReason::kInFuture, .requested = 99, .available = 12};
  EXPECT_EQ(client_impl::FromCursorError(future).code, ClientErrorCode::kCursorInFuture);
  EXPECT_EQ(client_impl::FromCursorError(future).available, 12u);
}

TEST(ErrorMapping, ClientSideCodesHaveSensibleClasses) {
  EXPECT_EQ(MakeClientError(ClientErrorCode::kTransport, "").retry, RetryClass::kOutcomeUnknown);
  EXPECT_EQ(MakeClientError(ClientErrorCode::kInvalidArgument, "").retry, RetryClass::kFatal);
  EXPECT_EQ(MakeClientError(ClientErrorCode::kNotFound, "").retry, RetryClass::kRetryAfter);
  EXPECT_EQ(MakeClientError(ClientErrorCode::kLagged, "").retry, RetryClass::kRetry);
  EXPECT_STREQ(ClientErrorCodeName(ClientErrorCode::kCursorTooOld), "cursor_too_old");
}

TEST(Options, ParsesStreamsStartPositionsAndAckModes) {
  auto s = StreamRef::Parse("orders");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->namespace_name, "default");
  EXPECT_EQ(s->stream, "orders");
  s = StreamRef::Parse("shop/orders");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ToString(), "shop/orders");
  EXPECT_FALSE(StreamRef::Parse(""));
  EXPECT_FALSE(StreamRef::Parse("a/b/c"));
  EXPECT_FALSE(StreamRef::Parse("/x"));

  EXPECT_EQ(*StartPosition::Parse("earliest"), StartPosition::Earliest());
  EXPECT_EQ(*StartPosition::Parse("latest"), StartPosition::Latest());
  EXPECT_EQ(*StartPosition::Parse("18446744073709551615"),
            StartPosition::Offset(18446744073709551615ull));
  EXPECT_FALSE(StartPosition::Parse("12x"));
  EXPECT_FALSE(StartPosition::Parse("-1"));
  EXPECT_EQ(StartPosition::Parse("soon").error().code, ClientErrorCode::kInvalidArgument);

  EXPECT_EQ(*ParseAckMode("none"), AckMode::kNone);
  EXPECT_EQ(*ParseAckMode("per_batch"), AckMode::kPerBatch);
  EXPECT_EQ(*ParseAckMode("per-message"), AckMode::kPerMessage);
  EXPECT_FALSE(ParseAckMode("all"));
}

TEST(Options, ConnectRefusesMissingCaAndBadAddressesWithoutDialling) {
  ClientOptions o;
  o.ca_file = "";
  auto c = Client::Connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ClientErrorCode::kInvalidArgument);
  o.ca_file = "/nonexistent/ca.pem";
  o.broker = "no-port";
  c = Client::Connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ClientErrorCode::kInvalidArgument);
}

// AwaitReady (ClientOptions::spin_wait) on an AnswerSlot: an answer that is already there, one
// that comes while the caller spins, one that comes after the spin (the caller then sleeps for
// it), and one that never comes — reported false once the timeout passed, however long the spin
// asked.
TEST(AwaitReady, AnAnswerReadyBeforeTheCallIsTakenWithoutWaiting) {
  client_impl::AnswerSlot<int> answer;
  answer.Set(7);
  EXPECT_TRUE(
      client_impl::AwaitReady(answer, std::chrono::microseconds(0), std::chrono::milliseconds(0)));
  EXPECT_TRUE(client_impl::AwaitReady(answer, std::chrono::microseconds(500),
                                      std::chrono::milliseconds(0)));
  EXPECT_EQ(answer.Take(), 7);
}

TEST(AwaitReady, AnAnswerSetByAnotherThreadIsSeenWhetherTheCallerSpinsOrSleeps) {
  for (auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(200),
                    std::chrono::microseconds(10'000'000)}) {
    for (int round = 0; round < 200; ++round) {
      auto answer = std::make_shared<client_impl::AnswerSlot<std::string>>();
      std::thread answerer([answer, round] { answer->Set("answer " + std::to_string(round)); });
      EXPECT_TRUE(client_impl::AwaitReady(*answer, spin, std::chrono::minutes(1))) << spin.count();
      EXPECT_EQ(answer->Take(), "answer " + std::to_string(round));
      answerer.join();
    }
  }
}

TEST(AwaitReady, AnAnswerThatNeverComesIsATimeoutEvenWhenTheSpinIsLonger) {
  client_impl::AnswerSlot<int> answer;
  EXPECT_FALSE(
      client_impl::AwaitReady(answer, std::chrono::microseconds(0), std::chrono::milliseconds(5)));
  // The spin is bounded by the timeout: this returns (false), it does not spin for an hour.
  EXPECT_FALSE(
      client_impl::AwaitReady(answer, std::chrono::hours(1), std::chrono::milliseconds(5)));
  // Set after the waiter gave up: kept, and seen by a later wait.
  answer.Set(5);
  EXPECT_TRUE(
      client_impl::AwaitReady(answer, std::chrono::microseconds(0), std::chrono::milliseconds(0)));
  EXPECT_EQ(answer.Take(), 5);
}

TEST(AnswerSlot, OnlyTheFirstValueSetIsKept) {
  client_impl::AnswerSlot<std::string> answer;
  EXPECT_FALSE(answer.Ready());
  answer.Set("first");
  answer.Set("second");
  ASSERT_TRUE(answer.Ready());
  EXPECT_EQ(answer.Take(), "first");
}

}  // namespace
}  // namespace felix
