// Consumer groups end to end on the real felix-broker process, through the client library:
// poll/ack with a contiguous cursor, a waiting poll woken by a publish, redelivery of a crashed
// consumer's records after the visibility timeout, a poison record dead-lettered after the
// attempt bound and redriven, restart keeping cursors and dead letters, group permissions.
#include <signal.h>
#include <algorithm>

#include <filesystem>
#include <future>

#include <gtest/gtest.h>
#include <httplib.h>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/credentials.h"
#include "felix/client.h"
#include "support/child_process.h"

namespace felix {
namespace {

using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;
using felix::testing::RunProgram;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string Field(const std::string& line, const std::string& name) {
  size_t at = line.find(name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 1;
  size_t end = line.find_first_of(" \n", at);
  return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

class GroupE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    data_dir_ = MakeTempDir("group-e2e");
    env_ = {{"FELIX_DATA_DIR", data_dir_},
            {"FELIX_QUIC_BIND", "127.0.0.1:0"},
            {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
            {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"},
            // Short claims and a low attempt bound keep the redelivery tests quick.
            {"FELIX_GROUP_VISIBILITY_TIMEOUT_MS", "400"},
            {"FELIX_GROUP_MAX_ATTEMPTS", "3"}};
    StartBroker();
    auto creds = catalog::LoadAdminCredentials(data_dir_ + "/" + catalog::kCredentialsFile);
    ASSERT_TRUE(creds) << creds.error().message;
    creds_ = *creds;
  }
  void TearDown() override {
    if (broker_) {
      EXPECT_EQ(broker_->Stop(SIGTERM), 0);
    }
  }

  void StartBroker() {
    broker_ = std::make_unique<ChildProcess>(BuiltProgram("src/server/felix-broker"),
                                             std::vector<std::string>{}, env_);
    auto line = broker_->WaitForLine("felix-broker listening");
    ASSERT_TRUE(line) << broker_->stderr_text();
    quic_ = Field(*line, "quic");
    ASSERT_FALSE(quic_.empty()) << *line;
    http_ = Field(*line, "http");
    ca_file_ = data_dir_ + "/tls/broker-cert.pem";
  }
  void RestartBroker() {
    ASSERT_EQ(broker_->Stop(SIGTERM), 0);
    broker_.reset();
    StartBroker();
  }

  std::pair<int, std::string> Felix(std::vector<std::string> args) {
    return RunProgram(BuiltProgram("src/cli/felix"), args, {{"FELIX_DATA_DIR", data_dir_}});
  }

  std::string Token(std::vector<std::string> perms) {
    auto key = auth::SigningKey::FromSeedBase64(creds_.signing_kid, creds_.signing_seed);
    EXPECT_TRUE(key);
    auth::TokenClaims claims;
    claims.sub = "group-e2e";
    claims.tid = creds_.tenant_id;
    claims.perms = std::move(perms);
    claims.iat = auth::NowUnixSeconds();
    claims.exp = claims.iat + 600;
    return key ? auth::MintToken(*key, claims) : "";
  }
  std::string Scope(const std::string& stream) { return creds_.tenant_id + "/default/" + stream; }
  // stream.subscribe implies group.consume, stream.manage implies group.manage.
  std::vector<std::string> AllPerms(const std::string& stream) {
    return {"stream.publish:stream:" + Scope(stream), "stream.subscribe:stream:" + Scope(stream),
            "stream.manage:stream:" + Scope(stream)};
  }

  std::unique_ptr<Client> Connect(std::vector<std::string> perms) {
    ClientOptions o;
    o.broker = quic_;
    o.ca_file = ca_file_;
    o.tenant_id = creds_.tenant_id;
    o.token = Token(std::move(perms));
    auto client = Client::Connect(o);
    EXPECT_TRUE(client) << client.error().ToString();
    return client ? std::move(*client) : nullptr;
  }

  void CreateStream(const std::string& name) {
    auto [rc, out] = Felix({"stream", "create", name, "--durable"});
    ASSERT_EQ(rc, 0) << out;
  }

  std::vector<uint64_t> Offsets(const std::vector<GroupRecord>& records) {
    std::vector<uint64_t> out;
    for (const auto& r : records) out.push_back(r.offset);
    return out;
  }

  // The value of one unlabelled series on /metrics (-1 when absent).
  double Metric(const std::string& name) {
    size_t colon = http_.rfind(':');
    httplib::Client http(http_.substr(0, colon), std::stoi(http_.substr(colon + 1)));
    auto r = http.Get("/metrics");
    if (!r || r->status != 200) return -1;
    size_t at = r->body.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stod(r->body.substr(at + name.size() + 2));
  }

  std::string data_dir_, quic_, ca_file_, http_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<ChildProcess> broker_;
  catalog::AdminCredentials creds_;
};

TEST_F(GroupE2E, PollAckAdvancesTheCursorOverContiguousAcks) {
  CreateStream("work");
  auto client = Connect(AllPerms("work"));
  ASSERT_TRUE(client);
  auto features = client->server_info().server_features;
  ASSERT_NE(features & 0x8u, 0u) << "FEATURE_CONSUMER_GROUP not advertised";
  StreamRef stream{"default", "work"};
  auto published = client->Publish(stream, {"a", "b", "c"});
  ASSERT_TRUE(published) << published.error().ToString();
  ASSERT_EQ(published->offset, 0u);
  GroupRef group{stream, 0, "workers"};

  auto polled = client->GroupPoll(group, {.max_records = 10});
  ASSERT_TRUE(polled) << polled.error().ToString();
  ASSERT_EQ(Offsets(*polled), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ((*polled)[0].payload, "a");
  EXPECT_EQ((*polled)[2].payload, "c");
  EXPECT_EQ((*polled)[1].attempts, 1u);

  // Ack 1 and 2 first: offset 0 is still outstanding, so nothing is committed yet.
  ASSERT_TRUE(client->GroupAck(group, 1));
  ASSERT_TRUE(client->GroupAck(group, 2));
  auto info = client->GroupDescribe(group);
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_FALSE(info->committed.has_value());
  EXPECT_EQ(info->in_flight, 1u);
  EXPECT_EQ(info->tail, 3u);
  ASSERT_TRUE(client->GroupAck(group, 0));
  info = client->GroupDescribe(group);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->committed, 3u);
  EXPECT_EQ(info->in_flight, 0u);
  // A duplicate ack is harmless; an ack past the tail is refused.
  EXPECT_TRUE(client->GroupAck(group, 1));
  auto past = client->GroupAck(group, 99);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code, ClientErrorCode::kInvalidRequest);

  auto empty = client->GroupPoll(group, {.max_records = 10});
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  // A second group on the same shard sees every record independently.
  auto other = client->GroupPoll(GroupRef{stream, 0, "auditors"}, {.max_records = 10});
  ASSERT_TRUE(other);
  EXPECT_EQ(Offsets(*other), (std::vector<uint64_t>{0, 1, 2}));
}

// GroupAckAll sends a batch's acks together (more than its window, out of order, one of them
// twice) and answers once all are durable: the cursor covers them, and what it cannot ack is
// reported with the broker's refusal.
TEST_F(GroupE2E, AckAllFinishesEveryOffsetItIsGivenAndReportsARefusal) {
  CreateStream("bulk");
  auto client = Connect(AllPerms("bulk"));
  ASSERT_TRUE(client);
  StreamRef stream{"default", "bulk"};
  const size_t count = Client::kGroupAckWindow * 2 + 5;
  std::vector<std::string> payloads(count, "r");
  ASSERT_TRUE(client->Publish(stream, payloads));
  GroupRef group{stream, 0, "bulk-workers"};
  auto polled = client->GroupPoll(group, {.max_records = static_cast<uint32_t>(count)});
  ASSERT_TRUE(polled) << polled.error().ToString();
  ASSERT_EQ(polled->size(), count);
  std::vector<uint64_t> offsets = Offsets(*polled);
  std::reverse(offsets.begin(), offsets.end());  // the cursor moves only once 0 is in
  offsets.push_back(offsets.front());            // acking twice is not an error
  auto acked = client->GroupAckAll(group, offsets);
  ASSERT_TRUE(acked) << acked.error().ToString();
  auto info = client->GroupDescribe(group);
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->committed, count);
  EXPECT_EQ(info->in_flight, 0u);
  EXPECT_TRUE(client->GroupAckAll(group, {}));
  // In order, acks move the cursor: each appends its record or shares a later one, so no more
  // records than acks are written (how many share depends on the flushes' timing; the unit
  // tests of StreamGroups pin it down).
  const double writes_before = Metric("felix_group_cursor_writes_total");
  const double shared_before = Metric("felix_group_acks_sharing_cursor_write_total");
  ASSERT_GE(writes_before, 1);
  ASSERT_GE(shared_before, 0);
  ASSERT_TRUE(client->Publish(stream, payloads));
  auto in_order = client->GroupPoll(group, {.max_records = static_cast<uint32_t>(count)});
  ASSERT_TRUE(in_order) << in_order.error().ToString();
  ASSERT_EQ(in_order->size(), count);
  ASSERT_TRUE(client->GroupAckAll(group, Offsets(*in_order)));
  const double writes = Metric("felix_group_cursor_writes_total") - writes_before;
  const double shared = Metric("felix_group_acks_sharing_cursor_write_total") - shared_before;
  EXPECT_GE(writes, 1);
  EXPECT_LE(writes, static_cast<double>(count));
  EXPECT_LE(shared, static_cast<double>(count));
  info = client->GroupDescribe(group);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->committed, 2 * count);
  // An offset past the tail is refused as a lone ack would be; the others are finished.
  ASSERT_TRUE(client->Publish(stream, {"s0", "s1"}));
  auto more = client->GroupPoll(group, {.max_records = 2});
  ASSERT_TRUE(more);
  ASSERT_EQ(Offsets(*more), (std::vector<uint64_t>{2 * count, 2 * count + 1}));
  auto refused = client->GroupAckAll(group, {2 * count, 9999, 2 * count + 1});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ClientErrorCode::kInvalidRequest);
  info = client->GroupDescribe(group);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->committed, 2 * count + 2);
  // A closed client answers at once, with the error a lone ack gets.
  client->Close();
  auto closed = client->GroupAckAll(group, {2 * count, 2 * count + 1});
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code, client->GroupAck(group, 2 * count).error().code);
}

TEST_F(GroupE2E, WaitingPollIsAnsweredByAPublish) {
  CreateStream("wake");
  auto consumer = Connect(AllPerms("wake"));
  auto producer = Connect(AllPerms("wake"));
  ASSERT_TRUE(consumer && producer);
  StreamRef stream{"default", "wake"};
  GroupRef group{stream, 0, "g"};
  auto waiting = std::async(std::launch::async, [&] {
    return consumer->GroupPoll(group, {.max_records = 5, .wait = seconds(20)});
  });
  ASSERT_TRUE(producer->Publish(stream, {"late"}));
  ASSERT_EQ(waiting.wait_for(seconds(30)), std::future_status::ready);
  auto polled = waiting.get();
  ASSERT_TRUE(polled) << polled.error().ToString();
  ASSERT_EQ(polled->size(), 1u);
  EXPECT_EQ((*polled)[0].payload, "late");
}

TEST_F(GroupE2E, CrashedConsumersRecordsAreRedeliveredAfterTheVisibilityTimeout) {
  CreateStream("crash");
  auto producer = Connect(AllPerms("crash"));
  ASSERT_TRUE(producer);
  StreamRef stream{"default", "crash"};
  ASSERT_TRUE(producer->Publish(stream, {"job-1", "job-2"}));
  GroupRef group{stream, 0, "workers"};
  {
    auto crashing = Connect(AllPerms("crash"));
    ASSERT_TRUE(crashing);
    auto claimed = crashing->GroupPoll(group, {.max_records = 10});
    ASSERT_TRUE(claimed) << claimed.error().ToString();
    ASSERT_EQ(Offsets(*claimed), (std::vector<uint64_t>{0, 1}));
    crashing->Close();  // gone without acknowledging anything
  }
  auto survivor = Connect(AllPerms("crash"));
  ASSERT_TRUE(survivor);
  // Nothing is handed out while the claims stand; the waiting poll is answered when they lapse.
  std::vector<GroupRecord> redelivered;
  auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (redelivered.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    auto polled = survivor->GroupPoll(group, {.max_records = 10, .wait = seconds(10)});
    ASSERT_TRUE(polled) << polled.error().ToString();
    for (auto& r : *polled) redelivered.push_back(r);
  }
  ASSERT_EQ(Offsets(redelivered), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(redelivered[0].attempts, 2u);
  EXPECT_EQ(redelivered[1].payload, "job-2");
  for (auto& r : redelivered) ASSERT_TRUE(survivor->GroupAck(group, r.offset));
  auto info = survivor->GroupDescribe(group);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->committed, 2u);
}

TEST_F(GroupE2E, PoisonRecordIsDeadLetteredAfterMaxAttemptsAndCanBeRedriven) {
  CreateStream("poison");
  auto client = Connect(AllPerms("poison"));
  ASSERT_TRUE(client);
  StreamRef stream{"default", "poison"};
  ASSERT_TRUE(client->Publish(stream, {"poison", "fine"}));
  GroupRef group{stream, 0, "workers"};
  std::vector<uint32_t> poison_attempts;
  std::vector<uint64_t> dead;
  // The attempt bound is 3 (FELIX_GROUP_MAX_ATTEMPTS): three deliveries, then dead letters.
  for (int round = 0; round < 10 && dead.empty(); ++round) {
    auto polled = client->GroupPoll(group, {.max_records = 10, .wait = seconds(2)});
    ASSERT_TRUE(polled) << polled.error().ToString();
    for (auto& r : *polled) {
      if (r.payload == "poison") {
        poison_attempts.push_back(r.attempts);
        ASSERT_TRUE(client->GroupNack(group, r.offset));
      } else {
        ASSERT_TRUE(client->GroupAck(group, r.offset));
      }
    }
    auto listed = client->GroupDeadLetters(group);
    ASSERT_TRUE(listed) << listed.error().ToString();
    dead = *listed;
  }
  EXPECT_EQ(poison_attempts, (std::vector<uint32_t>{1, 2, 3}));
  ASSERT_EQ(dead, std::vector<uint64_t>{0});
  EXPECT_EQ(Metric("felix_group_dead_letters_total"), 1);
  EXPECT_EQ(Metric("felix_group_redeliveries_total"), 2);  // deliveries 2 and 3
  EXPECT_EQ(Metric("felix_group_inflight"), 0);
  // The poison record no longer stalls the cursor.
  auto info = client->GroupDescribe(group);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->committed, 2u);
  EXPECT_EQ(info->dead_letters, 1u);

  ASSERT_TRUE(client->GroupRedrive(group, 0));
  auto again = client->GroupPoll(group, {.max_records = 10});
  ASSERT_TRUE(again) << again.error().ToString();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].offset, 0u);
  EXPECT_EQ((*again)[0].payload, "poison");
  EXPECT_EQ((*again)[0].attempts, 1u);  // attempts start over after a redrive
  ASSERT_TRUE(client->GroupAck(group, 0));
  auto listed = client->GroupDeadLetters(group);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
  // Redriving an offset that is not dead-lettered is refused.
  auto refused = client->GroupRedrive(group, 1);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ClientErrorCode::kInvalidRequest);
}

TEST_F(GroupE2E, RestartKeepsCursorsAndDeadLetters) {
  CreateStream("durable");
  StreamRef stream{"default", "durable"};
  GroupRef group{stream, 0, "workers"};
  {
    auto client = Connect(AllPerms("durable"));
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->Publish(stream, {"r0", "r1", "r2", "r3", "r4"}));
    auto first = client->GroupPoll(group, {.max_records = 4});
    ASSERT_TRUE(first) << first.error().ToString();
    ASSERT_EQ(Offsets(*first), (std::vector<uint64_t>{0, 1, 2, 3}));
    ASSERT_TRUE(client->GroupAck(group, 0));
    ASSERT_TRUE(client->GroupAck(group, 1));
    ASSERT_TRUE(client->GroupDeadLetter(group, 2));  // given up on explicitly
    // Offset 3 stays in flight across the restart.
    auto info = client->GroupDescribe(group);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->committed, 3u);
    auto other = client->GroupPoll(GroupRef{stream, 0, "second"}, {.max_records = 1});
    ASSERT_TRUE(other);
    ASSERT_TRUE(client->GroupAck(GroupRef{stream, 0, "second"}, 0));
  }
  RestartBroker();
  auto client = Connect(AllPerms("durable"));
  ASSERT_TRUE(client);
  auto info = client->GroupDescribe(group);
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->committed, 3u);
  EXPECT_EQ(info->dead_letters, 1u);
  EXPECT_EQ(info->in_flight, 0u);  // claims are memory only
  auto dead = client->GroupDeadLetters(group);
  ASSERT_TRUE(dead);
  EXPECT_EQ(*dead, std::vector<uint64_t>{2});
  // What was in flight is delivered again (attempts start over), then the rest.
  auto resumed = client->GroupPoll(group, {.max_records = 10});
  ASSERT_TRUE(resumed) << resumed.error().ToString();
  ASSERT_EQ(Offsets(*resumed), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ((*resumed)[0].attempts, 1u);
  auto second = client->GroupDescribe(GroupRef{stream, 0, "second"});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->committed, 1u);
  // Discard stops tracking the dead letter; discarding again is harmless.
  ASSERT_TRUE(client->GroupDiscard(group, 2));
  ASSERT_TRUE(client->GroupDiscard(group, 2));
  auto after = client->GroupDeadLetters(group);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->empty());
}

TEST_F(GroupE2E, ExtendNamesTheDelivery) {
  CreateStream("extend");
  auto client = Connect(AllPerms("extend"));
  ASSERT_TRUE(client);
  StreamRef stream{"default", "extend"};
  ASSERT_TRUE(client->Publish(stream, {"slow"}));
  GroupRef group{stream, 0, "g"};
  auto polled = client->GroupPoll(group, {.max_records = 1, .visibility = seconds(60)});
  ASSERT_TRUE(polled && polled->size() == 1u);
  auto granted = client->GroupExtend(group, 0, (*polled)[0].attempts, seconds(90));
  ASSERT_TRUE(granted) << granted.error().ToString();
  EXPECT_EQ(*granted, milliseconds(90000));
  auto stale = client->GroupExtend(group, 0, (*polled)[0].attempts + 1, seconds(90));
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ClientErrorCode::kStaleClaim);
  EXPECT_EQ(stale.error().retry, RetryClass::kFatal);
  auto info = client->GroupDescribe(group);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->in_flight, 1u);
}

TEST_F(GroupE2E, GroupPermissions) {
  CreateStream("guarded");
  StreamRef stream{"default", "guarded"};
  {
    auto admin = Connect(AllPerms("guarded"));
    ASSERT_TRUE(admin);
    ASSERT_TRUE(admin->Publish(stream, {"x"}));
  }
  // Publishing alone does not allow consuming.
  auto publisher = Connect({"stream.publish:stream:" + Scope("guarded")});
  ASSERT_TRUE(publisher);
  auto refused = publisher->GroupPoll(GroupRef{stream, 0, "g1"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ClientErrorCode::kForbidden);

  // A group grant narrows the stream grant to that group.
  auto narrowed = Connect({"stream.subscribe:stream:" + Scope("guarded"),
                           "group.consume:group:" + Scope("guarded") + "/g1"});
  ASSERT_TRUE(narrowed);
  auto allowed = narrowed->GroupPoll(GroupRef{stream, 0, "g1"});
  ASSERT_TRUE(allowed) << allowed.error().ToString();
  EXPECT_EQ(allowed->size(), 1u);
  auto other_group = narrowed->GroupPoll(GroupRef{stream, 0, "g2"});
  ASSERT_FALSE(other_group);
  EXPECT_EQ(other_group.error().code, ClientErrorCode::kForbidden);
  // group.consume does not allow redrive, seek or delete (group.manage).
  auto redrive = narrowed->GroupRedrive(GroupRef{stream, 0, "g1"}, 0);
  ASSERT_FALSE(redrive);
  EXPECT_EQ(redrive.error().code, ClientErrorCode::kForbidden);
  auto seek = narrowed->GroupSeek(GroupRef{stream, 0, "g1"}, StartPosition::Earliest());
  ASSERT_FALSE(seek);
  EXPECT_EQ(seek.error().code, ClientErrorCode::kForbidden);

  // stream.manage implies group.manage.
  auto manager = Connect({"stream.manage:stream:" + Scope("guarded")});
  ASSERT_TRUE(manager);
  auto moved = manager->GroupSeek(GroupRef{stream, 0, "g3"}, StartPosition::Latest());
  ASSERT_TRUE(moved) << moved.error().ToString();
  EXPECT_TRUE(moved->moved);
  EXPECT_EQ(moved->offset, 1u);
  auto deleted = manager->GroupDelete(GroupRef{stream, 0, "g3"});
  ASSERT_TRUE(deleted) << deleted.error().ToString();
  EXPECT_TRUE(*deleted);
}

TEST_F(GroupE2E, RefusesInMemoryStreamsAndBadNames) {
  auto [rc, out] = Felix({"stream", "create", "volatile"});
  ASSERT_EQ(rc, 0) << out;
  auto client = Connect(AllPerms("volatile"));
  ASSERT_TRUE(client);
  auto in_memory = client->GroupPoll(GroupRef{{"default", "volatile"}, 0, "g"});
  ASSERT_FALSE(in_memory);
  EXPECT_EQ(in_memory.error().code, ClientErrorCode::kInvalidRequest);
  CreateStream("named");
  auto named = Connect(AllPerms("named"));
  ASSERT_TRUE(named);
  auto bad = named->GroupPoll(GroupRef{{"default", "named"}, 0, "no/slash"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ClientErrorCode::kInvalidRequest);
  auto missing = named->GroupPoll(GroupRef{{"default", "missing"}, 0, "g"});
  ASSERT_FALSE(missing);
}

TEST_F(GroupE2E, CliConsumeDescribeAndDeadLetters) {
  CreateStream("cli");
  auto client = Connect(AllPerms("cli"));
  ASSERT_TRUE(client);
  StreamRef stream{"default", "cli"};
  ASSERT_TRUE(client->Publish(stream, {"alpha", "beta", "gamma"}));

  auto consumed = Felix({"group", "consume", "cli", "workers", "--count", "2"});
  ASSERT_EQ(consumed.first, 0) << consumed.second;
  EXPECT_NE(consumed.second.find("0\talpha\n"), std::string::npos) << consumed.second;
  EXPECT_NE(consumed.second.find("1\tbeta\n"), std::string::npos) << consumed.second;
  auto described = Felix({"group", "describe", "cli", "workers"});
  ASSERT_EQ(described.first, 0) << described.second;
  EXPECT_NE(described.second.find("committed\t2\n"), std::string::npos) << described.second;

  GroupRef group{stream, 0, "workers"};
  auto polled = client->GroupPoll(group, {.max_records = 1});
  ASSERT_TRUE(polled && polled->size() == 1u);
  ASSERT_TRUE(client->GroupDeadLetter(group, 2));
  auto listed = Felix({"group", "dead-letters", "list", "cli", "workers"});
  ASSERT_EQ(listed.first, 0) << listed.second;
  EXPECT_EQ(listed.second, "2\n");
  auto redriven = Felix({"group", "dead-letters", "redrive", "cli", "workers", "2"});
  ASSERT_EQ(redriven.first, 0) << redriven.second;
  auto again = Felix({"group", "consume", "cli", "workers", "--count", "1", "--max-wait", "5000"});
  ASSERT_EQ(again.first, 0) << again.second;
  EXPECT_NE(again.second.find("2\tgamma\n"), std::string::npos) << again.second;
  // --no-ack leaves the record unfinished; nothing is left here, so an idle poll just ends.
  auto idle = Felix({"group", "consume", "cli", "workers", "--max-wait", "100", "--no-ack"});
  EXPECT_EQ(idle.first, 0) << idle.second;
  EXPECT_EQ(idle.second, "");
}

// The group record bits the client offers (GROUP_SKIPPED, GROUP_PUBLISHER, RECORD_TIMESTAMPS):
// each record carries its append time, no publisher (this broker stores none) and no hole;
// OffsetForTime finds the first record at or after a time, nothing past the newest.
TEST_F(GroupE2E, RecordTimesAndOffsetForTime) {
  CreateStream("timed");
  auto [rc, out] = Felix({"stream", "create", "scratch"});  // in memory
  ASSERT_EQ(rc, 0) << out;
  auto perms = AllPerms("timed");
  perms.push_back("stream.subscribe:stream:" + Scope("scratch"));
  auto client = Connect(perms);
  ASSERT_TRUE(client);
  StreamRef stream{"default", "timed"};
  for (const char* payload : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(client->Publish(stream, {payload}));
  }
  auto polled = client->GroupPoll(GroupRef{stream, 0, "clock"}, {.max_records = 10});
  ASSERT_TRUE(polled) << polled.error().ToString();
  ASSERT_EQ(polled->size(), 4u);
  std::vector<uint64_t> times;
  for (const auto& r : *polled) {
    EXPECT_EQ(r.skipped_before, 0u);
    EXPECT_EQ(r.publisher, std::nullopt);
    ASSERT_TRUE(r.timestamp_micros);
    times.push_back(*r.timestamp_micros);
  }
  for (uint64_t at : {uint64_t{0}, times[1], times[2] + 1, times[3]}) {
    std::optional<uint64_t> expected;
    for (size_t i = 0; i < times.size() && !expected; ++i) {
      if (times[i] >= at) expected = i;
    }
    auto found = client->OffsetForTime(stream, 0, at);
    ASSERT_TRUE(found) << found.error().ToString();
    EXPECT_EQ(*found, expected) << "at " << at;
  }
  auto none = client->OffsetForTime(stream, 0, times[3] + 1);
  ASSERT_TRUE(none) << none.error().ToString();
  EXPECT_EQ(*none, std::nullopt);
  auto memory = client->OffsetForTime(StreamRef{"default", "scratch"}, 0, 0);
  ASSERT_FALSE(memory);
  EXPECT_EQ(memory.error().code, ClientErrorCode::kInvalidRequest);
}

}  // namespace
}  // namespace felix
