// ShardStorage, the storage-custody half of the broker core, on real directories: the custody
// claim around an open, the two refusal wordings, release, and a store whose logs are refused.
#include "broker/shard_storage.h"

#include <fstream>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "support/child_process.h"

namespace felix::broker {
namespace {

class ShardStorageTest : public ::testing::Test {
 protected:
  ShardStorageTest() : health_(metrics_) {
    ShardStorageOptions o;
    o.storage_dir = felix::testing::MakeTempDir("shard-storage");
    o.log_defaults.metrics = &metrics_;
    o.custody = &custody_;
    o.health = &health_;
    o.on_store_closing = [this](const ShardId& id) { closing_.push_back(id.ToString()); };
    storage_.emplace(std::move(o));
    layout_.dir = felix::testing::MakeTempDir("shard-storage-store");
  }

  MetricsRegistry metrics_;
  HealthRegistry health_;
  StoreCustody custody_;
  std::vector<std::string> closing_;
  std::optional<ShardStorage> storage_;
  ShardStoreLayout layout_;
};

TEST_F(ShardStorageTest, AnOpenStoreHoldsItsDirectoryUntilReleased) {
  auto first = storage_->Open("t/n/s#0", layout_);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(custody_.HolderOf(layout_.dir), StoreHolder::kCore);

  // A second open of the same directory (a step-down and reopen racing the close) is refused,
  // retryably, and names this broker's own previous store.
  auto again = storage_->Open("t/n/s#0", layout_);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(again.error().message.find("previous store on this broker"), std::string::npos)
      << again.error().message;

  ShardId id{"t", "n", "s", ShardKind::kStream, 0};
  storage_->Closing(id);
  EXPECT_EQ(closing_, std::vector<std::string>{id.ToString()});
  ASSERT_TRUE((*first)->Close());
  first->reset();
  storage_->Released(layout_.dir);
  EXPECT_FALSE(custody_.HolderOf(layout_.dir).has_value());
  EXPECT_TRUE(storage_->Open("t/n/s#0", layout_)) << "released: opens again";
}

TEST_F(ShardStorageTest, ADirectoryAFollowerHoldsIsRefusedWithoutTouchingIt) {
  ASSERT_TRUE(custody_.Claim(layout_.dir, StoreHolder::kFollower));
  auto refused = storage_->Open("t/n/s#0", layout_);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("replication follower"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(custody_.HolderOf(layout_.dir), StoreHolder::kFollower) << "the claim is not stolen";
  EXPECT_TRUE(health_.Problems().empty());
}

TEST_F(ShardStorageTest, ARefusedStoreReleasesItsClaimIsListedAndClearsOnceItOpens) {
  // A replica file that does not decode refuses the whole store (storage.md §7.1).
  {
    std::ofstream bad(layout_.dir + "/replica", std::ios::binary);
    bad << "not a replica file";
  }
  auto refused = storage_->Open("t/n/s#0", layout_);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(refused.error().message.find("refused at open"), std::string::npos)
      << refused.error().message;
  EXPECT_FALSE(custody_.HolderOf(layout_.dir).has_value()) << "a refused open keeps no claim";
  auto problems = health_.Problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].kind, HealthKind::kShardOpen);
  EXPECT_EQ(problems[0].key, layout_.dir);

  ASSERT_EQ(std::remove((layout_.dir + "/replica").c_str()), 0);
  auto opened = storage_->Open("t/n/s#0", layout_);
  ASSERT_TRUE(opened) << opened.error().message;
  EXPECT_TRUE(health_.Problems().empty()) << "the listing clears once the store opens";
}

TEST_F(ShardStorageTest, ASavedRetentionHoldIsLiftedByASingleNodeAndKeptInACluster) {
  // A store that was a replica once (replication.md §20: the hold is saved in `replica`).
  {
    auto store = storage::ShardStore::Open(layout_.dir, layout_.store_options());
    ASSERT_TRUE(store) << store.error().ToString();
    ASSERT_TRUE((*store)->SetRetentionHold(true));
  }
  // In a cluster (a custody) replication decides: the open keeps it.
  {
    auto held = storage_->Open("t/n/s#0", layout_);
    ASSERT_TRUE(held) << held.error().message;
    EXPECT_TRUE((*held)->replica_state().retention_held);
    EXPECT_TRUE((*held)->log(storage::LogKind::kStream).RetentionHeld());
    ASSERT_TRUE((*held)->Close());
    storage_->Released(layout_.dir);
  }
  // A single node (no custody) has nothing to raise the commit offset: lifted, and saved so.
  ShardStorageOptions o;
  o.storage_dir = felix::testing::MakeTempDir("shard-storage-single");
  o.log_defaults.metrics = &metrics_;
  ShardStorage single(std::move(o));
  auto lifted = single.Open("t/n/s#0", layout_);
  ASSERT_TRUE(lifted) << lifted.error().message;
  EXPECT_FALSE((*lifted)->replica_state().retention_held);
  for (size_t k = 0; k < storage::kLogKindCount; ++k) {
    EXPECT_FALSE((*lifted)->log(storage::LogKind(k)).RetentionHeld()) << k;
  }
  ASSERT_TRUE((*lifted)->Close());
  lifted->reset();
  auto again = storage::ShardStore::Open(layout_.dir, layout_.store_options());
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_FALSE((*again)->replica_state().retention_held) << "the lift is saved";
}

TEST_F(ShardStorageTest, WriteFaultsOfEachLogKindAreCountedApart) {
  WriteFaultReporting stream = storage_->Reporting("stream");
  WriteFaultReporting cache = storage_->Reporting("cache");
  ASSERT_NE(stream.full, nullptr);
  ASSERT_NE(cache.full, nullptr);
  EXPECT_NE(stream.full, cache.full);
  EXPECT_EQ(stream.health, &health_);
  stream.full->Increment();
  EXPECT_NE(metrics_.RenderPrometheus().find("felix_storage_full_total{log=\"stream\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace felix::broker
