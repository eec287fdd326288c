// The controller transactions' contract, shared by the FakeEtcd unit test and the real-etcd
// end-to-end test (the same assertions must hold on both).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "cluster/assignment_txn.h"

namespace felix::cluster::testing {

inline ClusterKeys TestKeys() {
  auto k = ClusterKeys::Create("t");
  if (!k) throw std::runtime_error(k.error().ToString());
  return *k;
}

inline Assignment Led(const std::string& leader, std::vector<std::string> replicas) {
  return Assignment{0, leader, std::move(replicas), AssignmentState::kActive, std::nullopt};
}

// Several planners read the same assignment and write different plans at once: exactly one
// write lands, the generation rises by exactly one, every loser gets the winner's value.
inline void RacingPlannersExactlyOneWins(etcd::EtcdClient& etcd, int planners) {
  auto keys = TestKeys();
  auto lease = etcd.LeaseGrant(30);
  ASSERT_TRUE(lease);
  auto won = Campaign(etcd, keys, {"n1", 1}, lease->id);
  ASSERT_TRUE(won) << won.error().ToString();
  ASSERT_TRUE(won->won);
  const std::string key = keys.Assign({ShardKind::kStream, "t", "ns", "s", 0});

  for (int round = 0; round < 3; ++round) {
    auto read = ReadAssignment(etcd, key);
    ASSERT_TRUE(read) << read.error().ToString();
    uint64_t before = read->value ? read->value->generation : 0;
    EXPECT_EQ(before, static_cast<uint64_t>(round));
    std::vector<Result<WriteOutcome>> outcomes(static_cast<size_t>(planners));
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < planners; ++p) {
      threads.emplace_back([&, p] {
        ++ready;
        while (ready.load() < planners) std::this_thread::yield();  // start together
        std::string leader = "n" + std::to_string(p + 1);
        outcomes[static_cast<size_t>(p)] =
            WriteAssignment(etcd, keys, won->term, key, *read, Led(leader, {leader}));
      });
    }
    for (auto& t : threads) t.join();
    int written = 0;
    std::string winner;
    for (auto& o : outcomes) {
      ASSERT_TRUE(o) << o.error().ToString();
      if (o->kind == WriteOutcome::Kind::kWritten) {
        ++written;
        winner = o->current.value->leader;
      }
    }
    ASSERT_EQ(written, 1) << "round " << round;
    auto after = ReadAssignment(etcd, key);
    ASSERT_TRUE(after);
    ASSERT_TRUE(after->value.has_value());
    EXPECT_EQ(after->value->generation, before + 1);
    EXPECT_EQ(after->value->leader, winner);
    for (auto& o : outcomes) {
      if (o->kind == WriteOutcome::Kind::kWritten) {
        EXPECT_EQ(o->current.mod_revision, after->mod_revision);
        continue;
      }
      EXPECT_EQ(o->kind, WriteOutcome::Kind::kLostRace);
      ASSERT_TRUE(o->current.value.has_value());
      EXPECT_EQ(*o->current.value, *after->value) << "a loser must see the winner's value";
      EXPECT_EQ(o->current.mod_revision, after->mod_revision);
    }
  }
}

// A failover lands only while the deposed leader's nodes/ key is absent: a leader that
// registered again in between keeps its shard (kNodeReturned, nothing written); once its key is
// gone the same plan lands. The check rides on the assignment compare (a lost race wins).
inline void FailoverLandsOnlyWhileTheDeposedLeaderIsAbsent(etcd::EtcdClient& etcd) {
  auto keys = TestKeys();
  const std::string key = keys.Assign({ShardKind::kStream, "t", "ns", "f", 0});
  auto lease = etcd.LeaseGrant(30);
  ASSERT_TRUE(lease);
  auto won = Campaign(etcd, keys, {"c", 1}, lease->id);
  ASSERT_TRUE(won && won->won);
  auto first = WriteAssignment(etcd, keys, won->term, key, {}, Led("a", {"a", "b"}));
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind, WriteOutcome::Kind::kWritten);

  ASSERT_TRUE(etcd.Put(keys.Node("a"), "registered again"));
  auto held = WriteAssignment(etcd, keys, won->term, key, first->current, Led("b", {"a", "b"}),
                              keys.Node("a"));
  ASSERT_TRUE(held) << held.error().ToString();
  EXPECT_EQ(held->kind, WriteOutcome::Kind::kNodeReturned);
  auto unchanged = ReadAssignment(etcd, key);
  ASSERT_TRUE(unchanged && unchanged->value);
  EXPECT_EQ(unchanged->value->leader, "a");
  EXPECT_EQ(unchanged->value->generation, 1u);

  // A concurrent change of the assignment is still reported as a lost race.
  auto other = WriteAssignment(etcd, keys, won->term, key, first->current, Led("a", {"a"}));
  ASSERT_TRUE(other && other->kind == WriteOutcome::Kind::kWritten);
  auto raced = WriteAssignment(etcd, keys, won->term, key, first->current, Led("b", {"a", "b"}),
                               keys.Node("a"));
  ASSERT_TRUE(raced);
  EXPECT_EQ(raced->kind, WriteOutcome::Kind::kLostRace);

  ASSERT_TRUE(etcd.Delete(keys.Node("a")));
  auto landed = WriteAssignment(etcd, keys, won->term, key, other->current, Led("b", {"a", "b"}),
                                keys.Node("a"));
  ASSERT_TRUE(landed);
  ASSERT_EQ(landed->kind, WriteOutcome::Kind::kWritten);
  EXPECT_EQ(landed->current.value->generation, 3u);
  EXPECT_EQ(landed->current.value->leader, "b");
}

// A controller whose key is gone (lease lapsed / revoked) or was recreated by someone else
// cannot write; the new controller can, from the same read.
inline void DeposedControllerCannotWrite(etcd::EtcdClient& etcd) {
  auto keys = TestKeys();
  const std::string key = keys.Assign({ShardKind::kCache, "t", "ns", "c", 1});
  auto lease_a = etcd.LeaseGrant(30);
  ASSERT_TRUE(lease_a);
  auto a = Campaign(etcd, keys, {"a", 1}, lease_a->id);
  ASSERT_TRUE(a && a->won);
  auto lease_b = etcd.LeaseGrant(30);
  ASSERT_TRUE(lease_b);
  auto b_lost = Campaign(etcd, keys, {"b", 1}, lease_b->id);
  ASSERT_TRUE(b_lost);
  EXPECT_FALSE(b_lost->won);
  EXPECT_EQ(b_lost->term.record, (ControllerRecord{"a", 1}));
  EXPECT_EQ(b_lost->term.create_revision, a->term.create_revision);

  auto first = WriteAssignment(etcd, keys, a->term, key, {}, Led("a", {"a", "b"}));
  ASSERT_TRUE(first);
  ASSERT_EQ(first->kind, WriteOutcome::Kind::kWritten);
  EXPECT_EQ(first->current.value->generation, 1u);

  ASSERT_TRUE(etcd.LeaseRevoke(lease_a->id));  // a's controller key goes with its lease
  auto gone = WriteAssignment(etcd, keys, a->term, key, first->current, Led("b", {"a", "b"}));
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->kind, WriteOutcome::Kind::kDeposed);

  auto b = Campaign(etcd, keys, {"b", 1}, lease_b->id);
  ASSERT_TRUE(b && b->won);
  auto stale = WriteAssignment(etcd, keys, a->term, key, first->current, Led("b", {"a", "b"}));
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->kind, WriteOutcome::Kind::kDeposed) << "a recreated key is a new term";
  EXPECT_EQ(stale->current.value->generation, 1u);

  auto current = ReadController(etcd, keys);
  ASSERT_TRUE(current && current->has_value());
  EXPECT_EQ((*current)->record.node_id, "b");
  auto by_b = WriteAssignment(etcd, keys, b->term, key, first->current, Led("b", {"a", "b"}));
  ASSERT_TRUE(by_b);
  EXPECT_EQ(by_b->kind, WriteOutcome::Kind::kWritten);
  EXPECT_EQ(by_b->current.value->generation, 2u);
  auto resigned = Resign(etcd, keys, a->term);
  ASSERT_TRUE(resigned);
  EXPECT_FALSE(*resigned) << "a cannot delete b's key";
  auto resigned_b = Resign(etcd, keys, b->term);
  ASSERT_TRUE(resigned_b);
  EXPECT_TRUE(*resigned_b);
}

inline void IncarnationsRiseByOne(etcd::EtcdClient& etcd) {
  auto keys = TestKeys();
  for (uint64_t want = 1; want <= 3; ++want) {
    auto inc = NextIncarnation(etcd, keys, "n1");
    ASSERT_TRUE(inc) << inc.error().ToString();
    EXPECT_EQ(*inc, want);
  }
  // Concurrent increments never hand out the same value.
  std::vector<uint64_t> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      auto inc = NextIncarnation(etcd, keys, "n2");
      got[i] = inc ? *inc : 0;
    });
  }
  for (auto& t : threads) t.join();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<uint64_t>{1, 2, 3, 4}));
}

}  // namespace felix::cluster::testing
