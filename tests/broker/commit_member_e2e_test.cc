// End to end through the real felix-broker process: named group consumers and `reclaim`
// (FEATURE_GROUP_CONSUMER), atomic commits and shard state (FEATURE_ATOMIC_COMMIT), and the
// feature bits a standalone broker advertises like the reference (client-protocol.md §7).
#include "e2e_broker.h"
#include "wire/shard_hash.h"

namespace felix::broker {
namespace {

using namespace e2e;  // NOLINT: the shared end-to-end fixture

struct CommitMemberE2E : ::testing::Test {
  std::string dir = MakeTempDir("felix-commit-member");
  std::unique_ptr<Broker> broker = std::make_unique<Broker>(dir + "/data");
};

flx1::GroupPoll Poll(const std::string& stream, std::optional<std::string> consumer, bool reclaim,
                     uint64_t request_id) {
  flx1::GroupPoll poll;
  poll.tenant_id = "default";
  poll.namespace_ = "default";
  poll.stream = stream;
  poll.shard = 0;
  poll.group = "g";
  poll.max_records = 10;
  poll.request_id = request_id;
  poll.consumer = std::move(consumer);
  if (reclaim) poll.reclaim = true;
  return poll;
}

// {offset, attempts} of a group_records answer (nullopt: another answer came).
std::optional<std::vector<std::pair<uint64_t, uint32_t>>> Records(TestStream& s) {
  auto records = s.Read<flx1::GroupRecords>();
  if (!records) return std::nullopt;
  std::vector<std::pair<uint64_t, uint32_t>> out;
  for (const auto& r : records->records) out.emplace_back(r.offset, r.attempts);
  return out;
}

using Claims = std::vector<std::pair<uint64_t, uint32_t>>;

void Publish(Broker& broker, const std::string& token, const std::string& stream, int n) {
  auto client = broker.Connect();
  auto s = Authed(*client, token);
  for (int i = 0; i < n; ++i) {
    s->Send(BinaryPublish(i + 1, stream, {"r" + std::to_string(i)}));
    EXPECT_EQ(ReadAck(*s).status, flx1::BinaryPublishAck::Status::kOk);
  }
}

TEST_F(CommitMemberE2E, AuthOkAdvertisesTheReferenceSingleNodeBits) {
  auto client = broker->Connect();
  auto stream = client->OpenStream();
  stream->SendMessage(AuthMessage("default", broker->AllToken()));
  auto ok = stream->Read<flx1::AuthOk>();
  ASSERT_TRUE(ok && ok->server_features);
  for (uint32_t bit : {flx1::kFeatureAtomicCommit, flx1::kFeatureShardMoved,
                       flx1::kFeatureGroupConsumer, flx1::kFeatureSubscriptionLagged,
                       flx1::kFeatureConsumerGroup, flx1::kFeatureGroupDeadLetters}) {
    EXPECT_NE(*ok->server_features & bit, 0u) << std::hex << bit;
  }
}

// consumer-groups.md §2 step 1: a member's newer connection takes its older claims back first
// (another attempt each); other members and anonymous polls cannot take them; only the first
// reclaim per connection reserves; an older connection never takes claims back.
TEST_F(CommitMemberE2E, NamedMemberReclaimsItsClaimsOnANewConnection) {
  broker->CreateStream("default", "work", /*durable=*/true);
  std::string token = broker->FullToken();
  Publish(*broker, token, "work", 3);
  auto old_conn = broker->Connect();
  auto anon_conn = broker->Connect();
  auto new_conn = broker->Connect();
  auto other_conn = broker->Connect();

  auto a = Authed(*old_conn, token);
  auto first = Poll("work", "w1", false, 1);
  first.max_records = 2;
  a->SendMessage(first);
  EXPECT_EQ(Records(*a), (Claims{{0, 1}, {1, 1}}));

  auto anon = Authed(*anon_conn, token);
  anon->SendMessage(Poll("work", std::nullopt, false, 2));
  EXPECT_EQ(Records(*anon), (Claims{{2, 1}}));  // 0 and 1 are claimed

  auto b = Authed(*new_conn, token);
  b->SendMessage(Poll("work", "w1", true, 3));
  EXPECT_EQ(Records(*b), (Claims{{0, 2}, {1, 2}}));  // reclaimed, another attempt each

  auto other = Authed(*other_conn, token);
  other->SendMessage(Poll("work", "w2", true, 4));
  EXPECT_EQ(Records(*other), Claims{});  // another member takes nothing of w1's

  b->SendMessage(Poll("work", "w1", true, 5));
  EXPECT_EQ(Records(*b), Claims{});  // the second reclaim on a connection is a plain poll
  a->SendMessage(Poll("work", "w1", true, 6));
  EXPECT_EQ(Records(*a), Claims{});  // the older connection takes nothing back

  for (uint64_t offset : {0, 1, 2}) {
    flx1::GroupAck ack;
    ack.tenant_id = "default";
    ack.namespace_ = "default";
    ack.stream = "work";
    ack.group = "g";
    ack.offset = offset;
    ack.request_id = 10 + offset;
    b->SendMessage(ack);
    auto ok = b->Read<flx1::CacheOk>();
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->request_id, 10 + offset);
  }
  flx1::GroupDescribe describe;
  describe.tenant_id = "default";
  describe.namespace_ = "default";
  describe.stream = "work";
  describe.group = "g";
  describe.request_id = 20;
  b->SendMessage(describe);
  auto info = b->Read<flx1::GroupInfo>();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->committed, 3u);
  EXPECT_EQ(info->in_flight, 0u);
}

TEST_F(CommitMemberE2E, ConsumerNamesOutside1To128BytesAreRefusedAndTheStreamGoesOn) {
  broker->CreateStream("default", "names", /*durable=*/true);
  std::string token = broker->FullToken();
  Publish(*broker, token, "names", 1);
  auto client = broker->Connect();
  auto s = Authed(*client, token);
  for (std::string bad : {std::string(), std::string(129, 'x')}) {
    s->SendMessage(Poll("names", bad, false, 1));
    auto error = s->Read<flx1::Error>();
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, "invalid_request");
    EXPECT_EQ(error->retry, "fatal");
  }
  s->SendMessage(Poll("names", std::string(128, 'x'), false, 2));
  EXPECT_EQ(Records(*s), (Claims{{0, 1}}));
}

flx1::Commit CommitOf(const std::string& stream, std::string entity, std::string event,
                      std::vector<flx1::StateChange> changes, uint64_t request_id) {
  flx1::Commit c;
  c.tenant_id = "default";
  c.namespace_ = "default";
  c.stream = stream;
  c.entity_key.assign(entity.begin(), entity.end());
  c.event.assign(event.begin(), event.end());
  c.changes = std::move(changes);
  c.request_id = request_id;
  return c;
}

flx1::StateChange Put(std::string key, std::string value) {
  return flx1::StateChange{flx1::StateChange::Op::kPut, std::move(key),
                           flx1::Bytes(value.begin(), value.end())};
}
flx1::StateChange Delete(std::string key) {
  return flx1::StateChange{flx1::StateChange::Op::kDelete, std::move(key), {}};
}

flx1::StateGet StateGetOf(const std::string& stream, std::string entity, std::string key,
                          uint64_t request_id) {
  flx1::StateGet g;
  g.tenant_id = "default";
  g.namespace_ = "default";
  g.stream = stream;
  g.entity_key.assign(entity.begin(), entity.end());
  g.key = std::move(key);
  g.request_id = request_id;
  return g;
}

std::optional<std::string> ValueOf(const flx1::StateValue& v) {
  if (!v.value) return std::nullopt;
  return std::string(v.value->begin(), v.value->end());
}

// semantics.md §8: one record holds the event and the state changes; readers see the event
// at its offset, state_get sees every change with the commit's offset as version, and both
// survive a restart (the state view is rebuilt from the log).
TEST_F(CommitMemberE2E, CommitAppendsTheEventAndStateAsOneRecordAndSurvivesARestart) {
  broker->CreateStream("default", "orders", /*durable=*/true);
  std::string token = broker->FullToken();
  {  // everything before the restart, on a connection that closes with it
    auto client = broker->Connect();
    auto s = Authed(*client, token);
    s->SendMessage(CommitOf("orders", "e", "E1", {Put("k1", "v1"), Put("k2", "v2")}, 1));
    auto ok1 = s->Read<flx1::CommitOk>();
    ASSERT_TRUE(ok1);
    EXPECT_EQ(ok1->request_id, 1u);
    EXPECT_EQ(ok1->offset, 0u);
    s->Send(BinaryPublish(2, "orders", {"plain"}));
    EXPECT_EQ(ReadAck(*s).offset, 1u);
    s->SendMessage(CommitOf("orders", "e", "E2", {Put("k1", "v1b"), Delete("k2")}, 3));
    auto ok2 = s->Read<flx1::CommitOk>();
    ASSERT_TRUE(ok2);
    EXPECT_EQ(ok2->offset, 2u);
    s->SendMessage(CommitOf("orders", "e", "E3", {}, 4));  // an event alone
    auto ok3 = s->Read<flx1::CommitOk>();
    ASSERT_TRUE(ok3);
    EXPECT_EQ(ok3->offset, 3u);

    auto check_state = [&](TestStream& stream) {
      stream.SendMessage(StateGetOf("orders", "e", "k1", 10));
      auto k1 = stream.Read<flx1::StateValue>();
      ASSERT_TRUE(k1);
      EXPECT_EQ(ValueOf(*k1), "v1b");
      EXPECT_EQ(k1->version, 2u);
      EXPECT_EQ(k1->as_of, 3u);
      EXPECT_EQ(k1->request_id, 10u);
      stream.SendMessage(StateGetOf("orders", "e", "k2", 11));
      auto k2 = stream.Read<flx1::StateValue>();
      ASSERT_TRUE(k2);
      EXPECT_EQ(ValueOf(*k2), std::nullopt);  // deleted by the second commit
      EXPECT_EQ(k2->version, std::nullopt);
      EXPECT_EQ(k2->as_of, 3u);
    };
    check_state(*s);

    // Subscribers and groups see each commit as its event bytes at its offset.
    auto sub = Authed(*client, token);
    flx1::Subscribe subscribe;
    subscribe.tenant_id = "default";
    subscribe.namespace_ = "default";
    subscribe.stream = "orders";
    subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kEarliest, 0};
    sub->SendMessage(subscribe);
    auto events = client->AcceptEventStream();
    ASSERT_TRUE(events);
    ASSERT_TRUE(events->Read<flx1::EventStreamHello>());
    auto history = ReadEvents(*events, 4);
    EXPECT_EQ(history, (std::vector<std::pair<uint64_t, std::string>>{
                           {0, "E1"}, {1, "plain"}, {2, "E2"}, {3, "E3"}}));
    s->SendMessage(CommitOf("orders", "e", "E4", {Put("k3", "v3")}, 5));
    ASSERT_TRUE(s->Read<flx1::CommitOk>());
    EXPECT_EQ(ReadEvents(*events, 1), (std::vector<std::pair<uint64_t, std::string>>{{4, "E4"}}));
    auto group = Authed(*client, token);
    group->SendMessage(Poll("orders", std::nullopt, false, 6));
    auto records = group->Read<flx1::GroupRecords>();
    ASSERT_TRUE(records);
    ASSERT_EQ(records->records.size(), 5u);
    EXPECT_EQ(std::string(records->records[2].payload.begin(), records->records[2].payload.end()),
              "E2");
  }
  broker->Restart();
  auto again = broker->Connect();
  auto s2 = Authed(*again, token);
  s2->SendMessage(StateGetOf("orders", "e", "k3", 12));
  auto k3 = s2->Read<flx1::StateValue>();
  ASSERT_TRUE(k3);
  EXPECT_EQ(ValueOf(*k3), "v3");
  EXPECT_EQ(k3->version, 4u);
  EXPECT_EQ(k3->as_of, 4u);
  s2->SendMessage(StateGetOf("orders", "e", "k1", 13));
  auto k1 = s2->Read<flx1::StateValue>();
  ASSERT_TRUE(k1);
  EXPECT_EQ(ValueOf(*k1), "v1b");
  EXPECT_EQ(k1->version, 2u);
}

// The entity key routes the commit and the read like a publish key: each shard has its own
// state, and an empty entity key is a key (shard of the empty string), not "no key".
TEST_F(CommitMemberE2E, EntityKeyRoutesCommitAndStateToOneShard) {
  broker->CreateStream("default", "wide", /*durable=*/true, 4);
  std::string token = broker->FullToken();
  std::string a = "a", b;
  for (char c = 'b'; c <= 'z'; ++c) {
    b = std::string(1, c);
    // Different shards whichever routing the catalog chose for the stream.
    if (wire::ShardModulo(4, b) != wire::ShardModulo(4, a) &&
        wire::ShardJump(4, b) != wire::ShardJump(4, a)) {
      break;
    }
  }
  ASSERT_NE(wire::ShardModulo(4, b), wire::ShardModulo(4, a));
  ASSERT_NE(wire::ShardJump(4, b), wire::ShardJump(4, a));
  auto client = broker->Connect();
  auto s = Authed(*client, token);
  s->SendMessage(CommitOf("wide", a, "ev", {Put("k", "on-a")}, 1));
  ASSERT_TRUE(s->Read<flx1::CommitOk>());
  s->SendMessage(StateGetOf("wide", a, "k", 2));
  auto on_a = s->Read<flx1::StateValue>();
  ASSERT_TRUE(on_a);
  EXPECT_EQ(ValueOf(*on_a), "on-a");
  s->SendMessage(StateGetOf("wide", b, "k", 3));
  auto on_b = s->Read<flx1::StateValue>();
  ASSERT_TRUE(on_b);
  EXPECT_EQ(ValueOf(*on_b), std::nullopt);
  EXPECT_EQ(on_b->as_of, std::nullopt);  // no commit on that shard yet
}

TEST_F(CommitMemberE2E, CommitRefusals) {
  broker->CreateStream("default", "mem", /*durable=*/false);
  broker->CreateStream("default", "disk", /*durable=*/true);
  std::string token = broker->FullToken();
  auto client = broker->Connect();
  auto s = Authed(*client, token);
  auto expect_error = [&](const char* code, const char* retry) {
    auto error = s->Read<flx1::Error>();
    ASSERT_TRUE(error);
    EXPECT_EQ(error->code, code) << error->message;
    EXPECT_EQ(error->retry, retry) << error->message;
  };
  // In-memory streams have no shard state: refused, the stream goes on.
  s->SendMessage(CommitOf("mem", "e", "E", {Put("k", "v")}, 1));
  expect_error("invalid_request", "fatal");
  s->SendMessage(StateGetOf("mem", "e", "k", 2));
  expect_error("invalid_request", "fatal");
  s->SendMessage(CommitOf("nope", "e", "E", {}, 3));
  expect_error("not_found", "retry_after");
  // expected_offset needs PUBLISH_CONDITIONAL, which is not advertised.
  auto conditional = CommitOf("disk", "e", "E", {}, 4);
  conditional.expected_offset = 0;
  s->SendMessage(conditional);
  expect_error("invalid_request", "fatal");
  s->SendMessage(CommitOf("disk", "e", "E", {}, 5));  // the stream is still served
  auto ok = s->Read<flx1::CommitOk>();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->offset, 0u);  // nothing refused took an offset

  // A commit needs stream.publish, a state read stream.subscribe: refusals end the stream.
  std::string read_only = broker->Token("default", {"stream.subscribe:stream:default/*/*"});
  auto r = Authed(*client, read_only);
  r->SendMessage(StateGetOf("disk", "e", "k", 6));
  auto value = r->Read<flx1::StateValue>();
  ASSERT_TRUE(value);
  EXPECT_EQ(value->as_of, 0u);
  r->SendMessage(CommitOf("disk", "e", "E", {}, 7));
  auto forbidden = r->Read<flx1::Error>();
  ASSERT_TRUE(forbidden);
  EXPECT_EQ(forbidden->code, "forbidden");
  EXPECT_TRUE(r->WaitEnded());
  std::string write_only = broker->Token("default", {"stream.publish:stream:default/*/*"});
  auto w = Authed(*client, write_only);
  w->SendMessage(StateGetOf("disk", "e", "k", 8));
  auto refused = w->Read<flx1::Error>();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, "forbidden");
  EXPECT_TRUE(w->WaitEnded());
}

}  // namespace
}  // namespace felix::broker
