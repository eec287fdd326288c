// The controller transactions on FakeEtcd (the same contract runs on a real etcd in
// cluster_etcd_e2e_test.cc), plus a stored value that does not decode.
#include "cluster/assignment_txn.h"

#include <gtest/gtest.h>

#include "cluster/assignment_txn_contract.h"
#include "etcd/fake_etcd.h"

namespace felix::cluster {
namespace {

TEST(AssignmentTxnFake, RacingPlannersExactlyOneWins) {
  etcd::FakeEtcd fake;
  testing::RacingPlannersExactlyOneWins(fake, 4);
}

TEST(AssignmentTxnFake, DeposedControllerCannotWrite) {
  etcd::FakeEtcd fake;
  testing::DeposedControllerCannotWrite(fake);
}

TEST(AssignmentTxnFake, FailoverLandsOnlyWhileTheDeposedLeaderIsAbsent) {
  etcd::FakeEtcd fake;
  testing::FailoverLandsOnlyWhileTheDeposedLeaderIsAbsent(fake);
}

TEST(AssignmentTxnFake, IncarnationsRiseByOne) {
  etcd::FakeEtcd fake;
  testing::IncarnationsRiseByOne(fake);
}

TEST(AssignmentTxnFake, CorruptStoredValuesAreTypedErrors) {
  etcd::FakeEtcd fake;
  auto keys = testing::TestKeys();
  const std::string key = keys.Assign({ShardKind::kStream, "t", "ns", "s", 0});
  ASSERT_TRUE(fake.Put(key, "{garbage"));
  auto read = ReadAssignment(fake, key);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::kCorruption);
  ASSERT_TRUE(fake.Put(keys.NodeIncarnation("n1"), "seven"));
  EXPECT_EQ(NextIncarnation(fake, keys, "n1").error().code, ErrorCode::kCorruption);
  ASSERT_TRUE(fake.Put(keys.Controller(), "[]"));
  EXPECT_EQ(ReadController(fake, keys).error().code, ErrorCode::kCorruption);
}

TEST(AssignmentTxnFake, InvalidNextValueIsRefusedBeforeWriting) {
  etcd::FakeEtcd fake;
  auto keys = testing::TestKeys();
  ControllerTerm term{{"n1", 1}, 2, 0};
  auto r = WriteAssignment(fake, keys, term, keys.Assign({}), {}, testing::Led("n1", {"n2"}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

TEST(AssignmentTxnFake, EtcdFailuresPassThrough) {
  etcd::FakeEtcd fake;
  fake.SetAvailable(false);
  auto keys = testing::TestKeys();
  EXPECT_EQ(Campaign(fake, keys, {"n1", 1}, 0).error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(NextIncarnation(fake, keys, "n1").error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace felix::cluster
