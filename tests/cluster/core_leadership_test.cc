// Issue 16 on in-process parts: a BrokerCore in cluster mode (a router whose answer the test
// sets, a custody) over a real embedded catalog and real shard stores in a temp directory.
//   - the leader takes the generation the router names it leader at into its store (ballot,
//     replica file, history entry at its tail) before it serves, and every record it appends
//     carries that generation — also after a restart at a newer generation;
//   - a store that accepted a newer generation (as a follower) is not served on a view that
//     names this broker leader at an older one;
//   - the fence refuses appends once the router names another leader, nothing written;
//   - StepDownDeposed closes a deposed shard: subscribers end with not_leader naming the new
//     owner, appends through the old handle are refused, the custody is released (the
//     follower side may open the store), and a shard the router calls Unavailable is kept; a
//     shard led here at a newer generation reopens at it.
#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "broker/publish_path.h"
#include "broker/store_custody.h"
#include "forward_owner_test_util.h"
#include "storage/shard_store.h"
#include "wire/flx1/constants.h"

namespace felix::cluster {
namespace {

using test::LocalRoute;
using test::RemoteRoute;

class CoreLeadershipTest : public test::OwnerFixture {
 protected:
  void SetUp() override {
    OpenCatalog("felix-core-leadership");
    catalog::Stream s;
    s.tenant_id = "default";
    s.namespace_name = "default";
    s.name = "orders";
    s.shards = 1;
    s.durable = true;
    ASSERT_TRUE(catalog_->CreateStream(s));
  }
  void TearDown() override { StopCore(); }

  void Start(uint64_t generation) {
    router_.Set(LocalRoute(generation));
    StartCore([this](broker::BrokerCoreOptions& o) {
      o.router = &router_;
      o.node_id = "n1";
      o.custody = &custody_;
    });
  }
  catalog::Stream Stream() { return *core_->FindStream("default", "default", "orders"); }
  std::string Dir() { return core_->StreamLayout(Stream(), 0).dir; }
  broker::StreamShardHandle Open() {
    auto handle = core_->OpenStreamShard(Stream(), 0);
    EXPECT_TRUE(handle) << handle.error().ToString();
    return *handle;
  }
  // Publishes through the shard's own path and waits for the answer.
  static Result<Offset> Publish(const broker::StreamShardHandle& handle,
                                std::vector<std::string> payloads) {
    auto owned = std::make_shared<std::vector<std::string>>(std::move(payloads));
    broker::PayloadBatch batch;
    batch.owner = owned;
    for (const auto& p : *owned) {
      batch.payloads.emplace_back(reinterpret_cast<const uint8_t*>(p.data()), p.size());
    }
    batch.timestamp_micros = broker::NowMicrosRoundedToMillis();
    auto done = std::make_shared<std::promise<Result<Offset>>>();
    auto answer = done->get_future();
    EXPECT_TRUE(handle.executor->Post([cell = handle.cell, batch, done]() mutable {
      broker::PublishWhenOpen(*cell, std::move(batch),
                              [done](Result<Offset> r) { done->set_value(std::move(r)); });
    }));
    return answer.get();
  }
  // The stored records of the stream log (the core must be stopped).
  std::vector<storage::Record> Records() {
    auto store = storage::ShardStore::Open(Dir(), storage::ShardStoreOptions::Uniform({}));
    EXPECT_TRUE(store) << store.error().ToString();
    if (!store) return {};
    auto& log = (*store)->log(storage::LogKind::kStream);
    std::vector<storage::Record> out;
    if (log.TailOffset() > log.BaseOffset()) {
      auto read = log.Read(log.BaseOffset(), storage::ReadLimits{1000, 1 << 20});
      EXPECT_TRUE(read);
      if (read) out = std::move(read->records);
    }
    (void)(*store)->Close();
    return out;
  }

  broker::StoreCustody custody_;
};

TEST_F(CoreLeadershipTest, TheLeaderTakesItsGenerationBeforeServingAndStampsEveryRecord) {
  Start(3);
  auto handle = Open();
  ASSERT_EQ(Publish(handle, {"a", "b"}).value_or(Offset(99)), Offset(0));
  ASSERT_EQ(Publish(handle, {"c"}).value_or(Offset(99)), Offset(2));
  const std::string dir = Dir();
  StopCore();
  {
    auto store = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform({}));
    ASSERT_TRUE(store) << store.error().ToString();
    EXPECT_EQ((*store)->replica_state().generation, Generation(3));
    ASSERT_TRUE((*store)->ballot());
    EXPECT_EQ(*(*store)->ballot(), (storage::Ballot{Generation(3), "n1"}));
    EXPECT_EQ((*store)->generation_history().entries(),
              (std::vector<storage::EpochEntry>{{Generation(3), Offset(0)}}));
    (void)(*store)->Close();
  }
  for (const auto& r : Records()) EXPECT_EQ(r.generation, Generation(3)) << "offset " << r.offset;

  // Restarted and named leader at generation 4: the new generation begins at its tail. (The old
  // core's handle goes first: its shard must not outlive that core.)
  handle = {};
  Start(4);
  handle = Open();
  ASSERT_EQ(Publish(handle, {"d"}).value_or(Offset(99)), Offset(3));
  StopCore();
  auto records = Records();
  ASSERT_EQ(records.size(), 4u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].generation, Generation(i < 3 ? 3 : 4)) << "offset " << i;
  }
  auto store = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform({}));
  ASSERT_TRUE(store);
  EXPECT_EQ(
      (*store)->generation_history().entries(),
      (std::vector<storage::EpochEntry>{{Generation(3), Offset(0)}, {Generation(4), Offset(3)}}));
}

TEST_F(CoreLeadershipTest, AStoreThatAcceptedANewerGenerationIsNotServedOnAStaleView) {
  Start(4);
  const std::string dir = Dir();
  {
    auto store = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform({}));
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(5), "n2", std::nullopt));
    (void)(*store)->Close();
  }
  auto refused = Publish(Open(), {"x"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("accepted generation 5"), std::string::npos)
      << refused.error().message;
  // The same generation promised to another leader is refused too.
  router_.Set(LocalRoute(5));
  refused = Publish(Open(), {"x"});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("from n2"), std::string::npos) << refused.error().message;
  StopCore();
  EXPECT_TRUE(Records().empty());
}

TEST_F(CoreLeadershipTest, TheFenceRefusesAppendsOnceTheViewNamesAnotherLeader) {
  Start(3);
  auto handle = Open();
  ASSERT_TRUE(Publish(handle, {"a"}));
  router_.Set(RemoteRoute("n2", 4));
  auto refused = Publish(handle, {"b"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("led by n2 at generation 4"), std::string::npos)
      << refused.error().message;
  StopCore();
  EXPECT_EQ(Records().size(), 1u) << "nothing written after the view moved";
}

TEST_F(CoreLeadershipTest, StepDownEndsSubscribersRefusesAppendsAndReleasesTheStore) {
  Start(3);
  auto handle = Open();
  ASSERT_TRUE(Publish(handle, {"a", "b"}));
  const std::string dir = Dir();
  EXPECT_EQ(custody_.HolderOf(dir), broker::StoreHolder::kCore);

  // A live subscriber, registered on the shard's executor.
  auto subscribed = std::make_shared<std::promise<std::shared_ptr<broker::SubscriberQueue>>>();
  auto queue_future = subscribed->get_future();
  handle.executor->Post([cell = handle.cell, subscribed] {
    auto sub = cell->get()->shard->Subscribe(broker::StartPosition{}, 0, [] {});
    subscribed->set_value(std::get<broker::Subscription>(sub).queue);
  });
  auto queue = queue_future.get();

  // Unavailable (a lapsed lease, held unplaced) is no new leader: kept.
  broker::Route unavailable;
  unavailable.where = broker::Route::Where::kUnavailable;
  unavailable.generation = Generation(3);
  router_.Set(unavailable);
  EXPECT_EQ(core_->StepDownDeposed(), 0u);
  router_.Set(LocalRoute(3));
  EXPECT_EQ(core_->StepDownDeposed(), 0u);

  router_.Set(RemoteRoute("n2", 4));
  EXPECT_EQ(core_->StepDownDeposed(), 1u);
  EXPECT_EQ(custody_.HolderOf(dir), std::nullopt) << "the store is handed back";
  EXPECT_TRUE(queue->ended());
  while (queue->Pop()) {
  }
  auto end = queue->TakeEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->kind, broker::QueueEnd::Kind::kMoved);
  EXPECT_EQ(end->code, static_cast<uint16_t>(wire::flx1::ProtocolErrorCode::kNotLeader));
  EXPECT_EQ(end->node_id, "n2");
  EXPECT_EQ(end->addr, "127.0.0.1:7000");
  EXPECT_EQ(end->generation, 4u);
  EXPECT_NE(end->message.find("n2 (127.0.0.1:7000) leads it at generation 4"), std::string::npos)
      << end->message;

  // Work still holding the old handle is refused, nothing written.
  auto refused = Publish(handle, {"c"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(core_->StepDownDeposed(), 0u);

  // The follower side may take the store now.
  ASSERT_TRUE(custody_.Claim(dir, broker::StoreHolder::kFollower));
  {
    auto store = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform({}));
    ASSERT_TRUE(store) << store.error().ToString();
    EXPECT_EQ((*store)->log(storage::LogKind::kStream).TailOffset(), Offset(2));
    (void)(*store)->Close();
  }
  custody_.Release(dir, broker::StoreHolder::kFollower);

  // Named leader again, at a newer generation: a fresh open takes it and serves.
  router_.Set(LocalRoute(6));
  handle = Open();
  ASSERT_EQ(Publish(handle, {"c"}).value_or(Offset(99)), Offset(2));
  // Led here at another generation than it opened at (a replica-set change): it steps down
  // and the next open takes the new generation.
  router_.Set(LocalRoute(7));
  EXPECT_EQ(core_->StepDownDeposed(), 1u);
  handle = Open();
  ASSERT_EQ(Publish(handle, {"d"}).value_or(Offset(99)), Offset(3));
  StopCore();
  auto records = Records();
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[2].generation, Generation(6));
  EXPECT_EQ(records[3].generation, Generation(7));
  auto store = storage::ShardStore::Open(dir, storage::ShardStoreOptions::Uniform({}));
  ASSERT_TRUE(store);
  EXPECT_EQ((*store)->generation_history().entries().back(),
            (storage::EpochEntry{Generation(7), Offset(3)}));
}

// One claim per open store (store_custody.h): a shard the core stepped down from and is named
// leader of again before the old store finished closing is refused (retryably, nothing
// written) instead of being opened a second time beside the close.
TEST_F(CoreLeadershipTest, AStoreStillClosingIsNotOpenedASecondTime) {
  Start(3);
  const std::string dir = Dir();
  // The core's previous store of the shard, still closing: the core holds the directory.
  ASSERT_TRUE(custody_.Claim(dir, broker::StoreHolder::kCore));
  EXPECT_FALSE(custody_.Claim(dir, broker::StoreHolder::kCore)) << "exclusive, even to its side";
  EXPECT_FALSE(custody_.Claim(dir, broker::StoreHolder::kFollower));
  auto refused = Publish(Open(), {"a"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("previous store on this broker is still closing"),
            std::string::npos)
      << refused.error().message;
  // Closed and released: the next open serves.
  custody_.Release(dir, broker::StoreHolder::kCore);
  ASSERT_EQ(Publish(Open(), {"a"}).value_or(Offset(99)), Offset(0));
  StopCore();
  EXPECT_EQ(Records().size(), 1u);
}

// The replication side learns of a store by on_shard_store_opened before anything can close
// the shard: a shard dropped while it opened announces "opened" then "closing" (never
// "closing" first, which would leave the host holding a closed store), and the store goes.
TEST_F(CoreLeadershipTest, AShardClosedWhileItOpensAnnouncesOpenedThenClosing) {
  std::promise<void> opening;
  std::promise<void> proceed;
  auto proceed_future = proceed.get_future().share();
  std::mutex mu;
  std::vector<std::string> events;
  router_.Set(LocalRoute(3));
  StartCore([&](broker::BrokerCoreOptions& o) {
    o.router = &router_;
    o.node_id = "n1";
    o.custody = &custody_;
    o.before_open = [&](const std::string&) {
      opening.set_value();
      proceed_future.wait();
    };
    o.on_shard_store_opened = [&](const broker::ShardId&, storage::ShardStore&) {
      std::lock_guard lock(mu);
      events.push_back("opened");
    };
    o.on_shard_store_closing = [&](const broker::ShardId&) {
      std::lock_guard lock(mu);
      events.push_back("closing");
    };
  });
  const std::string dir = Dir();
  auto handle = Open();
  opening.get_future().wait();
  core_->DropStream("default", "default", "orders");  // the open is still in progress
  proceed.set_value();
  auto refused = Publish(handle, {"a"});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kNotFound) << refused.error().message;
  std::lock_guard lock(mu);
  EXPECT_EQ(events, (std::vector<std::string>{"opened", "closing"}));
  EXPECT_EQ(custody_.HolderOf(dir), std::nullopt) << "the store was closed and released";
}

}  // namespace
}  // namespace felix::cluster
