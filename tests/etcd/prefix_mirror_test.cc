// PrefixMirror on FakeEtcd: snapshot then events, re-snapshot after a compaction, retry of a
// failed first read, Resync catching up past a lagging watch.
#include <gtest/gtest.h>

#include "etcd/event_log.h"
#include "etcd/fake_etcd.h"
#include "etcd/prefix_mirror.h"

namespace felix::etcd {
namespace {

using felix::etcd::testing::MirrorRecorder;
using namespace std::chrono_literals;

TEST(PrefixMirror, RetriesTheFirstReadUntilEtcdAnswers) {
  FakeEtcd fake;
  ASSERT_TRUE(fake.Put("/x/a", "1"));
  fake.SetAvailable(false);
  std::atomic<int> errors{0};
  testing::EventLog log;
  MirrorRecorder rec;
  MirrorCallbacks cb = rec.Callbacks();
  cb.on_error = [&](const EtcdError&) {
    ++errors;
    log.Touch();
  };
  PrefixMirror mirror(fake, "/x/", cb, Backoff(1ms, 5ms));
  mirror.Start();
  // Proves the fault took effect before healing it.
  ASSERT_TRUE(log.WaitFor([&](auto&) { return errors.load() > 0; }));
  EXPECT_EQ(rec.Snapshots(), 0);
  fake.SetAvailable(true);
  ASSERT_TRUE(rec.WaitForSnapshots(1));
  EXPECT_EQ(rec.State(), (std::map<std::string, std::string>{{"/x/a", "1"}}));
}

TEST(PrefixMirror, StopsCleanlyWithEventsInFlight) {
  FakeEtcd fake;
  MirrorRecorder rec;
  {
    PrefixMirror mirror(fake, "/y/", rec.Callbacks());
    mirror.Start();
    ASSERT_TRUE(rec.WaitForSnapshots(1));
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(fake.Put("/y/" + std::to_string(i), "v"));
  }
  // Destroyed with a possibly non-empty queue: no callback after destruction, no crash.
  EXPECT_TRUE(fake.Put("/y/after", "v"));
  EXPECT_TRUE(rec.OrderOk());
}

TEST(PrefixMirror, ResyncCatchesUpWithWritesItsWatchHasNotDelivered) {
  FakeEtcd fake;
  MirrorRecorder rec;
  PrefixMirror mirror(fake, "/z/", rec.Callbacks());
  mirror.Start();
  ASSERT_TRUE(rec.WaitForSnapshots(1));
  fake.HoldWatches(true);  // the watch lags behind the store
  ASSERT_TRUE(fake.Put("/z/a", "1"));
  auto written = fake.Put("/z/b", "2");
  ASSERT_TRUE(written);
  EXPECT_LT(rec.Revision(), written->revision);  // the fault took effect
  mirror.Resync();
  ASSERT_TRUE(rec.WaitForSnapshots(2));
  EXPECT_GE(rec.Revision(), written->revision);
  EXPECT_EQ(rec.State(), (std::map<std::string, std::string>{{"/z/a", "1"}, {"/z/b", "2"}}));
  // The new watch carries on from the snapshot: later writes arrive once, in order.
  fake.HoldWatches(false);
  auto later = fake.Put("/z/c", "3");
  ASSERT_TRUE(later);
  ASSERT_TRUE(rec.WaitForRevision(later->revision));
  EXPECT_EQ(rec.State().count("/z/c"), 1u);
  EXPECT_EQ(rec.Snapshots(), 2);
  EXPECT_TRUE(rec.OrderOk());
}

}  // namespace
}  // namespace felix::etcd
