// The client library against an in-process fake broker on the real QUIC transport: auth and
// negotiation, binary publishes matched to acknowledgements by request id (also out of
// order), error acks, stream_shards and the shard hash, subscribe with the event stream
// arriving before (and after) `subscribed`, offsets, cursor refusals, a slow reader throttled
// by flow control, and Close failing what is outstanding.
#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

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
  uint32_t shards = 8;
};

// Serves just enough FLX1 for the client: everything runs on the fake's loop thread.
class FakeBroker {
 public:
  explicit FakeBroker(FakeBrokerOptions o) : o_(o) {
    transport::TlsOptions tls;
    tls.role = transport::Role::kClient;
    tls.self_signed_name = "localhost";
    auto ctx = transport::TlsContext::Create(tls);
    EXPECT_TRUE(ctx);
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
  ClientOptions ClientOpts() const {
    ClientOptions c;
    c.broker = endpoint_->local_address().ToString();
    c.ca_file = ca_file_;
    c.tenant_id = "t1";
    c.token = "test-token";
    return c;
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
      if (stream == "denied") {
        ack.status = flx1::BinaryPublishAck::Status::kError;
        ack.message = "forbidden";
        ack.code = flx1::BinaryPublishAck::Code{2, 5};
      } else {
        ack.offset = log.size();
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
      ok.server_features = flx1::kFeatureStreamShards | flx1::kFeatureErrorCodes;
      Send(s, flx1::Message(ok));
    } else if (auto* req = std::get_if<flx1::StreamShards>(&m)) {
      flx1::StreamShardsView view;
      view.shards = o_.shards;
      view.request_id = req->request_id;
      view.routing = flx1::ShardRouting::kJumpHash;
      Send(s, flx1::Message(view));
    } else if (auto* sub = std::get_if<flx1::Subscribe>(&m)) {
      Subscribe(s, conn, *sub);
    }
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
  MetricsRegistry metrics_;
  std::string dir_, ca_file_;
  std::unique_ptr<transport::Endpoint> endpoint_;
  // Loop thread only.
  std::vector<std::shared_ptr<transport::Connection>> conns_;
  std::vector<std::shared_ptr<Session>> sessions_;
  std::vector<std::shared_ptr<transport::Stream>> event_streams_;
  std::map<std::string, std::vector<std::string>> logs_;
  uint64_t next_sub_ = 0;
  std::mutex mu_;
  std::optional<flx1::Auth> last_auth_;
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

}  // namespace
}  // namespace felix
