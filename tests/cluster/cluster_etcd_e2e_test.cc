// felix_cluster against a real etcd: the controller transactions under concurrent planners,
// a deposed controller, incarnations, and the node lease losing and regaining validity when
// etcd is SIGSTOPped and SIGCONTed.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "cluster/assignment_txn.h"
#include "cluster/assignment_txn_contract.h"
#include "cluster/node_lease.h"
#include "etcd/grpc_etcd_client.h"
#include "support/etcd_process.h"

namespace felix::cluster {
namespace {

using namespace std::chrono_literals;
using felix::testing::EtcdProcess;

// Waits for NodeLease's on_change to report `want`.
class FlagWatcher {
 public:
  void Set(bool v) {
    {
      std::lock_guard lock(mu_);
      history_.push_back(v);
    }
    cv_.notify_all();
  }
  bool WaitFor(bool want, size_t min_changes, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout,
                        [&] { return history_.size() >= min_changes && history_.back() == want; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> history_;
};

class ClusterEtcd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start()) << etcd_.error();
    etcd::GrpcEtcdOptions options;
    options.call_timeout = 2000ms;
    auto client = etcd::GrpcEtcdClient::Create(etcd_.endpoint(), options);
    ASSERT_TRUE(client) << client.error().ToString();
    client_ = std::move(*client);
  }
  // A started NodeLease (L = `lease`: usable 3/4 L after the last answered keepalive) whose
  // flag changes go to `flag`, with nodes/n1 attached to it; null on failure (reported).
  std::unique_ptr<NodeLease> StartLeaseWithNodeKey(FlagWatcher& flag, const LeaseClock& clock,
                                                   std::chrono::milliseconds lease_ms) {
    NodeLeaseOptions options;
    options.lease = lease_ms;
    options.on_change = [&flag](bool v) { flag.Set(v); };
    auto lease = std::make_unique<NodeLease>(*client_, options, clock);
    auto started = lease->Start();
    EXPECT_TRUE(started) << started.error().ToString();
    EXPECT_TRUE(flag.WaitFor(true, 1, 5s));
    auto put = client_->Put(testing::TestKeys().Node("n1"), "{}", lease->id());
    EXPECT_TRUE(put) << put.error().ToString();
    if (!started || !put) return nullptr;
    return lease;
  }

  EtcdProcess etcd_;
  std::unique_ptr<etcd::GrpcEtcdClient> client_;
};

TEST_F(ClusterEtcd, RacingPlannersExactlyOneWins) {
  testing::RacingPlannersExactlyOneWins(*client_, 4);
}

TEST_F(ClusterEtcd, TwoControllersRacingExactlyOneWins) {
  // Two brokers campaign at once: exactly one becomes controller.
  auto keys = testing::TestKeys();
  auto la = client_->LeaseGrant(30);
  auto lb = client_->LeaseGrant(30);
  ASSERT_TRUE(la && lb);
  Result<CampaignResult> ra, rb;
  std::thread ta([&] { ra = Campaign(*client_, keys, {"a", 1}, la->id); });
  std::thread tb([&] { rb = Campaign(*client_, keys, {"b", 1}, lb->id); });
  ta.join();
  tb.join();
  ASSERT_TRUE(ra && rb);
  ASSERT_NE(ra->won, rb->won) << "exactly one controller";
  EXPECT_EQ(ra->term.create_revision, rb->term.create_revision);
  const CampaignResult& first = ra->won ? *ra : *rb;
  int64_t first_lease = ra->won ? la->id : lb->id;
  int64_t second_lease = ra->won ? lb->id : la->id;
  std::string second_id = ra->won ? "b" : "a";

  // The first controller's lease lapses (revoked here) and the other takes over, while the
  // first has not noticed: both now plan from the same read and write at once.
  ASSERT_TRUE(client_->LeaseRevoke(first_lease));
  auto second = Campaign(*client_, keys, {second_id, 1}, second_lease);
  ASSERT_TRUE(second && second->won);
  const std::string key = keys.Assign({ShardKind::kStream, "t", "ns", "s", 9});
  auto read = ReadAssignment(*client_, key);
  ASSERT_TRUE(read);
  Result<WriteOutcome> old_write, new_write;
  std::thread xa([&] {
    old_write = WriteAssignment(*client_, keys, first.term, key, *read,
                                testing::Led(first.term.record.node_id, {"a", "b"}));
  });
  std::thread xb([&] {
    new_write = WriteAssignment(*client_, keys, second->term, key, *read,
                                testing::Led(second_id, {"a", "b"}));
  });
  xa.join();
  xb.join();
  ASSERT_TRUE(old_write && new_write);
  EXPECT_EQ(old_write->kind, WriteOutcome::Kind::kDeposed);
  EXPECT_EQ(new_write->kind, WriteOutcome::Kind::kWritten);
  auto after = ReadAssignment(*client_, key);
  ASSERT_TRUE(after && after->value);
  EXPECT_EQ(after->value->generation, 1u);
  EXPECT_EQ(after->value->leader, second_id);
}

TEST_F(ClusterEtcd, DeposedControllerCannotWrite) {
  testing::DeposedControllerCannotWrite(*client_);
}

TEST_F(ClusterEtcd, FailoverLandsOnlyWhileTheDeposedLeaderIsAbsent) {
  testing::FailoverLandsOnlyWhileTheDeposedLeaderIsAbsent(*client_);
}

TEST_F(ClusterEtcd, IncarnationsRiseByOne) {
  testing::IncarnationsRiseByOne(*client_);
}

TEST_F(ClusterEtcd, StoppedEtcdInvalidatesTheLeaseBeforeItCanExpireAndResumeRestoresIt) {
  FlagWatcher flag;
  BoottimeClock clock;
  auto owned = StartLeaseWithNodeKey(flag, clock, 6000ms);
  ASSERT_TRUE(owned);
  NodeLease& lease = *owned;
  auto keys = testing::TestKeys();
  EXPECT_TRUE(lease.ValidNow());

  // Stopped for at most usable = 4.5 s (+ detection): well inside etcd's 6 s TTL.
  etcd_.Pause();
  bool went_invalid = flag.WaitFor(false, 2, 8s);
  bool exact_invalid = !lease.ValidNow();
  etcd_.Resume();
  ASSERT_TRUE(went_invalid) << "the cached flag never dropped while etcd was stopped";
  EXPECT_TRUE(exact_invalid);
  // etcd never saw the lease expire: the flag dropped before the TTL could run out.
  ASSERT_TRUE(flag.WaitFor(true, 3, 6s)) << "answers after SIGCONT did not restore the lease";
  EXPECT_FALSE(lease.lost());
  auto ttl = client_->LeaseTimeToLive(lease.id());
  ASSERT_TRUE(ttl) << ttl.error().ToString();
  EXPECT_GT(ttl->ttl_seconds, 0);
  auto node = client_->Get(keys.Node("n1"));
  ASSERT_TRUE(node);
  EXPECT_TRUE(node->first.has_value()) << "the node key survived";
  EXPECT_TRUE(lease.ValidNow());

  ASSERT_TRUE(lease.Revoke());
  auto gone = client_->Get(keys.Node("n1"));
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->first.has_value());
}

TEST_F(ClusterEtcd, LeaseSurvivesAnEtcdRestartWithinItsTtl) {
  FlagWatcher flag;
  BoottimeClock clock;
  auto owned = StartLeaseWithNodeKey(flag, clock, 4000ms);
  ASSERT_TRUE(owned);
  NodeLease& lease = *owned;
  auto keys = testing::TestKeys();
  int64_t answered_before = lease.last_answer_ns();

  // etcd persists leases and restarts their TTL when it comes back: the keeper reconnects its
  // keepalive stream and the lease stays (or becomes again) usable, without a new grant.
  etcd_.Kill();
  ASSERT_TRUE(etcd_.Restart()) << etcd_.error();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (lease.last_answer_ns() == answered_before || !lease.valid()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no keepalive answered after restart";
    ASSERT_FALSE(lease.lost());
    flag.WaitFor(true, 1000, 50ms);  // pacing only: the answer time is what we wait for
  }
  EXPECT_FALSE(lease.lost());
  auto node = client_->Get(keys.Node("n1"));
  ASSERT_TRUE(node) << node.error().ToString();
  EXPECT_TRUE(node->first.has_value());
}

}  // namespace
}  // namespace felix::cluster
