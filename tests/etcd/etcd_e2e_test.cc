// The EtcdClient contract, run against a real etcd (GrpcEtcdClient + EtcdProcess) and against
// FakeEtcd, so the fake keeps etcd's semantics; then real-etcd-only behaviour: lease expiry,
// keepalive, watch resume across an etcd SIGKILL + restart, compaction → re-snapshot, deadlines
// on a SIGSTOPped etcd, the version check and endpoint failover.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "etcd/etcd_version.h"
#include "etcd/event_log.h"
#include "etcd/fake_etcd.h"
#include "etcd/grpc_etcd_client.h"
#include "etcd/prefix_mirror.h"
#include "support/etcd_process.h"

namespace felix::etcd {
namespace {

using felix::etcd::testing::EventLog;
using felix::etcd::testing::MirrorRecorder;
using felix::testing::EtcdProcess;
using namespace std::chrono_literals;

std::unique_ptr<GrpcEtcdClient> Connect(const std::string& endpoints,
                                        std::chrono::milliseconds timeout = 2000ms) {
  GrpcEtcdOptions options;
  options.call_timeout = timeout;
  auto client = GrpcEtcdClient::Create(endpoints, options);
  if (!client) throw std::runtime_error(client.error().ToString());
  return std::move(*client);
}

// Retries `op` until it succeeds or the deadline passes (for the first calls after an etcd
// restart, while the channel reconnects).
template <typename Op>
auto Eventually(Op op, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto r = op();
  while (!r && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);  // pacing between retries, not synchronisation
    r = op();
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// The contract on both implementations.

class EtcdContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "fake") {
      client_ = std::make_unique<FakeEtcd>();
    } else {
      etcd_ = std::make_unique<EtcdProcess>();
      ASSERT_TRUE(etcd_->Start()) << etcd_->error();
      client_ = Connect(etcd_->endpoint());
    }
  }
  EtcdClient& c() { return *client_; }

  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_P(EtcdContract, PutGetRangeDelete) {
  auto p1 = c().Put("/t/a", "1");
  ASSERT_TRUE(p1) << p1.error().ToString();
  auto p2 = c().Put("/t/b", "2");
  ASSERT_TRUE(p2);
  EXPECT_EQ(p2->revision, p1->revision + 1);
  ASSERT_TRUE(c().Put("/u/c", "3"));
  ASSERT_TRUE(c().Put("/t/a", "1b"));

  auto got = c().Get("/t/a");
  ASSERT_TRUE(got);
  ASSERT_TRUE(got->first.has_value());
  EXPECT_EQ(got->first->value, "1b");
  EXPECT_EQ(got->first->create_revision, p1->revision);
  EXPECT_EQ(got->first->version, 2);
  EXPECT_EQ(got->second, p1->revision + 3);

  auto range = c().GetPrefix("/t/");
  ASSERT_TRUE(range);
  ASSERT_EQ(range->kvs.size(), 2u);
  EXPECT_EQ(range->kvs[0].key, "/t/a");
  EXPECT_EQ(range->kvs[1].key, "/t/b");
  EXPECT_EQ(range->revision, got->second);

  auto del = c().Delete("/t/", PrefixEnd("/t/"));
  ASSERT_TRUE(del);
  EXPECT_EQ(del->deleted, 2);
  auto after = c().GetPrefix("/t/");
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->kvs.empty());
  auto missing = c().Get("/t/a");
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->first.has_value());
}

TEST_P(EtcdContract, TxnSucceedsOrRunsElseBranch) {
  // Create-if-absent wins once.
  Txn create;
  create.compares.push_back(Compare::Absent("/k"));
  create.then_ops.push_back(TxnOp::Put("/k", "v1"));
  create.else_ops.push_back(TxnOp::Get("/k"));
  auto first = c().Transact(create);
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_TRUE(first->succeeded);
  auto second = c().Transact(create);
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->succeeded);
  ASSERT_EQ(second->results.size(), 1u);
  ASSERT_EQ(second->results[0].kvs.size(), 1u);
  EXPECT_EQ(second->results[0].kvs[0].value, "v1");
  EXPECT_EQ(second->results[0].kvs[0].mod_revision, first->revision);
  EXPECT_EQ(second->revision, first->revision);  // a failed compare writes nothing

  // MOD: only the writer that read the newest mod_revision wins.
  Txn bump;
  bump.compares.push_back(Compare::ModRevisionIs("/k", first->revision));
  bump.then_ops.push_back(TxnOp::Put("/k", "v2"));
  bump.else_ops.push_back(TxnOp::Get("/k"));
  auto won = c().Transact(bump);
  ASSERT_TRUE(won);
  EXPECT_TRUE(won->succeeded);
  EXPECT_EQ(won->revision, first->revision + 1);
  auto lost = c().Transact(bump);
  ASSERT_TRUE(lost);
  EXPECT_FALSE(lost->succeeded);
  EXPECT_EQ(lost->results[0].kvs[0].value, "v2");

  // VALUE and VERSION compares, several ops in one revision.
  Txn multi;
  multi.compares.push_back(Compare::ValueIs("/k", "v2"));
  multi.compares.push_back({"/k", CompareTarget::kVersion, CompareOp::kEqual, 2, {}});
  multi.then_ops.push_back(TxnOp::Put("/m/1", "a"));
  multi.then_ops.push_back(TxnOp::Put("/m/2", "b"));
  multi.then_ops.push_back(TxnOp::Delete("/k"));
  auto m = c().Transact(multi);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->succeeded);
  ASSERT_EQ(m->results.size(), 3u);
  EXPECT_EQ(m->results[2].deleted, 1);
  auto kvs = c().GetPrefix("/m/");
  ASSERT_TRUE(kvs);
  ASSERT_EQ(kvs->kvs.size(), 2u);
  EXPECT_EQ(kvs->kvs[0].mod_revision, kvs->kvs[1].mod_revision);

  // A VALUE compare on an absent key is false; GREATER on CREATE works on present keys.
  Txn absent;
  absent.compares.push_back(Compare::ValueIs("/k", "v2"));
  auto a = c().Transact(absent);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->succeeded);
  Txn greater;
  greater.compares.push_back({"/m/1", CompareTarget::kCreate, CompareOp::kGreater, 0, {}});
  auto g = c().Transact(greater);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->succeeded);
}

TEST_P(EtcdContract, LeaseKeysAndRevoke) {
  auto lease = c().LeaseGrant(30);
  ASSERT_TRUE(lease) << lease.error().ToString();
  EXPECT_GE(lease->ttl_seconds, 30);
  ASSERT_TRUE(c().Put("/l/a", "x", lease->id));
  auto ttl = c().LeaseTimeToLive(lease->id);
  ASSERT_TRUE(ttl);
  EXPECT_GT(ttl->ttl_seconds, 0);
  EXPECT_EQ(ttl->keys, std::vector<std::string>{"/l/a"});
  auto kv = c().Get("/l/a");
  ASSERT_TRUE(kv && kv->first);
  EXPECT_EQ(kv->first->lease, lease->id);

  ASSERT_TRUE(c().LeaseRevoke(lease->id));
  auto gone = c().Get("/l/a");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->first.has_value());
  auto after = c().LeaseTimeToLive(lease->id);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->ttl_seconds, -1);
  auto again = c().LeaseRevoke(lease->id);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, EtcdErrc::kLeaseNotFound);
  auto put = c().Put("/l/b", "x", lease->id);
  ASSERT_FALSE(put);
  EXPECT_EQ(put.error().code, EtcdErrc::kLeaseNotFound);
}

TEST_P(EtcdContract, KeepAliveAnswersWithTtl) {
  auto lease = c().LeaseGrant(30);
  ASSERT_TRUE(lease);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int64_t, int64_t>> answers;
  KeepAliveCallbacks cb;
  cb.on_answer = [&](int64_t id, int64_t ttl) {
    std::lock_guard lock(mu);
    answers.emplace_back(id, ttl);
    cv.notify_all();
  };
  auto stream = c().OpenKeepAlive(cb);
  ASSERT_TRUE(stream);
  ASSERT_TRUE((*stream)->Send(lease->id));
  ASSERT_TRUE((*stream)->Send(lease->id + 12345));  // unknown: answered with TTL 0
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return answers.size() >= 2; }));
  EXPECT_EQ(answers[0].first, lease->id);
  EXPECT_EQ(answers[0].second, lease->ttl_seconds);
  EXPECT_LE(answers[1].second, 0);
}

TEST_P(EtcdContract, WatchDeliversEventsInRevisionOrder) {
  auto start = c().Put("/w/start", "0");
  ASSERT_TRUE(start);
  EventLog log;
  WatchOptions options{"/w/", PrefixEnd("/w/"), start->revision + 1, true, false};
  auto watch = c().Watch(options, log.Callbacks());
  ASSERT_TRUE(watch);
  ASSERT_TRUE(c().Put("/w/a", "1"));
  ASSERT_TRUE(c().Put("/other", "x"));  // outside the prefix
  ASSERT_TRUE(c().Put("/w/a", "2"));
  Txn txn;
  txn.then_ops = {TxnOp::Put("/w/b", "3"), TxnOp::Put("/w/c", "4")};
  ASSERT_TRUE(c().Transact(txn));
  ASSERT_TRUE(c().Delete("/w/a"));
  ASSERT_TRUE(log.WaitForCount(5));
  auto events = log.events();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[1].kv.value, "2");
  ASSERT_TRUE(events[1].prev_kv.has_value());
  EXPECT_EQ(events[1].prev_kv->value, "1");
  EXPECT_EQ(events[2].kv.key, "/w/b");
  EXPECT_EQ(events[3].kv.key, "/w/c");
  EXPECT_EQ(events[2].kv.mod_revision, events[3].kv.mod_revision);
  EXPECT_EQ(events[4].type, Event::Type::kDelete);
  EXPECT_EQ(events[4].kv.key, "/w/a");
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GE(events[i].kv.mod_revision, events[i - 1].kv.mod_revision);
  }
  EXPECT_EQ((*watch)->next_revision(), events[4].kv.mod_revision + 1);
}

TEST_P(EtcdContract, WatchFromACompactedRevisionReportsIt) {
  auto first = c().Put("/c/a", "1");
  ASSERT_TRUE(first);
  ASSERT_TRUE(c().Put("/c/a", "2"));
  auto last = c().Put("/c/a", "3");
  ASSERT_TRUE(last);
  ASSERT_TRUE(c().Compact(last->revision));
  EventLog log;
  auto watch = c().Watch({"/c/", PrefixEnd("/c/"), first->revision, false, false}, log.Callbacks());
  ASSERT_TRUE(watch);
  ASSERT_TRUE(log.WaitForCompacted());
  EXPECT_EQ(log.compacted().front(), last->revision);
  auto old = c().Range("/c/a", {{}, first->revision, 0});
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error().code, EtcdErrc::kCompacted);
}

TEST_P(EtcdContract, MirrorSnapshotsThenFollows) {
  ASSERT_TRUE(c().Put("/p/a", "1"));
  MirrorRecorder rec;
  PrefixMirror mirror(c(), "/p/", rec.Callbacks());
  mirror.Start();
  ASSERT_TRUE(rec.WaitForSnapshots(1));
  EXPECT_EQ(rec.State(), (std::map<std::string, std::string>{{"/p/a", "1"}}));
  ASSERT_TRUE(c().Put("/p/b", "2"));
  ASSERT_TRUE(c().Delete("/p/a"));
  ASSERT_TRUE(c().Put("/q/x", "outside"));
  auto last = c().Put("/p/c", "3");
  ASSERT_TRUE(last);
  ASSERT_TRUE(rec.WaitForRevision(last->revision));
  EXPECT_EQ(rec.State(), (std::map<std::string, std::string>{{"/p/b", "2"}, {"/p/c", "3"}}));
  EXPECT_TRUE(rec.OrderOk());
  EXPECT_EQ(rec.Snapshots(), 1);
}

INSTANTIATE_TEST_SUITE_P(Both, EtcdContract, ::testing::Values("fake", "real"),
                         [](const auto& info) { return info.param; });

// ---------------------------------------------------------------------------------------------
// Real etcd only.

class RealEtcd : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.Start()) << etcd_.error(); }
  EtcdProcess etcd_;
};

TEST_F(RealEtcd, VersionCheckAcceptsTheInstalledEtcd) {
  auto client = Connect(etcd_.endpoint());
  auto status = client->Status();
  ASSERT_TRUE(status) << status.error().ToString();
  EXPECT_FALSE(status->version.empty());
  auto v = VerifyServerVersion(*client);
  ASSERT_TRUE(v) << v.error().ToString();
  EXPECT_GE(*v, kMinimumEtcdVersion);
}

TEST_F(RealEtcd, LeaseExpiryDeletesTheKey) {
  auto client = Connect(etcd_.endpoint());
  // etcd grants at least its minimum TTL (2 s with default election settings): use what it says.
  auto lease = client->LeaseGrant(1);
  ASSERT_TRUE(lease);
  EXPECT_GE(lease->ttl_seconds, 1);
  auto put = client->Put("/e/k", "v", lease->id);
  ASSERT_TRUE(put);
  EventLog log;
  auto watch = client->Watch({"/e/k", {}, put->revision + 1, false, false}, log.Callbacks());
  ASSERT_TRUE(watch);
  ASSERT_TRUE(log.WaitFor(
      [](const std::vector<Event>& e) {
        return !e.empty() && e.back().type == Event::Type::kDelete;
      },
      std::chrono::seconds(lease->ttl_seconds + 5)));
  auto got = client->Get("/e/k");
  ASSERT_TRUE(got);
  EXPECT_FALSE(got->first.has_value());
}

TEST_F(RealEtcd, KeepAliveKeepsTheLeasePastItsTtl) {
  auto client = Connect(etcd_.endpoint());
  auto lease = client->LeaseGrant(2);
  ASSERT_TRUE(lease);
  ASSERT_TRUE(client->Put("/ka/k", "v", lease->id));
  std::mutex mu;
  std::condition_variable cv;
  int answers = 0;
  KeepAliveCallbacks cb;
  cb.on_answer = [&](int64_t, int64_t ttl) {
    std::lock_guard lock(mu);
    if (ttl > 0) ++answers;
    cv.notify_all();
  };
  auto stream = client->OpenKeepAlive(cb);
  ASSERT_TRUE(stream);
  // Keep it alive (one keepalive per quarter TTL, each answered) for 1.5 TTLs.
  auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(lease->ttl_seconds * 1500);
  int sent = 0;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE((*stream)->Send(lease->id));
    ++sent;
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 2s, [&] { return answers == sent; }));
    cv.wait_for(lock, std::chrono::milliseconds(lease->ttl_seconds * 250),
                [] { return false; });  // keepalive cadence
  }
  auto got = client->Get("/ka/k");
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->first.has_value()) << "the key expired although its lease was kept alive";
  auto ttl = client->LeaseTimeToLive(lease->id);
  ASSERT_TRUE(ttl);
  EXPECT_GT(ttl->ttl_seconds, 0);
}

TEST_F(RealEtcd, WatchResumesAfterEtcdKillAndRestartWithoutLosingEvents) {
  auto client = Connect(etcd_.endpoint(), 1000ms);
  auto start = client->Put("/r/0", "0");
  ASSERT_TRUE(start);
  EventLog log;
  std::atomic<int> broken{0};
  WatchCallbacks cb = log.Callbacks();
  cb.on_broken = [&](const EtcdError&) {
    ++broken;
    log.Touch();
  };
  auto watch = client->Watch({"/r/", PrefixEnd("/r/"), start->revision, false, false}, cb);
  ASSERT_TRUE(watch);
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(client->Put("/r/" + std::to_string(i), "v"));
  ASSERT_TRUE(log.WaitForCount(6));

  etcd_.Kill();
  ASSERT_TRUE(log.WaitFor([&](auto&) { return broken.load() > 0; }, 5s));
  ASSERT_TRUE(etcd_.Restart()) << etcd_.error();
  // Written right after the restart, possibly before the watch reconnected: resumed from
  // last seen revision + 1, the watch must still deliver them.
  for (int i = 6; i <= 10; ++i) {
    std::string key = "/r/" + std::to_string(i);
    auto put = Eventually([&] { return client->Put(key, "v"); });
    ASSERT_TRUE(put) << put.error().ToString();
  }
  ASSERT_TRUE(log.WaitForCount(11, 15s)) << log.events().size();
  auto events = log.events();
  std::set<std::string> keys;
  for (size_t i = 0; i < events.size(); ++i) {
    keys.insert(events[i].kv.key);
    if (i > 0) {
      EXPECT_GT(events[i].kv.mod_revision, events[i - 1].kv.mod_revision);
    }
  }
  EXPECT_EQ(events.size(), 11u) << "an event was delivered twice";
  EXPECT_EQ(keys.size(), 11u);
}

TEST_F(RealEtcd, MirrorResnapshotsAfterCompactionWhileDisconnected) {
  auto client = Connect(etcd_.endpoint(), 1000ms);
  ASSERT_TRUE(client->Put("/m/a", "1"));
  MirrorRecorder rec;
  PrefixMirror mirror(*client, "/m/", rec.Callbacks(), Backoff(20ms, 200ms));
  mirror.Start();
  ASSERT_TRUE(rec.WaitForSnapshots(1));

  // Change etcd where the mirror cannot see it, and compact the history it would need.
  etcd_.Kill();
  ASSERT_TRUE(etcd_.StartOnOtherPort()) << etcd_.error();
  {
    auto side = Connect(etcd_.other_endpoint());
    ASSERT_TRUE(side->Put("/m/b", "2"));
    ASSERT_TRUE(side->Delete("/m/a"));
    auto last = side->Put("/m/c", "3");
    ASSERT_TRUE(last);
    ASSERT_TRUE(side->Compact(last->revision));
  }
  etcd_.Kill();
  ASSERT_TRUE(etcd_.Restart()) << etcd_.error();

  ASSERT_TRUE(rec.WaitForSnapshots(2, 15s));
  EXPECT_EQ(rec.State(), (std::map<std::string, std::string>{{"/m/b", "2"}, {"/m/c", "3"}}));
  // And it follows again after the re-snapshot.
  auto more = Eventually([&] { return client->Put("/m/d", "4"); });
  ASSERT_TRUE(more);
  ASSERT_TRUE(rec.WaitForRevision(more->revision));
  EXPECT_EQ(rec.State().at("/m/d"), "4");
  EXPECT_EQ(rec.Snapshots(), 2);
}

TEST_F(RealEtcd, DeadlineOnAStoppedEtcdIsATypedTimeout) {
  auto client = Connect(etcd_.endpoint(), 300ms);
  ASSERT_TRUE(client->Put("/s/a", "1"));
  etcd_.Pause();
  auto put = client->Put("/s/b", "2");
  auto range = client->GetPrefix("/s/");
  auto lease = client->LeaseGrant(5);
  etcd_.Resume();
  ASSERT_FALSE(put);
  EXPECT_EQ(put.error().code, EtcdErrc::kTimeout) << put.error().ToString();
  ASSERT_FALSE(range);
  EXPECT_EQ(range.error().code, EtcdErrc::kTimeout) << range.error().ToString();
  ASSERT_FALSE(lease);
  EXPECT_EQ(lease.error().code, EtcdErrc::kTimeout);
  auto after = Eventually([&] { return client->Get("/s/a"); });
  ASSERT_TRUE(after) << after.error().ToString();
}

TEST_F(RealEtcd, ReadsFailOverToTheNextEndpoint) {
  int dead = felix::testing::FreeLoopbackPort();
  auto client = Connect("http://127.0.0.1:" + std::to_string(dead) + "," + etcd_.endpoint());
  // A read is retried on the next endpoint within its deadline.
  auto got = client->Get("/f/a");
  ASSERT_TRUE(got) << got.error().ToString();
  // The failure moved "current" to the live endpoint, so a write (never retried) goes there.
  auto put = client->Put("/f/b", "2");
  ASSERT_TRUE(put) << put.error().ToString();
}

}  // namespace
}  // namespace felix::etcd
