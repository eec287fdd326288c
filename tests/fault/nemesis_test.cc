// The nemesis schedule is a function of the seed: the same seed gives the same faults, another
// seed other ones, and every group has one fault of each kind on a real node (the eight local
// kinds, or all twelve with the network faults).
#include "fault/nemesis.h"

#include <gtest/gtest.h>

#include <set>

namespace felix::fault {
namespace {

bool Same(const std::vector<Fault>& a, const std::vector<Fault>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].node != b[i].node || a[i].hold_ms != b[i].hold_ms ||
        a[i].gap_ms != b[i].gap_ms) {
      return false;
    }
  }
  return true;
}

TEST(Nemesis, TheSeedNamesTheSchedule) {
  const std::vector<FaultKind> three = {FaultKind::kKillBroker, FaultKind::kPauseBroker,
                                        FaultKind::kPauseEtcd};
  auto a = NemesisSchedule(1717, 12, 3, three);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_TRUE(Same(a, NemesisSchedule(1717, 12, 3, three)));
  EXPECT_FALSE(Same(a, NemesisSchedule(1718, 12, 3, three)));
  for (size_t group = 0; group < a.size(); group += 3) {
    std::set<FaultKind> kinds;
    for (size_t i = group; i < group + 3; ++i) {
      kinds.insert(a[i].kind);
      EXPECT_GE(a[i].node, 1);
      EXPECT_LE(a[i].node, 3);
      EXPECT_GT(a[i].hold_ms, 0);
      EXPECT_GT(a[i].gap_ms, 0);
    }
    EXPECT_EQ(kinds.size(), 3u) << "group " << group / 3;
  }
  EXPECT_EQ(FaultKindName(FaultKind::kPauseEtcd), "pause_etcd");
  EXPECT_EQ(LocalFaultKinds().size(), 8u);
}

TEST(Nemesis, TheQuorumRegimeAddsTheAssignmentFaults) {
  auto kinds = WithAssignmentFaults(AllFaultKinds());
  ASSERT_EQ(kinds.size(), 14u);
  EXPECT_EQ(FaultKindName(kinds[12]), "move_shard");
  EXPECT_EQ(FaultKindName(kinds[13]), "drain_broker");
  auto schedule = NemesisSchedule(7, 14, 3, kinds);
  std::set<FaultKind> seen;
  for (const Fault& f : schedule) seen.insert(f.kind);
  EXPECT_EQ(seen.size(), 14u) << "one of each kind in the first group";
}

TEST(Nemesis, EveryGroupHasEveryKind) {
  const auto all = AllFaultKinds();
  ASSERT_EQ(all.size(), 12u);
  auto a = NemesisSchedule(1717, 24, 3, all);
  ASSERT_EQ(a.size(), 24u);
  EXPECT_TRUE(Same(a, NemesisSchedule(1717, 24, 3, all)));
  for (size_t group = 0; group < a.size(); group += all.size()) {
    std::set<FaultKind> kinds;
    for (size_t i = group; i < group + all.size(); ++i) kinds.insert(a[i].kind);
    EXPECT_EQ(kinds.size(), all.size()) << "group " << group / all.size();
  }
  EXPECT_EQ(FaultKindName(FaultKind::kIsolateBroker), "isolate_broker");
  EXPECT_EQ(FaultKindName(FaultKind::kSplit), "split");
  EXPECT_EQ(FaultKindName(FaultKind::kOneWay), "one_way");
  EXPECT_EQ(FaultKindName(FaultKind::kSlowLink), "slow_link");
  EXPECT_EQ(FaultKindName(FaultKind::kDiskFull), "disk_full");
  EXPECT_EQ(FaultKindName(FaultKind::kFsyncEio), "fsync_eio");
  EXPECT_EQ(FaultKindName(FaultKind::kClockJump), "clock_jump");
  EXPECT_EQ(FaultKindName(FaultKind::kKillEtcdLeader), "kill_etcd_leader");
}

}  // namespace
}  // namespace felix::fault
