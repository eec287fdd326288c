// ClusterNode on FakeEtcd: registration under a lease (nodes/<id>, incarnation), readiness,
// re-registration when etcd drops the lease, clean leave on Stop, and the EtcdRouter's answers
// from the assignments (Local / Remote with the owner's client address / Unavailable), including
// "stop serving when the lease cannot be proven" (keepalives held, the lease clock moved past
// the usable window), and "serve nothing lost while the view catches up with a re-registration".
#include "cluster/cluster_node.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "etcd/fake_etcd.h"
#include "fake_lease_clock.h"

namespace felix::cluster {
namespace {

using namespace std::chrono_literals;

// Records what the node reports and lets the test wait for it (no sleeps).
struct Observer {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  int registrations = 0;
  int unregistrations = 0;
  int64_t lease = 0;
  uint64_t incarnation = 0;

  template <typename Pred>
  bool WaitUntil(Pred pred, std::chrono::milliseconds limit = 10s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return pred(*this); });
  }
};

class ClusterNodeTest : public ::testing::Test {
 protected:
  ClusterNodeTest() : keys_(*ClusterKeys::Create("test")) {}

  ClusterNodeOptions Options(const std::string& id, Observer& o,
                             const LeaseClock* clock = nullptr) {
    ClusterNodeOptions opts{.keys = keys_};
    opts.self.node_id = id;
    opts.self.internal_addr = "127.0.0.1:7001";
    opts.self.client_addr = id + ".example:5000";
    opts.self.version = "test";
    opts.lease = 2000ms;
    opts.clock = clock;
    opts.on_ready_change = [&o](bool ready) {
      std::lock_guard lock(o.mu);
      o.ready = ready;
      o.cv.notify_all();
    };
    opts.on_registered = [&o](int64_t lease, int64_t, uint64_t incarnation) {
      std::lock_guard lock(o.mu);
      ++o.registrations;
      o.lease = lease;
      o.incarnation = incarnation;
      o.cv.notify_all();
    };
    opts.on_unregistered = [&o] {
      std::lock_guard lock(o.mu);
      ++o.unregistrations;
      o.cv.notify_all();
    };
    return opts;
  }

  void PutAssignment(const ShardRef& shard, const Assignment& a) {
    ASSERT_TRUE(etcd_.Put(keys_.Assign(shard), EncodeAssignment(a)));
  }

  etcd::FakeEtcd etcd_;
  ClusterKeys keys_;
};

// The mirrors apply watch events on their own threads: wait (bounded) until `pred` holds.
template <typename Pred>
bool Eventually(Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

broker::ShardId StreamShard(uint32_t n) {
  return broker::ShardId{"t", "ns", "s", broker::ShardKind::kStream, n};
}

TEST_F(ClusterNodeTest, RegistersUnderItsLeaseAndBecomesReady) {
  Observer o;
  ClusterNode node(etcd_, Options("n1", o));
  node.Start();
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
  auto kv = etcd_.Get(keys_.Node("n1"));
  ASSERT_TRUE(kv && kv->first);
  auto record = DecodeNodeRecord(kv->first->value);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->incarnation, 1u);
  EXPECT_EQ(record->client_addr, "n1.example:5000");
  EXPECT_EQ(kv->first->lease, o.lease);
  EXPECT_TRUE(node.lease_valid());
  EXPECT_TRUE(node.LeaseValidNow());
}

TEST_F(ClusterNodeTest, RegistersAgainWhenEtcdDropsTheLease) {
  Observer o;
  ClusterNode node(etcd_, Options("n1", o));
  node.Start();
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.registrations == 1 && x.ready; }));
  int64_t first = o.lease;
  etcd_.ExpireLease(first);  // as etcd does when the TTL ran out: nodes/n1 is gone
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.registrations == 2; }));
  EXPECT_EQ(o.unregistrations, 1);
  EXPECT_NE(o.lease, first);
  EXPECT_EQ(o.incarnation, 2u);
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
  auto kv = etcd_.Get(keys_.Node("n1"));
  ASSERT_TRUE(kv && kv->first);
  EXPECT_EQ(kv->first->lease, o.lease);
}

TEST_F(ClusterNodeTest, StopLeavesAtOnce) {
  Observer o;
  {
    ClusterNode node(etcd_, Options("n1", o));
    node.Start();
    ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
    node.Stop();
    EXPECT_FALSE(node.ready());
    EXPECT_EQ(o.unregistrations, 1);
  }
  auto kv = etcd_.Get(keys_.Node("n1"));
  ASSERT_TRUE(kv);
  EXPECT_FALSE(kv->first.has_value());
}

TEST_F(ClusterNodeTest, StaysNotReadyWhileEtcdIsUnreachableThenJoins) {
  etcd_.SetAvailable(false);
  Observer o;
  ClusterNode node(etcd_, Options("n1", o));
  node.Start();
  EXPECT_FALSE(o.WaitUntil([](Observer& x) { return x.ready; }, 300ms));
  EXPECT_EQ(o.registrations, 0);
  etcd_.SetAvailable(true);
  EXPECT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
}

TEST_F(ClusterNodeTest, AnEtcdOlderThan3420IsFatal) {
  etcd_.SetVersion("3.4.19");
  Observer o;
  std::mutex mu;
  std::condition_variable cv;
  std::string fatal;
  auto opts = Options("n1", o);
  opts.on_fatal = [&](const std::string& why) {
    std::lock_guard lock(mu);
    fatal = why;
    cv.notify_all();
  };
  ClusterNode node(etcd_, std::move(opts));
  node.Start();
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return !fatal.empty(); }));
  EXPECT_NE(fatal.find("3.4.19"), std::string::npos) << fatal;
  EXPECT_EQ(o.registrations, 0);
}

TEST_F(ClusterNodeTest, RouterAnswersFromTheAssignments) {
  Observer o;
  ClusterNode n1(etcd_, Options("n1", o));
  Observer o2;
  ClusterNode n2(etcd_, Options("n2", o2));
  n1.Start();
  n2.Start();
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
  ASSERT_TRUE(o2.WaitUntil([](Observer& x) { return x.ready; }));

  // Each sees the other's registration (its own readiness does not wait for peers).
  for (ClusterNode* node : {&n1, &n2}) {
    ASSERT_TRUE(Eventually([node] { return node->view().Nodes().size() == 2; }));
  }
  // No assignment yet: nobody serves the shard.
  auto route = n1.router().RouteShard(StreamShard(0));
  EXPECT_EQ(route.where, broker::Route::Where::kUnavailable);
  EXPECT_NE(route.unavailable_reason.find("not assigned"), std::string::npos);

  ShardRef s0{ShardKind::kStream, "t", "ns", "s", 0};
  ShardRef s1{ShardKind::kStream, "t", "ns", "s", 1};
  PutAssignment(s0, Assignment{.generation = 3, .leader = "n1", .replicas = {"n1", "n2"}});
  PutAssignment(s1, Assignment{.generation = 1, .leader = "n2", .replicas = {"n2"}});
  // Both brokers apply the assignments through their own watch.
  for (ClusterNode* node : {&n1, &n2}) {
    ASSERT_TRUE(Eventually([node] { return node->view().Assignments().size() == 2; }));
  }
  for (ClusterNode* node : {&n1, &n2}) {
    auto r0 = node->router().RouteShard(StreamShard(0));
    auto r1 = node->router().RouteShard(StreamShard(1));
    EXPECT_EQ(r0.generation.value(), 3u);
    EXPECT_EQ(r1.generation.value(), 1u);
    if (node == &n1) {
      EXPECT_TRUE(r0.is_local());
      ASSERT_TRUE(r1.is_remote());
      EXPECT_EQ(r1.owner_node_id, "n2");
      EXPECT_EQ(r1.owner_client_addr, "n2.example:5000");
    } else {
      ASSERT_TRUE(r0.is_remote());
      EXPECT_EQ(r0.owner_client_addr, "n1.example:5000");
      EXPECT_TRUE(r1.is_local());
    }
  }
  // A stale write (generation not above the one held) is ignored: once a later event (s1's)
  // has been applied, s0 is still n1's at generation 3.
  PutAssignment(s0, Assignment{.generation = 2, .leader = "n2", .replicas = {"n2"}});
  PutAssignment(s1, Assignment{.generation = 2, .leader = "n2", .replicas = {"n2"}});
  ASSERT_TRUE(Eventually([&] { return n1.view().FindAssignment(s1)->generation == 2; }));
  EXPECT_TRUE(n1.router().RouteShard(StreamShard(0)).is_local());
  EXPECT_EQ(n1.router().RouteShard(StreamShard(0)).generation.value(), 3u);
  // Held unplaced: nobody serves it.
  PutAssignment(
      s0, Assignment{.generation = 4, .replicas = {"n1"}, .state = AssignmentState::kUnavailable});
  ASSERT_TRUE(Eventually([&] { return n1.view().FindAssignment(s0)->generation == 4; }));
  EXPECT_EQ(n1.router().RouteShard(StreamShard(0)).where, broker::Route::Where::kUnavailable);

  auto brokers = n1.router().Brokers();
  ASSERT_EQ(brokers.size(), 2u);
  EXPECT_EQ(brokers[0].node_id, "n1");
  EXPECT_EQ(brokers[1].client_addr, "n2.example:5000");
}

TEST_F(ClusterNodeTest, StopsServingItsShardsWhenTheLeaseCannotBeProven) {
  FakeLeaseClock clock;
  Observer o;
  ClusterNode node(etcd_, Options("n1", o, &clock));
  node.Start();
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
  ShardRef s0{ShardKind::kStream, "t", "ns", "s", 0};
  PutAssignment(s0, Assignment{.generation = 1, .leader = "n1", .replicas = {"n1"}});
  ASSERT_TRUE(Eventually([&] { return node.view().FindAssignment(s0).has_value(); }));
  ASSERT_TRUE(node.router().RouteShard(StreamShard(0)).is_local())
      << node.router().RouteShard(StreamShard(0)).unavailable_reason;

  // etcd stops answering keepalives; the lease clock passes the usable end (anchor + 3L/4).
  etcd_.HoldKeepAlives(true);
  clock.Advance(2 * int64_t{1'000'000'000});
  EXPECT_FALSE(node.LeaseValidNow());
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return !x.ready; }));
  EXPECT_FALSE(node.lease_valid());
  auto route = node.router().RouteShard(StreamShard(0));
  EXPECT_EQ(route.where, broker::Route::Where::kUnavailable);
  EXPECT_NE(route.unavailable_reason.find("lease"), std::string::npos);

  // Answers resume: the anchor moves to a keepalive sent after the clock moved.
  etcd_.HoldKeepAlives(false);
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
  EXPECT_TRUE(node.router().RouteShard(StreamShard(0)).is_local());
}

// Fault seed q1622: a broker whose lease etcd dropped registers again while its assign/ watch
// still lags behind a failover of its shard; it must not serve the shard from the old view.
TEST_F(ClusterNodeTest, ServesNoShardItLostUntilItsViewHasCaughtUpWithItsReRegistration) {
  Observer o;
  std::atomic<ClusterNode*> node_ptr{nullptr};
  std::mutex probe_mu;
  std::optional<broker::Route> route_at_reregistration;
  ClusterNodeOptions opts = Options("n1", o);
  opts.on_registered = [&, inner = opts.on_registered](int64_t lease, int64_t ttl,
                                                       uint64_t incarnation) {
    if (incarnation == 2) {
      std::lock_guard lock(probe_mu);
      route_at_reregistration = node_ptr.load()->router().RouteShard(StreamShard(0));
    }
    inner(lease, ttl, incarnation);
  };
  ClusterNode node(etcd_, std::move(opts));
  node_ptr = &node;
  node.Start();
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
  ShardRef s0{ShardKind::kStream, "t", "ns", "s", 0};
  PutAssignment(s0, Assignment{.generation = 1, .leader = "n1", .replicas = {"n1"}});
  ASSERT_TRUE(Eventually([&] { return node.router().RouteShard(StreamShard(0)).is_local(); }));

  // The watch lags: the failover to n2 and the loss of the lease are written, not yet heard.
  etcd_.HoldWatches(true);
  PutAssignment(s0, Assignment{.generation = 2, .leader = "n2", .replicas = {"n2"}});
  etcd_.ExpireLease(o.lease);
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.registrations == 2; }));
  {
    std::lock_guard lock(probe_mu);
    ASSERT_TRUE(route_at_reregistration.has_value());
    EXPECT_FALSE(route_at_reregistration->is_local())
        << "served generation " << route_at_reregistration->generation.value()
        << " from a view older than its own registration";
  }
  // A fresh read catches the view up although the watch still lags.
  ASSERT_TRUE(o.WaitUntil([](Observer& x) { return x.ready; }));
  auto route = node.router().RouteShard(StreamShard(0));
  ASSERT_TRUE(route.is_remote()) << route.unavailable_reason;
  EXPECT_EQ(route.owner_node_id, "n2");
  EXPECT_EQ(route.generation.value(), 2u);
  EXPECT_TRUE(node.lease_valid());
  etcd_.HoldWatches(false);
}

}  // namespace
}  // namespace felix::cluster
