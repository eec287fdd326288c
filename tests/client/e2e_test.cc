// End to end against the real felix-broker: create a durable stream with the `felix` CLI,
// publish with the client library, subscribe from earliest, check offsets and payloads,
// resume from next_offset(), and run `felix pub` / `felix sub` against the same broker.
//
// A broker that does not print `quic=` in its listening line or does not write
// <data_dir>/tls/broker-cert.pem fails the test.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/credentials.h"
#include "felix/client.h"
#include "support/child_process.h"
#include "support/etcd_process.h"

namespace felix {
namespace {

using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;
using felix::testing::RunProgram;

std::string Field(const std::string& line, const std::string& name) {
  size_t at = line.find(name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 1;
  size_t end = line.find_first_of(" \n", at);
  return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

class ClientE2E : public ::testing::Test {
 protected:
  // Publishes record(0) … record(count - 1) fire-and-forget, one call each: every call queued
  // and answered with no offset (nothing comes back for fire-and-forget).
  static ::testing::AssertionResult PublishEachFireAndForget(
      Client& client, const StreamRef& stream, int count,
      const std::function<std::string(int)>& record) {
    PublishOptions po;
    po.ack = AckMode::kNone;
    for (int i = 0; i < count; ++i) {
      auto queued = client.Publish(stream, {record(i)}, po);
      if (!queued) return ::testing::AssertionFailure() << i << ": " << queued.error().ToString();
      if (queued->offset) return ::testing::AssertionFailure() << i << ": an offset came back";
    }
    return ::testing::AssertionSuccess();
  }

  void SetUp() override {
    data_dir_ = MakeTempDir("client-e2e");
    // A small in-flight budget a stream, and publishes that wait for room however long it
    // takes: fire-and-forget publishers here outrun the broker's budget, so what they wrote
    // waits unread at the broker, and must still all arrive (the client's close waits for the
    // broker to have handled it: Client::Impl::FinishRequestStream).
    env_ = {{"FELIX_DATA_DIR", data_dir_},
            {"FELIX_QUIC_BIND", "127.0.0.1:0"},
            {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
            {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"},
            {"FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES", "1048576"},
            {"FELIX_PUB_INGRESS_WAIT", "true"}};
    broker_ = std::make_unique<ChildProcess>(BuiltProgram("src/server/felix-broker"),
                                             std::vector<std::string>{}, env_);
    auto line = broker_->WaitForLine("felix-broker listening");
    ASSERT_TRUE(line) << broker_->stderr_text();
    quic_ = Field(*line, "quic");
    ASSERT_FALSE(quic_.empty()) << "no quic= in the broker's listening line: '" << *line << "'";
    ca_file_ = data_dir_ + "/tls/broker-cert.pem";
    ASSERT_TRUE(std::filesystem::exists(ca_file_))
        << "the broker did not write its certificate to " << ca_file_;
    auto creds = catalog::LoadAdminCredentials(data_dir_ + "/" + catalog::kCredentialsFile);
    ASSERT_TRUE(creds) << creds.error().message;
    creds_ = *creds;
  }
  void TearDown() override {
    if (broker_) {
      EXPECT_EQ(broker_->Stop(SIGTERM), 0);
    }
  }

  std::pair<int, std::string> Felix(std::vector<std::string> args) {
    return RunProgram(BuiltProgram("src/cli/felix"), args, {{"FELIX_DATA_DIR", data_dir_}});
  }

  std::string Token(const std::string& stream, std::vector<std::string> more_perms = {}) {
    auto key = auth::SigningKey::FromSeedBase64(creds_.signing_kid, creds_.signing_seed);
    EXPECT_TRUE(key);
    auth::TokenClaims claims;
    claims.sub = "e2e";
    claims.tid = creds_.tenant_id;
    std::string scope = creds_.tenant_id + "/default/" + stream;
    claims.perms = {"stream.publish:stream:" + scope, "stream.subscribe:stream:" + scope};
    claims.perms.insert(claims.perms.end(), more_perms.begin(), more_perms.end());
    claims.iat = auth::NowUnixSeconds();
    claims.exp = claims.iat + 600;
    return key ? auth::MintToken(*key, claims) : "";
  }

  ClientOptions Options(const std::string& stream) {
    ClientOptions o;
    o.broker = quic_;
    o.ca_file = ca_file_;
    o.tenant_id = creds_.tenant_id;
    o.token = Token(stream);
    return o;
  }

  // Creates a durable stream and a cache; options whose token may publish, subscribe, read
  // and write both.
  ClientOptions StreamAndCacheOptions(const std::string& stream, const std::string& cache) {
    EXPECT_EQ(Felix({"stream", "create", stream, "--durable"}).first, 0);
    EXPECT_EQ(Felix({"cache", "create", cache}).first, 0);
    ClientOptions options = Options(stream);
    const std::string cache_scope = "cache:" + creds_.tenant_id + "/default/" + cache;
    options.token = Token(stream, {"cache.read:" + cache_scope, "cache.write:" + cache_scope});
    return options;
  }

  std::string data_dir_, quic_, ca_file_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<ChildProcess> broker_;
  catalog::AdminCredentials creds_;
};

TEST_F(ClientE2E, PublishSubscribeEarliestAndResume) {
  auto [rc, out] = Felix({"stream", "create", "e2e", "--durable"});
  ASSERT_EQ(rc, 0) << out;
  auto client = Client::Connect(Options("e2e"));
  ASSERT_TRUE(client) << client.error().ToString();
  StreamRef stream{"default", "e2e"};
  auto r1 = (*client)->Publish(stream, {"one", "two"});
  ASSERT_TRUE(r1) << r1.error().ToString();
  auto r2 = (*client)->Publish(stream, {"three"});
  ASSERT_TRUE(r2) << r2.error().ToString();
  ASSERT_TRUE(r1->offset) << "a durable stream with ack_on_commit reports offsets";
  ASSERT_TRUE(r2->offset);
  EXPECT_EQ(*r2->offset, *r1->offset + 2);

  auto sub = (*client)->Subscribe(stream, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  std::vector<std::string> payloads;
  std::vector<uint64_t> offsets;
  while (payloads.size() < 3) {
    auto e = (*sub)->Next(std::chrono::seconds(10));
    ASSERT_TRUE(e) << e.error().ToString();
    ASSERT_TRUE(*e) << "no event within 10 s";
    payloads.push_back((*e)->payload);
    ASSERT_TRUE((*e)->offset);
    offsets.push_back(*(*e)->offset);
  }
  EXPECT_EQ(payloads, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(offsets, (std::vector<uint64_t>{*r1->offset, *r1->offset + 1, *r1->offset + 2}));
  auto resume_at = (*sub)->next_offset();
  ASSERT_TRUE(resume_at);
  EXPECT_EQ(*resume_at, *r2->offset + 1);
  (*sub)->Close();

  auto r3 = (*client)->Publish(stream, {"four"});
  ASSERT_TRUE(r3) << r3.error().ToString();
  auto resumed = (*client)->Subscribe(stream, {.start = StartPosition::Offset(*resume_at)});
  ASSERT_TRUE(resumed) << resumed.error().ToString();
  auto e = (*resumed)->Next(std::chrono::seconds(10));
  ASSERT_TRUE(e && *e);
  EXPECT_EQ((*e)->payload, "four");
  EXPECT_EQ((*e)->offset, r3->offset);

  auto future = (*client)->Subscribe(stream, {.start = StartPosition::Offset(*resume_at + 100)});
  ASSERT_FALSE(future);
  EXPECT_EQ(future.error().code, ClientErrorCode::kCursorInFuture);
}

// Push delivery through the real broker: a live subscription's handler receives what is
// published afterwards, in order with its offsets, on the client's I/O thread; Close silences
// it and next_offset says where to resume.
TEST_F(ClientE2E, APushSubscriptionReceivesLiveEventsOnTheIoThread) {
  auto [rc, out] = Felix({"stream", "create", "push", "--durable"});
  ASSERT_EQ(rc, 0) << out;
  auto client = Client::Connect(Options("push"));
  ASSERT_TRUE(client) << client.error().ToString();
  StreamRef stream{"default", "push"};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Event> events;
  std::vector<ClientError> ends;
  std::set<std::thread::id> threads;
  auto sub = (*client)->Subscribe(stream, {.on_event = [&](ClientResult<Event> r) {
                                    std::lock_guard<std::mutex> lock(mu);
                                    if (r) events.push_back(std::move(*r));
                                    if (!r) ends.push_back(r.error());
                                    threads.insert(std::this_thread::get_id());
                                    cv.notify_all();
                                  }});
  ASSERT_TRUE(sub) << sub.error().ToString();
  std::vector<std::string> sent;
  std::optional<uint64_t> first;
  for (int i = 0; i < 50; ++i) {
    sent.push_back("push-" + std::to_string(i));
    auto r = (*client)->Publish(stream, {sent.back()});
    ASSERT_TRUE(r) << r.error().ToString();
    ASSERT_TRUE(r->offset);
    if (!first) first = r->offset;
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return events.size() >= 50; }));
  }
  (*sub)->Close();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(events.size(), 50u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].payload, sent[i]);
    EXPECT_EQ(events[i].offset, *first + i);
  }
  EXPECT_TRUE(ends.empty()) << ends.front().ToString();
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ((*sub)->next_offset(), *first + 50);
}

// Fire-and-forget publishes return once queued to the connection (the caller never waits for
// the client's loop thread); closing the client writes what is still queued first, so every
// record arrives, in the order published. The reader may start while the broker still appends
// them: if its live queue overflows (a loaded machine), the broker ends the subscription with
// kLagged{resume_from}, and the reader resubscribes there as an application would, so the
// check is that nothing is missing, repeated or reordered across resumes. The records' sizes
// vary (up to 1.8 KB, ~2.7 MB in all), so the client's batches (64 KiB of publishes each, a
// publish that would pass that starting the next) end at many different records.
TEST_F(ClientE2E, FireAndForgetPublishesAreAllWrittenInOrderBeforeTheClientCloses) {
  auto [rc, out] = Felix({"stream", "create", "ff", "--durable"});
  ASSERT_EQ(rc, 0) << out;
  StreamRef stream{"default", "ff"};
  constexpr int kRecords = 3000;
  auto record = [](int i) {
    return "m" + std::to_string(i) + std::string(size_t(i % 7) * 300, 'x');
  };
  {
    auto client = Client::Connect(Options("ff"));
    ASSERT_TRUE(client) << client.error().ToString();
    ASSERT_TRUE(PublishEachFireAndForget(**client, stream, kRecords, record));
  }  // closed here, right after the last call returned
  auto reader = Client::Connect(Options("ff"));
  ASSERT_TRUE(reader) << reader.error().ToString();
  auto sub = (*reader)->Subscribe(stream, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  int resumes = 0;
  for (int i = 0; i < kRecords;) {
    auto e = (*sub)->Next(std::chrono::seconds(10));
    if (!e && e.error().code == ClientErrorCode::kLagged && resumes < 100) {
      ASSERT_TRUE(e.error().resume_from) << e.error().ToString();
      ++resumes;
      sub = (*reader)->Subscribe(stream, {.start = StartPosition::Offset(*e.error().resume_from)});
      ASSERT_TRUE(sub) << sub.error().ToString();
      continue;
    }
    ASSERT_TRUE(e) << e.error().ToString();
    ASSERT_TRUE(*e) << "record " << i << " never arrived";
    ASSERT_EQ((*e)->payload, record(i)) << "after " << resumes << " resumes";
    ++i;
  }
}

// Fire-and-forget publishers that outrun the connection fill the client's send queue (8 MiB of
// publishes queued and not yet written): each then waits for the I/O thread to free room, and
// none is refused, lost or reordered. Four threads publish 24 MiB in 256 KiB records, three
// times what the queue holds, so they wait for room (a publisher refused instead of waiting
// fails it: mutation-checked). The broker's budget (1 MiB a stream here) holds what they wrote
// unread at the broker while it waits for room, so the close must wait for the broker to have
// handled it (closing once the bytes were acknowledged lost the last ~30 records: mutation-
// checked). Nothing is timed: the check is that every call succeeds and every record arrives,
// in each publisher's order.
TEST_F(ClientE2E, FireAndForgetPublishersBeyondTheSendQueueWaitForRoomAndLoseNothing) {
  auto [rc, out] = Felix({"stream", "create", "ffq", "--durable"});
  ASSERT_EQ(rc, 0) << out;
  const StreamRef stream{"default", "ffq"};
  constexpr int kThreads = 4, kPerThread = 24;
  constexpr size_t kRecordBytes = 256 * 1024;
  {
    auto client = Client::Connect(Options("ffq"));
    ASSERT_TRUE(client) << client.error().ToString();
    std::vector<std::string> failures(kThreads);
    std::vector<std::thread> publishers;
    for (int t = 0; t < kThreads; ++t) {
      publishers.emplace_back([&, t] {
        PublishOptions po;
        po.ack = AckMode::kNone;
        for (int i = 0; i < kPerThread; ++i) {
          std::string payload = std::to_string(t) + "/" + std::to_string(i) + "/";
          payload.resize(kRecordBytes, static_cast<char>('a' + t));
          auto queued = (*client)->Publish(stream, {payload}, po);
          if (!queued) {
            failures[t] = std::to_string(i) + ": " + queued.error().ToString();
            return;
          }
        }
      });
    }
    for (auto& p : publishers) p.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "publisher " << t;
  }  // closed here: what is still queued is written first
  auto reader = Client::Connect(Options("ffq"));
  ASSERT_TRUE(reader) << reader.error().ToString();
  auto sub = (*reader)->Subscribe(stream, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  std::vector<int> next(kThreads, 0);
  for (int n = 0; n < kThreads * kPerThread; ++n) {
    auto e = (*sub)->Next(std::chrono::seconds(20));
    ASSERT_TRUE(e) << e.error().ToString();
    ASSERT_TRUE(*e) << "record " << n << " never arrived";
    const std::string& payload = (*e)->payload;
    ASSERT_EQ(payload.size(), kRecordBytes);
    const int t = payload[0] - '0';
    ASSERT_TRUE(t >= 0 && t < kThreads) << payload.substr(0, 16);
    ASSERT_EQ(payload.substr(0, payload.find('/', 2) + 1),
              std::to_string(t) + "/" + std::to_string(next[t]) + "/")
        << "publisher " << t << " out of order";
    ASSERT_EQ(payload.back(), static_cast<char>('a' + t));
    ++next[t];
  }
  EXPECT_EQ(next, std::vector<int>(kThreads, kPerThread));
}

// A fire-and-forget publisher whose batch fills before the I/O thread takes it writes the batch
// itself, one loop turn on its own thread (docs/performance.md, change 62): records of 60 KiB
// make every publish's batch due (past 56 KiB), so each publish here takes that path. Every
// record arrives whole and in order, and so does a last small record published after them while
// the publisher then stays open and idle: its batch, posted without waking the parked I/O
// thread, is written once the park after the publisher's last turn ends (a tail left to a
// publisher that never comes back would never arrive: mutation-checked).
TEST_F(ClientE2E, AFireAndForgetPublisherWritingItsOwnBatchesLosesNothingAndLeavesNoTail) {
  auto [rc, out] = Felix({"stream", "create", "ffown", "--durable"});
  ASSERT_EQ(rc, 0) << out;
  const StreamRef stream{"default", "ffown"};
  constexpr int kBig = 48;
  constexpr size_t kBigBytes = 60 * 1024;
  auto big = [&](int i) {
    std::string payload = std::to_string(i) + "/";
    payload.resize(kBigBytes, static_cast<char>('a' + i % 26));
    return payload;
  };
  auto publisher = Client::Connect(Options("ffown"));
  ASSERT_TRUE(publisher) << publisher.error().ToString();
  ASSERT_TRUE(PublishEachFireAndForget(**publisher, stream, kBig, big));
  PublishOptions po;
  po.ack = AckMode::kNone;
  auto last = (*publisher)->Publish(stream, {"last"}, po);
  ASSERT_TRUE(last) << last.error().ToString();
  // The publisher stays open and publishes nothing more while the reader reads.
  auto reader = Client::Connect(Options("ffown"));
  ASSERT_TRUE(reader) << reader.error().ToString();
  auto sub = (*reader)->Subscribe(stream, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  for (int i = 0; i <= kBig; ++i) {
    auto e = (*sub)->Next(std::chrono::seconds(20));
    ASSERT_TRUE(e) << e.error().ToString();
    ASSERT_TRUE(*e) << "record " << i << " never arrived";
    ASSERT_EQ((*e)->payload, i < kBig ? big(i) : "last") << "record " << i;
  }
  (*sub)->Close();
}

// A run of fire-and-forget publishes to one stream travels as one batch frame (change 44 of
// docs/performance.md): publishes alternating between two streams, runs to each, and keyed
// ones in between (never joined) each arrive on their own stream, all of them, in order.
TEST_F(ClientE2E, FireAndForgetPublishesToTwoStreamsArriveEachOnItsOwnInOrder) {
  for (const char* name : {"ffa", "ffb"}) {
    auto [rc, out] = Felix({"stream", "create", name, "--durable"});
    ASSERT_EQ(rc, 0) << out;
  }
  const StreamRef a{"default", "ffa"}, b{"default", "ffb"};
  ClientOptions options = Options("ffa");
  const std::string scope_b = creds_.tenant_id + "/default/ffb";
  options.token =
      Token("ffa", {"stream.publish:stream:" + scope_b, "stream.subscribe:stream:" + scope_b});
  std::vector<std::string> sent_a, sent_b;
  {
    auto client = Client::Connect(options);
    ASSERT_TRUE(client) << client.error().ToString();
    PublishOptions po;
    po.ack = AckMode::kNone;
    PublishOptions keyed = po;
    keyed.key = "k";
    for (int i = 0; i < 600; ++i) {
      // Alternate, then runs of 1..9 to one stream; every seventh keyed.
      const bool to_a = i < 100 ? i % 2 == 0 : (i / (1 + i % 9)) % 2 == 0;
      std::string payload = (to_a ? "a" : "b") + std::to_string(i);
      std::vector<std::string> payloads = {payload};
      if (i % 5 == 0) payloads.push_back(payload + "+");  // two records in one publish
      auto queued = (*client)->Publish(to_a ? a : b, payloads, i % 7 == 0 ? keyed : po);
      ASSERT_TRUE(queued) << i << ": " << queued.error().ToString();
      auto& sent = to_a ? sent_a : sent_b;
      sent.insert(sent.end(), payloads.begin(), payloads.end());
    }
  }  // closed here: what is queued is written first
  auto reader = Client::Connect(options);
  ASSERT_TRUE(reader) << reader.error().ToString();
  for (const auto& [stream, sent] : {std::pair{a, &sent_a}, std::pair{b, &sent_b}}) {
    auto sub = (*reader)->Subscribe(stream, {.start = StartPosition::Earliest()});
    ASSERT_TRUE(sub) << sub.error().ToString();
    for (size_t i = 0; i < sent->size(); ++i) {
      auto e = (*sub)->Next(std::chrono::seconds(10));
      ASSERT_TRUE(e) << e.error().ToString();
      ASSERT_TRUE(*e) << stream.stream << ": record " << i << " never arrived";
      ASSERT_EQ((*e)->payload, (*sent)[i]) << stream.stream << " record " << i;
      EXPECT_EQ((*e)->offset, i) << stream.stream;
    }
  }
}

// A fire-and-forget publish the broker refuses (a stream the token does not cover) ends the
// request stream (client-protocol §8.3), and the broker reads nothing written after it there.
// That is not silent: a later fire-and-forget Publish reports that publishes written to the
// ended stream may not have been read, and the ones after it go out on a new stream and arrive.
TEST_F(ClientE2E, FireAndForgetPublishesLostWithARefusedOneAreReported) {
  for (const char* name : {"ffok", "ffno"}) {
    auto [rc, out] = Felix({"stream", "create", name, "--durable"});
    ASSERT_EQ(rc, 0) << out;
  }
  const StreamRef ok{"default", "ffok"}, refused{"default", "ffno"};
  auto client = Client::Connect(Options("ffok"));  // covers ffok only
  ASSERT_TRUE(client) << client.error().ToString();
  PublishOptions po;
  po.ack = AckMode::kNone;
  ASSERT_TRUE((*client)->Publish(refused, {"refused"}, po));
  std::optional<ClientError> reported;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; !reported && std::chrono::steady_clock::now() < deadline; ++i) {
    auto queued = (*client)->Publish(ok, {"before " + std::to_string(i)}, po);
    if (!queued) reported = queued.error();
  }
  ASSERT_TRUE(reported) << "no fire-and-forget Publish reported the ended request stream";
  EXPECT_NE(reported->message.find("may not have been read"), std::string::npos)
      << reported->ToString();
  EXPECT_EQ(reported->retry, RetryClass::kOutcomeUnknown) << reported->ToString();
  // The client goes on, on a new request stream.
  ASSERT_TRUE((*client)->Publish(ok, {"after"}, po));
  auto acked = (*client)->Publish(ok, {"acked"});
  ASSERT_TRUE(acked) << acked.error().ToString();
  auto sub = (*client)->Subscribe(ok, {.start = StartPosition::Offset(*acked->offset - 1)});
  ASSERT_TRUE(sub) << sub.error().ToString();
  auto e = (*sub)->Next(std::chrono::seconds(10));
  ASSERT_TRUE(e && *e) << (e ? "nothing" : e.error().ToString());
  EXPECT_EQ((*e)->payload, "after");
}

// Fire-and-forget publishes are written in batches by the client's I/O thread. An acked
// publish sent asynchronously between them keeps its place: its offset counts exactly the
// publishes made before it, though more fire-and-forget ones follow at once (they must not join
// a batch written ahead of it), whether they fit one batch or, 40 KiB each, spill over several.
TEST_F(ClientE2E, AnAckedPublishKeepsItsPlaceAmongFireAndForgetPublishes) {
  auto [rc, out] = Felix({"stream", "create", "mixed", "--durable"});
  ASSERT_EQ(rc, 0) << out;
  StreamRef stream{"default", "mixed"};
  auto client = Client::Connect(Options("mixed"));
  ASSERT_TRUE(client) << client.error().ToString();
  PublishOptions unacked;
  unacked.ack = AckMode::kNone;
  const std::string large(40 * 1024, 'L');
  constexpr int kRounds = 40;
  struct Outcome {
    uint64_t expected = 0;
    std::promise<ClientResult<PublishReceipt>> receipt;
  };
  std::vector<Outcome> outcomes(kRounds);
  uint64_t published = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int burst = 1 + round * 7 % 50;
    for (int i = 0; i < burst; ++i) {
      auto queued = (*client)->Publish(
          stream, {round % 4 == 3 ? large : "u" + std::to_string(published)}, unacked);
      ASSERT_TRUE(queued) << queued.error().ToString();
      ++published;
    }
    outcomes[round].expected = published;
    auto sent = (*client)->PublishAsync(
        stream, {"a" + std::to_string(published)}, {},
        [&promise = outcomes[round].receipt](ClientResult<PublishReceipt> r) {
          promise.set_value(std::move(r));
        });
    ASSERT_TRUE(sent) << sent.error().ToString();
    ++published;
  }
  for (int round = 0; round < kRounds; ++round) {
    auto future = outcomes[round].receipt.get_future();
    ASSERT_EQ(future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    auto receipt = future.get();
    ASSERT_TRUE(receipt) << receipt.error().ToString();
    ASSERT_TRUE(receipt->offset);
    EXPECT_EQ(*receipt->offset, outcomes[round].expected) << "round " << round;
  }
}

// ClientOptions::spin_wait changes how a blocking call waits, not what it gets: acked
// publishes come back with consecutive offsets, a subscription's Next returns them in order,
// and cache calls return their values.
// Twenty puts over three keys, each read back at once.
void PutAndGetEach(Client& client, const CacheRef& cache) {
  for (int i = 0; i < 20; ++i) {
    std::string key = "k" + std::to_string(i % 3);
    ASSERT_TRUE(client.CachePut(cache, key, "v" + std::to_string(i)));
    auto got = client.CacheGet(cache, key);
    ASSERT_TRUE(got) << got.error().ToString();
    ASSERT_TRUE(*got);
    EXPECT_EQ(**got, "v" + std::to_string(i));
  }
}

TEST_F(ClientE2E, ACallerThatSpinsForItsAnswersGetsTheSameAnswers) {
  ClientOptions options = StreamAndCacheOptions("spun", "spun-cache");
  options.spin_wait = std::chrono::microseconds(2000);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client) << client.error().ToString();
  StreamRef stream{"default", "spun"};
  std::optional<uint64_t> first;
  for (int i = 0; i < 20; ++i) {
    auto receipt = (*client)->Publish(stream, {"r" + std::to_string(i)});
    ASSERT_TRUE(receipt) << receipt.error().ToString();
    ASSERT_TRUE(receipt->offset);
    if (!first) first = receipt->offset;
    EXPECT_EQ(*receipt->offset, *first + i);
  }
  auto sub = (*client)->Subscribe(stream, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(sub) << sub.error().ToString();
  for (int i = 0; i < 20; ++i) {
    auto e = (*sub)->Next(std::chrono::seconds(10));
    ASSERT_TRUE(e) << e.error().ToString();
    ASSERT_TRUE(*e) << "event " << i << " never arrived";
    EXPECT_EQ((*e)->payload, "r" + std::to_string(i));
    EXPECT_EQ((*e)->offset, *first + i);
  }
  (*sub)->Close();
  PutAndGetEach(**client, CacheRef{"default", "spun-cache"});
}

// ClientOptions::caller_runs_io: acked publishes and cache calls do the connection's I/O on the
// calling thread. Through the real broker: one caller's publishes, four callers at once on the
// same client (one drives, the others wait and are served), cache calls, and a push and a pull
// subscription on that same client get every answer and every event.
TEST_F(ClientE2E, CallersRunningTheConnectionsIoGetTheSameAnswers) {
  ClientOptions options = StreamAndCacheOptions("cio", "cio-cache");
  auto client = Client::Connect(options);
  ASSERT_TRUE(client) << client.error().ToString();
  StreamRef stream{"default", "cio"};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> pushed;
  auto push = (*client)->Subscribe(stream, {.on_event = [&](ClientResult<Event> r) {
                                     std::lock_guard<std::mutex> lock(mu);
                                     if (r) pushed.push_back(r->payload);
                                     cv.notify_all();
                                   }});
  ASSERT_TRUE(push) << push.error().ToString();
  std::set<std::string> sent;
  std::optional<uint64_t> first;
  for (int i = 0; i < 50; ++i) {
    const std::string payload = "one-" + std::to_string(i);
    auto r = (*client)->Publish(stream, {payload});
    ASSERT_TRUE(r) << r.error().ToString();
    ASSERT_TRUE(r->offset);
    if (!first) first = r->offset;
    EXPECT_EQ(*r->offset, *first + i);
    sent.insert(payload);
  }
  std::vector<std::thread> callers;
  std::vector<std::vector<uint64_t>> offsets(4);
  std::atomic<int> failed{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto r =
            (*client)->Publish(stream, {"many-" + std::to_string(t) + "-" + std::to_string(i)});
        if (!r || !r->offset) {
          ++failed;
          continue;
        }
        offsets[t].push_back(*r->offset);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(failed.load(), 0);
  std::set<uint64_t> distinct;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 25; ++i) sent.insert("many-" + std::to_string(t) + "-" + std::to_string(i));
    distinct.insert(offsets[t].begin(), offsets[t].end());
  }
  EXPECT_EQ(distinct.size(), 100u);
  PutAndGetEach(**client, CacheRef{"default", "cio-cache"});
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return pushed.size() >= 150; }))
        << pushed.size() << " of 150 events pushed";
    EXPECT_EQ(std::set<std::string>(pushed.begin(), pushed.end()), sent);
  }
  (*push)->Close();
  auto pull = (*client)->Subscribe(stream, {.start = StartPosition::Earliest()});
  ASSERT_TRUE(pull) << pull.error().ToString();
  std::set<std::string> pulled;
  for (int i = 0; i < 150; ++i) {
    auto e = (*pull)->Next(std::chrono::seconds(20));
    ASSERT_TRUE(e) << e.error().ToString();
    ASSERT_TRUE(*e) << "event " << i << " never arrived";
    pulled.insert((*e)->payload);
  }
  EXPECT_EQ(pulled, sent);
  (*pull)->Close();
}

// A caller that drives its connection (caller_runs_io, the default) reads whatever arrives
// meanwhile — other publishes' acknowledgements, a push subscription's events — but the user's
// callbacks for them run on the connection's I/O thread, in order, each once: never on the
// caller's thread, where one would run inside the caller's blocking call.
TEST_F(ClientE2E, CallbacksRunOnTheIoThreadNotOnTheCallerDrivingIt) {
  ClientOptions options = StreamAndCacheOptions("cb", "cb-cache");
  ASSERT_TRUE(options.caller_runs_io) << "the default";
  auto client = Client::Connect(options);
  ASSERT_TRUE(client) << client.error().ToString();
  StreamRef stream{"default", "cb"};
  const std::thread::id caller = std::this_thread::get_id();
  constexpr size_t kRounds = 200;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint64_t> pushed;  // offsets, in delivery order
  int pushed_on_caller = 0;
  auto push = (*client)->Subscribe(stream, {.on_event = [&](ClientResult<Event> r) {
                                     std::lock_guard<std::mutex> lock(mu);
                                     if (std::this_thread::get_id() == caller) ++pushed_on_caller;
                                     if (r && r->offset) pushed.push_back(*r->offset);
                                     cv.notify_all();
                                   }});
  ASSERT_TRUE(push) << push.error().ToString();
  std::vector<uint64_t> async_acked;  // offsets, in callback order
  int async_on_caller = 0;
  int async_failed = 0;
  for (size_t i = 0; i < kRounds; ++i) {
    auto queued = (*client)->PublishAsync(stream, {"async-" + std::to_string(i)}, {},
                                          [&](ClientResult<PublishReceipt> r) {
                                            std::lock_guard<std::mutex> lock(mu);
                                            if (std::this_thread::get_id() == caller)
                                              ++async_on_caller;
                                            if (r && r->offset) {
                                              async_acked.push_back(*r->offset);
                                            } else {
                                              ++async_failed;
                                            }
                                            cv.notify_all();
                                          });
    ASSERT_TRUE(queued) << queued.error().ToString();
    // The blocking publish drives the connection while the async one's answer and both
    // records' events arrive.
    auto r = (*client)->Publish(stream, {"sync-" + std::to_string(i)});
    ASSERT_TRUE(r) << r.error().ToString();
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20),
                            [&] {
                              return async_acked.size() + size_t(async_failed) >= kRounds &&
                                     pushed.size() >= 2 * kRounds;
                            }))
        << async_acked.size() << " async acks, " << pushed.size() << " events";
    EXPECT_EQ(async_on_caller, 0) << "a PublishAsync callback ran on the driving caller";
    EXPECT_EQ(pushed_on_caller, 0) << "an event handler ran on the driving caller";
    EXPECT_EQ(async_failed, 0);
    EXPECT_EQ(async_acked.size(), kRounds);
    EXPECT_TRUE(std::is_sorted(async_acked.begin(), async_acked.end())) << "acks out of order";
    ASSERT_EQ(pushed.size(), 2 * kRounds);
    for (size_t i = 1; i < pushed.size(); ++i)
      ASSERT_EQ(pushed[i], pushed[0] + i) << "events out of order or repeated at " << i;
  }
  (*push)->Close();
}

TEST_F(ClientE2E, CliPubAndSub) {
  auto [rc, out] = Felix({"stream", "create", "cli", "--durable"});
  ASSERT_EQ(rc, 0) << out;
  auto pub = Felix({"pub", "cli", "alpha", "beta"});
  ASSERT_EQ(pub.first, 0) << pub.second;
  auto sub = Felix({"sub", "cli", "--from", "earliest", "--count", "2"});
  ASSERT_EQ(sub.first, 0) << sub.second;
  EXPECT_NE(sub.second.find("\talpha\n"), std::string::npos) << sub.second;
  EXPECT_NE(sub.second.find("\tbeta\n"), std::string::npos) << sub.second;
}

// $FELIX_BROKERS (as `scripts/cluster` writes it) is tried in order when --broker is absent: an
// address nobody answers is passed over for the next; --broker wins over it; when none
// connects the error names every address.
TEST_F(ClientE2E, CliTriesFelixBrokersInOrder) {
  ASSERT_EQ(Felix({"stream", "create", "list"}).first, 0);
  std::string dead = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  auto run = [&](const std::string& brokers, std::vector<std::string> args) {
    args.insert(args.end(), {"--timeout-ms", "1000"});
    return RunProgram(BuiltProgram("src/cli/felix"), args,
                      {{"FELIX_DATA_DIR", data_dir_}, {"FELIX_BROKERS", brokers}});
  };
  auto ok = run(dead + "," + quic_, {"pub", "list", "via-second"});
  EXPECT_EQ(ok.first, 0) << ok.second;
  auto overridden = run(quic_, {"pub", "list", "x", "--broker", dead});
  EXPECT_NE(overridden.first, 0);
  EXPECT_NE(overridden.second.find(dead), std::string::npos) << overridden.second;
  auto none = run(dead + ", " + dead, {"pub", "list", "x"});
  EXPECT_NE(none.first, 0);
  EXPECT_NE(none.second.find(dead + ": "), std::string::npos) << none.second;
  EXPECT_NE(none.second.find("; " + dead + ": "), std::string::npos) << none.second;
  auto sub = run(quic_, {"sub", "list", "--from", "earliest", "--count", "1"});
  ASSERT_EQ(sub.first, 0) << sub.second;
  EXPECT_NE(sub.second.find("\tvia-second\n"), std::string::npos) << sub.second;
}

}  // namespace
}  // namespace felix
