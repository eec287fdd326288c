// Replica reports: the caught-up rule (MakeReport) and the writer's fencing on FakeEtcd (a
// report is stored only while the assignment names this node at the report's generation).
#include "cluster/report_writer.h"

#include <gtest/gtest.h>

#include "cluster/controller_test_util.h"
#include "etcd/fake_etcd.h"

namespace felix::cluster {
namespace {

using storage::LogKind;

ReplicaCursorStatus Cursor(const std::string& node, LogKind log, Offset confirmed,
                           ReplicaHalt halt = ReplicaHalt::kNone) {
  ReplicaCursorStatus c;
  c.node_id = node;
  c.log = log;
  c.confirmed = confirmed;
  c.halt = halt;
  return c;
}

TEST(MakeReport, AFollowerIsCaughtUpOnlyWhenItHoldsTheFloorOnEveryCountedLog) {
  // Leader regime: the floor is the leader's tail (100).
  std::vector<ReplicaCursorStatus> cursors = {
      Cursor("b", LogKind::kStream, Offset(100)), Cursor("c", LogKind::kStream, Offset(99)),
      Cursor("d", LogKind::kStream, Offset(100), ReplicaHalt::kDiverged)};
  Report r = MakeReport(5, "a", Offset(100), Offset(100), {"b", "c", "d", "e"},
                        {{LogKind::kStream, Offset(100)}}, cursors);
  EXPECT_EQ(r.generation, 5u);
  EXPECT_EQ(r.leader, "a");
  EXPECT_EQ(r.caught_up, std::vector<std::string>{"b"});  // c behind, d halted, e unanswered
  EXPECT_EQ(r.durable,
            (std::map<std::string, uint64_t>{{"a", 100}, {"b", 100}, {"c", 99}, {"d", 100}}));
  EXPECT_EQ(r.commit, 100u);

  // Quorum regime: the floor is the mark, so c (at the mark) counts.
  Report q = MakeReport(5, "a", Offset(100), Offset(99), {"b", "c"},
                        {{LogKind::kStream, Offset(99)}}, cursors);
  EXPECT_EQ(q.caught_up, (std::vector<std::string>{"b", "c"}));

  // A cache counts its cache log and its counter log.
  std::vector<ReplicaCursorStatus> cache = {
      Cursor("b", LogKind::kCache, Offset(10)), Cursor("b", LogKind::kCounters, Offset(4)),
      Cursor("c", LogKind::kCache, Offset(10)), Cursor("c", LogKind::kCounters, Offset(3))};
  Report k = MakeReport(2, "a", Offset(10), Offset(10), {"b", "c"},
                        {{LogKind::kCache, Offset(10)}, {LogKind::kCounters, Offset(4)}}, cache);
  EXPECT_EQ(k.caught_up, std::vector<std::string>{"b"});
}

class ReportWriterTest : public ::testing::Test {
 protected:
  void Assign(uint64_t generation, const std::string& leader) {
    Assignment a;
    a.generation = generation;
    a.leader = leader;
    a.replicas = {leader, leader == "n1" ? "n2" : "n1"};
    ASSERT_TRUE(fake_.Put(keys_.Assign(shard_), EncodeAssignment(a)));
  }
  std::optional<Report> Stored() {
    auto r = fake_.Get(keys_.Report(shard_));
    EXPECT_TRUE(r);
    if (!r || !r->first) return std::nullopt;
    auto report = DecodeReport(r->first->value);
    EXPECT_TRUE(report);
    return report ? std::optional<Report>(*report) : std::nullopt;
  }
  ReportWriter Make() {
    return ReportWriter(
        ReportWriterOptions{.etcd = fake_,
                            .keys = keys_,
                            .node_id = "n1",
                            .collect =
                                [this] {
                                  return std::vector<LeaderReport>{{shard_, report_}};
                                },
                            .metrics = &metrics_});
  }

  etcd::FakeEtcd fake_;
  ClusterKeys keys_ = testing::TestKeys();
  MetricsRegistry metrics_;
  ShardRef shard_{ShardKind::kStream, "t", "ns", "s", 0};
  Report report_{3, "n1", {"n2"}, {{"n1", 10}, {"n2", 10}}, 10};
};

TEST_F(ReportWriterTest, WritesChangedReportsWhileTheAssignmentNamesThisLeader) {
  Assign(3, "n1");
  ReportWriter writer = Make();
  auto wrote = writer.WriteChanged();
  ASSERT_TRUE(wrote) << wrote.error().ToString();
  EXPECT_EQ(*wrote, 1u);
  EXPECT_EQ(Stored(), report_);

  // Unchanged: nothing written (no etcd traffic to speak of).
  const int64_t rev = fake_.revision();
  EXPECT_EQ(*writer.WriteChanged(), 0u);
  EXPECT_EQ(fake_.revision(), rev);

  // Changed: written.
  report_.durable["n2"] = 20;
  report_.durable["n1"] = 20;
  EXPECT_EQ(*writer.WriteChanged(), 1u);
  EXPECT_EQ(Stored(), report_);

  // The assignment moves on (another leader at generation 4): a report of generation 3 from
  // this node is refused and the stored one stays.
  Assign(4, "n2");
  Report before = *Stored();
  report_.durable["n2"] = 30;
  EXPECT_EQ(*writer.WriteChanged(), 0u);
  EXPECT_EQ(Stored(), before);
}

TEST_F(ReportWriterTest, AReassignmentToThisNodeIsReadBackAndWrittenInTheSameRound) {
  Assign(3, "n1");
  ReportWriter writer = Make();
  ASSERT_EQ(*writer.WriteChanged(), 1u);
  // A new generation that still names n1 (a follower changed): the cached mod_revision fails
  // the compare, the else branch returns the assignment, and the report is written.
  Assign(4, "n1");
  report_.generation = 4;
  EXPECT_EQ(*writer.WriteChanged(), 1u);
  EXPECT_EQ(Stored()->generation, 4u);
  // A report for a generation the assignment has not reached is never stored.
  report_.generation = 5;
  EXPECT_EQ(*writer.WriteChanged(), 0u);
  EXPECT_EQ(Stored()->generation, 4u);
}

TEST_F(ReportWriterTest, NoAssignmentNoReport) {
  ReportWriter writer = Make();
  EXPECT_EQ(*writer.WriteChanged(), 0u);
  EXPECT_FALSE(Stored());
}

}  // namespace
}  // namespace felix::cluster
