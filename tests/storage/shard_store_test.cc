// ShardStore opens the five logs of a shard in one call, each in its own subdirectory.
#include <sys/stat.h>

#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "storage/io_util.h"
#include "storage/shard_store.h"
#include "test_util.h"

namespace felix::storage {
namespace {

TEST(ShardStore, OpensFiveLogsAndReopens) {
  auto dir = test::TempDir("shard");
  MetricsRegistry registry;
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  o.metrics = &registry;
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store) << store.error().ToString();
    for (size_t i = 0; i < kLogKindCount; ++i) {
      LogKind k = LogKind(i);
      EXPECT_TRUE(std::filesystem::is_directory(dir + "/" + LogKindName(k)));
      test::AppendN((*store)->log(k), Offset(0), i + 1);
    }
    ASSERT_TRUE((*store)->Close());
  }
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_TRUE(store);
  for (size_t i = 0; i < kLogKindCount; ++i) {
    EXPECT_EQ((*store)->log(LogKind(i)).TailOffset(), Offset(i + 1));
  }
  EXPECT_EQ(ParseLogKind("dead_letters"), LogKind::kDeadLetters);
  EXPECT_NE(registry.RenderPrometheus().find("log=\"counters\""), std::string::npos);
}

TEST(ShardStore, ReplicaStateStartsAtZeroAndSurvivesReopen) {
  auto dir = test::TempDir("shard-replica");
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store);
    EXPECT_EQ((*store)->replica_state(), ReplicaState{});
    EXPECT_FALSE((*store)->ballot().has_value());
    EXPECT_FALSE(std::filesystem::exists(dir + "/replica")) << "nothing written at generation 0";
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(3), "n1", Offset(0)));
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(5), "n2", Offset(40)));
    EXPECT_EQ((*store)->AcceptGeneration(Generation(5), "n3", Offset(41)).error().code,
              StorageErrc::kInvalidArgument);
    ASSERT_TRUE((*store)->SetCommitOffset(Offset(42)));
    ASSERT_TRUE((*store)->SetCommitOffset(Offset(7))) << "a lower commit offset is no error";
    ASSERT_TRUE((*store)->Close());
  }
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_TRUE(store) << store.error().ToString();
  EXPECT_EQ((*store)->replica_state(), (ReplicaState{Generation(5), Offset(42), false}));
  EXPECT_EQ((*store)->ballot(), (Ballot{Generation(5), "n2"}));
  EXPECT_EQ((*store)->generation_history().entries(),
            (std::vector<EpochEntry>{{Generation(3), Offset(0)}, {Generation(5), Offset(40)}}));
}

TEST(ShardStore, ACommitOffsetIsRewrittenInPlaceAndSurvivesReopen) {
  // A follower writes its commit offset through before every ReplicateOk (on_commit): the
  // replica file is rewritten in place (same inode, no temp file left), never replaced.
  auto dir = test::TempDir("shard-commit-in-place");
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(2), "n1", Offset(0)));
    struct stat before {};
    ASSERT_EQ(::stat((dir + "/replica").c_str(), &before), 0);
    for (uint64_t c = 1; c <= 50; ++c) ASSERT_TRUE((*store)->SetCommitOffset(Offset(c * 10)));
    struct stat after {};
    ASSERT_EQ(::stat((dir + "/replica").c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino) << "rewritten in place, not replaced";
    EXPECT_FALSE(std::filesystem::exists(dir + "/replica.tmp"));
    ASSERT_TRUE((*store)->Close());
  }
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_TRUE(store) << store.error().ToString();
  EXPECT_EQ((*store)->replica_state(), (ReplicaState{Generation(2), Offset(500), false}));
}

TEST(ShardStore, ARetentionHoldIsSavedAndHoldsEveryLogFromTheNextOpen) {
  // replication.md §20: a held shard is held before anyone can run a pass after a restart.
  auto dir = test::TempDir("shard-hold");
  LogOptions o = test::Opts();
  o.segment_bytes = 4096;  // a record of ~600 bytes: a few records a segment
  auto open = [&] {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    EXPECT_TRUE(store) << (store ? "" : store.error().ToString());
    return store ? std::move(*store) : nullptr;
  };
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    for (size_t k = 0; k < kLogKindCount; ++k) EXPECT_FALSE(store->log(LogKind(k)).RetentionHeld());
    test::AppendN(store->log(LogKind::kCache), Offset(0), 40, 600);
    ASSERT_TRUE(store->SetRetentionHold(true));
    EXPECT_TRUE(store->replica_state().retention_held);
    ASSERT_TRUE(store->Close());
  }
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(store->replica_state().retention_held);
    for (size_t k = 0; k < kLogKindCount; ++k) {
      EXPECT_TRUE(store->log(LogKind(k)).RetentionHeld()) << LogKindName(LogKind(k));
    }
    // Held at a commit offset of 0 (replication has not said more yet): nothing goes.
    DurableLog& cache = store->log(LogKind::kCache);
    ASSERT_GT(cache.SegmentCount(), 2u);
    ASSERT_TRUE(cache.Roll());
    auto dropped = cache.DropSegmentsBelow(Offset(40));
    ASSERT_TRUE(dropped);
    EXPECT_EQ(dropped->segments_deleted, 0u);
    EXPECT_EQ(cache.BaseOffset(), Offset(0));
    ASSERT_TRUE(store->SetRetentionHold(false));
    ASSERT_TRUE(store->Close());
  }
  auto store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->replica_state().retention_held);
  DurableLog& cache = store->log(LogKind::kCache);
  EXPECT_FALSE(cache.RetentionHeld());
  auto dropped = cache.DropSegmentsBelow(Offset(40));
  ASSERT_TRUE(dropped);
  EXPECT_GT(dropped->segments_deleted, 0u);
  EXPECT_GT(cache.BaseOffset(), Offset(0));
}

TEST(OverwriteFileInPlace, CreatesAMissingFileAndReplacesOneOfAnotherSize) {
  auto dir = test::TempDir("overwrite");
  const std::vector<uint8_t> four{1, 2, 3, 4};
  ASSERT_TRUE(OverwriteFileInPlace(dir, "f", four));
  EXPECT_EQ(*ReadWholeFile(dir + "/f"), four);
  const std::vector<uint8_t> six{9, 8, 7, 6, 5, 4};
  ASSERT_TRUE(OverwriteFileInPlace(dir, "f", six));
  EXPECT_EQ(*ReadWholeFile(dir + "/f"), six) << "a different size is replaced whole";
  const std::vector<uint8_t> other{0, 0, 0, 0, 0, 1};
  ASSERT_TRUE(OverwriteFileInPlace(dir, "f", other));
  EXPECT_EQ(*ReadWholeFile(dir + "/f"), other);
  EXPECT_FALSE(OverwriteFileInPlace(dir + "/missing-dir", "f", four)) << "errors are values";
}

TEST(ShardStore, ADamagedReplicaFileRefusesTheOpenNamingIt) {
  auto dir = test::TempDir("shard-replica-bad");
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(2), "n1", Offset(0)));
  }
  std::filesystem::resize_file(dir + "/replica", 27);
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, StorageErrc::kCorruption);
  EXPECT_EQ(store.error().file, dir + "/replica");
}

TEST(ShardStore, ABallotOneAheadIsARaiseThatCrashedBetweenItsTwoWrites) {
  auto dir = test::TempDir("shard-ballot-ahead");
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(4), "n1", Offset(0)));
  }
  // The ballot of generation 5 reached the disk, the replica file did not.
  auto ballot = EncodeBallot(Ballot{Generation(5), "n2"});
  ASSERT_TRUE(ballot);
  ASSERT_TRUE(WriteFileAtomic(dir, "ballot", *ballot, true));
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_TRUE(store);
  EXPECT_EQ((*store)->replica_state().generation, Generation(5));
  EXPECT_EQ((*store)->ballot(), (Ballot{Generation(5), "n2"}));
}

TEST(ShardStore, ADamagedEpochsFileReadsAsEmptyAndSaysWhy) {
  auto dir = test::TempDir("shard-epochs-bad");
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(1), "n1", Offset(0)));
  }
  std::filesystem::resize_file(dir + "/epochs", 5);
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_TRUE(store) << "the generation history is advisory";
  EXPECT_TRUE((*store)->generation_history().entries().empty());
  EXPECT_FALSE((*store)->epochs_defect().empty());
  EXPECT_EQ((*store)->replica_state().generation, Generation(1));
}

TEST(ShardStore, AFollowerAcceptsWithoutHistoryAndRelabelsWhatItAppends) {
  auto dir = test::TempDir("shard-relabel");
  LogOptions o = test::Opts(FsyncMode::kOnCommit);
  {
    auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(2), "n1", std::nullopt));
    EXPECT_TRUE((*store)->generation_history().entries().empty()) << "nothing appended yet";
    std::vector<EpochEntry> labels{{Generation(1), Offset(0)}, {Generation(2), Offset(5)}};
    ASSERT_TRUE((*store)->RelabelGenerations(Offset(0), labels));
    ASSERT_TRUE((*store)->AcceptGeneration(Generation(3), "n2", std::nullopt));
    std::vector<EpochEntry> more{{Generation(3), Offset(4)}};
    ASSERT_TRUE((*store)->RelabelGenerations(Offset(4), more)) << "drops (2, 5), at or after 4";
    EXPECT_EQ((*store)->generation_history().entries(),
              (std::vector<EpochEntry>{{Generation(1), Offset(0)}, {Generation(3), Offset(4)}}));
  }
  auto store = ShardStore::Open(dir, ShardStoreOptions::Uniform(o));
  ASSERT_TRUE(store);
  EXPECT_EQ((*store)->generation_history().entries(),
            (std::vector<EpochEntry>{{Generation(1), Offset(0)}, {Generation(3), Offset(4)}}));
  ASSERT_TRUE((*store)->RelabelGenerations(Offset(0), {}));
  EXPECT_TRUE((*store)->generation_history().entries().empty());
  EXPECT_EQ((*store)->replica_state().generation, Generation(3));
}

}  // namespace
}  // namespace felix::storage
