// The ingress side of a forwarded publish (cluster/forward_publisher.h) against scripted test
// peers over real QUIC on loopback: each row of the retry table — ok with and without
// FORWARD_OFFSETS, NotLeader followed once to an untried broker (same generation included),
// a redirect loop refused, StaleRoute retried then served, Unavailable until the attempt
// budget runs out, Overload, the non-retried refusals (Unauthorized, Malformed,
// StorageFailed), the legacy kind sent once after UnsupportedKind, a peer that never answers
// (indeterminate), a peer that goes away after receiving (indeterminate) and an owner with no
// known address (nothing sent). Then the same engine forwarding cache operations (kind 23):
// each op's frame and answer, redirect and retry rows, a lost write answer indeterminate and
// never re-sent, a lost read answer re-sent within the budget, the legacy kind 11 once.
#include "cluster/forward_publisher.h"

#include <gtest/gtest.h>

#include <future>

#include "peer_test_util.h"
#include "wire/flx1/constants.h"

namespace felix::cluster {
namespace {

using namespace felix::cluster::test;
using broker::ForwardPublishOutcome;
using wire::flx1::ProtocolErrorCode;

using Action = std::function<void(const PeerRequest&, PeerReply&)>;

Action Ok(uint64_t first, uint64_t last) {
  return [=](const PeerRequest&, PeerReply& reply) {
    reply(flxi::Frame{flxi::Kind::kForwardPublishOk, flxi::ForwardPublishOk{0, first, last}});
  };
}
bool IsCacheKind(flxi::Kind kind) {
  return kind == flxi::Kind::kAuthorizedForwardCacheOp || kind == flxi::Kind::kForwardCacheOp;
}
// A refusal in the shape of the request (kind 3 or 13).
Action Refuse(flxi::ErrorCode code) {
  return [=](const PeerRequest& r, PeerReply& reply) {
    reply(flxi::Frame{IsCacheKind(r.frame.kind) ? flxi::Kind::kForwardCacheError
                                                : flxi::Kind::kForwardPublishError,
                      flxi::ErrorAnswer{0, code, "scripted"}});
  };
}
Action CacheOk(std::optional<std::string> value) {
  return [=](const PeerRequest&, PeerReply& reply) {
    std::optional<flxi::Bytes> v;
    if (value) v = *value;
    reply(flxi::Frame{flxi::Kind::kForwardCacheOk, flxi::ForwardCacheOk{0, v}});
  };
}
Action Moved(std::string node, std::string addr, uint64_t generation) {
  return [=](const PeerRequest&, PeerReply& reply) {
    reply(flxi::Frame{flxi::Kind::kNotLeader, flxi::NotLeader{0, node, addr, generation}});
  };
}
Action Hold() {
  return [](const PeerRequest&, PeerReply&) {};  // the reply is kept, never called
}

struct Seen {
  flxi::Kind kind;
  uint64_t generation = 0;
  uint32_t shard = 0;
  bool credential = false;
  // Cache operations only.
  flxi::CacheOpKind op = flxi::CacheOpKind::kGet;
  std::string key{}, value{};
  uint64_t ttl_ms = 0;
};

// A broker that answers forwarded publishes from a script, one action per request.
struct ScriptedPeer {
  MetricsRegistry metrics;
  std::unique_ptr<PeerServer> server;
  std::unique_ptr<Endpoint> ep;
  std::mutex mu;
  std::deque<Action> script;
  std::vector<Seen> seen;
  std::vector<PeerReply> held;

  explicit ScriptedPeer(const std::string& node_id, uint64_t caps = flxi::kCapForwardOffsets) {
    server =
        std::make_unique<PeerServer>(PeerServerOptions{node_id, caps, false, "internal"}, metrics);
    for (auto kind : {flxi::Kind::kAuthorizedForwardPublish, flxi::Kind::kForwardPublish,
                      flxi::Kind::kAuthorizedForwardCacheOp, flxi::Kind::kForwardCacheOp}) {
      EXPECT_TRUE(server->Handle(kind, [this](const PeerRequest& r, PeerReply reply) {
        Seen s{r.frame.kind};
        if (const auto* fp = std::get_if<flxi::ForwardPublish>(&r.frame.body)) {
          s.generation = fp->shard.generation;
          s.shard = fp->shard.shard;
          s.credential = fp->credential.has_value();
        } else {
          const auto& op = std::get<flxi::CacheOp>(r.frame.body);
          s.generation = op.shard.generation;
          s.shard = op.shard.shard;
          s.credential = op.credential.has_value();
          s.op = op.op;
          s.key = std::string(op.key);
          s.value = std::string(op.value);
          s.ttl_ms = op.ttl_ms;
        }
        Action next;
        {
          std::lock_guard lock(mu);
          seen.push_back(std::move(s));
          if (!script.empty()) {
            next = std::move(script.front());
            script.pop_front();
          }
        }
        if (!next) next = Refuse(flxi::ErrorCode::kMalformed);
        next(r, reply);
        std::lock_guard lock(mu);
        held.push_back(std::move(reply));
      }));
    }
    EndpointOptions eo;
    eo.tls = MakeTls(UnauthenticatedInternal());
    eo.name = "internal";
    auto r = Endpoint::Create(Loopback(), eo, metrics, server->listen_handlers());
    EXPECT_TRUE(r.has_value());
    ep = std::move(*r);
  }
  ~ScriptedPeer() {
    if (ep) ep->Stop();
  }
  void Script(std::vector<Action> actions) {
    std::lock_guard lock(mu);
    for (auto& a : actions) script.push_back(std::move(a));
  }
  std::vector<Seen> Requests() {
    std::lock_guard lock(mu);
    return seen;
  }
  std::string addr() const { return ep->local_address().ToString(); }
};

// Forwards a one-record publish to `owner` through `publisher`; the future of its outcome.
std::future<ForwardPublishOutcome> ForwardOne(ForwardPublisher& publisher,
                                              const std::string& owner) {
  broker::ForwardPublishRequest r;
  r.target.owner_node_id = owner;
  r.tenant = r.ns = r.stream = "x";
  static const uint8_t byte = 'x';
  r.payloads = {std::span<const uint8_t>(&byte, 1)};
  r.credential = "t";
  auto p = std::make_shared<std::promise<ForwardPublishOutcome>>();
  auto f = p->get_future();
  publisher.Forward(std::move(r), [p](ForwardPublishOutcome o) { p->set_value(std::move(o)); });
  return f;
}

class ForwardPublisherTest : public ::testing::Test {
 protected:
  ForwardPublisherTest() : n2("n2"), n3("n3") {}

  void Start(PeerPoolOptions pool_options = Opts("n1"), int max_attempts = 4) {
    caller = std::make_unique<Caller>(std::move(pool_options));
    ForwardPublisherOptions o;
    o.max_attempts = max_attempts;
    o.backoff_base = std::chrono::milliseconds(1);
    o.backoff_max = std::chrono::milliseconds(5);
    o.internal_addr_of = [this](std::string_view node) -> std::optional<HostPort> {
      if (node == "n2") return n2.ep->local_address();
      if (node == "n3") return n3.ep->local_address();
      return std::nullopt;
    };
    publisher = std::make_unique<ForwardPublisher>(*caller->pool, *caller->ep, std::move(o),
                                                   caller->metrics);
  }
  void TearDown() override {
    if (caller) caller->pool->Shutdown();
    publisher.reset();
    caller.reset();
  }

  ForwardPublishOutcome Forward(const std::string& owner = "n2", uint64_t generation = 4) {
    broker::ForwardPublishRequest r;
    r.target.shard = 3;
    r.target.generation = Generation(generation);
    r.target.owner_node_id = owner;
    r.tenant = "default";
    r.ns = "default";
    r.stream = "orders";
    auto payloads = std::make_shared<std::string>("ab");
    r.payloads = {
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payloads->data()), 1),
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payloads->data()) + 1, 1)};
    r.owner = payloads;
    r.credential = "client-token";
    auto p = std::make_shared<std::promise<ForwardPublishOutcome>>();
    auto f = p->get_future();
    publisher->Forward(std::move(r), [p](ForwardPublishOutcome o) { p->set_value(std::move(o)); });
    if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "no outcome within 20 s";  // every forward must terminate
      return {};
    }
    return f.get();
  }
  static void ExpectFailure(const ForwardPublishOutcome& o, ProtocolErrorCode code) {
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.code, static_cast<uint16_t>(code)) << o.message;
  }
  // Forwards one cache command for shard 3 at `generation` to `owner`; its outcome.
  broker::ForwardCacheOutcome ForwardCache(broker::CacheCommand command,
                                           const std::string& owner = "n2",
                                           uint64_t generation = 4) {
    broker::ForwardCacheRequest r;
    r.target.shard = 3;
    r.target.generation = Generation(generation);
    r.target.owner_node_id = owner;
    r.tenant = "default";
    r.ns = "default";
    r.cache = "sessions";
    r.command = std::move(command);
    r.credential = "client-token";
    auto p = std::make_shared<std::promise<broker::ForwardCacheOutcome>>();
    auto f = p->get_future();
    publisher->ForwardCache(std::move(r),
                            [p](broker::ForwardCacheOutcome o) { p->set_value(std::move(o)); });
    if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "no outcome within 20 s";  // every forward must terminate
      return {};
    }
    return f.get();
  }
  static broker::CacheCommand Command(broker::CacheCommand::Op op, std::string key = "user:1") {
    broker::CacheCommand c;
    c.op = op;
    c.key = std::move(key);
    return c;
  }
  static void ExpectFailure(const broker::ForwardCacheOutcome& o, ProtocolErrorCode code) {
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.code, static_cast<uint16_t>(code)) << o.message;
  }

  ScriptedPeer n2, n3;
  std::unique_ptr<Caller> caller;
  std::unique_ptr<ForwardPublisher> publisher;
};

TEST_F(ForwardPublisherTest, OkCarriesTheOwnersOffsetsAndTheNamedShardAndGeneration) {
  Start();
  n2.Script({Ok(10, 11)});
  auto o = Forward();
  ASSERT_TRUE(o.ok) << o.message;
  ASSERT_TRUE(o.offsets);
  EXPECT_EQ(*o.offsets, (std::pair<uint64_t, uint64_t>{10, 11}));
  auto seen = n2.Requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, flxi::Kind::kAuthorizedForwardPublish);
  EXPECT_EQ(seen[0].shard, 3u);  // exactly the shard the ingress resolved
  EXPECT_EQ(seen[0].generation, 4u);
  EXPECT_TRUE(seen[0].credential);
  // An empty range (no log) is ok without offsets.
  n2.Script({Ok(1, 0)});
  auto empty = Forward();
  EXPECT_TRUE(empty.ok);
  EXPECT_FALSE(empty.offsets);
}

TEST(ForwardPublisherOffsets, AnOwnerWithoutForwardOffsetsIsNotTrustedWithOffsets) {
  ScriptedPeer old("n2", /*caps=*/0);
  Caller caller(Opts("n1"));
  ForwardPublisherOptions o;
  o.internal_addr_of = [&](std::string_view) -> std::optional<HostPort> {
    return old.ep->local_address();
  };
  ForwardPublisher publisher(*caller.pool, *caller.ep, o, caller.metrics);
  old.Script({Ok(0, 0)});
  auto f = ForwardOne(publisher, "n2");
  ASSERT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  auto out = f.get();
  EXPECT_TRUE(out.ok);
  EXPECT_FALSE(out.offsets);
  caller.pool->Shutdown();
}

TEST_F(ForwardPublisherTest, NotLeaderIsFollowedToAnUntriedBrokerEvenAtTheSameGeneration) {
  Start();
  n2.Script({Moved("n3", n3.addr(), 4)});
  n3.Script({Ok(7, 8)});
  auto o = Forward();
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_EQ(*o.offsets, (std::pair<uint64_t, uint64_t>{7, 8}));
  EXPECT_EQ(o.owner_node_id, "n3");  // what the owner hint (0x0080) names
  EXPECT_EQ(o.owner_generation, 4u);
  ASSERT_EQ(n3.Requests().size(), 1u);
  EXPECT_EQ(n3.Requests()[0].generation, 4u);
}

TEST_F(ForwardPublisherTest, ARedirectBackToATriedBrokerAndGenerationIsALoopAndRefused) {
  Start();
  n2.Script({Moved("n3", n3.addr(), 4), Ok(0, 0)});
  n3.Script({Moved("n2", n2.addr(), 4)});
  auto o = Forward();
  ExpectFailure(o, ProtocolErrorCode::kShardUnavailable);
  EXPECT_NE(o.message.find("loop"), std::string::npos) << o.message;
  EXPECT_EQ(n2.Requests().size(), 1u);  // never sent back
  EXPECT_EQ(n3.Requests().size(), 1u);
}

TEST_F(ForwardPublisherTest, ANewerGenerationOfATriedBrokerIsFollowed) {
  Start();
  n2.Script({Moved("n2", n2.addr(), 5), Ok(3, 4)});
  auto o = Forward();
  ASSERT_TRUE(o.ok) << o.message;
  auto seen = n2.Requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].generation, 5u);
}

TEST_F(ForwardPublisherTest, StaleRouteIsRetriedAndThenServed) {
  Start();
  n2.Script({Refuse(flxi::ErrorCode::kStaleRoute), Refuse(flxi::ErrorCode::kStaleRoute), Ok(1, 2)});
  auto o = Forward();
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_EQ(n2.Requests().size(), 3u);
}

TEST_F(ForwardPublisherTest, UnavailableAndOverloadAreRetriedWithinTheAttemptBudget) {
  Start(Opts("n1"), /*max_attempts=*/3);
  n2.Script({Refuse(flxi::ErrorCode::kUnavailable), Refuse(flxi::ErrorCode::kUnavailable),
             Refuse(flxi::ErrorCode::kUnavailable), Ok(0, 0)});
  ExpectFailure(Forward(), ProtocolErrorCode::kShardUnavailable);
  EXPECT_EQ(n2.Requests().size(), 3u);
  {
    std::lock_guard lock(n2.mu);
    n2.script.clear();
  }
  n2.Script({Refuse(flxi::ErrorCode::kOverload), Refuse(flxi::ErrorCode::kOverload),
             Refuse(flxi::ErrorCode::kOverload)});
  ExpectFailure(Forward(), ProtocolErrorCode::kOverloaded);
  EXPECT_EQ(n2.Requests().size(), 6u);
}

TEST_F(ForwardPublisherTest, RefusalsThatAreNotRetryableAreAnsweredAtOnce) {
  Start();
  n2.Script({Refuse(flxi::ErrorCode::kUnauthorized), Refuse(flxi::ErrorCode::kMalformed),
             Refuse(flxi::ErrorCode::kStorageFailed)});
  ExpectFailure(Forward(), ProtocolErrorCode::kForbidden);
  ExpectFailure(Forward(), ProtocolErrorCode::kInvalidRequest);
  ExpectFailure(Forward(), ProtocolErrorCode::kStorage);
  EXPECT_EQ(n2.Requests().size(), 3u);  // one send each
}

TEST_F(ForwardPublisherTest, UnsupportedKindFallsBackToTheLegacyKindOnce) {
  Start();
  n2.Script({Refuse(flxi::ErrorCode::kUnsupportedKind), Ok(5, 6)});
  auto o = Forward();
  ASSERT_TRUE(o.ok) << o.message;
  auto seen = n2.Requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].kind, flxi::Kind::kForwardPublish);
  EXPECT_FALSE(seen[1].credential);
  // Refused again: not a third time.
  n2.Script({Refuse(flxi::ErrorCode::kUnsupportedKind), Refuse(flxi::ErrorCode::kUnsupportedKind)});
  EXPECT_FALSE(Forward().ok);
  EXPECT_EQ(n2.Requests().size(), 4u);
}

TEST_F(ForwardPublisherTest, APeerThatNeverAnswersIsIndeterminateAndNotRetried) {
  PeerPoolOptions o = Opts("n1");
  o.request_timeout = std::chrono::milliseconds(300);
  Start(std::move(o));
  n2.Script({Hold(), Ok(0, 0)});
  auto out = Forward();
  ExpectFailure(out, ProtocolErrorCode::kUnacknowledged);
  EXPECT_EQ(wire::flx1::DefaultRetryClass(out.code), wire::flx1::RetryClass::kOutcomeUnknown);
  EXPECT_EQ(n2.Requests().size(), 1u);
}

TEST_F(ForwardPublisherTest, APeerThatGoesAwayAfterReceivingIsIndeterminate) {
  Start();
  auto peer = std::make_unique<ScriptedPeer>("n4");
  HostPort addr = peer->ep->local_address();
  ForwardPublisherOptions fo;
  fo.internal_addr_of = [addr](std::string_view) -> std::optional<HostPort> { return addr; };
  ForwardPublisher to_n4(*caller->pool, *caller->ep, fo, caller->metrics);
  auto received = std::make_shared<std::promise<void>>();
  peer->Script({[received](const PeerRequest&, PeerReply&) { received->set_value(); }});
  auto f = ForwardOne(to_n4, "n4");
  // Received; the broker then goes away before answering.
  ASSERT_EQ(received->get_future().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  peer->ep->Stop();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  ExpectFailure(f.get(), ProtocolErrorCode::kUnacknowledged);
  EXPECT_EQ(peer->Requests().size(), 1u);
  caller->pool->Shutdown();
}

TEST_F(ForwardPublisherTest, AnOwnerWithoutAnAddressIsRetriedThenUnavailableWithNothingSent) {
  Start(Opts("n1"), /*max_attempts=*/2);
  ExpectFailure(Forward("n9"), ProtocolErrorCode::kShardUnavailable);
  EXPECT_TRUE(n2.Requests().empty());
}

// ---- Forwarded cache operations: the same engine, the same table; a lost read is re-sent ----

using Op = broker::CacheCommand::Op;

TEST_F(ForwardPublisherTest, CacheOpsAreSentAsKind23AndAnsweredFromTheOwnersValue) {
  Start();
  n2.Script({CacheOk(std::nullopt), CacheOk("v1"), CacheOk(""), CacheOk(std::nullopt),
             CacheOk(flxi::EncodeCounterValue(-7)), CacheOk(std::nullopt)});
  auto put = Command(Op::kPut);
  put.value = "v1";
  put.ttl_ms = 30000;
  auto put_ok = ForwardCache(put);
  ASSERT_TRUE(put_ok.ok) << put_ok.message;
  auto get = ForwardCache(Command(Op::kGet));
  ASSERT_TRUE(get.ok) << get.message;
  EXPECT_EQ(get.result.value, "v1");
  EXPECT_EQ(ForwardCache(Command(Op::kGet)).result.value, "");  // empty is not a miss
  EXPECT_EQ(ForwardCache(Command(Op::kDelete)).result.value, std::nullopt);
  auto add = Command(Op::kCounterAdd, "hits");
  add.delta = -9;
  auto sum = ForwardCache(add);
  ASSERT_TRUE(sum.ok) << sum.message;
  EXPECT_EQ(sum.result.sum, -7);
  auto never = ForwardCache(Command(Op::kCounterGet, "hits"));
  ASSERT_TRUE(never.ok);
  EXPECT_EQ(never.result.sum, std::nullopt);  // never written, distinct from 0
  auto seen = n2.Requests();
  ASSERT_EQ(seen.size(), 6u);
  for (const auto& s : seen) {
    EXPECT_EQ(s.kind, flxi::Kind::kAuthorizedForwardCacheOp);
    EXPECT_EQ(s.shard, 3u);  // exactly the shard the key routed to
    EXPECT_EQ(s.generation, 4u);
    EXPECT_TRUE(s.credential);
  }
  EXPECT_EQ(seen[0].op, flxi::CacheOpKind::kPut);
  EXPECT_EQ(seen[0].key, "user:1");
  EXPECT_EQ(seen[0].value, "v1");
  EXPECT_EQ(seen[0].ttl_ms, 30000u);
  EXPECT_EQ(seen[3].op, flxi::CacheOpKind::kDelete);
  EXPECT_EQ(seen[4].op, flxi::CacheOpKind::kCounterAdd);
  EXPECT_EQ(seen[4].value, flxi::EncodeCounterValue(-9));
  EXPECT_EQ(seen[5].op, flxi::CacheOpKind::kCounterGet);
  EXPECT_EQ(
      caller->Count("felix_forward_sent_total", "kind=\"AuthorizedForwardCacheOp\",outcome=\"ok\""),
      6u);
}

TEST_F(ForwardPublisherTest, ACacheOpFollowsNotLeaderAndRetriesStaleRouteButNotUnauthorized) {
  Start();
  n2.Script({Moved("n3", n3.addr(), 4), Refuse(flxi::ErrorCode::kUnauthorized)});
  n3.Script({Refuse(flxi::ErrorCode::kStaleRoute), CacheOk("v")});
  auto o = ForwardCache(Command(Op::kGet));
  ASSERT_TRUE(o.ok) << o.message;
  EXPECT_EQ(o.result.value, "v");
  EXPECT_EQ(n3.Requests().size(), 2u);
  ExpectFailure(ForwardCache(Command(Op::kPut)), ProtocolErrorCode::kForbidden);
  EXPECT_EQ(n2.Requests().size(), 2u);  // refused once, not re-sent
}

TEST_F(ForwardPublisherTest, ALostWriteAnswerIsIndeterminateAndNeverResent) {
  PeerPoolOptions o = Opts("n1");
  o.request_timeout = std::chrono::milliseconds(300);
  Start(std::move(o));
  for (Op op : {Op::kPut, Op::kDelete, Op::kCounterAdd}) {
    size_t before = n2.Requests().size();
    n2.Script({Hold(), CacheOk(std::nullopt)});
    auto out = ForwardCache(Command(op));
    ExpectFailure(out, ProtocolErrorCode::kUnacknowledged);
    EXPECT_EQ(wire::flx1::DefaultRetryClass(out.code), wire::flx1::RetryClass::kOutcomeUnknown);
    EXPECT_EQ(n2.Requests().size(), before + 1);
    std::lock_guard lock(n2.mu);
    n2.script.clear();
  }
}

TEST_F(ForwardPublisherTest, ALostReadAnswerIsResentWithinTheBudget) {
  PeerPoolOptions o = Opts("n1");
  o.request_timeout = std::chrono::milliseconds(300);
  Start(std::move(o), /*max_attempts=*/3);
  n2.Script({Hold(), CacheOk("v")});
  auto get = ForwardCache(Command(Op::kGet));
  ASSERT_TRUE(get.ok) << get.message;
  EXPECT_EQ(get.result.value, "v");
  EXPECT_EQ(n2.Requests().size(), 2u);
  // A read that never gets an answer is an error once the budget is spent, never a miss.
  n2.Script({Hold(), Hold(), Hold()});
  auto lost = ForwardCache(Command(Op::kCounterGet));
  ExpectFailure(lost, ProtocolErrorCode::kShardUnavailable);
  EXPECT_EQ(n2.Requests().size(), 5u);
}

TEST_F(ForwardPublisherTest, ACacheOpFallsBackToTheLegacyKind11OnceOnUnsupportedKind) {
  Start();
  n2.Script({Refuse(flxi::ErrorCode::kUnsupportedKind), CacheOk("old")});
  auto o = ForwardCache(Command(Op::kGet));
  ASSERT_TRUE(o.ok) << o.message;
  auto seen = n2.Requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].kind, flxi::Kind::kForwardCacheOp);
  EXPECT_FALSE(seen[1].credential);
}

TEST_F(ForwardPublisherTest, AnUnexpectedAnswerKindToAWriteIsIndeterminate) {
  Start();
  n2.Script({Ok(1, 2)});  // a publish's answer to a cache put
  ExpectFailure(ForwardCache(Command(Op::kPut)), ProtocolErrorCode::kUnacknowledged);
}

}  // namespace
}  // namespace felix::cluster
