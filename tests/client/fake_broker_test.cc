// The client library against an in-process fake broker on the real QUIC transport: auth and
// negotiation, binary publishes matched to acknowledgements by request id (also out of
// order), error acks, stream_shards and the shard hash, subscribe with the event stream
// arriving before (and after) `subscribed`, offsets, cursor refusals, a slow reader throttled
// by flow control, and Close failing what is outstanding. Cluster fakes (they advertise
// TOPOLOGY and answer shard_owners, scripted refusals, owner hints and not_leader) check the
// cluster-aware routing: retries by class only against a cluster, an unknown outcome reported
// indeterminate and never resent, publishes straight to the owner shard_owners names or an
// owner hint taught, subscribe redirects followed up to three hops and loops refused, and a
// cache delete whose answer was lost reported indeterminate, never resent (a get is).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/credentials.h"
#include "client/frame_reader.h"
#include "common/metrics.h"
#include "felix/client.h"
#include "support/child_process.h"
#include "transport/endpoint.h"
#include "wire/flx1/frame.h"

namespace felix {
namespace {

namespace flx1 = wire::flx1;
using client_impl::FrameReader;

struct FakeBrokerOptions {
  bool swap_acks = false;  // answer each pair of acked publishes in reverse order
  bool never_ack = false;  // hold every ack
  bool hello_after_subscribed = false;
  bool one_event_per_frame = false;
  bool end_with_lagged = false;  // end each event stream after the history: subscription_lagged
  // The first history batch says this many offsets below it hold no event (skipped_before).
  uint64_t first_batch_skipped = 0;
  uint32_t shards = 8;
  // Cache gets are answered in groups of this many, once that many are held (0: at once): so
  // many callers are in flight together on every round.
  uint32_t cache_gets_answered_together = 0;
  // group_ack: the stream finished with no answer (else `cache_ok`, then the stream finished).
  bool group_acks_unanswered = false;
  // Cluster fakes: advertise TOPOLOGY | SHARD_OWNERS | REDIRECT and answer from `script`.
  bool cluster = false;
  // Shared between fakes so one CA file verifies them all (a fresh one when null).
  std::shared_ptr<transport::TlsContext> tls;
};

// What a cluster fake answers (set before the client connects; read on the fake's loop).
struct ClusterScript {
  std::string node_id = "a";
  std::vector<flx1::ShardOwner> owners;  // shard_owners answer, any name
  // The failed ack for the n-th (from 0) acked publish to a stream, if any.
  std::function<std::optional<flx1::BinaryPublishAck>(const std::string&, uint64_t)> fail_ack;
  // The owner hint on successful acks.
  std::optional<flx1::BinaryPublishAck::Owner> hint;
  std::optional<flx1::NotLeader> subscribe_redirect;  // answer to every subscribe
  // Cache requests (cache_get, cache_delete; advertised CACHE_DELETE): the n-th (from 0) of a
  // type goes unanswered when this says so, as if the answer were lost; the others are
  // answered from the fake's map.
  std::function<bool(std::string_view type, uint64_t n)> lose_cache_answer;
};

// Serves just enough FLX1 for the client: everything runs on the fake's loop thread.
class FakeBroker {
 public:
  explicit FakeBroker(FakeBrokerOptions o, ClusterScript script = {})
      : o_(o), script_(std::move(script)) {
    transport::TlsOptions tls;
    tls.role = transport::Role::kClient;
    tls.self_signed_name = "localhost";
    auto ctx = o.tls ? Result<std::shared_ptr<transport::TlsContext>>(o.tls)
                     : transport::TlsContext::Create(tls);
    EXPECT_TRUE(ctx);
    tls_ = *ctx;
    dir_ = felix::testing::MakeTempDir("fake-broker");
    ca_file_ = dir_ + "/broker-cert.pem";
    std::ofstream(ca_file_) << (*ctx)->self_signed_cert_pem();
    transport::EndpointOptions eo;
    eo.tls = *ctx;
    eo.name = "fake-broker";
    auto ep = transport::Endpoint::Create(
        HostPort{"127.0.0.1", 0}, eo, metrics_,
        transport::ListenHandlers{
            [this](const std::shared_ptr<transport::Connection>& c) { OnConnection(c); }});
    EXPECT_TRUE(ep) << ep.error().message;
    endpoint_ = std::move(*ep);
  }
  ~FakeBroker() {
    endpoint_->Stop();
    // Sessions own their streams and the streams' handlers own the sessions: break that.
    for (auto& session : sessions_) {
      session->stream->SetHandlers({});
      session->stream.reset();
    }
  }

  const std::string& ca_file() const { return ca_file_; }
  std::vector<uint64_t> Acked() {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }
  ClientOptions ClientOpts() const {
    ClientOptions c;
    c.broker = endpoint_->local_address().ToString();
    c.ca_file = ca_file_;
    c.tenant_id = "t1";
    c.token = "test-token";
    return c;
  }
  const std::shared_ptr<transport::TlsContext>& tls() const { return tls_; }
  std::string address() const { return endpoint_->local_address().ToString(); }
  // Answers every later subscribe with `not_leader` (any thread).
  void RedirectSubscribes(flx1::NotLeader redirect) {
    std::lock_guard<std::mutex> lock(mu_);
    redirect_ = std::move(redirect);
  }
  // Acked or not, the publishes this fake received for `stream` (any thread).
  uint64_t publishes(const std::string& stream) {
    std::lock_guard<std::mutex> lock(mu_);
    return publishes_[stream];
  }
  // The cache requests of `type` (e.g. "cache_delete") this fake received (any thread).
  uint64_t cache_requests(const std::string& type) {
    std::lock_guard<std::mutex> lock(mu_);
    return cache_requests_[type];
  }
  // The auth messages received: one per authenticated stream (any thread).
  uint64_t auths() {
    std::lock_guard<std::mutex> lock(mu_);
    return auths_;
  }
  // The auth message of the most recent stream (any thread).
  std::optional<flx1::Auth> last_auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_auth_;
  }

 private:
  struct Session {
    std::shared_ptr<transport::Stream> stream;
    FrameReader reader{16u << 20};
    std::vector<std::vector<uint8_t>> held_acks;
  };

  void OnConnection(const std::shared_ptr<transport::Connection>& c) {
    conns_.push_back(c);
    std::weak_ptr<transport::Connection> weak = c;
    c->SetHandlers(transport::ConnectionHandlers{
        .on_stream =
            [this, weak](const std::shared_ptr<transport::Stream>& s) {
              auto session = std::make_shared<Session>();
              session->stream = s;
              s->SetHandlers(transport::StreamHandlers{
                  .on_data =
                      [this, session, weak](transport::Stream& st, std::span<const uint8_t> d) {
                        auto fed =
                            session->reader.Feed(d, [&](uint16_t f, std::span<const uint8_t> p) {
                              Handle(*session, weak.lock(), f, p);
                              return FrameReader::Verdict::kAccept;
                            });
                        st.Consume(fed.consume);
                      },
                  .on_fin = nullptr,
                  .on_reset = nullptr,
                  .on_writable = nullptr,
              });
              sessions_.push_back(session);
            },
        .on_closed = nullptr,
    });
  }

  void Send(transport::Stream& s, const flx1::Flx1Frame& f) {
    auto bytes = flx1::EncodeFrame(f);
    ASSERT_TRUE(bytes);
    (void)s.Write(*bytes);
  }

  void Handle(Session& session, const std::shared_ptr<transport::Connection>& conn, uint16_t flags,
              std::span<const uint8_t> payload) {
    auto frame = flx1::DecodePayload(flags, payload);
    ASSERT_TRUE(frame) << frame.error().ToString();
    transport::Stream& s = *session.stream;
    if (auto* batch = std::get_if<flx1::BinaryPublishBatch>(&*frame)) {
      std::string stream(batch->stream);
      auto& log = logs_[stream];
      flx1::BinaryPublishAck ack;
      ack.request_id = batch->acked ? batch->acked->request_id : 0;
      uint64_t n = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        n = publishes_[stream]++;
      }
      std::optional<flx1::BinaryPublishAck> failed;
      if (script_.fail_ack) failed = script_.fail_ack(stream, n);
      if (failed) {
        failed->request_id = ack.request_id;
        ack = *failed;
      } else if (stream == "denied") {
        ack.status = flx1::BinaryPublishAck::Status::kError;
        ack.message = "forbidden";
        ack.code = flx1::BinaryPublishAck::Code{2, 5};
      } else {
        ack.offset = log.size();
        ack.owner = script_.hint;
        for (auto p : batch->payloads) log.emplace_back(p);
      }
      if (!batch->acked) return;
      auto bytes = flx1::EncodeFrame(flx1::Flx1Frame(ack));
      ASSERT_TRUE(bytes);
      if (o_.never_ack) return;
      if (o_.swap_acks) {
        session.held_acks.push_back(*bytes);
        if (session.held_acks.size() == 2) {
          (void)s.Write(session.held_acks[1]);
          (void)s.Write(session.held_acks[0]);
          session.held_acks.clear();
        }
        return;
      }
      (void)s.Write(*bytes);
      return;
    }
    auto& m = std::get<flx1::Message>(*frame);
    if (auto* auth = std::get_if<flx1::Auth>(&m)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_auth_ = *auth;
        ++auths_;
      }
      if (auth->token == "bad") {
        Send(s, flx1::Message(flx1::Error{.message = "auth failed",
                                          .code = "unauthenticated",
                                          .retry = "fatal",
                                          .detail = {}}));
        s.Finish();
        return;
      }
      flx1::AuthOk ok;
      ok.server_flags = 0x7EFF;
      ok.server_features = flx1::kFeatureStreamShards | flx1::kFeatureErrorCodes |
                           flx1::kFeatureCacheDelete | flx1::kFeatureConsumerGroup;
      if (o_.cluster)
        *ok.server_features |=
            flx1::kFeatureTopology | flx1::kFeatureShardOwners | flx1::kFeatureRedirect;
      Send(s, flx1::Message(ok));
    } else if (std::holds_alternative<flx1::Topology>(m) && o_.cluster) {
      Send(s, flx1::Message(flx1::TopologyView{}));
    } else if (auto* owners = std::get_if<flx1::ShardOwners>(&m)) {
      flx1::ShardOwnersView view;
      view.owners = script_.owners;
      view.request_id = owners->request_id;
      Send(s, flx1::Message(view));
    } else if (auto* req = std::get_if<flx1::StreamShards>(&m)) {
      flx1::StreamShardsView view;
      view.shards = o_.shards;
      view.request_id = req->request_id;
      view.routing = flx1::ShardRouting::kJumpHash;
      Send(s, flx1::Message(view));
    } else if (auto* sub = std::get_if<flx1::Subscribe>(&m)) {
      std::optional<flx1::NotLeader> redirect = script_.subscribe_redirect;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (redirect_) redirect = redirect_;
      }
      if (redirect) {
        Send(s, flx1::Message(*redirect));
        s.Finish();
        return;
      }
      Subscribe(s, conn, *sub);
    } else if (auto* get = std::get_if<flx1::CacheGet>(&m)) {
      if (LoseCacheAnswer("cache_get")) return;
      if (o_.cache_gets_answered_together > 0) {
        held_gets_.emplace_back(session.stream, CacheAnswer(get->key, get->request_id, false));
        if (held_gets_.size() < o_.cache_gets_answered_together) return;
        for (auto& [stream, answer] : held_gets_) Send(*stream, flx1::Message(answer));
        held_gets_.clear();
        return;
      }
      Send(s, flx1::Message(CacheAnswer(get->key, get->request_id, false)));
    } else if (auto* del = std::get_if<flx1::CacheDelete>(&m)) {
      if (LoseCacheAnswer("cache_delete")) return;
      Send(s, flx1::Message(CacheAnswer(del->key, del->request_id, true)));
    } else if (auto* ack = std::get_if<flx1::GroupAck>(&m)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        acked_.push_back(ack->offset);
      }
      // A group request's stream carries one answer, then the broker finishes it.
      if (!o_.group_acks_unanswered) Send(s, flx1::Message(flx1::CacheOk{ack->request_id}));
      s.Finish();
    }
  }

  // Counts a cache request of `type`; true when the script loses its answer.
  bool LoseCacheAnswer(const std::string& type) {
    uint64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      n = cache_requests_[type]++;
    }
    return script_.lose_cache_answer && script_.lose_cache_answer(type, n);
  }

  // The value of `key` (a miss when absent), erased when `erase`.
  flx1::CacheValue CacheAnswer(const std::string& key, std::optional<uint64_t> request_id,
                               bool erase) {
    flx1::CacheValue value;
    value.key = key;
    value.request_id = request_id;
    if (auto it = cache_.find(key); it != cache_.end()) {
      value.value = flx1::Bytes(it->second.begin(), it->second.end());
      if (erase) cache_.erase(it);
    }
    return value;
  }

  void Subscribe(transport::Stream& s, const std::shared_ptr<transport::Connection>& conn,
                 const flx1::Subscribe& sub) {
    auto& log = logs_[sub.stream];
    uint64_t tail = log.size();
    uint64_t start = tail;
    if (sub.start && sub.start->kind == flx1::StartPosition::Kind::kEarliest) start = 0;
    if (sub.start && sub.start->kind == flx1::StartPosition::Kind::kOffset) {
      start = sub.start->offset;
      if (start > tail) {
        Send(s, flx1::Message(
                    flx1::SubscribeCursorError{flx1::CursorErrorReason::kInFuture, start, tail}));
        s.Finish();
        return;
      }
    }
    uint64_t id = ++next_sub_;
    auto events = conn->OpenUniStream();
    ASSERT_TRUE(events);
    flx1::Subscribed ok{
        .subscription_id = id, .start_offset = start, .live_offset = tail, .queue_capacity = {}};
    if (!o_.hello_after_subscribed) Send(**events, flx1::Message(flx1::EventStreamHello{id}));
    Send(s, flx1::Message(ok));
    s.Finish();
    if (o_.hello_after_subscribed) Send(**events, flx1::Message(flx1::EventStreamHello{id}));
    size_t step = o_.one_event_per_frame ? 1 : 64;
    for (uint64_t at = start; at < tail; at += step) {
      flx1::BinaryEventBatch batch;
      batch.base_offset = at;
      batch.has_timestamps = true;
      if (at == start && o_.first_batch_skipped != 0) batch.skipped_before = o_.first_batch_skipped;
      for (uint64_t i = at; i < std::min<uint64_t>(tail, at + step); ++i)
        batch.events.push_back({1700000000000000ull + i, log[i]});
      Send(**events, flx1::Flx1Frame(batch));
    }
    if (o_.end_with_lagged) {
      Send(**events, flx1::Message(flx1::SubscriptionLagged{id, tail + 5}));
      (*events)->Finish();
    }
    event_streams_.push_back(*events);  // live: kept open
  }

  FakeBrokerOptions o_;
  const ClusterScript script_;
  std::shared_ptr<transport::TlsContext> tls_;
  MetricsRegistry metrics_;
  std::string dir_, ca_file_;
  std::unique_ptr<transport::Endpoint> endpoint_;
  // Loop thread only.
  std::vector<std::shared_ptr<transport::Connection>> conns_;
  std::vector<std::shared_ptr<Session>> sessions_;
  std::vector<std::shared_ptr<transport::Stream>> event_streams_;
  std::map<std::string, std::vector<std::string>> logs_;
  std::map<std::string, std::string> cache_;
  std::vector<std::pair<std::shared_ptr<transport::Stream>, flx1::CacheValue>> held_gets_;
  uint64_t next_sub_ = 0;
  std::mutex mu_;
  std::optional<flx1::Auth> last_auth_;
  uint64_t auths_ = 0;
  std::map<std::string, uint64_t> publishes_;
  std::map<std::string, uint64_t> cache_requests_;
  std::vector<uint64_t> acked_;  // group_ack offsets, as they came
  std::optional<flx1::NotLeader> redirect_;
};

std::unique_ptr<Client> ConnectTo(FakeBroker& broker, ClientOptions extra = {}) {
  ClientOptions o = broker.ClientOpts();
  if (extra.subscription_queue_capacity != ClientOptions{}.subscription_queue_capacity)
    o.subscription_queue_capacity = extra.subscription_queue_capacity;
  auto c = Client::Connect(o);
  EXPECT_TRUE(c) << c.error().ToString();
  return c ? std::move(*c) : nullptr;
}

Event NextEvent(Subscription& sub) {
  auto e = sub.Next(std::chrono::seconds(10));
  EXPECT_TRUE(e) << e.error().ToString();
  EXPECT_TRUE(e && *e) << "no event within 10 s";
  return e && *e ? **e : Event{};
}

const StreamRef kDemo{"default", "demo"};

TEST(ClientFakeBroker, NegotiatesAndPublishesThenSubscribesFromEarliest) {
  FakeBroker broker({});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  auto auth = broker.last_auth();
  ASSERT_TRUE(auth);
  EXPECT_EQ(auth->tenant_id, "t1");
  EXPECT_EQ(auth->token, "test-token");
  ASSERT_TRUE(auth->client_flags);
  EXPECT_TRUE(*auth->client_flags & flx1::kFlagBinaryPublishAckOffset);
  EXPECT_TRUE(*auth->client_features & flx1::kFeatureErrorCodes);
  EXPECT_TRUE(client->server_info().negotiated);
  EXPECT_EQ(client->server_info().server_flags, 0x7EFF);

  auto r1 = client->Publish(kDemo, {"one", "two"});
  ASSERT_TRUE(r1) << r1.error().ToString();
  EXPECT_EQ(r1->offset, 0u);
  EXPECT_EQ(r1->count, 2u);
  auto r2 =
      client->Publish(kDemo, {"three"}, PublishOptions{.key = "k", .ack = AckMode::kPerMessage});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->offset, 2u);

  auto sub = client->Subscribe(kDemo, {.shard = 0, .start = StartPosition::Earliest()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  EXPECT_EQ((*sub)->start_offset(), 0u);
  EXPECT_EQ((*sub)->live_offset(), 3u);
  std::vector<std::string> payloads;
  for (uint64_t i = 0; i < 3; ++i) {
    Event e = NextEvent(**sub);
    EXPECT_EQ(e.offset, i);
    EXPECT_EQ(e.timestamp_micros, 1700000000000000ull + i);
    payloads.push_back(e.payload);
  }
  EXPECT_EQ(payloads, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ((*sub)->next_offset(), 3u);
  auto none = (*sub)->Next(std::chrono::milliseconds(0));
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

// An event batch's skipped_before (EVENT_BATCH_SKIPPED: offsets below it that hold no event,
// e.g. a `Quorum` leader's generation-start record) reaches the application on that batch's
// first event, and only there.
TEST(ClientFakeBroker, SkippedBeforeIsReportedOnTheFirstEventOfItsBatch) {
  FakeBroker broker({.first_batch_skipped = 1});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Publish(kDemo, {"a", "b", "c"}));
  auto sub = client->Subscribe(kDemo, {.start = StartPosition::Offset(1)});
  ASSERT_TRUE(sub) << sub.error().ToString();
  Event first = NextEvent(**sub);
  EXPECT_EQ(first.offset, 1u);
  EXPECT_EQ(first.skipped_before, 1u);
  Event second = NextEvent(**sub);
  EXPECT_EQ(second.offset, 2u);
  EXPECT_EQ(second.skipped_before, 0u);
}

TEST(ClientFakeBroker, EventStreamAfterSubscribedIsRoutedToo) {
  FakeBroker broker({.hello_after_subscribed = true});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Publish(kDemo, {"a", "b"}));
  auto sub = client->Subscribe(kDemo, {.start = StartPosition::Offset(1)});
  ASSERT_TRUE(sub) << sub.error().ToString();
  Event e = NextEvent(**sub);
  EXPECT_EQ(e.offset, 1u);
  EXPECT_EQ(e.payload, "b");
}

TEST(ClientFakeBroker, PipelinedAcksAnsweredOutOfOrderMatchTheirRequests) {
  FakeBroker broker({.swap_acks = true});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, uint64_t> offsets;
  for (std::string p : {"first", "second"}) {
    auto queued = client->PublishAsync(kDemo, {p}, {}, [&, p](ClientResult<PublishReceipt> r) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_TRUE(r) << r.error().ToString();
      if (r && r->offset) offsets[p] = *r->offset;
      cv.notify_all();
    });
    ASSERT_TRUE(queued);
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return offsets.size() == 2; }));
  EXPECT_EQ(offsets["first"], 0u);
  EXPECT_EQ(offsets["second"], 1u);
}

TEST(ClientFakeBroker, FailedAckIsATypedError) {
  FakeBroker broker({});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  auto r = client->Publish({"default", "denied"}, {"x"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ClientErrorCode::kForbidden);
  EXPECT_EQ(r.error().retry, RetryClass::kFatal);
  EXPECT_EQ(r.error().message, "forbidden");
  EXPECT_TRUE(client->Publish(kDemo, {"still fine"}));  // the stream continues
}

// A group request's stream ends after its answer: the answer is the outcome. Ended with no
// answer, the request fails as a transport error saying so (its outcome unknown).
TEST(ClientFakeBroker, AGroupRequestStreamEndedWithoutAnAnswerFailsAndOneAnsweredSucceeds) {
  const GroupRef group{kDemo, 0, "g"};
  {
    FakeBroker broker({});
    auto client = ConnectTo(broker);
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->GroupAck(group, 7));
    std::vector<uint64_t> offsets(300);
    for (uint64_t i = 0; i < offsets.size(); ++i) offsets[i] = 100 + i;
    ASSERT_TRUE(client->GroupAckAll(group, offsets));
    auto acked = broker.Acked();
    std::sort(acked.begin(), acked.end());
    ASSERT_EQ(acked.size(), 301u);
    EXPECT_EQ(acked.front(), 7u);
    EXPECT_EQ(std::vector<uint64_t>(acked.begin() + 1, acked.end()), offsets);
  }
  FakeBroker broker({.group_acks_unanswered = true});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  auto r = client->GroupAck(group, 7);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ClientErrorCode::kTransport);
  EXPECT_NE(r.error().message.find("ended the request stream"), std::string::npos)
      << r.error().message;
}

TEST(ClientFakeBroker, CursorPastTheTailIsRefusedWithTheTail) {
  FakeBroker broker({});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Publish(kDemo, {"a", "b"}));
  auto sub = client->Subscribe(kDemo, {.start = StartPosition::Offset(100)});
  ASSERT_FALSE(sub);
  EXPECT_EQ(sub.error().code, ClientErrorCode::kCursorInFuture);
  EXPECT_EQ(sub.error().requested, 100u);
  EXPECT_EQ(sub.error().available, 2u);
}

TEST(ClientFakeBroker, StreamShardsAndTheFrozenHash) {
  FakeBroker broker({.shards = 8});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  auto info = client->StreamShards(kDemo);
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->shards, 8u);
  EXPECT_TRUE(info->jump_hash);
  // semantics.md §4.2 golden values (N = 8, jump hash).
  EXPECT_EQ(*client->ShardForKey(kDemo, "customer-0"), 3u);
  EXPECT_EQ(*client->ShardForKey(kDemo, "customer-6"), 7u);
}

TEST(ClientFakeBroker, SlowReaderIsThrottledNotDropped) {
  FakeBroker broker({.one_event_per_frame = true});
  ClientOptions small;
  small.subscription_queue_capacity = 2;
  auto client = ConnectTo(broker, small);
  ASSERT_TRUE(client);
  std::vector<std::string> payloads;
  for (int i = 0; i < 200; ++i) payloads.push_back("event-" + std::to_string(i));
  ASSERT_TRUE(client->Publish(kDemo, payloads));
  auto sub = client->Subscribe(kDemo, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(sub);
  for (uint64_t i = 0; i < 200; ++i) {
    Event e = NextEvent(**sub);
    ASSERT_EQ(e.offset, i);
    ASSERT_EQ(e.payload, payloads[i]);
  }
}

TEST(ClientFakeBroker, CloseFailsOutstandingPublishesAndEndsSubscriptions) {
  FakeBroker broker({.never_ack = true});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  auto sub = client->Subscribe(kDemo, {});
  ASSERT_TRUE(sub);
  std::mutex mu;
  std::optional<ClientResult<PublishReceipt>> outcome;
  ASSERT_TRUE(client->PublishAsync(kDemo, {"x"}, {}, [&](ClientResult<PublishReceipt> r) {
    std::lock_guard<std::mutex> lock(mu);
    outcome = std::move(r);
  }));
  client->Close();
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_TRUE(outcome);
    ASSERT_FALSE(*outcome);
    EXPECT_EQ(outcome->error().code, ClientErrorCode::kClosed);
  }
  auto next = (*sub)->Next(std::chrono::seconds(5));
  ASSERT_FALSE(next);
  EXPECT_EQ(next.error().code, ClientErrorCode::kClosed);
  auto after = client->Publish(kDemo, {"y"});
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, ClientErrorCode::kClosed);
}

TEST(ClientFakeBroker, RefusedTokenIsUnauthenticatedAndFatal) {
  FakeBroker broker({});
  ClientOptions o = broker.ClientOpts();
  o.token = "bad";
  auto c = Client::Connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ClientErrorCode::kUnauthenticated);
  EXPECT_EQ(c.error().retry, RetryClass::kFatal);
  EXPECT_EQ(c.error().message, "auth failed");
}

TEST(ClientFakeBroker, LaggedSubscriptionEndsAfterItsEventsWithTheResumeOffset) {
  FakeBroker broker({.end_with_lagged = true});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Publish(kDemo, {"a", "b"}));
  auto sub = client->Subscribe(kDemo, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(sub);
  EXPECT_EQ(NextEvent(**sub).payload, "a");
  EXPECT_EQ(NextEvent(**sub).payload, "b");
  auto end = (*sub)->Next(std::chrono::seconds(10));
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error().code, ClientErrorCode::kLagged);
  EXPECT_EQ(end.error().resume_from, 7u);
  EXPECT_EQ((*sub)->next_offset(), 2u);
}

// What a push subscription's handler was given, in order, and on which threads.
struct HandlerLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ClientResult<Event>> calls;
  std::set<std::thread::id> threads;

  SubscriptionHandler Handler() {
    return [this](ClientResult<Event> r) {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(std::move(r));
      threads.insert(std::this_thread::get_id());
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return calls.size() >= n; });
  }
};

// Push delivery: the events, in order, on the client's I/O thread (not the caller's), then the
// end with its resume offset, once; Next returns the end and no events.
TEST(ClientFakeBroker, APushSubscriptionHandsEventsToItsHandlerThenItsEnd) {
  FakeBroker broker({.end_with_lagged = true});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Publish(kDemo, {"a", "b"}));
  HandlerLog log;
  auto sub =
      client->Subscribe(kDemo, {.start = StartPosition::Earliest(), .on_event = log.Handler()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  ASSERT_TRUE(log.WaitFor(3));
  auto end = (*sub)->Next(std::chrono::seconds(10));
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error().code, ClientErrorCode::kLagged);
  client->Close();
  std::lock_guard<std::mutex> lock(log.mu);
  ASSERT_EQ(log.calls.size(), 3u);
  ASSERT_TRUE(log.calls[0]);
  EXPECT_EQ(log.calls[0]->payload, "a");
  EXPECT_EQ(log.calls[0]->offset, 0u);
  ASSERT_TRUE(log.calls[1]);
  EXPECT_EQ(log.calls[1]->payload, "b");
  EXPECT_EQ(log.calls[1]->offset, 1u);
  ASSERT_FALSE(log.calls[2]);
  EXPECT_EQ(log.calls[2].error().code, ClientErrorCode::kLagged);
  EXPECT_EQ(log.calls[2].error().resume_from, 7u);
  EXPECT_EQ(log.threads.size(), 1u);
  EXPECT_EQ(log.threads.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ((*sub)->next_offset(), 2u);
}

// A handler may close its own subscription: the rest of the batch is not delivered, and a
// subscription its user closed hears nothing more — not even the Client's close.
TEST(ClientFakeBroker, AHandlerThatClosesItsSubscriptionGetsNoMoreCalls) {
  FakeBroker broker({});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Publish(kDemo, {"a", "b", "c"}));
  HandlerLog log;
  std::promise<Subscription*> self;
  auto self_future = self.get_future().share();
  auto closing = log.Handler();
  auto sub = client->Subscribe(
      kDemo, {.start = StartPosition::Earliest(), .on_event = [&](ClientResult<Event> r) {
                closing(std::move(r));
                self_future.get()->Close();  // from the handler itself: must not wait for it
              }});
  ASSERT_TRUE(sub) << sub.error().ToString();
  self.set_value(sub->get());
  ASSERT_TRUE(log.WaitFor(1));
  auto end = (*sub)->Next(std::chrono::seconds(10));
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error().code, ClientErrorCode::kClosed);
  client->Close();
  std::lock_guard<std::mutex> lock(log.mu);
  ASSERT_EQ(log.calls.size(), 1u);
  ASSERT_TRUE(log.calls[0]);
  EXPECT_EQ(log.calls[0]->payload, "a");
}

// Close from another thread returns only once no handler call is running; the Client's close
// afterwards tells the handler nothing.
TEST(ClientFakeBroker, ClosingAPushSubscriptionWaitsForItsHandlerAndSilencesIt) {
  FakeBroker broker({});
  auto client = ConnectTo(broker);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Publish(kDemo, {"a"}));
  std::promise<void> entered;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<int> calls{0};
  std::atomic<bool> returned{false};
  auto sub = client->Subscribe(
      kDemo, {.start = StartPosition::Earliest(), .on_event = [&](ClientResult<Event>) {
                if (calls.fetch_add(1) == 0) entered.set_value();
                released.wait();
                returned = true;
              }});
  ASSERT_TRUE(sub) << sub.error().ToString();
  entered.get_future().wait();
  auto closer = std::async(std::launch::async, [&] {
    (*sub)->Close();
    return returned.load();
  });
  // Close cannot return while the handler is held; once released, it must have returned.
  EXPECT_EQ(closer.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  release.set_value();
  EXPECT_TRUE(closer.get());
  client->Close();
  EXPECT_EQ(calls.load(), 1);
}

// One Client shared by many threads: each concurrent cache caller has a lane (a stream
// authenticated once) and keeps reusing it. The fake answers gets only in groups of 16, so all
// 16 callers are in flight together on every round; lanes dropped as idle between rounds would
// each cost a new stream and `auth` (with 8 idle lanes kept: 8 per round, 160 over 20 rounds).
TEST(ClientFakeBroker, ConcurrentCacheCallersOnOneClientKeepTheirLanes) {
  constexpr int kCallers = 16;
  constexpr int kRounds = 20;
  FakeBroker broker({.cache_gets_answered_together = kCallers});
  auto client = ConnectTo(broker);
  ASSERT_NE(client, nullptr);
  const uint64_t auths_before = broker.auths();
  const CacheRef cache{"default", "c"};
  std::atomic<int> failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        auto got = client->CacheGet(cache, "k" + std::to_string(t));
        if (!got || *got) ++failed;  // every key is a miss
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(broker.cache_requests("cache_get"), uint64_t{kCallers * kRounds});
  EXPECT_LE(broker.auths() - auths_before, uint64_t{kCallers})
      << "lanes were dropped while idle and opened again";
}

TEST(ClientFakeBroker, UnverifiableBrokerIsRefused) {
  FakeBroker broker({});
  FakeBroker other({});
  ClientOptions o = broker.ClientOpts();
  o.ca_file = other.ClientOpts().ca_file;  // a different self-signed certificate
  auto c = Client::Connect(o);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ClientErrorCode::kTransport);
}

// `felix pub` / `felix sub` with nothing but FELIX_DATA_DIR: the broker address, tenant, CA
// file and a stream-scoped token all come from the credential file.
TEST(ClientFakeBroker, CliFindsBrokerCaAndTokenInTheDataDir) {
  FakeBroker broker({});
  std::string dir = felix::testing::MakeTempDir("cli-data");
  std::filesystem::create_directories(dir + "/tls");
  std::filesystem::copy_file(broker.ca_file(), dir + "/tls/broker-cert.pem");
  catalog::AdminCredentials creds;
  creds.admin_url = "http://127.0.0.1:1";
  creds.admin_token = "unused";
  creds.quic_addr = broker.ClientOpts().broker;
  creds.tenant_id = "t1";
  auto key = auth::SigningKey::Generate("k-test");
  creds.signing_kid = key.kid();
  creds.signing_seed = key.SeedBase64();
  ASSERT_TRUE(catalog::WriteAdminCredentials(dir + "/" + catalog::kCredentialsFile, creds));
  std::map<std::string, std::string> env{{"FELIX_DATA_DIR", dir}};
  const std::string felix = felix::testing::BuiltProgram("src/cli/felix");

  auto [rc, out] = felix::testing::RunProgram(felix, {"pub", "demo", "alpha", "beta"}, env);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("published 2 message(s) to default/demo"), std::string::npos) << out;
  auto auth = broker.last_auth();
  ASSERT_TRUE(auth);
  EXPECT_EQ(auth->tenant_id, "t1");
  auto token = auth::ParseToken(auth->token);
  ASSERT_TRUE(token);
  EXPECT_EQ(token->claims.tid, "t1");
  EXPECT_EQ(token->header.kid, "k-test");
  EXPECT_EQ(token->claims.perms,
            (std::vector<std::string>{"stream.publish:stream:t1/default/demo",
                                      "stream.subscribe:stream:t1/default/demo"}));

  auto sub =
      felix::testing::RunProgram(felix, {"sub", "demo", "--from", "earliest", "--count", "2"}, env);
  ASSERT_EQ(sub.first, 0) << sub.second;
  EXPECT_NE(sub.second.find("0\talpha\n1\tbeta\n"), std::string::npos) << sub.second;

  auto bad = felix::testing::RunProgram(felix, {"sub", "demo", "--from", "soon"}, env);
  EXPECT_EQ(bad.first, 2) << bad.second;
  auto future = felix::testing::RunProgram(felix, {"sub", "demo", "--from", "99"}, env);
  EXPECT_EQ(future.first, 1);
  EXPECT_NE(future.second.find("cursor_in_future"), std::string::npos) << future.second;
}

// ---- Cluster-aware routing against cluster fakes (issue 15, client side) ----

flx1::BinaryPublishAck FailedAck(uint16_t code, uint8_t retry) {
  flx1::BinaryPublishAck ack;
  ack.status = flx1::BinaryPublishAck::Status::kError;
  ack.message = "scripted";
  ack.code = flx1::BinaryPublishAck::Code{code, retry};
  return ack;
}

flx1::ShardOwner OwnedBy(uint32_t shard, const std::string& node, const std::string& addr) {
  flx1::ShardOwner o;
  o.shard = shard;
  o.node_id = node;
  o.addr = addr;
  o.generation = 3;
  return o;
}

TEST(ClientClusterFake, ARetryableRefusalIsResentOnlyAgainstAClusterBroker) {
  // shard_unavailable (class retry) twice, then accepted.
  ClusterScript script;
  script.fail_ack = [](const std::string&, uint64_t n) -> std::optional<flx1::BinaryPublishAck> {
    if (n < 2) return FailedAck(5, 1);
    return std::nullopt;
  };
  FakeBroker cluster({.cluster = true}, script);
  auto client = Client::Connect(cluster.ClientOpts());
  ASSERT_TRUE(client) << client.error().ToString();
  auto receipt = (*client)->Publish(kDemo, {"x"});
  ASSERT_TRUE(receipt) << receipt.error().ToString();
  EXPECT_EQ(receipt->offset, 0u);
  EXPECT_EQ(cluster.publishes("demo"), 3u);

  // A standalone broker: one attempt, the refusal as it came (unchanged behaviour).
  FakeBroker single({}, script);
  auto plain = Client::Connect(single.ClientOpts());
  ASSERT_TRUE(plain);
  auto refused = (*plain)->Publish(kDemo, {"x"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ClientErrorCode::kShardUnavailable);
  EXPECT_EQ(single.publishes("demo"), 1u);
}

TEST(ClientClusterFake, AnUnknownOutcomeIsIndeterminateAndNeverResent) {
  ClusterScript script;  // unacknowledged (9), outcome_unknown (4), every time
  script.fail_ack = [](const std::string&, uint64_t) -> std::optional<flx1::BinaryPublishAck> {
    return FailedAck(9, 4);
  };
  FakeBroker cluster({.cluster = true}, script);
  auto client = Client::Connect(cluster.ClientOpts());
  ASSERT_TRUE(client);
  auto outcome = (*client)->Publish(kDemo, {"x"});
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code, ClientErrorCode::kIndeterminate);
  EXPECT_EQ(outcome.error().cause, ClientErrorCode::kUnacknowledged);
  EXPECT_EQ(outcome.error().retry, RetryClass::kOutcomeUnknown);
  std::promise<ClientResult<PublishReceipt>> async;
  ASSERT_TRUE((*client)->PublishAsync(
      kDemo, {"y"}, {}, [&](ClientResult<PublishReceipt> r) { async.set_value(std::move(r)); }));
  auto later = async.get_future().get();
  ASSERT_FALSE(later);
  EXPECT_TRUE(later.error().indeterminate());
  EXPECT_EQ(cluster.publishes("demo"), 2u);  // one send each
}

TEST(ClientClusterFake, ALostCacheDeleteAnswerIsIndeterminateAndNeverResentButAGetIs) {
  // A resent delete could erase a put another client made in between (fault-run seeds 40, 53,
  // 60, 65: Porcupine found the history not linearizable); a get changes nothing.
  ClusterScript script;
  script.lose_cache_answer = [](std::string_view, uint64_t n) { return n == 0; };
  FakeBroker cluster({.cluster = true}, script);
  ClientOptions o = cluster.ClientOpts();
  o.request_timeout = std::chrono::milliseconds(300);
  auto client = Client::Connect(o);
  ASSERT_TRUE(client) << client.error().ToString();
  const CacheRef cache{"default", "c"};

  auto deleted = (*client)->CacheDelete(cache, "k");
  ASSERT_FALSE(deleted);
  EXPECT_EQ(deleted.error().code, ClientErrorCode::kIndeterminate) << deleted.error().ToString();
  EXPECT_TRUE(deleted.error().indeterminate());
  EXPECT_EQ(cluster.cache_requests("cache_delete"), 1u);

  auto got = (*client)->CacheGet(cache, "k");
  ASSERT_TRUE(got) << got.error().ToString();
  EXPECT_FALSE(*got);
  EXPECT_EQ(cluster.cache_requests("cache_get"), 2u);  // the lost one, then the resend

  auto again = (*client)->CacheDelete(cache, "k");  // answered: one send, a miss
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_FALSE(*again);
  EXPECT_EQ(cluster.cache_requests("cache_delete"), 2u);
}

TEST(ClientClusterFake, PublishesGoToTheOwnerShardOwnersNames) {
  FakeBroker owner({.cluster = true}, ClusterScript{.node_id = "b"});
  ClusterScript script;
  script.owners = {OwnedBy(0, "b", owner.address())};
  FakeBroker entry({.cluster = true, .tls = owner.tls()}, script);
  ClientOptions o = entry.ClientOpts();
  o.ca_file = owner.ca_file();
  auto client = Client::Connect(o);
  ASSERT_TRUE(client) << client.error().ToString();
  ASSERT_TRUE((*client)->Publish(kDemo, {"one"}));  // no key: shard 0
  ASSERT_TRUE((*client)->Publish(kDemo, {"two"}));
  EXPECT_EQ(owner.publishes("demo"), 2u);
  EXPECT_EQ(entry.publishes("demo"), 0u);
  EXPECT_EQ((*client)->CachedOwner(kDemo, 0), owner.address());

  // Everything through one ingress: the entry broker gets them all.
  o.route_to_owners = false;
  auto via = Client::Connect(o);
  ASSERT_TRUE(via);
  ASSERT_TRUE((*via)->Publish(kDemo, {"three"}));
  EXPECT_EQ(entry.publishes("demo"), 1u);
}

TEST(ClientClusterFake, TheOwnerHintOfAForwardedAckRoutesTheNextPublish) {
  FakeBroker owner({.cluster = true}, ClusterScript{.node_id = "b"});
  const std::string owner_addr = owner.address();  // outlives `entry`, whose acks point into it
  ClusterScript script;  // knows no owners (forwards) and names the owner in its acks
  script.hint = flx1::BinaryPublishAck::Owner{"b", std::string_view(owner_addr), 4};
  FakeBroker entry({.cluster = true, .tls = owner.tls()}, script);
  ClientOptions o = entry.ClientOpts();
  o.ca_file = owner.ca_file();
  auto client = Client::Connect(o);
  ASSERT_TRUE(client);
  ASSERT_TRUE((*client)->Publish(kDemo, {"one"}));  // forwarded by the entry broker
  EXPECT_EQ(entry.publishes("demo"), 1u);
  EXPECT_EQ((*client)->CachedOwner(kDemo, 0), owner_addr);
  ASSERT_TRUE((*client)->Publish(kDemo, {"two"}));  // straight to the owner
  EXPECT_EQ(entry.publishes("demo"), 1u);
  EXPECT_EQ(owner.publishes("demo"), 1u);
}

TEST(ClientClusterFake, SubscribeFollowsRedirectsButRefusesALoop) {
  // entry → owner: followed, and the owner remembered.
  FakeBroker owner({.cluster = true});
  ClusterScript to_owner;
  to_owner.subscribe_redirect = flx1::NotLeader{"b", owner.address(), 5};
  FakeBroker entry({.cluster = true, .tls = owner.tls()}, to_owner);
  ClientOptions o = entry.ClientOpts();
  o.ca_file = owner.ca_file();
  auto client = Client::Connect(o);
  ASSERT_TRUE(client);
  auto sub = (*client)->Subscribe(kDemo, {.shard = 2});
  ASSERT_TRUE(sub) << sub.error().ToString();
  EXPECT_EQ((*client)->CachedOwner(kDemo, 2), owner.address());

  // looping → entry → owner is fine; looping → entry, entry → looping would be a loop: a
  // broker sending the client back to where it started is refused.
  ClusterScript to_entry;
  to_entry.subscribe_redirect = flx1::NotLeader{"a", entry.address(), 5};
  FakeBroker looping({.cluster = true, .tls = owner.tls()}, to_entry);
  ClusterScript back;
  back.subscribe_redirect = flx1::NotLeader{"l", looping.address(), 5};
  FakeBroker bouncer({.cluster = true, .tls = owner.tls()}, back);
  ClusterScript to_bouncer;
  to_bouncer.subscribe_redirect = flx1::NotLeader{"x", bouncer.address(), 5};
  FakeBroker start({.cluster = true, .tls = owner.tls()}, to_bouncer);
  ClientOptions so = start.ClientOpts();
  so.ca_file = owner.ca_file();
  // start → bouncer → looping → entry → owner: four hops, one more than allowed.
  auto far = Client::Connect(so);
  ASSERT_TRUE(far);
  auto too_far = (*far)->Subscribe(kDemo, {.shard = 1});
  ASSERT_FALSE(too_far);
  EXPECT_EQ(too_far.error().code, ClientErrorCode::kNotLeader);
  EXPECT_NE(too_far.error().message.find("more than 3 redirects"), std::string::npos)
      << too_far.error().message;
  // bouncer → looping → entry → owner: three hops, served.
  ClientOptions bo = bouncer.ClientOpts();
  bo.ca_file = owner.ca_file();
  auto near = Client::Connect(bo);
  ASSERT_TRUE(near);
  auto served = (*near)->Subscribe(kDemo, {.shard = 1});
  ASSERT_TRUE(served) << served.error().ToString();
}

TEST(ClientClusterFake, ARedirectBackToABrokerAlreadyTriedIsALoopAndRefused) {
  FakeBroker a({.cluster = true});
  FakeBroker b({.cluster = true, .tls = a.tls()});
  a.RedirectSubscribes(flx1::NotLeader{"b", b.address(), 5});
  b.RedirectSubscribes(flx1::NotLeader{"a", a.address(), 5});
  ClientOptions o = a.ClientOpts();
  auto client = Client::Connect(o);
  ASSERT_TRUE(client);
  auto refused = (*client)->Subscribe(kDemo, {.shard = 1});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ClientErrorCode::kNotLeader);
  EXPECT_NE(refused.error().message.find("redirect loop"), std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace felix
