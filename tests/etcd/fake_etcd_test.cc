// FakeEtcd's test controls (the shared contract with real etcd is in etcd_e2e_test.cc).
#include <gtest/gtest.h>

#include "etcd/event_log.h"
#include "etcd/fake_etcd.h"

namespace felix::etcd {
namespace {

using felix::etcd::testing::EventLog;

TEST(FakeEtcd, ExpireLeaseDeletesItsKeysInOneRevisionAndNotifiesWatchers) {
  FakeEtcd fake;
  auto lease = fake.LeaseGrant(2);
  ASSERT_TRUE(lease);
  ASSERT_TRUE(fake.Put("/n/a", "1", lease->id));
  ASSERT_TRUE(fake.Put("/n/b", "2", lease->id));
  auto keep = fake.Put("/n/c", "3");
  ASSERT_TRUE(keep);
  EventLog log;
  auto watch =
      fake.Watch({"/n/", PrefixEnd("/n/"), keep->revision + 1, false, false}, log.Callbacks());
  ASSERT_TRUE(watch);
  fake.ExpireLease(lease->id);
  ASSERT_TRUE(log.WaitForCount(2));
  auto events = log.events();
  EXPECT_EQ(events[0].type, Event::Type::kDelete);
  EXPECT_EQ(events[0].kv.mod_revision, events[1].kv.mod_revision);
  EXPECT_EQ(fake.revision(), keep->revision + 1);
  auto left = fake.GetPrefix("/n/");
  ASSERT_TRUE(left);
  ASSERT_EQ(left->kvs.size(), 1u);
  EXPECT_EQ(left->kvs[0].key, "/n/c");
}

TEST(FakeEtcd, AWatchHeldFromARevisionCatchesUpAsFarAsReleased) {
  FakeEtcd fake;
  EventLog log;
  auto watch = fake.Watch({"/k/", PrefixEnd("/k/"), 0, false, false}, log.Callbacks());
  ASSERT_TRUE(watch);
  const int64_t first = fake.revision() + 1;
  fake.HoldWatchesFrom(first + 1);  // the first write is heard, the rest lag
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(fake.Put("/k/" + std::to_string(i), "v"));
  auto revisions = [&log] {
    std::vector<int64_t> out;
    for (const auto& e : log.events()) out.push_back(e.kv.mod_revision);
    return out;
  };
  // Delivery is synchronous: what was released has arrived when the call returns.
  EXPECT_EQ(revisions(), (std::vector<int64_t>{first}));
  auto late = fake.Watch({"/k/", PrefixEnd("/k/"), first, false, false}, log.Callbacks());
  ASSERT_TRUE(late);  // a new watch replays only what is not held
  EXPECT_EQ(revisions(), (std::vector<int64_t>{first, first}));
  late->reset();

  fake.ReleaseWatchesThrough(first + 2);
  EXPECT_EQ(revisions(), (std::vector<int64_t>{first, first, first + 1, first + 2}));
  ASSERT_TRUE(fake.Put("/k/late", "v"));  // still held: it comes after the release point
  EXPECT_EQ(revisions().size(), 4u);
  fake.HoldWatches(false);
  EXPECT_EQ(revisions(),
            (std::vector<int64_t>{first, first, first + 1, first + 2, first + 3, first + 4}));
}

TEST(FakeEtcd, HeldKeepAlivesAreAnsweredInOrderOnRelease) {
  FakeEtcd fake;
  auto lease = fake.LeaseGrant(3);
  ASSERT_TRUE(lease);
  std::vector<int64_t> ttls;
  KeepAliveCallbacks cb;
  cb.on_answer = [&](int64_t, int64_t ttl) { ttls.push_back(ttl); };
  auto stream = fake.OpenKeepAlive(cb);
  ASSERT_TRUE(stream);
  fake.HoldKeepAlives(true);
  ASSERT_TRUE((*stream)->Send(lease->id));
  ASSERT_TRUE((*stream)->Send(lease->id));
  EXPECT_TRUE(ttls.empty());
  fake.HoldKeepAlives(false);
  EXPECT_EQ(ttls, (std::vector<int64_t>{3, 3}));
  fake.ExpireLease(lease->id);
  ASSERT_TRUE((*stream)->Send(lease->id));
  EXPECT_EQ(ttls.back(), 0);
}

TEST(FakeEtcd, UnavailableFailsEveryCall) {
  FakeEtcd fake;
  fake.SetAvailable(false);
  EXPECT_EQ(fake.Put("/a", "b").error().code, EtcdErrc::kUnavailable);
  EXPECT_EQ(fake.GetPrefix("/").error().code, EtcdErrc::kUnavailable);
  EXPECT_EQ(fake.LeaseGrant(1).error().code, EtcdErrc::kUnavailable);
  EXPECT_EQ(fake.Transact(Txn{}).error().code, EtcdErrc::kUnavailable);
  // A refused watch returns (it once deadlocked destroying its watcher under the fake's locks).
  WatchCallbacks cb;
  cb.on_events = [](const std::vector<Event>&) {};
  EXPECT_EQ(fake.Watch({"/", PrefixEnd("/"), 0, false, false}, cb).error().code,
            EtcdErrc::kUnavailable);
  fake.SetAvailable(true);
  EXPECT_TRUE(fake.Put("/a", "b"));
}

TEST(FakeEtcd, DeleteOfNothingDoesNotRaiseTheRevision) {
  FakeEtcd fake;
  auto put = fake.Put("/a", "b");
  ASSERT_TRUE(put);
  auto del = fake.Delete("/nothing");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->deleted, 0);
  EXPECT_EQ(del->revision, put->revision);
}

}  // namespace
}  // namespace felix::etcd
