// The controller against a real etcd: two controllers on two gRPC clients with real node leases
// kept alive by NodeLease. Exactly one wins and places a stream; revoking the winner's lease
// (an in-process controller cannot be SIGKILLed; its lease going is what a killed broker looks
// like to etcd) hands the controller role to the other, which keeps placing and deleting.
#include <gtest/gtest.h>

#include "cluster/controller.h"
#include "cluster/controller_test_util.h"
#include "cluster/node_lease.h"
#include "etcd/grpc_etcd_client.h"
#include "support/etcd_process.h"

namespace felix::cluster {
namespace {

using namespace std::chrono_literals;
using felix::testing::EtcdProcess;
using testing::Deadline;

class ControllerEtcd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start()) << etcd_.error();
    for (auto* client : {&admin_, &client_a_, &client_b_}) {
      etcd::GrpcEtcdOptions options;
      options.call_timeout = 2000ms;
      auto made = etcd::GrpcEtcdClient::Create(etcd_.endpoint(), options);
      ASSERT_TRUE(made) << made.error().ToString();
      *client = std::move(*made);
    }
  }
  // A started node lease on `client` with nodes/<id> attached to it.
  std::unique_ptr<NodeLease> StartNode(etcd::EtcdClient& client, const std::string& id) {
    NodeLeaseOptions options;
    options.lease = 2000ms;
    auto lease = std::make_unique<NodeLease>(client, options, clock_);
    auto started = lease->Start();
    EXPECT_TRUE(started) << started.error().ToString();
    if (!started) return nullptr;
    if (testing::RegisterNode(client, id, lease->id()) == 0) return nullptr;
    return lease;
  }
  std::unique_ptr<Controller> Make(etcd::EtcdClient& client, const std::string& id,
                                   NodeLease& lease) {
    ControllerOptions options{.etcd = client,
                              .keys = testing::TestKeys(),
                              .me = {id, 1},
                              .lease_id = lease.id(),
                              .lease_ttl = std::chrono::milliseconds(lease.ttl_ms()),
                              .clock = clock_,
                              .lease_valid = [&lease] { return lease.ValidNow(); }};
    return std::make_unique<Controller>(std::move(options));
  }

  EtcdProcess etcd_;
  BoottimeClock clock_;
  std::unique_ptr<etcd::GrpcEtcdClient> admin_, client_a_, client_b_;
};

TEST_F(ControllerEtcd, OneOfTwoWinsAndTheOtherTakesOverWhenItsLeaseGoes) {
  auto lease_a = StartNode(*client_a_, "n1");
  auto lease_b = StartNode(*client_b_, "n2");
  ASSERT_TRUE(lease_a && lease_b);
  auto lease_c = admin_->LeaseGrant(60);
  ASSERT_TRUE(lease_c);
  testing::RegisterNode(*admin_, "n3", lease_c->id);
  int64_t rev = testing::CreateStream(*admin_, "s", 6, 2);

  auto a = Make(*client_a_, "n1", *lease_a);
  auto b = Make(*client_b_, "n2", *lease_b);
  a->Start();
  b->Start();
  Controller* winner = testing::WaitForEither(*a, *b, Deadline(20));
  ASSERT_NE(winner, nullptr);
  Controller* other = winner == a.get() ? b.get() : a.get();
  const bool a_won = winner == a.get();
  ASSERT_TRUE(winner->WaitForPass(rev, Deadline(20)));
  EXPECT_FALSE(other->is_controller());
  auto holder = ReadController(*admin_, testing::TestKeys());
  ASSERT_TRUE(holder && holder->has_value());
  EXPECT_EQ((*holder)->record.node_id, a_won ? "n1" : "n2");
  EXPECT_EQ((*holder)->lease, a_won ? lease_a->id() : lease_b->id());

  auto placed = testing::StreamAssignments(*admin_, "s");
  ASSERT_EQ(placed.size(), 6u);
  std::map<std::string, int> led;
  for (const auto& [shard, asg] : placed) {
    EXPECT_EQ(asg.generation, 1u);
    EXPECT_EQ(asg.replicas.size(), 2u);
    ++led[asg.leader];
  }
  EXPECT_EQ(led, (std::map<std::string, int>{{"n1", 2}, {"n2", 2}, {"n3", 2}}));

  // The winner's lease goes: its node key and the controller key vanish at etcd.
  ASSERT_TRUE((a_won ? lease_a : lease_b)->Revoke());
  ASSERT_TRUE(other->WaitForRole(true, Deadline(20)));
  ASSERT_TRUE(winner->WaitForRole(false, Deadline(20)));
  holder = ReadController(*admin_, testing::TestKeys());
  ASSERT_TRUE(holder && holder->has_value());
  EXPECT_EQ((*holder)->record.node_id, a_won ? "n2" : "n1");

  const std::string gone = a_won ? "n1" : "n2";
  int64_t rev2 = testing::CreateStream(*admin_, "s2", 4, 1);
  ASSERT_TRUE(other->WaitForPass(rev2, Deadline(20)));
  auto placed2 = testing::StreamAssignments(*admin_, "s2");
  ASSERT_EQ(placed2.size(), 4u);
  for (const auto& [shard, asg] : placed2) EXPECT_NE(asg.leader, gone);
  // The old stream keeps every leader (replacing the gone one is failover's job).
  auto after = testing::StreamAssignments(*admin_, "s");
  for (const auto& [shard, asg] : after) EXPECT_EQ(asg.leader, placed[shard].leader);

  // A stream leaving the catalog loses its assignments.
  auto deleted = admin_->Delete(testing::TestKeys().CatalogStream("t", "ns", "s"));
  ASSERT_TRUE(deleted && deleted->deleted == 1);
  ASSERT_TRUE(other->WaitForPass(deleted->revision, Deadline(20)));
  EXPECT_TRUE(testing::StreamAssignments(*admin_, "s").empty());
  EXPECT_EQ(testing::StreamAssignments(*admin_, "s2").size(), 4u);

  a->Stop();
  b->Stop();
  holder = ReadController(*admin_, testing::TestKeys());
  ASSERT_TRUE(holder);
  EXPECT_FALSE(holder->has_value()) << "the last controller resigned";
}

}  // namespace
}  // namespace felix::cluster
