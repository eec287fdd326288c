// The controller on FakeEtcd with a fake lease clock: election and takeover, placement passes
// (new shards, joins, deletions, zone spread), racing planners, and the down rule. The same
// controller runs against a real etcd in controller_e2e_test.cc.
#include "cluster/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cluster/controller_pass.h"
#include "cluster/controller_test_util.h"
#include "cluster/down_tracker.h"
#include "cluster/fake_lease_clock.h"
#include "cluster/placement.h"
#include "cluster/restore_plan.h"
#include "etcd/fake_etcd.h"

namespace felix::cluster {
namespace {

using namespace std::chrono_literals;
using testing::Deadline;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000 * kMs;

constexpr auto kLeaseTtl = 2000ms;  // L in these tests: margin L/4 = 500 ms

std::set<std::string> Leaders(const std::map<uint32_t, Assignment>& assignments) {
  std::set<std::string> leaders;
  for (const auto& [shard, a] : assignments) leaders.insert(a.leader);
  return leaders;
}

class ControllerTest : public ::testing::Test {
 protected:
  int64_t Lease() {
    auto lease = fake_.LeaseGrant(30);
    EXPECT_TRUE(lease);
    return lease ? lease->id : 0;
  }
  std::unique_ptr<Controller> Make(const std::string& id, int64_t lease,
                                   std::atomic<bool>* valid = nullptr,
                                   MetricsRegistry* metrics = nullptr) {
    ControllerOptions options{.etcd = fake_,
                              .keys = keys_,
                              .me = {id, 1},
                              .lease_id = lease,
                              .lease_ttl = kLeaseTtl,
                              .clock = clock_,
                              .metrics = metrics,
                              .lease_valid = nullptr,
                              .retry_interval = 20ms};
    if (valid) options.lease_valid = [valid] { return valid->load(); };
    return std::make_unique<Controller>(std::move(options));
  }
  // A started controller for n1 that has completed a pass planned from `revision` or later.
  std::unique_ptr<Controller> StartedPastRevision(int64_t revision) {
    auto c = Make("n1", Lease());
    c->Start();
    EXPECT_TRUE(c->WaitForPass(revision, Deadline()));
    return c;
  }
  // Registers n1..n<count> (own leases); returns their leases.
  std::vector<int64_t> RegisterNodes(int count) {
    std::vector<int64_t> leases;
    for (int i = 1; i <= count; ++i) {
      leases.push_back(Lease());
      testing::RegisterNode(fake_, "n" + std::to_string(i), leases.back());
    }
    return leases;
  }

  etcd::FakeEtcd fake_;
  FakeLeaseClock clock_;
  ClusterKeys keys_ = testing::TestKeys();
};

TEST_F(ControllerTest, SingleControllerPlacesSixShardsWithLeadersSpread) {
  auto leases = RegisterNodes(3);
  int64_t rev = testing::CreateStream(fake_, "s", 6, 1);
  MetricsRegistry metrics;
  auto c = Make("n1", leases[0], nullptr, &metrics);
  c->Start();
  ASSERT_TRUE(c->WaitForPass(rev, Deadline()));
  EXPECT_TRUE(c->is_controller());

  auto assigned = testing::StreamAssignments(fake_, "s");
  ASSERT_EQ(assigned.size(), 6u);
  std::map<std::string, int> led;
  for (const auto& [shard, a] : assigned) {
    EXPECT_EQ(a.generation, 1u) << shard;
    EXPECT_EQ(a.replicas, std::vector<std::string>{a.leader}) << shard;
    EXPECT_EQ(a.state, AssignmentState::kActive);
    ++led[a.leader];
  }
  EXPECT_EQ(led, (std::map<std::string, int>{{"n1", 2}, {"n2", 2}, {"n3", 2}}));

  // A later pass (triggered by the controller's own writes) changes nothing.
  ASSERT_TRUE(c->WaitForPass(fake_.revision(), Deadline()));
  EXPECT_EQ(testing::StreamAssignments(fake_, "s"), assigned);
  std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("felix_cluster_controller 1"), std::string::npos) << text;
  EXPECT_NE(text.find("felix_cluster_assignment_writes_total 6"), std::string::npos) << text;
  EXPECT_EQ(text.find("felix_cluster_placement_passes_total 0"), std::string::npos) << text;

  c->Stop();
  EXPECT_FALSE(c->is_controller());
  auto holder = ReadController(fake_, keys_);
  ASSERT_TRUE(holder);
  EXPECT_FALSE(holder->has_value()) << "Stop() resigns";
  EXPECT_NE(metrics.RenderPrometheus().find("felix_cluster_controller 0"), std::string::npos);
}

TEST_F(ControllerTest, ExactlyOneControllerAndRevokingItsLeaseHandsOver) {
  auto leases = RegisterNodes(3);
  std::atomic<bool> valid_a{true}, valid_b{true};
  auto a = Make("n1", leases[0], &valid_a);
  auto b = Make("n2", leases[1], &valid_b);
  int64_t rev = testing::CreateStream(fake_, "s", 6, 1);
  a->Start();
  b->Start();
  Controller* winner = testing::WaitForEither(*a, *b, Deadline());
  ASSERT_NE(winner, nullptr);
  Controller* other = winner == a.get() ? b.get() : a.get();
  ASSERT_TRUE(winner->WaitForPass(rev, Deadline()));
  EXPECT_FALSE(other->is_controller());
  EXPECT_EQ(other->passes(), 0u);
  auto holder = ReadController(fake_, keys_);
  ASSERT_TRUE(holder && holder->has_value());
  EXPECT_EQ((*holder)->record.node_id, winner == a.get() ? "n1" : "n2");
  auto before = testing::StreamAssignments(fake_, "s");
  ASSERT_EQ(before.size(), 6u);

  // The winner's node lease goes (its node key and the controller key with it).
  (winner == a.get() ? valid_a : valid_b) = false;
  ASSERT_TRUE(fake_.LeaseRevoke(winner == a.get() ? leases[0] : leases[1]));
  ASSERT_TRUE(other->WaitForRole(true, Deadline()));
  ASSERT_TRUE(winner->WaitForRole(false, Deadline()));

  // The new controller keeps working: a new stream is placed on the registered nodes only,
  // and the old stream's leaders are untouched (replacing a leader is failover's job).
  int64_t rev2 = testing::CreateStream(fake_, "s2", 4, 1);
  ASSERT_TRUE(other->WaitForPass(rev2, Deadline()));
  auto placed = testing::StreamAssignments(fake_, "s2");
  ASSERT_EQ(placed.size(), 4u);
  std::string gone = winner == a.get() ? "n1" : "n2";
  for (const auto& [shard, asg] : placed) EXPECT_NE(asg.leader, gone);
  EXPECT_EQ(testing::StreamAssignments(fake_, "s"), before);
  EXPECT_FALSE(winner->is_controller());
}

TEST_F(ControllerTest, NoCampaignWhileTheLeaseIsNotUsable) {
  auto leases = RegisterNodes(2);
  std::atomic<bool> valid_a{false}, valid_b{true};
  auto a = Make("n1", leases[0], &valid_a);
  auto b = Make("n2", leases[1], &valid_b);
  a->Start();  // first, but its lease is not usable
  b->Start();
  ASSERT_TRUE(b->WaitForRole(true, Deadline()));
  EXPECT_FALSE(a->is_controller());
  valid_a = true;
  valid_b = false;
  ASSERT_TRUE(fake_.LeaseRevoke(leases[1]));
  ASSERT_TRUE(a->WaitForRole(true, Deadline()));
  ASSERT_TRUE(b->WaitForRole(false, Deadline()));
}

TEST_F(ControllerTest, RacingPlannersOneWriteWinsAndTheLoserReplans) {
  auto leases = RegisterNodes(3);
  testing::CreateStream(fake_, "s", 2, 2);
  auto won = Campaign(fake_, keys_, {"n1", 1}, leases[0]);
  ASSERT_TRUE(won && won->won);
  const ControllerTerm term = won->term;

  ControllerView stale = testing::ReadView(fake_);  // before anything was assigned
  PassResult first = RunPass(fake_, term, stale, {});
  ASSERT_TRUE(first.complete());
  EXPECT_EQ(first.writes, 2u);
  auto target = testing::StreamAssignments(fake_, "s");

  // Another planner of the same term writes shard 0 first (a different follower).
  const std::string key0 = keys_.Assign({ShardKind::kStream, "t", "ns", "s", 0});
  auto read = ReadAssignment(fake_, key0);
  ASSERT_TRUE(read && read->value);
  std::string leader = read->value->leader;
  std::string stranger;
  for (std::string n : {"n1", "n2", "n3"}) {
    if (std::find(read->value->replicas.begin(), read->value->replicas.end(), n) ==
        read->value->replicas.end()) {
      stranger = n;
    }
  }
  auto racing =
      WriteAssignment(fake_, keys_, term, key0, *read, testing::Led(leader, {leader, stranger}));
  ASSERT_TRUE(racing && racing->kind == WriteOutcome::Kind::kWritten);
  // Now a pass from the older view: both its writes lose. Shard 0 re-plans from the winner's
  // value (generation 2) to the target again (generation 3); shard 1 then needs nothing.
  PassResult second = RunPass(fake_, term, stale, {});
  EXPECT_TRUE(second.complete());
  EXPECT_EQ(second.lost_races, 2u);
  EXPECT_EQ(second.writes, 1u);
  auto after = testing::StreamAssignments(fake_, "s");
  EXPECT_EQ(after[0].generation, 3u);
  EXPECT_EQ(after[0].leader, leader);
  EXPECT_EQ(after[0].replicas, target[0].replicas);
  EXPECT_EQ(after[1], target[1]);

  // Two passes of one term over the same view at once: every shard is written exactly once.
  testing::CreateStream(fake_, "race", 4, 1);
  ControllerView view = testing::ReadView(fake_);
  PassResult r1, r2;
  std::thread t1([&] { r1 = RunPass(fake_, term, view, {}); });
  std::thread t2([&] { r2 = RunPass(fake_, term, view, {}); });
  t1.join();
  t2.join();
  EXPECT_TRUE(r1.complete() && r2.complete());
  EXPECT_EQ(r1.writes + r2.writes, 4u);
  EXPECT_EQ(r1.lost_races + r2.lost_races, 4u);
  for (const auto& [shard, a] : testing::StreamAssignments(fake_, "race")) {
    EXPECT_EQ(a.generation, 1u) << shard;
  }

  // A deposed term writes nothing: its pass ends at the first write.
  ASSERT_TRUE(fake_.LeaseRevoke(leases[0]));
  auto next = Campaign(fake_, keys_, {"n2", 1}, leases[1]);
  ASSERT_TRUE(next && next->won);
  testing::CreateStream(fake_, "late", 2, 1);
  PassResult deposed = RunPass(fake_, term, testing::ReadView(fake_), {});
  EXPECT_TRUE(deposed.deposed);
  EXPECT_EQ(deposed.writes, 0u);
  EXPECT_TRUE(testing::StreamAssignments(fake_, "late").empty());
}

TEST_F(ControllerTest, UnreadableMetadataIsLeftAlone) {
  auto leases = RegisterNodes(2);
  testing::CreateStream(fake_, "s", 2, 1);
  auto won = Campaign(fake_, keys_, {"n1", 1}, leases[0]);
  ASSERT_TRUE(won && won->won);
  ASSERT_EQ(RunPass(fake_, won->term, testing::ReadView(fake_), {}).writes, 2u);
  auto placed = testing::StreamAssignments(fake_, "s");

  // A catalog value that does not decode: its shards are neither placed nor deleted.
  ASSERT_TRUE(fake_.Put(keys_.CatalogStream("t", "ns", "s"), "{not json"));
  // A stream whose assignment value is corrupt: that shard is skipped, the other placed.
  testing::CreateStream(fake_, "c", 2, 1);
  ASSERT_TRUE(fake_.Put(keys_.Assign({ShardKind::kStream, "t", "ns", "c", 0}), "[]"));
  // Keys of the layout the controller does not read are ignored.
  ASSERT_TRUE(fake_.Put(keys_.CatalogTenant("t"), "{}"));
  ASSERT_TRUE(fake_.Put(keys_.prefix() + "catalog/streams/too/few", "{}"));

  ControllerView view = testing::ReadView(fake_);
  EXPECT_EQ(view.catalog().size(), 2u);
  PassResult r = RunPass(fake_, won->term, view, {});
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(r.deletes, 0u);
  EXPECT_EQ(r.skipped, 1u);
  EXPECT_EQ(r.writes, 1u);
  EXPECT_EQ(testing::StreamAssignments(fake_, "s"), placed);
  auto c = ReadAssignment(fake_, keys_.Assign({ShardKind::kStream, "t", "ns", "c", 1}));
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->value.has_value());
}

TEST_F(ControllerTest, ANodeJoiningChangesNoLeader) {
  RegisterNodes(2);
  int64_t rev = testing::CreateStream(fake_, "s", 6, 2);
  auto c = StartedPastRevision(rev);
  ASSERT_FALSE(HasFailure());
  auto before = testing::StreamAssignments(fake_, "s");
  ASSERT_EQ(before.size(), 6u);

  int64_t joined = testing::RegisterNode(fake_, "n3", Lease());
  // The target after the join would move leaders to n3 (so keeping them is the controller's
  // decision, not an accident of placement).
  ControllerView view = testing::ReadView(fake_);
  PlacementInput input;
  for (const auto& [id, record] : view.nodes()) input.nodes.push_back({id, record->zone});
  for (const auto& [shard, a] : before) {
    std::string path = ShardRef{ShardKind::kStream, "t", "ns", "s", shard}.Path();
    input.shards.push_back({path, 2});
    input.current[path] = ReplicaSet{a.leader, {a.replicas.begin() + 1, a.replicas.end()}};
  }
  auto target = Place(input);
  bool moves = false;
  for (const auto& [path, set] : target.assignment) moves |= set.leader == "n3";
  ASSERT_TRUE(moves);

  ASSERT_TRUE(c->WaitForPass(joined, Deadline()));
  auto after = testing::StreamAssignments(fake_, "s");
  ASSERT_EQ(after.size(), 6u);
  for (const auto& [shard, a] : after) {
    EXPECT_EQ(a.leader, before[shard].leader) << shard;
    EXPECT_EQ(a.replicas.front(), a.leader);
    EXPECT_EQ(a.replicas.size(), 2u);
    EXPECT_LE(a.generation, before[shard].generation + 1);
  }
}

// The pass after a pass that wrote waits for the view to hold those writes: planned from a view
// holding only some of them it would place from a half-old picture and move shards twice. The
// watch here lags on purpose (held), part of the way; the controller overtakes it with a
// snapshot.
TEST_F(ControllerTest, APassIsNotPlannedFromAViewMissingTheLastPassesWrites) {
  RegisterNodes(2);
  int64_t rev = testing::CreateStream(fake_, "s", 6, 2);
  auto c = StartedPastRevision(rev);
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(c->WaitForPass(fake_.revision(), Deadline()));  // its own writes seen
  auto before = testing::StreamAssignments(fake_, "s");
  ASSERT_EQ(before.size(), 6u);

  const int64_t join_revision = fake_.revision() + 1;
  fake_.HoldWatchesFrom(join_revision + 1);  // the join is heard, what the pass writes is not
  ASSERT_EQ(testing::RegisterNode(fake_, "n3", Lease()), join_revision);
  ASSERT_TRUE(c->WaitForPass(join_revision, Deadline()));
  const int64_t written = fake_.revision();
  ASSERT_GE(written, join_revision + 2) << "the join should rewrite several shards";

  auto check = [&](const char* when) {
    auto now = testing::StreamAssignments(fake_, "s");
    ASSERT_EQ(now.size(), 6u);
    for (const auto& [shard, a] : now) {
      EXPECT_EQ(a.leader, before[shard].leader) << when << " shard " << shard;
      EXPECT_LE(a.generation, before[shard].generation + 1) << when << " shard " << shard;
    }
  };
  fake_.ReleaseWatchesThrough(join_revision + 1);  // one of its writes comes back, then a pause
  ASSERT_TRUE(c->WaitForPass(join_revision + 1, Deadline()));
  check("after the partial catch-up");
  fake_.HoldWatches(false);
  ASSERT_TRUE(c->WaitForPass(fake_.revision(), Deadline()));
  check("after the whole catch-up");
  EXPECT_EQ(fake_.revision(), written) << "nothing written after the join's pass";
}

TEST_F(ControllerTest, AStreamLeavingTheCatalogLosesItsAssignments) {
  RegisterNodes(3);
  testing::CreateStream(fake_, "gone", 3, 1);
  testing::CreateStream(fake_, "stays", 2, 1);
  int64_t rev = testing::CreateCache(fake_, "c", 2, 2);
  auto c = StartedPastRevision(rev);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(testing::StreamAssignments(fake_, "gone").size(), 3u);
  ASSERT_EQ(testing::AssignmentsOf(fake_, ShardKind::kCache, "c").size(), 2u);
  auto stays = testing::StreamAssignments(fake_, "stays");
  ASSERT_EQ(stays.size(), 2u);

  auto deleted = fake_.Delete(keys_.CatalogStream("t", "ns", "gone"));
  ASSERT_TRUE(deleted && deleted->deleted == 1);
  ASSERT_TRUE(c->WaitForPass(deleted->revision, Deadline()));
  EXPECT_TRUE(testing::StreamAssignments(fake_, "gone").empty());
  EXPECT_EQ(testing::StreamAssignments(fake_, "stays"), stays);
  EXPECT_EQ(testing::AssignmentsOf(fake_, ShardKind::kCache, "c").size(), 2u);
}

TEST_F(ControllerTest, FollowersSpreadOverZonesWithReplicationFactorThree) {
  const char* zones[] = {"a", "a", "b", "b", "c", "c"};
  for (int i = 0; i < 6; ++i) {
    testing::RegisterNode(fake_, "n" + std::to_string(i + 1), Lease(), zones[i]);
  }
  int64_t rev = testing::CreateStream(fake_, "s", 6, 3);
  auto c = StartedPastRevision(rev);
  ASSERT_FALSE(HasFailure());
  auto assigned = testing::StreamAssignments(fake_, "s");
  ASSERT_EQ(assigned.size(), 6u);
  for (const auto& [shard, a] : assigned) {
    ASSERT_EQ(a.replicas.size(), 3u) << shard;
    EXPECT_EQ(a.replicas.front(), a.leader);
    std::set<char> used;
    for (const auto& r : a.replicas) used.insert(zones[r[1] - '1'][0]);
    EXPECT_EQ(used.size(), 3u) << "shard " << shard << " has two copies in one zone";
  }
  EXPECT_EQ(Leaders(assigned).size(), 6u) << "one leader per node";
}

TEST(DownTracker, MarginAfterTheDeletionAndAFullWindowAfterElection) {
  const int64_t L = 2 * kSec;
  DownTracker down(L, 0);
  EXPECT_EQ(down.margin_ns(), L / 4);
  const int64_t t0 = 100 * kSec;
  down.Elected(t0);
  down.Snapshot({"n1", "n2", "n3"}, t0);
  down.Absent("n2", t0 + 10 * kMs);
  // The margin has passed, the new-controller window has not.
  EXPECT_FALSE(down.IsDown("n2", t0 + 10 * kMs + L / 4));
  EXPECT_FALSE(down.IsDown("n2", t0 + L + L / 4 - 1));
  EXPECT_TRUE(down.IsDown("n2", t0 + L + L / 4));
  EXPECT_EQ(down.Down(t0 + L + L / 4), std::vector<std::string>{"n2"});

  // After the window only the margin counts; a later observation never moves it later.
  const int64_t t1 = t0 + 10 * kSec;
  down.Absent("n3", t1);
  down.Absent("n3", t1 + kSec);
  EXPECT_FALSE(down.IsDown("n3", t1 + L / 4 - 1));
  EXPECT_TRUE(down.IsDown("n3", t1 + L / 4));
  // Coming back clears it.
  down.Present("n3");
  EXPECT_FALSE(down.IsDown("n3", t1 + 10 * kSec));
  EXPECT_FALSE(down.IsDown("n1", t1 + 10 * kSec));
}

TEST(DownTracker, SnapshotsAndAssignmentsCountAsObservationsAtTheirTime) {
  const int64_t L = 4 * kSec;
  DownTracker down(L, 100 * kMs);
  const int64_t t0 = 50 * kSec;
  down.Elected(t0);
  down.Snapshot({"n1", "n2"}, t0);
  down.Mentioned("n9", t0);  // named in an assignment, never registered
  down.Mentioned("n1", t0);  // registered: not absent
  const int64_t window = t0 + L + 100 * kMs;
  EXPECT_EQ(down.Down(window), std::vector<std::string>{"n9"});
  // A re-snapshot without n2: absent from that snapshot's time.
  down.Snapshot({"n1"}, window);
  EXPECT_FALSE(down.IsDown("n2", window + 100 * kMs - 1));
  EXPECT_TRUE(down.IsDown("n2", window + 100 * kMs));
  // A new term forgets the old observations.
  down.Elected(window + kSec);
  EXPECT_TRUE(down.Down(window + 100 * kSec).empty());
}

TEST_F(ControllerTest, DownNodesHonourTheMarginAndTheNewControllerWait) {
  auto leases = RegisterNodes(3);
  int64_t rev = testing::CreateStream(fake_, "s", 3, 1);
  const int64_t elected = clock_.NowNs();
  auto c = Make("n1", leases[0]);
  c->Start();
  ASSERT_TRUE(c->WaitForPass(rev, Deadline()));
  const int64_t L = 2 * kSec, margin = L / 4;

  fake_.ExpireLease(leases[2]);  // n3's key goes
  ASSERT_TRUE(c->WaitForPass(fake_.revision(), Deadline()));
  EXPECT_TRUE(c->DownNodes().empty());
  clock_.Set(elected + margin);
  EXPECT_TRUE(c->DownNodes().empty()) << "a new controller first waits L + margin";
  clock_.Set(elected + L + margin - 1);
  EXPECT_TRUE(c->DownNodes().empty());
  clock_.Set(elected + L + margin);
  EXPECT_EQ(c->DownNodes(), std::vector<std::string>{"n3"});
  // Nothing was reassigned: n3's shard keeps its leader.
  for (const auto& [shard, a] : testing::StreamAssignments(fake_, "s")) {
    EXPECT_EQ(a.generation, 1u);
  }

  // Past the window only the margin after the observed deletion counts.
  const int64_t t1 = clock_.NowNs();
  fake_.ExpireLease(leases[1]);
  ASSERT_TRUE(c->WaitForPass(fake_.revision(), Deadline()));
  EXPECT_EQ(c->DownNodes(), std::vector<std::string>{"n3"});
  clock_.Set(t1 + margin);
  EXPECT_EQ(c->DownNodes(), (std::vector<std::string>{"n2", "n3"}));

  // A node registering again is not down.
  int64_t back = testing::RegisterNode(fake_, "n3", Lease());
  ASSERT_TRUE(c->WaitForPass(back, Deadline()));
  EXPECT_EQ(c->DownNodes(), std::vector<std::string>{"n2"});
}

TEST(PlanShard, KeepsTheLeaderTakesTargetFollowersAndKeepsAbsentOnes) {
  std::set<std::string> registered = {"a", "b", "c", "d"};
  ReplicaSet target{"a", {"b", "c"}};
  // New shard: the target, leader first.
  auto fresh = PlanShard(std::nullopt, &target, 3, registered);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->leader, "a");
  EXPECT_EQ(fresh->replicas, (std::vector<std::string>{"a", "b", "c"}));
  // Unchanged (in any order): nothing to write.
  Assignment same = testing::Led("a", {"a", "c", "b"});
  same.generation = 4;
  EXPECT_FALSE(PlanShard(same, &target, 3, registered));
  // A live leader other than the target's stays; the target leader becomes a follower.
  Assignment other = testing::Led("d", {"d", "b", "c"});
  other.generation = 2;
  auto kept = PlanShard(other, &target, 3, registered);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->leader, "d");
  EXPECT_EQ(kept->replicas, (std::vector<std::string>{"d", "a", "b"}));
  // A follower whose node is not registered keeps its slot (replaced only after its grace
  // period, later); a dead leader is not replaced either.
  Assignment absent = testing::Led("x", {"x", "y", "b"});
  auto with_absent = PlanShard(absent, &target, 3, registered);
  ASSERT_TRUE(with_absent);
  EXPECT_EQ(with_absent->leader, "x");
  EXPECT_EQ(with_absent->replicas, (std::vector<std::string>{"x", "y", "a"}));
  // Moving and unavailable shards, and no target at all: left alone.
  Assignment moving = testing::Led("a", {"a", "b"});
  moving.state = AssignmentState::kMoving;
  moving.move = MovePlan{"b", MoveStep::kStage};
  EXPECT_FALSE(PlanShard(moving, &target, 3, registered));
  Assignment unavailable{1, "", {"b"}, AssignmentState::kUnavailable, std::nullopt};
  EXPECT_FALSE(PlanShard(unavailable, &target, 3, registered));
  EXPECT_FALSE(PlanShard(std::nullopt, nullptr, 3, registered));
}

TEST(PlanFailover, PromotesOnlyACaughtUpLiveFollowerNamedByTheCurrentLeadersReport) {
  const std::set<std::string> registered = {"b", "c", "d"};
  const std::set<std::string> down = {"a"};
  Assignment current = testing::Led("a", {"a", "b", "c"});
  current.generation = 7;
  Report report{7, "a", {"b", "c"}, {{"a", 40}, {"b", 30}, {"c", 35}}, 30};

  // The furthest-ahead caught-up follower leads; the set is kept, the dead leader included.
  auto promoted = PlanFailover(current, &report, down, registered);
  ASSERT_TRUE(promoted);
  EXPECT_EQ(promoted->leader, "c");
  EXPECT_EQ(promoted->replicas, (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(promoted->state, AssignmentState::kActive);

  // Ties go to the earlier replica.
  Report tie = report;
  tie.durable["c"] = 30;
  ASSERT_TRUE(PlanFailover(current, &tie, down, registered));
  EXPECT_EQ(PlanFailover(current, &tie, down, registered)->leader, "b");

  // A leader that is not down keeps its shard.
  EXPECT_FALSE(PlanFailover(current, &report, {}, registered));
  // No report, a report of an older generation or from another leader: nobody is known to
  // hold every acknowledged record, so nobody is promoted.
  EXPECT_FALSE(PlanFailover(current, nullptr, down, registered));
  Report old = report;
  old.generation = 6;
  EXPECT_FALSE(PlanFailover(current, &old, down, registered));
  Report foreign = report;
  foreign.leader = "b";
  EXPECT_FALSE(PlanFailover(current, &foreign, down, registered));
  // Followers not named caught up, not registered or down themselves are never candidates.
  Report lagging = report;
  lagging.caught_up = {};
  EXPECT_FALSE(PlanFailover(current, &lagging, down, registered));
  EXPECT_FALSE(PlanFailover(current, &report, down, {"d"}));
  auto only_b = PlanFailover(current, &report, {"a", "c"}, registered);
  ASSERT_TRUE(only_b);
  EXPECT_EQ(only_b->leader, "b");
  // A caught-up node outside the replica set is ignored.
  Report outsider = report;
  outsider.caught_up = {"d"};
  EXPECT_FALSE(PlanFailover(current, &outsider, down, registered));
  // A shard fenced in a planned move whose leader died fails over too, from the report of its
  // generation or of the one before (the fence generation writes nothing); an older one is
  // not enough.
  Assignment moving = current;
  moving.state = AssignmentState::kMoving;
  moving.move = MovePlan{"b", MoveStep::kFence};
  auto from_fence = PlanFailover(moving, &report, down, registered);
  ASSERT_TRUE(from_fence);
  EXPECT_EQ(from_fence->leader, "c");
  EXPECT_EQ(from_fence->state, AssignmentState::kActive);
  EXPECT_FALSE(from_fence->move);
  moving.generation = 8;
  EXPECT_TRUE(PlanFailover(moving, &report, down, registered));
  moving.generation = 9;
  EXPECT_FALSE(PlanFailover(moving, &report, down, registered));
  // Unavailable shards belong to other logic.
  Assignment unavailable;
  unavailable.generation = 7;
  unavailable.state = AssignmentState::kUnavailable;
  unavailable.replicas = {"a", "b", "c"};
  EXPECT_FALSE(PlanFailover(unavailable, &report, down, registered));
  EXPECT_FALSE(PlanFailover(std::nullopt, &report, down, registered));
}

TEST_F(ControllerTest, ADownLeaderFailsOverToTheFollowerItsReportNamesCaughtUp) {
  auto leases = RegisterNodes(3);
  int64_t rev = testing::CreateStream(fake_, "s", 2, 3);
  auto c = Make("ctl", Lease());  // not registered: never placed, so any leader can go
  c->Start();
  ASSERT_TRUE(c->WaitForPass(rev, Deadline()));
  auto before = testing::StreamAssignments(fake_, "s");
  ASSERT_EQ(before.size(), 2u);

  // Shard 0's leader reports one follower caught up; shard 1's leader never reported.
  const Assignment a0 = before.at(0);
  ASSERT_EQ(a0.replicas.size(), 3u);
  const std::string follower = a0.replicas[1];
  Report report{a0.generation, a0.leader, {follower}, {{follower, 12}}, 12};
  ShardRef ref0{ShardKind::kStream, "t", "ns", "s", 0};
  ASSERT_TRUE(fake_.Put(keys_.Report(ref0), EncodeReport(report)));

  // Shard 0's leader's node goes.
  const int64_t t0 = clock_.NowNs();
  fake_.ExpireLease(leases[std::stoi(a0.leader.substr(1)) - 1]);
  ASSERT_TRUE(c->WaitForPass(fake_.revision(), Deadline()));
  // Not down yet: nothing moves before L + margin after the election / margin after the loss.
  EXPECT_EQ(testing::StreamAssignments(fake_, "s").at(0).leader, a0.leader);
  clock_.Set(t0 + 3 * kSec);  // past L + margin (2.5 s) since the election and the loss

  const auto deadline = Deadline();
  std::map<uint32_t, Assignment> after;
  while (std::chrono::steady_clock::now() < deadline) {
    after = testing::StreamAssignments(fake_, "s");
    if (after.at(0).leader != a0.leader) break;
    std::this_thread::sleep_for(5ms);  // polling etcd state with a deadline, not a delay
  }
  EXPECT_EQ(after.at(0).leader, follower);
  EXPECT_EQ(after.at(0).generation, a0.generation + 1);
  EXPECT_EQ(after.at(0).replicas.size(), 3u);
  EXPECT_EQ(after.at(0).replicas[0], follower);
  // Shard 1 keeps its leader: alive, or dead with no report (then unavailable, never guessed).
  EXPECT_EQ(after.at(1).leader, before.at(1).leader);
  EXPECT_EQ(after.at(1).generation, before.at(1).generation);
}

// A pass planned while the leader was down does not fail its shard over once the leader has
// registered again (it may serve from a view caught up to that registration); it does when the
// leader's key is gone.
TEST_F(ControllerTest, AFailoverPlannedWhileTheLeaderWasDownIsNotWrittenOnceItRegisteredAgain) {
  auto leases = RegisterNodes(3);
  testing::CreateStream(fake_, "s", 1, 3);
  auto won = Campaign(fake_, keys_, {"ctl", 1}, Lease());
  ASSERT_TRUE(won && won->won);
  ASSERT_TRUE(RunPass(fake_, won->term, testing::ReadView(fake_), {}).complete());
  const Assignment a0 = testing::StreamAssignments(fake_, "s").at(0);
  const std::string follower = a0.replicas[1];
  ShardRef ref0{ShardKind::kStream, "t", "ns", "s", 0};
  Report report{a0.generation, a0.leader, {follower}, {{follower, 12}}, 12};
  ASSERT_TRUE(fake_.Put(keys_.Report(ref0), EncodeReport(report)));

  // DownTracker said down, but the leader's key is back by the time the pass writes.
  PassOptions options;
  options.down = {a0.leader};
  PassResult held = RunPass(fake_, won->term, testing::ReadView(fake_), options);
  EXPECT_TRUE(held.complete());
  EXPECT_EQ(held.promotions, 0u);
  EXPECT_EQ(held.leaders_returned, 1u);
  EXPECT_EQ(testing::StreamAssignments(fake_, "s").at(0), a0);

  fake_.ExpireLease(leases[std::stoi(a0.leader.substr(1)) - 1]);
  PassResult failed_over = RunPass(fake_, won->term, testing::ReadView(fake_), options);
  EXPECT_TRUE(failed_over.complete());
  EXPECT_EQ(failed_over.promotions, 1u);
  EXPECT_EQ(failed_over.leaders_returned, 0u);
  const Assignment after = testing::StreamAssignments(fake_, "s").at(0);
  EXPECT_EQ(after.leader, follower);
  EXPECT_EQ(after.generation, a0.generation + 1);
}

TEST(DeleteAssignment, ComparesTheTermAndTheRevision) {
  etcd::FakeEtcd fake;
  auto keys = testing::TestKeys();
  auto lease = fake.LeaseGrant(30);
  ASSERT_TRUE(lease);
  auto won = Campaign(fake, keys, {"n1", 1}, lease->id);
  ASSERT_TRUE(won && won->won);
  const std::string key = keys.Assign({ShardKind::kStream, "t", "ns", "s", 0});
  auto first = WriteAssignment(fake, keys, won->term, key, {}, testing::Led("n1", {"n1"}));
  ASSERT_TRUE(first && first->kind == WriteOutcome::Kind::kWritten);
  auto second =
      WriteAssignment(fake, keys, won->term, key, first->current, testing::Led("n1", {"n1", "n2"}));
  ASSERT_TRUE(second && second->kind == WriteOutcome::Kind::kWritten);

  auto stale = DeleteAssignment(fake, keys, won->term, key, first->current);
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->kind, WriteOutcome::Kind::kLostRace);
  EXPECT_EQ(stale->current.value, second->current.value);
  EXPECT_EQ(DeleteAssignment(fake, keys, won->term, key, {}).error().code,
            ErrorCode::kInvalidArgument);
  ControllerTerm other = won->term;
  other.create_revision += 1000;
  auto deposed = DeleteAssignment(fake, keys, other, key, second->current);
  ASSERT_TRUE(deposed);
  EXPECT_EQ(deposed->kind, WriteOutcome::Kind::kDeposed);
  auto deleted = DeleteAssignment(fake, keys, won->term, key, second->current);
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->kind, WriteOutcome::Kind::kWritten);
  auto gone = ReadAssignment(fake, key);
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->value.has_value());
}

TEST(DownTracker, DownForAGracePeriodIsLaterThanDown) {
  const int64_t L = 2 * kSec;
  DownTracker down(L, 0);
  const int64_t t0 = 100 * kSec;
  down.Elected(t0);
  down.Snapshot({"n1", "n2"}, t0);
  const int64_t gone = t0 + 10 * kSec;
  down.Absent("n2", gone);
  const int64_t grace = 5 * kSec;
  EXPECT_EQ(down.Down(gone + L / 4), std::vector<std::string>{"n2"});
  EXPECT_TRUE(down.Down(gone + L / 4 + grace - 1, grace).empty());
  EXPECT_EQ(down.Down(gone + L / 4 + grace, grace), std::vector<std::string>{"n2"});
  EXPECT_EQ(down.NextDownAt(gone, grace), gone + L / 4 + grace);
  EXPECT_EQ(down.NextDownAt(gone + L / 4 + grace, grace), std::nullopt);
  down.Present("n2");
  EXPECT_TRUE(down.Down(gone + 60 * kSec, grace).empty());
}

// The restore plan (restore_plan.h): join a live outsider, seat it once reported caught up,
// abandon it when it dies or when nothing is lost any more.
TEST(PlanRestore, JoinsALiveOutsiderThenSeatsItOnceCaughtUp) {
  const std::set<std::string> registered = {"a", "b", "d", "e"};
  const std::set<std::string> down = {"c"};
  const std::set<std::string> lost = {"c"};
  Assignment current = testing::Led("a", {"a", "b", "c"});
  current.generation = 7;
  Report report{7, "a", {"b"}, {{"a", 40}, {"b", 40}}, 40};
  RestoreInputs in;
  in.report = &report;
  in.lost = &lost;
  in.down = &down;
  in.registered = &registered;
  in.replication_factor = 3;
  in.shard_key = "stream/default/default/s/0";

  auto joined = PlanRestore(current, in);
  ASSERT_TRUE(joined);
  ASSERT_TRUE(joined->joining);
  const std::string joiner = *joined->joining;
  EXPECT_TRUE(joiner == "d" || joiner == "e");
  // The rendezvous choice: the outsider with the higher score for this shard.
  const std::string other = joiner == "d" ? "e" : "d";
  EXPECT_GE(RendezvousScore(in.shard_key, joiner), RendezvousScore(in.shard_key, other));
  EXPECT_EQ(joined->leader, "a");
  EXPECT_EQ(joined->replicas, (std::vector<std::string>{"a", "b", "c", joiner}));
  EXPECT_TRUE(ValidateAssignment([&] {
    Assignment v = *joined;
    v.generation = 8;
    return v;
  }()));

  // While copying: nothing to write until the report at the new generation names it caught up.
  Assignment copying = *joined;
  copying.generation = 8;
  EXPECT_FALSE(PlanRestore(copying, in));  // report still at generation 7
  Report at8{8, "a", {"b"}, {{"a", 40}, {"b", 40}, {joiner, 10}}, 40};
  in.report = &at8;
  EXPECT_FALSE(PlanRestore(copying, in));
  Report caught{8, "a", {"b", joiner}, {{"a", 40}, {"b", 40}, {joiner, 40}}, 40};
  in.report = &caught;
  auto seated = PlanRestore(copying, in);
  ASSERT_TRUE(seated);
  EXPECT_FALSE(seated->joining);
  EXPECT_EQ(seated->replicas, (std::vector<std::string>{"a", "b", joiner}));
  // PlanShard leaves a shard with a joiner alone (it would trim the set back to RF).
  ReplicaSet target{"a", {"b", "d"}};
  EXPECT_FALSE(PlanShard(copying, &target, 3, registered));
}

TEST(PlanRestore, WaitsForALeadersReportAndAFreeBrokerAndAbandonsADeadCopy) {
  const std::set<std::string> registered = {"a", "b", "d"};
  const std::set<std::string> none;
  const std::set<std::string> down = {"c"};
  const std::set<std::string> lost = {"c"};
  Assignment current = testing::Led("a", {"a", "b", "c"});
  current.generation = 3;
  Report report{3, "a", {"b"}, {{"a", 5}, {"b", 5}}, 5};
  RestoreInputs in;
  in.report = &report;
  in.lost = &lost;
  in.down = &down;
  in.registered = &registered;
  in.replication_factor = 3;
  in.shard_key = "k";
  ASSERT_TRUE(PlanRestore(current, in));

  // Not yet lost (only down), no report, a report of an older generation: nothing starts.
  in.lost = &none;
  EXPECT_FALSE(PlanRestore(current, in));
  in.lost = &lost;
  in.report = nullptr;
  EXPECT_FALSE(PlanRestore(current, in));
  Report old = report;
  old.generation = 2;
  in.report = &old;
  EXPECT_FALSE(PlanRestore(current, in));
  in.report = &report;
  // No broker outside the set that is alive: nothing to copy to.
  const std::set<std::string> only_members = {"a", "b"};
  in.registered = &only_members;
  EXPECT_FALSE(PlanRestore(current, in));
  in.registered = &registered;
  // A down leader is failover's business, not restore's.
  const std::set<std::string> leader_down = {"a", "c"};
  in.down = &leader_down;
  EXPECT_FALSE(PlanRestore(current, in));
  in.down = &down;

  // The copy dies: abandoned (removed, joining cleared).
  Assignment copying = testing::Led("a", {"a", "b", "c", "d"});
  copying.generation = 4;
  copying.joining = "d";
  const std::set<std::string> copy_down = {"c", "d"};
  in.down = &copy_down;
  auto abandoned = PlanRestore(copying, in);
  ASSERT_TRUE(abandoned);
  EXPECT_FALSE(abandoned->joining);
  EXPECT_EQ(abandoned->replicas, (std::vector<std::string>{"a", "b", "c"}));
  in.down = &down;
  // The lost replica came back before the copy was seated: abandoned too.
  in.lost = &none;
  auto back = PlanRestore(copying, in);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->replicas, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(back->joining);
}

TEST(PlanFailover, ARestoreUnderWayEndsWithTheFailover) {
  const std::set<std::string> registered = {"b", "c", "d"};
  const std::set<std::string> down = {"a"};
  // Joined an odd-sized set (3 → 4): the copy is dropped.
  Assignment current = testing::Led("a", {"a", "b", "c", "d"});
  current.generation = 9;
  current.joining = "d";
  Report report{9, "a", {"b"}, {{"a", 10}, {"b", 10}}, 10};
  auto promoted = PlanFailover(current, &report, down, registered);
  ASSERT_TRUE(promoted);
  EXPECT_EQ(promoted->leader, "b");
  EXPECT_FALSE(promoted->joining);
  EXPECT_EQ(promoted->replicas, (std::vector<std::string>{"b", "a", "c"}));
  // Joined an even-sized set (2 → 3): it stays as a plain replica.
  Assignment even = testing::Led("a", {"a", "b", "d"});
  even.generation = 9;
  even.joining = "d";
  auto kept = PlanFailover(even, &report, down, registered);
  ASSERT_TRUE(kept);
  EXPECT_FALSE(kept->joining);
  EXPECT_EQ(kept->replicas, (std::vector<std::string>{"b", "a", "d"}));
}

}  // namespace
}  // namespace felix::cluster
