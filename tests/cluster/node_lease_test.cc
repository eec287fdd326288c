// Lease arithmetic (LeaseWindow) and the keeper (NodeLease) on FakeEtcd with a fake clock:
// time only moves when the test moves it; the keeper runs through Tick() (no thread).
#include "cluster/node_lease.h"

#include <gtest/gtest.h>

#include "etcd/fake_etcd.h"
#include "fake_lease_clock.h"

namespace felix::cluster {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000 * kMs;

using FakeClock = FakeLeaseClock;

TEST(LeaseWindow, UsableUntilAnchorPlusThreeQuartersOfTheTtl) {
  LeaseWindow w(4 * kSec);
  w.Start(100 * kSec);
  EXPECT_EQ(w.usable_until_ns(), 103 * kSec);
  EXPECT_TRUE(w.ValidAt(103 * kSec - 1));
  EXPECT_FALSE(w.ValidAt(103 * kSec));
}

TEST(LeaseWindow, AnswersGoToTheOldestUnansweredKeepalive) {
  LeaseWindow w(4 * kSec);
  w.Start(100 * kSec);
  w.OnSend(101 * kSec);
  w.OnSend(102 * kSec);
  w.OnAnswer();  // may be the answer to either: credit the older one
  EXPECT_EQ(w.anchor_ns(), 101 * kSec);
  w.OnAnswer();
  EXPECT_EQ(w.anchor_ns(), 102 * kSec);
  w.OnAnswer();  // nothing outstanding: ignored
  EXPECT_EQ(w.anchor_ns(), 102 * kSec);
  EXPECT_EQ(w.unanswered(), 0u);
}

TEST(LeaseWindow, AnchorNeverMovesBackwards) {
  LeaseWindow w(4 * kSec);
  w.Start(100 * kSec);
  w.OnSend(99 * kSec);  // sent "before" the grant (clock oddity): must not pull the anchor back
  w.OnAnswer();
  EXPECT_EQ(w.anchor_ns(), 100 * kSec);
}

TEST(LeaseWindow, StreamResetDropsUnansweredSends) {
  LeaseWindow w(4 * kSec);
  w.Start(100 * kSec);
  w.OnSend(101 * kSec);
  w.OnStreamReset();
  w.OnSend(105 * kSec);
  w.OnAnswer();  // the answer belongs to the new stream's keepalive
  EXPECT_EQ(w.anchor_ns(), 105 * kSec);
}

class NodeLeaseTest : public ::testing::Test {
 protected:
  NodeLeaseOptions Options(int64_t ms) {
    NodeLeaseOptions o;
    o.lease = std::chrono::milliseconds(ms);
    o.on_change = [this](bool valid) { changes_.push_back(valid); };
    return o;
  }
  etcd::FakeEtcd fake_;
  FakeClock clock_;
  std::vector<bool> changes_;
};

TEST_F(NodeLeaseTest, RoundsUpToWholeSecondsAndUsesTheGrantedTtl) {
  NodeLease lease(fake_, Options(2500), clock_);
  ASSERT_TRUE(lease.Start(false));
  EXPECT_EQ(lease.ttl_ms(), 3000);
  auto ttl = fake_.LeaseTimeToLive(lease.id());
  ASSERT_TRUE(ttl);
  EXPECT_EQ(ttl->granted_ttl_seconds, 3);
  EXPECT_TRUE(lease.valid());
  EXPECT_EQ(lease.usable_until_ns(), clock_.NowNs() + 2250 * kMs);
}

TEST_F(NodeLeaseTest, KeepalivesEveryQuarterTtlKeepItValid) {
  NodeLease lease(fake_, Options(4000), clock_);
  ASSERT_TRUE(lease.Start(false));
  int64_t t0 = clock_.NowNs();
  for (int i = 1; i <= 12; ++i) {
    clock_.Set(t0 + i * kSec);
    lease.Tick();
    EXPECT_TRUE(lease.valid()) << i;
    EXPECT_EQ(lease.usable_until_ns(), t0 + i * kSec + 3 * kSec) << i;
  }
  EXPECT_TRUE(changes_ == std::vector<bool>{true});
}

TEST_F(NodeLeaseTest, UnansweredKeepalivesMakeItInvalidBeforeTheTtlAndAnswersRestoreIt) {
  NodeLease lease(fake_, Options(4000), clock_);
  ASSERT_TRUE(lease.Start(false));
  int64_t t0 = clock_.NowNs();
  clock_.Set(t0 + kSec);
  lease.Tick();                // answered: anchor t0 + 1 s, usable until t0 + 4 s
  fake_.HoldKeepAlives(true);  // etcd stops answering
  for (int64_t t = 2; t <= 3; ++t) {
    clock_.Set(t0 + t * kSec);
    lease.Tick();
    EXPECT_TRUE(lease.valid());
  }
  clock_.Set(t0 + 4 * kSec - 1);
  EXPECT_TRUE(lease.ValidNow());
  clock_.Set(t0 + 4 * kSec);
  EXPECT_FALSE(lease.ValidNow()) << "exact check at anchor + L - L/4";
  lease.Tick();
  EXPECT_FALSE(lease.valid()) << "cached flag refreshed by the tick";
  // The lease itself (TTL 4 s from the last renewal at t0 + 1 s) is still alive at etcd.
  EXPECT_LT(clock_.NowNs(), t0 + kSec + 4 * kSec);

  // etcd answers the queued keepalives (sent at t0+2, t0+3, t0+4) in order.
  fake_.HoldKeepAlives(false);
  EXPECT_TRUE(lease.valid());
  EXPECT_EQ(lease.usable_until_ns(), t0 + 4 * kSec + 3 * kSec);
  EXPECT_TRUE(changes_ == (std::vector<bool>{true, false, true}));
}

TEST_F(NodeLeaseTest, ALeaseEtcdDroppedIsLostForGood) {
  NodeLease lease(fake_, Options(2000), clock_);
  ASSERT_TRUE(lease.Start(false));
  ASSERT_TRUE(fake_.Put("/felix/x/nodes/n1", "{}", lease.id()));
  fake_.ExpireLease(lease.id());
  clock_.Advance(500 * kMs);
  lease.Tick();  // the keepalive is answered with TTL 0
  EXPECT_TRUE(lease.lost());
  EXPECT_FALSE(lease.valid());
  EXPECT_FALSE(lease.ValidNow());
  clock_.Advance(500 * kMs);
  lease.Tick();
  EXPECT_FALSE(lease.valid());
}

TEST_F(NodeLeaseTest, RevokeDeletesTheKeysAndInvalidates) {
  NodeLease lease(fake_, Options(2000), clock_);
  ASSERT_TRUE(lease.Start(false));
  ASSERT_TRUE(fake_.Put("/k", "v", lease.id()));
  ASSERT_TRUE(lease.Revoke());
  EXPECT_FALSE(lease.valid());
  auto got = fake_.Get("/k");
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->first.has_value());
}

TEST_F(NodeLeaseTest, GrantFailureIsReported) {
  fake_.SetAvailable(false);
  NodeLease lease(fake_, Options(2000), clock_);
  auto r = lease.Start(false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  NodeLease zero(fake_, Options(0), clock_);
  EXPECT_EQ(zero.Start(false).error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace felix::cluster
