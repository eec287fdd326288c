// The nemesis schedule is a function of the seed: the same seed gives the same faults, another
// seed other ones, and every group has one fault of each kind on a real node (three process
// kinds, or all seven with the network faults).
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
  auto a = NemesisSchedule(1717, 12, 3);
  ASSERT_EQ(a.size(), 12u);
  EXPECT_TRUE(Same(a, NemesisSchedule(1717, 12, 3)));
  EXPECT_FALSE(Same(a, NemesisSchedule(1718, 12, 3)));
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
  // Process faults only by default: the schedule of a seed did not change with partitions.
  EXPECT_TRUE(Same(a, NemesisSchedule(1717, 12, 3, kProcessFaultKinds)));
}

TEST(Nemesis, WithPartitionsEveryGroupHasEveryKind) {
  auto a = NemesisSchedule(1717, 14, 3, kAllFaultKinds);
  ASSERT_EQ(a.size(), 14u);
  EXPECT_TRUE(Same(a, NemesisSchedule(1717, 14, 3, kAllFaultKinds)));
  for (size_t group = 0; group < a.size(); group += kAllFaultKinds) {
    std::set<FaultKind> kinds;
    for (size_t i = group; i < group + kAllFaultKinds; ++i) kinds.insert(a[i].kind);
    EXPECT_EQ(kinds.size(), static_cast<size_t>(kAllFaultKinds)) << "group " << group / 7;
  }
  EXPECT_EQ(FaultKindName(FaultKind::kIsolateBroker), "isolate_broker");
  EXPECT_EQ(FaultKindName(FaultKind::kSplit), "split");
  EXPECT_EQ(FaultKindName(FaultKind::kOneWay), "one_way");
  EXPECT_EQ(FaultKindName(FaultKind::kSlowLink), "slow_link");
}

}  // namespace
}  // namespace felix::fault
