// Planned moves, the pure parts (issue 16): the controller's rule (PlanMove, move_plan.h) row
// by row, the keys and records of move requests and drains and how the controller's view
// keeps them, the route every broker gives a fenced shard, and the follower's acceptance of
// the drain at the generation before the fence.
#include <gtest/gtest.h>

#include "cluster/controller_view.h"
#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "cluster/etcd_router.h"
#include "cluster/move_plan.h"
#include "cluster/replica_role.h"

namespace felix::cluster {
namespace {

Assignment Active(uint64_t generation, std::string leader, std::vector<std::string> replicas) {
  Assignment a;
  a.generation = generation;
  a.leader = std::move(leader);
  a.replicas = std::move(replicas);
  return a;
}

Assignment Fenced(uint64_t generation, std::string leader, std::vector<std::string> replicas,
                  std::string target) {
  Assignment a = Active(generation, std::move(leader), std::move(replicas));
  a.state = AssignmentState::kMoving;
  a.move = MovePlan{std::move(target), MoveStep::kFence};
  return a;
}

struct Inputs {
  Report report;
  std::optional<MoveRequest> request;
  std::set<std::string> draining, down;
  std::set<std::string> registered = {"a", "b", "c", "d"};
  bool expired = false;
  uint32_t replication_factor = 0;
  MoveInputs Get() const {
    MoveInputs in;
    in.report = &report;
    in.request = request ? &*request : nullptr;
    in.draining = &draining;
    in.down = &down;
    in.registered = &registered;
    in.fence_expired = expired;
    in.replication_factor = replication_factor;
    return in;
  }
};

TEST(PlanMove, ARequestForACaughtUpReplicaFencesThenCutsOverOnTheDrainReport) {
  Inputs in;
  in.report = Report{5, "a", {"b", "c"}, {{"a", 90}, {"b", 90}, {"c", 80}}, 90};
  in.request = MoveRequest{"c"};
  auto fence = PlanMove(Active(5, "a", {"a", "b", "c"}), in.Get());
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->action, MoveAction::kFence);
  EXPECT_EQ(fence->next.state, AssignmentState::kMoving);
  EXPECT_EQ(fence->next.leader, "a");  // the leader, the set: unchanged
  EXPECT_EQ(fence->next.replicas, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(fence->next.move);
  EXPECT_EQ(fence->next.move->target, "c");
  EXPECT_EQ(fence->next.move->step, MoveStep::kFence);
  EXPECT_TRUE(ValidateAssignment(Fenced(6, "a", {"a", "b", "c"}, "c")));

  // Fenced at 6: nothing until the leader's drain report at 6 names the target.
  Assignment fenced = Fenced(6, "a", {"a", "b", "c"}, "c");
  EXPECT_FALSE(PlanMove(fenced, in.Get()));  // the report is still generation 5's
  in.report = Report{6, "a", {"b"}, {{"a", 95}, {"b", 95}, {"c", 90}}, 95};
  EXPECT_FALSE(PlanMove(fenced, in.Get()));  // c not level yet
  in.report.caught_up = {"b", "c"};
  auto cut = PlanMove(fenced, in.Get());
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->action, MoveAction::kCutOver);
  EXPECT_EQ(cut->next.leader, "c");
  EXPECT_EQ(cut->next.replicas, (std::vector<std::string>{"c", "a", "b"}));  // a keeps a seat
  EXPECT_EQ(cut->next.state, AssignmentState::kActive);
  EXPECT_FALSE(cut->next.move);
}

TEST(PlanMove, ARequestWaitsForItsTargetToBeALiveCaughtUpReplica) {
  Inputs in;
  in.report = Report{5, "a", {"b"}, {{"a", 90}, {"b", 90}, {"c", 10}}, 90};
  const Assignment current = Active(5, "a", {"a", "b", "c"});
  in.request = MoveRequest{"c"};
  EXPECT_FALSE(PlanMove(current, in.Get()));  // c lags
  in.request = MoveRequest{"d"};
  in.down = {"d"};
  EXPECT_FALSE(PlanMove(current, in.Get()));  // d is down
  in.down = {};
  in.request = MoveRequest{"b"};
  in.down = {"b"};
  EXPECT_FALSE(PlanMove(current, in.Get()));  // b is down
  in.down = {};
  in.report.generation = 4;
  EXPECT_FALSE(PlanMove(current, in.Get()));  // no report at the current generation
  in.report.generation = 5;
  in.request = MoveRequest{"a"};
  EXPECT_FALSE(PlanMove(current, in.Get()));  // the target leads already
  in.request = MoveRequest{"b"};
  in.down = {"a"};
  EXPECT_FALSE(PlanMove(current, in.Get()));  // a dead leader is failover's
  in.down = {};
  Assignment restoring = current;
  restoring.joining = "c";
  EXPECT_FALSE(PlanMove(restoring, in.Get()));  // a restore finishes first
  EXPECT_TRUE(PlanMove(current, in.Get()));
}

TEST(PlanMove, ATargetOutsideTheSetIsCopiedInFirstAndTheOldLeaderLeavesAtTheCutOver) {
  Inputs in;
  in.report = Report{5, "a", {"b", "c"}, {{"a", 90}, {"b", 90}, {"c", 90}}, 90};
  in.request = MoveRequest{"d"};
  auto stage = PlanMove(Active(5, "a", {"a", "b", "c"}), in.Get());
  ASSERT_TRUE(stage);
  EXPECT_EQ(stage->action, MoveAction::kStage);
  EXPECT_EQ(stage->next.leader, "a");
  EXPECT_EQ(stage->next.replicas, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(stage->next.move, (MovePlan{"d", MoveStep::kStage}));

  Assignment staged = stage->next;
  staged.generation = 6;
  in.report = Report{6, "a", {"b", "c"}, {{"a", 95}, {"b", 95}, {"c", 95}, {"d", 40}}, 95};
  EXPECT_FALSE(PlanMove(staged, in.Get()));  // still copying
  in.report.caught_up = {"b", "c", "d"};
  auto fence = PlanMove(staged, in.Get());
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->action, MoveAction::kFence);
  EXPECT_EQ(fence->next.replicas, staged.replicas);
  EXPECT_EQ(fence->next.move, (MovePlan{"d", MoveStep::kFence}));

  Assignment fenced = fence->next;
  fenced.generation = 7;
  in.report.generation = 7;
  in.replication_factor = 3;
  auto cut = PlanMove(fenced, in.Get());
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->action, MoveAction::kCutOver);
  EXPECT_EQ(cut->next.leader, "d");
  EXPECT_EQ(cut->next.replicas, (std::vector<std::string>{"d", "b", "c"}));  // a left

  // A staged copy that dies is dropped and the shard is active again as it was; a stage never
  // times out (only a fence does).
  in.report.generation = 6;
  in.down = {"d"};
  in.expired = true;
  auto abandon = PlanMove(staged, in.Get());
  ASSERT_TRUE(abandon);
  EXPECT_EQ(abandon->action, MoveAction::kAbandon);
  EXPECT_EQ(abandon->next.replicas, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(abandon->next.state, AssignmentState::kActive);
  EXPECT_FALSE(abandon->next.move);
  in.down = {};
  in.report.caught_up = {"b", "c"};
  EXPECT_FALSE(PlanMove(staged, in.Get()));
}

TEST(PlanMove, ADrainingLeaderGivesItsShardToTheFurthestCaughtUpFollowerNotDraining) {
  Inputs in;
  in.report = Report{3, "a", {"b", "c"}, {{"a", 50}, {"b", 40}, {"c", 50}}, 50};
  in.draining = {"a"};
  const Assignment current = Active(3, "a", {"a", "b", "c"});
  auto fence = PlanMove(current, in.Get());
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->next.move->target, "c");
  in.draining = {"a", "c"};  // c is leaving too
  fence = PlanMove(current, in.Get());
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->next.move->target, "b");
  in.report.caught_up = {"c"};
  EXPECT_FALSE(PlanMove(current, in.Get()));  // nobody eligible: the leader keeps it
  in.draining = {"b"};                        // a follower draining moves nothing
  in.report.caught_up = {"b", "c"};
  EXPECT_FALSE(PlanMove(current, in.Get()));
}

TEST(PlanMove, AFencedMoveIsRetakenWhenItsTargetDiesOrItDoesNotDrainInTime) {
  Inputs in;
  in.report = Report{6, "a", {"b"}, {{"a", 95}, {"b", 95}, {"c", 10}}, 95};
  const Assignment fenced = Fenced(6, "a", {"a", "b", "c"}, "c");
  EXPECT_FALSE(PlanMove(fenced, in.Get()));  // still draining
  for (int row = 0; row < 3; ++row) {
    Inputs r = in;
    if (row == 0) r.down = {"c"};
    if (row == 1) r.registered = {"a", "b"};
    if (row == 2) r.expired = true;
    auto retake = PlanMove(fenced, r.Get());
    ASSERT_TRUE(retake) << row;
    EXPECT_EQ(retake->action, MoveAction::kRetake);
    EXPECT_EQ(retake->next.leader, "a");
    EXPECT_EQ(retake->next.state, AssignmentState::kActive);
    EXPECT_FALSE(retake->next.move);
    EXPECT_EQ(retake->next.replicas, fenced.replicas);
  }
  // A drained target is cut over to even when the fence expired meanwhile; a dead leader's
  // fenced shard is failover's.
  in.report.caught_up = {"b", "c"};
  in.expired = true;
  EXPECT_EQ(PlanMove(fenced, in.Get())->action, MoveAction::kCutOver);
  in.report.caught_up = {"b"};
  in.down = {"a"};
  EXPECT_FALSE(PlanMove(fenced, in.Get()));
}

TEST(MoveKeys, RequestsAndDrainsRoundTripAndTheViewKeepsThem) {
  auto keys = ClusterKeys::Create("felix");
  ASSERT_TRUE(keys);
  ShardRef shard{ShardKind::kStream, "t", "ns", "orders", 3};
  EXPECT_EQ(keys->Move(shard), "/felix/felix/moves/stream/t/ns/orders/3");
  EXPECT_EQ(*keys->ParseMove(keys->Move(shard)), shard);
  EXPECT_EQ(keys->Drain("n2"), "/felix/felix/drains/n2");
  EXPECT_EQ(*keys->ParseDrain("/felix/felix/drains/n2"), "n2");
  EXPECT_FALSE(keys->ParseDrain("/felix/felix/drains/"));
  EXPECT_FALSE(keys->ParseMove("/felix/felix/moves/stream/t/ns/orders"));

  EXPECT_EQ(*DecodeMoveRequest(EncodeMoveRequest({"n3"})), MoveRequest{"n3"});
  EXPECT_FALSE(DecodeMoveRequest(R"({"target":""})"));
  EXPECT_FALSE(DecodeMoveRequest(R"({"target":7})"));
  EXPECT_FALSE(DecodeMoveRequest("not json"));

  ControllerView view(*keys);
  EXPECT_EQ(view.Put({keys->Move(shard), EncodeMoveRequest({"n3"}), 1, 1, 1, 0}),
            ControllerView::Area::kMoves);
  EXPECT_EQ(view.Put({keys->Drain("n2"), "{}", 2, 2, 1, 0}), ControllerView::Area::kMoves);
  ASSERT_EQ(view.moves().size(), 1u);
  EXPECT_EQ(view.moves().at(shard).target, "n3");
  EXPECT_EQ(view.drains(), (std::set<std::string>{"n2"}));
  // A request that does not decode is dropped, not kept stale.
  EXPECT_EQ(view.Put({keys->Move(shard), "{", 3, 3, 2, 0}), ControllerView::Area::kMoves);
  EXPECT_TRUE(view.moves().empty());
  EXPECT_EQ(view.Delete(keys->Drain("n2")), ControllerView::Area::kMoves);
  EXPECT_TRUE(view.drains().empty());
}

TEST(MoveRouting, AFencedShardIsUnavailableEverywhereAndItsDrainIsFollowed) {
  auto keys = ClusterKeys::Create("felix");
  ASSERT_TRUE(keys);
  ClusterView view(*keys);
  ShardRef shard{ShardKind::kStream, "t", "ns", "orders", 0};
  view.ReplaceAssignments(
      {{keys->Assign(shard), EncodeAssignment(Fenced(6, "n1", {"n1", "n2", "n3"}, "n2")), 1, 1, 1,
        0}});
  for (const char* self : {"n1", "n2", "n3"}) {
    EtcdRouter router(view, self, [] { return true; });
    auto route = router.RouteShard(broker::ShardId{"t", "ns", "orders"});
    EXPECT_EQ(route.where, broker::Route::Where::kUnavailable) << self;
    EXPECT_EQ(route.generation.value(), 6u) << self;
    EXPECT_NE(route.unavailable_reason.find("moving from n1 to n2"), std::string::npos);
  }
  // The followers take the leader's drain at the generation before the fence, nothing older.
  const auto fenced = view.FindAssignment(shard);
  EXPECT_EQ(FollowerRoleFor(fenced, 5, "n2"), FollowerRole::kFollower);
  EXPECT_EQ(FollowerRoleFor(fenced, 6, "n3"), FollowerRole::kFollower);
  EXPECT_EQ(FollowerRoleFor(fenced, 4, "n2"), FollowerRole::kViewNewer);
  EXPECT_EQ(FollowerRoleFor(fenced, 5, "n1"), FollowerRole::kNotReplica);
  // Once active again (cut over or retaken), the older generation is fenced as always.
  auto active = Active(7, "n2", {"n2", "n1", "n3"});
  EXPECT_EQ(FollowerRoleFor(active, 6, "n3"), FollowerRole::kViewNewer);
}

}  // namespace
}  // namespace felix::cluster
