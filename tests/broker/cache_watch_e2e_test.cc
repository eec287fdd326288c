// Conditional cache writes, versions and cache watches on the wire, against the real
// felix-broker process (client-protocol.md §6.5, §9.4; semantics.md §10): exact FLX1 messages
// from Flx1TestClient, including every refusal.
#include <signal.h>

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "e2e_broker.h"
#include "flx1_test_client.h"
#include "support/child_process.h"

namespace felix::broker {
namespace {

namespace flx1 = felix::wire::flx1;
using felix::testing::MakeTempDir;
using testing::Flx1TestClient;
using testing::TestStream;
using namespace std::chrono_literals;

class CacheWatchE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = std::make_unique<e2e::Broker>(MakeTempDir("cache-watch-e2e"));
    tenant_ = broker_->creds().tenant_id;
    client_ = broker_->Connect();
    ASSERT_TRUE(client_);
  }
  void TearDown() override {
    client_.reset();
    if (broker_) {
      EXPECT_EQ(broker_->Stop(SIGTERM), 0);
    }
  }

  void CreateCache(const std::string& name, uint32_t shards = 1, bool durable = true) {
    broker_->CreateCache(tenant_, name, durable, shards);
  }
  std::string AllToken() {
    std::string scope = "cache:" + tenant_ + "/*/*";
    return broker_->Token(tenant_, {"cache.read:" + scope, "cache.write:" + scope});
  }
  std::shared_ptr<TestStream> Authed(const std::string& token,
                                     uint32_t features = flx1::kFeatureErrorCodes |
                                                         flx1::kFeatureCacheConditional,
                                     uint32_t* server_features = nullptr) {
    auto stream = client_->OpenStream();
    flx1::Auth auth;
    auth.tenant_id = tenant_;
    auth.token = token;
    auth.client_flags = flx1::kKnownFlags & ~flx1::kFlagBinaryPublishIdempotent;
    auth.client_features = features;
    stream->SendMessage(auth);
    auto ok = stream->Read<flx1::AuthOk>();
    EXPECT_TRUE(ok.has_value());
    if (ok && server_features) *server_features = ok->server_features.value_or(0);
    return stream;
  }
  static flx1::Bytes B(const std::string& s) { return flx1::Bytes(s.begin(), s.end()); }
  static std::string S(const flx1::Bytes& b) { return std::string(b.begin(), b.end()); }

  flx1::CachePutIf PutIf(const std::string& cache, const std::string& key, const std::string& value,
                         std::optional<uint64_t> version, uint64_t request_id) {
    flx1::CachePutIf m;
    m.tenant_id = tenant_;
    m.namespace_ = "default";
    m.cache = cache;
    m.key = key;
    m.value = B(value);
    if (version) m.condition = flx1::CacheCondition{flx1::CacheCondition::Kind::kVersion, *version};
    m.request_id = request_id;
    return m;
  }
  flx1::CacheDeleteIf DeleteIf(const std::string& cache, const std::string& key, uint64_t version,
                               uint64_t request_id) {
    return flx1::CacheDeleteIf{tenant_, "default", cache, key, version, request_id};
  }
  // A plain put, answered before this returns; the offset it landed at is not told.
  void Put(TestStream& s, const std::string& cache, const std::string& key,
           const std::string& value, std::optional<uint64_t> ttl_ms = std::nullopt) {
    s.SendMessage(flx1::CachePut{tenant_, "default", cache, key, B(value), 1, ttl_ms});
    ASSERT_TRUE(s.Read<flx1::CacheOk>()) << "put " << key;
  }
  void Delete(TestStream& s, const std::string& cache, const std::string& key) {
    s.SendMessage(flx1::CacheDelete{tenant_, "default", cache, key, 2});
    ASSERT_TRUE(s.Read<flx1::CacheValue>()) << "delete " << key;
  }
  flx1::CacheWatch Watch(const std::string& cache) {
    flx1::CacheWatch w;
    w.tenant_id = tenant_;
    w.namespace_ = "default";
    w.cache = cache;
    return w;
  }
  // Sends `watch`; the event stream must open with its hello, then cache_watch_started.
  std::shared_ptr<TestStream> StartWatch(TestStream& s, const flx1::CacheWatch& watch,
                                         flx1::CacheWatchStarted* started) {
    s.SendMessage(watch);
    auto events = client_->AcceptEventStream();
    if (!events) return nullptr;
    auto hello = events->Read<flx1::EventStreamHello>();
    EXPECT_TRUE(hello);
    auto answer = s.Read<flx1::CacheWatchStarted>();
    EXPECT_TRUE(answer);
    if (!hello || !answer) return nullptr;
    EXPECT_EQ(hello->subscription_id, answer->subscription_id);
    *started = *answer;
    return events;
  }

  std::unique_ptr<e2e::Broker> broker_;
  std::unique_ptr<Flx1TestClient> client_;
  std::string tenant_;
};

void ExpectEvent(TestStream& events, const std::string& key, std::optional<std::string> value,
                 std::optional<uint64_t> offset = std::nullopt) {
  auto event = events.Read<flx1::CacheEvent>();
  ASSERT_TRUE(event) << "no cache_event for " << key;
  EXPECT_EQ(event->key, key);
  if (value) {
    ASSERT_TRUE(event->value) << key << " should be a put";
    EXPECT_EQ(std::string(event->value->begin(), event->value->end()), *value);
  } else {
    EXPECT_FALSE(event->value) << key << " should be a delete";
    EXPECT_EQ(event->expires_at_millis, 0u);
  }
  if (offset) {
    EXPECT_EQ(event->offset, *offset) << key;
  }
}

TEST_F(CacheWatchE2E, ConditionalWritesAnswerAppliedAndTheVersion) {
  CreateCache("c");
  uint32_t features = 0;
  auto s = Authed(AllToken(), flx1::kFeatureErrorCodes | flx1::kFeatureCacheConditional, &features);
  EXPECT_NE(features & flx1::kFeatureCacheConditional, 0u);
  EXPECT_NE(features & flx1::kFeatureCacheWatch, 0u);
  EXPECT_NE(features & flx1::kFeatureCacheWatchRetained, 0u);

  s->SendMessage(PutIf("c", "k", "one", std::nullopt, 1));
  auto first = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(first && first->version);
  EXPECT_TRUE(first->applied);
  EXPECT_EQ(first->request_id, 1u);
  const uint64_t v1 = *first->version;
  s->SendMessage(PutIf("c", "k", "again", std::nullopt, 2));  // not absent any more
  auto second = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->applied);
  EXPECT_EQ(second->version, v1);

  s->SendMessage(flx1::CacheGet{tenant_, "default", "c", "k", 3});
  auto got = s->Read<flx1::CacheValue>();
  ASSERT_TRUE(got && got->value);
  EXPECT_EQ(S(*got->value), "one");
  EXPECT_EQ(got->version, v1) << "a hit carries its version to a CACHE_CONDITIONAL client";

  s->SendMessage(PutIf("c", "k", "stale", v1 + 1000, 4));  // a version the key never had
  auto stale = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(stale);
  EXPECT_FALSE(stale->applied);
  EXPECT_EQ(stale->version, v1);
  s->SendMessage(PutIf("c", "k", "two", v1, 5));
  auto swapped = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(swapped && swapped->version);
  EXPECT_TRUE(swapped->applied);
  EXPECT_GT(*swapped->version, v1) << "a version is the offset of the put";
  const uint64_t v2 = *swapped->version;

  s->SendMessage(DeleteIf("c", "k", v1, 6));
  auto kept = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(kept);
  EXPECT_FALSE(kept->applied);
  EXPECT_EQ(kept->version, v2);
  s->SendMessage(DeleteIf("c", "k", v2, 7));
  auto deleted = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(deleted);
  EXPECT_TRUE(deleted->applied);
  EXPECT_FALSE(deleted->version) << "no live entry after an applied delete_if";
  s->SendMessage(DeleteIf("c", "k", v2, 8));
  auto gone = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->applied);
  EXPECT_FALSE(gone->version);
  s->SendMessage(flx1::CacheGet{tenant_, "default", "c", "k", 9});
  auto miss = s->Read<flx1::CacheValue>();
  ASSERT_TRUE(miss);
  EXPECT_FALSE(miss->value);
  EXPECT_FALSE(miss->version) << "a miss carries no version";

  // Two racing "absent" puts on one stream, sent without waiting: exactly one applies, and
  // both answers name the version the winner wrote.
  s->SendMessage(PutIf("c", "race", "a", std::nullopt, 10));
  s->SendMessage(PutIf("c", "race", "b", std::nullopt, 11));
  std::map<uint64_t, flx1::CacheConditionResult> race;
  for (int i = 0; i < 2; ++i) {
    auto r = s->Read<flx1::CacheConditionResult>();
    ASSERT_TRUE(r);
    race[r->request_id] = *r;
  }
  ASSERT_EQ(race.size(), 2u);
  EXPECT_NE(race[10].applied, race[11].applied) << "exactly one racing absent put applies";
  EXPECT_EQ(race[10].version, race[11].version);

  // A client that did not offer CACHE_CONDITIONAL gets no version on its gets.
  auto plain = Authed(AllToken(), flx1::kFeatureErrorCodes);
  plain->SendMessage(flx1::CacheGet{tenant_, "default", "c", "race", 12});
  auto bytes = plain->ReadFrameBytes();
  ASSERT_TRUE(bytes);
  std::string text(bytes->begin() + 12, bytes->end());
  EXPECT_NE(text.find("\"request_id\":12"), std::string::npos) << text;
  EXPECT_EQ(text.find("version"), std::string::npos) << text;
}

TEST_F(CacheWatchE2E, ConditionalWritesOnAnInMemoryCacheAndTheirRefusals) {
  CreateCache("mem", 1, /*durable=*/false);
  auto s = Authed(AllToken());
  s->SendMessage(PutIf("mem", "k", "v", std::nullopt, 1));
  auto put = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(put && put->version);
  EXPECT_TRUE(put->applied);
  s->SendMessage(DeleteIf("mem", "k", *put->version, 2));
  auto del = s->Read<flx1::CacheConditionResult>();
  ASSERT_TRUE(del);
  EXPECT_TRUE(del->applied);

  s->SendMessage(PutIf("nope", "k", "v", std::nullopt, 3));
  auto unknown = s->Read<flx1::Error>();
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->code, "not_found");
  s->SendMessage(PutIf("mem", "k2", "v", std::nullopt, 4));
  ASSERT_TRUE(s->Read<flx1::CacheConditionResult>()) << "the stream goes on after not_found";

  std::string scope = "cache:" + tenant_ + "/default/mem";
  auto reader = Authed(broker_->Token(tenant_, {"cache.read:" + scope}));
  reader->SendMessage(DeleteIf("mem", "k2", 1, 5));
  auto refused = reader->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, "forbidden");
  EXPECT_TRUE(reader->WaitEnded()) << "a conditional write is a write: cache.write";
}

TEST_F(CacheWatchE2E, WatchFromAnOffsetReplaysHistoryThenLiveWithNoGapOrDuplicate) {
  CreateCache("c");
  auto s = Authed(AllToken());
  Put(*s, "c", "a", "1");              // offset 0
  Put(*s, "c", "b", "2");              // 1
  Put(*s, "c", "a", "3");              // 2
  Delete(*s, "c", "b");                // 3
  Put(*s, "c", "x:1", "not matched");  // 4

  auto w = Watch("c");
  w.key = "a";
  w.from_offset = 0;
  flx1::CacheWatchStarted started;
  auto key_events = StartWatch(*s, w, &started);
  ASSERT_TRUE(key_events);
  EXPECT_EQ(started.resume_offset, 5u);
  EXPECT_FALSE(started.resnapshot);
  EXPECT_FALSE(started.retained_count);
  ExpectEvent(*key_events, "a", "1", 0);
  ExpectEvent(*key_events, "a", "3", 2);

  // A prefix watch from offset 1 while a writer keeps writing on another stream: history,
  // then live, every offset exactly once and in order.
  auto writer = Authed(AllToken());
  constexpr int kLive = 200;
  for (int i = 0; i < kLive; ++i) {
    writer->SendMessage(flx1::CachePut{tenant_, "default", "c", "k" + std::to_string(i), B("v"),
                                       static_cast<uint64_t>(100 + i), std::nullopt});
  }
  auto all = Watch("c");
  all.prefix = "";
  all.from_offset = 1;
  auto events = StartWatch(*s, all, &started);
  ASSERT_TRUE(events);
  uint64_t expect = 1;
  for (uint64_t total = 5 + kLive; expect < total; ++expect) {
    auto event = events->Read<flx1::CacheEvent>();
    ASSERT_TRUE(event) << "missing offset " << expect;
    ASSERT_EQ(event->offset, expect) << "a gap or a duplicate";
  }
  for (int i = 0; i < kLive; ++i) ASSERT_TRUE(writer->Read<flx1::CacheOk>());
  // Live after everything: a put and an expiry (the sweep writes it as a delete).
  Put(*s, "c", "a", "4", /*ttl_ms=*/1);
  ExpectEvent(*key_events, "a", "4", expect);
  ExpectEvent(*events, "a", "4", expect);
  ExpectEvent(*key_events, "a", std::nullopt, expect + 1);
  ExpectEvent(*events, "a", std::nullopt, expect + 1);

  // A resume point past the tail is a cursor error; the stream goes on.
  auto future = Watch("c");
  future.key = "a";
  future.from_offset = 1000000;
  s->SendMessage(future);
  auto cursor = s->Read<flx1::SubscribeCursorError>();
  ASSERT_TRUE(cursor);
  EXPECT_EQ(cursor->reason, flx1::CursorErrorReason::kInFuture);
  EXPECT_EQ(cursor->requested, 1000000u);
  EXPECT_EQ(cursor->available, expect + 2);
}

TEST_F(CacheWatchE2E, RetainedWatchSendsCurrentValuesInKeyOrderThenLive) {
  CreateCache("c");
  auto s = Authed(AllToken());
  Put(*s, "c", "user:2", "b");     // 0
  Put(*s, "c", "other", "x");      // 1
  Put(*s, "c", "user:1", "a");     // 2
  Put(*s, "c", "user:1", "c");     // 3
  Put(*s, "c", "user:3", "gone");  // 4
  Delete(*s, "c", "user:3");       // 5

  auto w = Watch("c");
  w.prefix = "user:";
  w.retained = true;
  flx1::CacheWatchStarted started;
  auto events = StartWatch(*s, w, &started);
  ASSERT_TRUE(events);
  EXPECT_EQ(started.resume_offset, 6u);
  EXPECT_EQ(started.retained_count, 2u);
  ExpectEvent(*events, "user:1", "c", 3);  // at the offset of the write that produced it
  ExpectEvent(*events, "user:2", "b", 0);
  Put(*s, "c", "other", "y");   // 6: not matched
  Put(*s, "c", "user:9", "z");  // 7
  ExpectEvent(*events, "user:9", "z", 7);

  auto nothing = Watch("c");
  nothing.prefix = "none:";
  nothing.retained = true;
  auto empty = StartWatch(*s, nothing, &started);
  ASSERT_TRUE(empty);
  EXPECT_EQ(started.retained_count, 0u) << "0 = nothing matched";
  auto key = Watch("c");
  key.key = "other";
  key.retained = true;
  auto one = StartWatch(*s, key, &started);
  ASSERT_TRUE(one);
  EXPECT_EQ(started.retained_count, 1u);
  ExpectEvent(*one, "other", "y", 6);
}

TEST_F(CacheWatchE2E, WatchRefusals) {
  CreateCache("c");
  CreateCache("three", 3);
  CreateCache("mem", 1, /*durable=*/false);
  auto s = Authed(AllToken());
  auto expect_invalid = [&](flx1::CacheWatch w, const std::string& why) {
    s->SendMessage(w);
    auto error = s->Read<flx1::Error>();
    ASSERT_TRUE(error) << why;
    EXPECT_EQ(error->code, "invalid_request") << why << ": " << error->message;
  };
  auto both = Watch("c");
  both.key = "k";
  both.prefix = "k";
  expect_invalid(both, "key and prefix");
  expect_invalid(Watch("c"), "neither key nor prefix");
  auto exclusive = Watch("c");
  exclusive.key = "k";
  exclusive.retained = true;
  exclusive.from_offset = 0;
  expect_invalid(exclusive, "retained with from_offset");
  auto memory = Watch("mem");
  memory.key = "k";
  expect_invalid(memory, "in-memory cache");
  auto unnamed = Watch("three");
  unnamed.prefix = "";
  expect_invalid(unnamed, "prefix watch of a multi-shard cache without a shard");
  auto beyond = Watch("three");
  beyond.prefix = "";
  beyond.shard = 3;
  expect_invalid(beyond, "shard out of range");
  auto unknown = Watch("nope");
  unknown.key = "k";
  s->SendMessage(unknown);
  auto not_found = s->Read<flx1::Error>();
  ASSERT_TRUE(not_found);
  EXPECT_EQ(not_found->code, "not_found");

  // Validation errors keep the stream: a good watch on it is served.
  auto shard_two = Watch("three");
  shard_two.prefix = "";
  shard_two.shard = 2;
  flx1::CacheWatchStarted started;
  EXPECT_TRUE(StartWatch(*s, shard_two, &started));

  std::string scope = "cache:" + tenant_ + "/default/c";
  auto writer_only = Authed(broker_->Token(tenant_, {"cache.write:" + scope}));
  auto w = Watch("c");
  w.prefix = "";
  writer_only->SendMessage(w);
  auto refused = writer_only->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, "forbidden");
  EXPECT_TRUE(writer_only->WaitEnded()) << "a watch needs cache.read";
}

TEST_F(CacheWatchE2E, AWatcherThatFallsBehindEndsLaggedAndResumesWithoutAGap) {
  CreateCache("c");
  auto s = Authed(AllToken());
  auto w = Watch("c");
  w.prefix = "";
  flx1::CacheWatchStarted started;
  auto events = StartWatch(*s, w, &started);
  ASSERT_TRUE(events);
  events->SetPaused(true);  // QUIC flow control backs the broker's writer into the queue
  // 32 MiB of values: more than the watch queue (16 MiB) and QUIC's windows hold. Every key is
  // distinct, so nothing is garbage and no compaction copy takes an offset in between.
  const std::string big(64 * 1024, 'v');
  constexpr int kPuts = 512;
  for (int i = 0; i < kPuts; ++i) {
    s->SendMessage(flx1::CachePut{tenant_, "default", "c", "k" + std::to_string(i), B(big),
                                  static_cast<uint64_t>(i), std::nullopt});
  }
  for (int i = 0; i < kPuts; ++i) ASSERT_TRUE(s->Read<flx1::CacheOk>());
  events->SetPaused(false);
  uint64_t next = 0;
  std::optional<flx1::CacheWatchLagged> lagged;
  while (!lagged) {
    auto frame = events->ReadFrame();
    ASSERT_TRUE(frame) << "the event stream ended without cache_watch_lagged";
    auto& message = std::get<flx1::Message>(*frame);
    if (auto* l = std::get_if<flx1::CacheWatchLagged>(&message)) {
      lagged = *l;
      break;
    }
    auto& event = std::get<flx1::CacheEvent>(message);
    ASSERT_EQ(event.offset, next);
    ++next;
  }
  EXPECT_EQ(lagged->resume_from, next) << "resume_from is the first change not delivered";
  EXPECT_LT(next, static_cast<uint64_t>(kPuts));
  EXPECT_TRUE(events->WaitEnded()) << "cache_watch_lagged is the last frame";

  // Re-watching from resume_from is gapless.
  w.from_offset = lagged->resume_from;
  auto again = StartWatch(*s, w, &started);
  ASSERT_TRUE(again);
  EXPECT_EQ(started.resume_offset, static_cast<uint64_t>(kPuts));
  for (; next < kPuts; ++next) {
    auto event = again->Read<flx1::CacheEvent>();
    ASSERT_TRUE(event);
    ASSERT_EQ(event->offset, next);
    EXPECT_EQ(event->key, "k" + std::to_string(next));
  }
}

TEST_F(CacheWatchE2E, AResumePointCompactedAwayResnapshotsTheCurrentValues) {
  CreateCache("c");
  auto s = Authed(AllToken());
  // Overwrite two keys until compaction (4x live, 1 MiB floor) moves the log's base.
  const std::string big(8192, 'z');
  for (int i = 0; i < 200; ++i) Put(*s, "c", i % 2 ? "odd" : "even", big + std::to_string(i));
  auto probe = Watch("c");
  probe.key = "no-such-key";  // reads the log, queues nothing
  probe.from_offset = 0;
  flx1::CacheWatchStarted started;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  do {
    ASSERT_TRUE(StartWatch(*s, probe, &started));
  } while (!started.resnapshot && std::chrono::steady_clock::now() < deadline);
  ASSERT_TRUE(started.resnapshot) << "compaction never moved the log's base";
  // Copies taken during the puts moved later offsets: the versions are what a get reports.
  std::map<std::string, uint64_t> version;
  for (const char* key : {"even", "odd"}) {
    s->SendMessage(flx1::CacheGet{tenant_, "default", "c", key, 3});
    auto got = s->Read<flx1::CacheValue>();
    ASSERT_TRUE(got && got->version) << key;
    version[key] = *got->version;
  }

  auto w = Watch("c");
  w.prefix = "";
  w.from_offset = 0;
  auto events = StartWatch(*s, w, &started);
  ASSERT_TRUE(events);
  EXPECT_TRUE(started.resnapshot);
  ExpectEvent(*events, "even", big + "198", version["even"]);  // current values, at their versions
  ExpectEvent(*events, "odd", big + "199", version["odd"]);
  Put(*s, "c", "after", "a");
  ExpectEvent(*events, "after", "a", started.resume_offset);
}

}  // namespace
}  // namespace felix::broker
