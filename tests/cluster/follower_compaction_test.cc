// FollowerCompaction on real logs: a cache follower deletes only whole sealed segments whose
// every record a later record below the floor supersedes, and the log folds to the same state
// before and after.
#include "cluster/follower_compaction.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "broker/cache_record.h"
#include "storage/durable_log.h"
#include "storage/record_format.h"
#include "support/child_process.h"

namespace felix::cluster {
namespace {

using broker::CacheRecord;
using broker::CounterRecord;

constexpr uint64_t kNow = 1'700'000'000'000;  // the broker's clock in these tests, ms

class FollowerCompactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = felix::testing::MakeTempDir("felix-follower-compaction");
    storage::LogOptions o;
    o.segment_bytes = 4096;  // the least a log allows: 7 records of ~550 bytes a segment
    o.fsync_mode = storage::FsyncMode::kOnCommit;  // the floor is capped at the durable offset
    auto log = storage::DurableLog::Open(dir_ + "/log", o);
    ASSERT_TRUE(log) << log.error().ToString();
    log_ = std::move(*log);
  }
  void TearDown() override {
    log_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  Offset Append(const std::vector<uint8_t>& payload, uint32_t flags = 0) {
    storage::AppendRecord r{{payload.data(), payload.size()}, Generation(1), 0, flags};
    auto appended = log_->Append(r);
    EXPECT_TRUE(appended) << appended.error().ToString();
    return appended ? appended->first_offset : Offset(0);
  }
  Offset Put(const std::string& key, uint64_t expires_at = 0) {
    std::string value(512, 'v');
    return Append(broker::EncodeCacheRecord(
        CacheRecord{CacheRecord::Op::kPut,
                    expires_at,
                    std::nullopt,
                    key,
                    {reinterpret_cast<const uint8_t*>(value.data()), value.size()}}));
  }
  Offset Delete(const std::string& key) {
    return Append(broker::EncodeCacheRecord(CacheRecord{CacheRecord::Op::kDelete, 0, {}, key, {}}));
  }
  Offset Add(const std::string& counter, int64_t delta) {
    return Append(broker::EncodeCounterRecord(
        CounterRecord{CounterRecord::Op::kDelta, delta, counter + std::string(500, '.')}));
  }
  Offset Checkpoint(const std::string& counter, int64_t sum) {
    return Append(broker::EncodeCounterRecord(
        CounterRecord{CounterRecord::Op::kCheckpoint, sum, counter + std::string(500, '.')}));
  }
  // A leader's promotion: a generation-start record.
  Offset GenerationStart() {
    auto p = storage::GenerationStartPayload(2);
    return Append({p.begin(), p.end()}, storage::kRecordFlagGenerationStart);
  }

  // What a promoted replica would fold the log to: live keys (unexpired at kNow) with the
  // offset of the put that wrote them, or counter sums.
  std::map<std::string, int64_t> Fold() {
    std::map<std::string, int64_t> state;
    auto read = log_->Read(log_->BaseOffset(), storage::ReadLimits{1u << 20, 1u << 30});
    EXPECT_TRUE(read) << read.error().ToString();
    if (!read) return state;
    for (const auto& r : read->records) {
      if (r.flags != 0) continue;
      std::span<const uint8_t> p{reinterpret_cast<const uint8_t*>(r.payload.data()),
                                 r.payload.size()};
      if (auto c = broker::DecodeCacheRecord(p); c && cache_) {
        if (c->op == CacheRecord::Op::kDelete ||
            (c->expires_at_millis != 0 && c->expires_at_millis <= kNow)) {
          state.erase(std::string(c->key));
        } else {
          state[std::string(c->key)] = static_cast<int64_t>(r.offset.value());
        }
      } else if (auto n = broker::DecodeCounterRecord(p); n && !cache_) {
        int64_t& sum = state[std::string(n->key)];
        sum = n->op == CounterRecord::Op::kCheckpoint ? n->value : sum + n->value;
      }
    }
    return state;
  }

  FollowerCompactionPass Run(FollowerCompaction& c, Offset floor) {
    auto pass = c.Run(*log_, floor, kNow);
    EXPECT_TRUE(pass) << pass.error().ToString();
    return pass ? *pass : FollowerCompactionPass{};
  }

  std::string dir_;
  bool cache_ = true;
  std::unique_ptr<storage::DurableLog> log_;
};

TEST_F(FollowerCompactionTest, ACacheLogDropsThePrefixItsLeadersCopiesSupersedeOnceBelowTheFloor) {
  // Forty puts over four keys, then the leader's compaction copies of the four (v2 puts).
  for (int i = 0; i < 40; ++i) Put("key-" + std::to_string(i % 4));
  ASSERT_GT(log_->SegmentCount(), 4u);
  const Offset cut = log_->TailOffset();
  ASSERT_TRUE(log_->Roll());  // a segment ends at the cut (where the follower's fell is its own)
  for (int k = 0; k < 4; ++k) Put("key-" + std::to_string(k));
  const auto before = Fold();
  FollowerCompaction c(CompactedLog::kCache);

  // The floor below the copies: the last round of originals (36..39) is superseded by nothing
  // below it, so only segments wholly below 36 may go.
  auto pass = Run(c, cut);
  EXPECT_EQ(pass.superseded_through, Offset(36));
  EXPECT_GT(pass.segments_deleted, 0u);
  EXPECT_LE(log_->BaseOffset(), Offset(36));
  EXPECT_EQ(Fold(), before);

  // The floor past the copies: everything below the cut is superseded.
  pass = Run(c, log_->TailOffset());
  EXPECT_EQ(pass.superseded_through, cut);
  EXPECT_EQ(log_->BaseOffset(), cut);
  EXPECT_EQ(Fold(), before) << "the same state without the prefix";
  EXPECT_FALSE(pass.more);
}

TEST_F(FollowerCompactionTest, ALivePutNothingFollowsStopsThePrefixThere) {
  Put("lonely");  // written once, never again: the prefix can never pass it
  for (int i = 0; i < 40; ++i) Put("key-" + std::to_string(i % 4));
  const auto before = Fold();
  FollowerCompaction c(CompactedLog::kCache);
  auto pass = Run(c, log_->TailOffset());
  EXPECT_EQ(pass.superseded_through, Offset(0));
  EXPECT_EQ(pass.segments_deleted, 0u);
  EXPECT_EQ(log_->BaseOffset(), Offset(0));
  EXPECT_EQ(Fold(), before);
}

TEST_F(FollowerCompactionTest, DeletesAndExpiredPutsNeedNoSuccessor) {
  // A key put then deleted, and one whose put expired: absent either way, so they go.
  for (int i = 0; i < 12; ++i) Put("gone");
  Delete("gone");
  for (int i = 0; i < 12; ++i) Put("expired", kNow - 1);
  Put("later", kNow + 60'000);  // not expired: stops the prefix
  for (int i = 0; i < 12; ++i) Put("filler-" + std::to_string(i));
  const auto before = Fold();
  FollowerCompaction c(CompactedLog::kCache);
  auto pass = Run(c, log_->TailOffset());
  EXPECT_EQ(pass.superseded_through, Offset(25));
  EXPECT_GT(log_->BaseOffset(), Offset(0));
  EXPECT_LE(log_->BaseOffset(), Offset(25));
  EXPECT_EQ(Fold(), before);
}

TEST_F(FollowerCompactionTest, CounterDeltasGoOnlyBehindACheckpointBelowTheFloor) {
  cache_ = false;
  for (int i = 0; i < 30; ++i) Add("c" + std::to_string(i % 3), i);
  GenerationStart();  // carries no state: it never stops the prefix
  const Offset checkpoints = log_->TailOffset();
  // The leader's compaction: one checkpoint per counter, of its sum so far.
  std::map<std::string, int64_t> sums;
  for (int i = 0; i < 30; ++i) sums["c" + std::to_string(i % 3)] += i;
  for (const auto& [counter, sum] : sums) Checkpoint(counter, sum);
  for (int i = 0; i < 5; ++i) Add("c0", 100);
  const auto before = Fold();
  FollowerCompaction c(CompactedLog::kCounters);

  // Below the checkpoints nothing supersedes a delta.
  auto pass = Run(c, checkpoints);
  EXPECT_EQ(pass.superseded_through, Offset(0));
  EXPECT_EQ(log_->BaseOffset(), Offset(0));
  // Two of the three checkpoints below the floor: c0's and c1's deltas are superseded, c2's
  // first delta (offset 2) is not.
  pass = Run(c, checkpoints + 2);
  EXPECT_EQ(pass.superseded_through, Offset(2));
  // All three: everything below them goes, the generation-start record too.
  pass = Run(c, log_->TailOffset());
  EXPECT_EQ(pass.superseded_through, checkpoints);
  EXPECT_GT(log_->BaseOffset(), Offset(0));
  EXPECT_LE(log_->BaseOffset(), checkpoints);
  EXPECT_EQ(Fold(), before);
}

TEST_F(FollowerCompactionTest, ALogResetUnderItIsReadAfresh) {
  // The index remembers key-0's newest record at 39; a bootstrap or rebuild replaces the log
  // (here: reset at 0 and a single put of key-0), and that put is the live one.
  for (int i = 0; i < 40; ++i) Put("key-" + std::to_string(i % 4));
  FollowerCompaction c(CompactedLog::kCache);
  (void)Run(c, Offset(20));  // indexes [0, 20) only, drops nothing live
  ASSERT_TRUE(log_->Reset(Offset(0)));
  Put("key-0");
  for (int i = 0; i < 20; ++i) Put("other-" + std::to_string(i % 2));
  const auto before = Fold();
  auto pass = Run(c, log_->TailOffset());
  EXPECT_EQ(pass.superseded_through, Offset(0)) << "key-0's only put is live";
  EXPECT_EQ(log_->BaseOffset(), Offset(0));
  EXPECT_EQ(Fold(), before);
}

TEST_F(FollowerCompactionTest, ASmallBudgetTakesSeveralPassesToTheSameResult) {
  for (int i = 0; i < 60; ++i) Put("key-" + std::to_string(i % 3));
  const Offset cut = log_->TailOffset();
  for (int k = 0; k < 3; ++k) Put("key-" + std::to_string(k));
  const auto before = Fold();
  FollowerCompaction c(CompactedLog::kCache, /*scan_bytes_per_pass=*/8000);
  FollowerCompactionPass pass;
  int passes = 0;
  do {
    pass = Run(c, log_->TailOffset());
    ++passes;
  } while (pass.more && passes < 100);
  EXPECT_GT(passes, 2);
  EXPECT_EQ(pass.superseded_through, cut);
  EXPECT_GT(log_->BaseOffset(), Offset(0));
  EXPECT_EQ(Fold(), before);
}

TEST_F(FollowerCompactionTest, AHeldLogNeverLosesASegmentAtOrAboveItsCommitOffset) {
  for (int i = 0; i < 40; ++i) Put("key-" + std::to_string(i % 4));
  for (int k = 0; k < 4; ++k) Put("key-" + std::to_string(k));
  log_->SetRetentionHold(true);
  log_->SetCommitOffset(Offset(10));
  FollowerCompaction c(CompactedLog::kCache);
  (void)Run(c, log_->TailOffset());  // a floor past the commit offset: the hold still rules
  EXPECT_LE(log_->BaseOffset(), Offset(10));
}

}  // namespace
}  // namespace felix::cluster
