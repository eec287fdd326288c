// Recovery on open: torn tails are cut (at every byte boundary), zero-filled tails and damage
// past the durable mark are repaired and counted, interior damage is refused naming file and
// byte position, blank segments are removed, and recovery is idempotent.
#include <filesystem>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "storage/durable_log.h"
#include "storage/recovery.h"
#include "test_util.h"

namespace felix::storage {
namespace {

namespace fs = std::filesystem;
using test::AppendN;
using test::ExpectRecords;
using test::MustOpen;
using test::Opts;
using test::TempDir;

// A closed log of `n` records of `size` bytes in one segment; returns its segment path.
std::string MakeLog(const std::string& dir, uint64_t n, size_t size) {
  auto log = MustOpen(dir, Opts(FsyncMode::kOnCommit));
  AppendN(*log, Offset(0), n, size);
  EXPECT_TRUE(log->Close());
  auto files = test::SegmentFiles(dir);
  EXPECT_EQ(files.size(), 1u);
  return files.front();
}

TEST(Recovery, EveryByteTruncationOfTheLastRecordsReopensRepaired) {
  auto src = TempDir("torn-src");
  std::string seg = MakeLog(src, 6, 37);
  const auto original = test::ReadFileBytes(seg);
  const auto positions = test::RecordPositions(original);
  ASSERT_EQ(positions.size(), 6u);
  const std::string name = fs::path(seg).filename().string();
  // Cut anywhere inside the last three records (and at their boundaries).
  for (uint64_t cut = positions[3]; cut <= original.size(); ++cut) {
    auto dir = TempDir("torn");
    fs::copy(src, dir, fs::copy_options::overwrite_existing);
    std::vector<uint8_t> bytes(original.begin(), original.begin() + long(cut));
    test::WriteFileBytes(dir + "/" + name, bytes);
    uint64_t whole = 0;
    for (auto p : positions) {
      {
        RecordHeader h;
        DecodeRecordHeader(original.data() + p, &h);
        if (p + RecordBytes(h.payload_len) <= cut) ++whole;
      }
    }
    MetricsRegistry registry;
    LogOptions o = Opts(FsyncMode::kOnCommit);
    o.metrics = &registry;
    {
      auto log = MustOpen(dir, o);
      ASSERT_TRUE(log) << "cut " << cut;
      bool at_boundary = std::find(positions.begin(), positions.end(), cut) != positions.end() ||
                         cut == original.size();
      EXPECT_EQ(log->recovery().torn_tail_repaired, !at_boundary) << "cut " << cut;
      EXPECT_EQ(log->TailOffset(), Offset(whole)) << "cut " << cut;
      ExpectRecords(*log, Offset(0), Offset(whole), 37);
      if (!at_boundary) {
        EXPECT_NE(registry.RenderPrometheus().find(
                      "felix_storage_recovery_torn_tails_total{log=\"log\"} 1"),
                  std::string::npos);
      }
      // The log keeps working where the tear was cut.
      AppendN(*log, Offset(whole), 2, 37);
      ASSERT_TRUE(log->Close());
    }
    auto again = MustOpen(dir, Opts());
    ASSERT_TRUE(again);
    EXPECT_FALSE(again->recovery().torn_tail_repaired) << "recovery is idempotent, cut " << cut;
    ExpectRecords(*again, Offset(0), Offset(whole + 2), 37);
    ASSERT_TRUE(again->Close());
    fs::remove_all(dir);
  }
}

TEST(Recovery, FlippedBitInInteriorRecordIsRefusedWithFileAndOffset) {
  auto dir = TempDir("flip");
  std::string seg = MakeLog(dir, 10, 50);
  const auto original = test::ReadFileBytes(seg);
  const auto positions = test::RecordPositions(original);
  for (size_t victim : {size_t(0), size_t(4), size_t(8)}) {
    for (size_t within : {size_t(1), size_t(20), size_t(kRecordHeaderBytes + 7)}) {
      auto bytes = original;
      bytes[positions[victim] + within] ^= 0x08;
      test::WriteFileBytes(seg, bytes);
      auto log = DurableLog::Open(dir, Opts());
      ASSERT_FALSE(log) << "victim " << victim << " byte " << within;
      EXPECT_EQ(log.error().code, StorageErrc::kCorruption);
      EXPECT_EQ(log.error().file, seg);
      EXPECT_EQ(log.error().position, positions[victim]);
      EXPECT_NE(log.error().ToString().find(seg), std::string::npos);
      EXPECT_NE(log.error().ToString().find("position=" + std::to_string(positions[victim])),
                std::string::npos);
    }
  }
  test::WriteFileBytes(seg, original);
  auto log = MustOpen(dir, Opts());
  ExpectRecords(*log, Offset(0), Offset(10), 50);
}

TEST(Recovery, DamagedLastRecordIsCorruptBelowTheMarkAndTornWithoutOne) {
  auto dir = TempDir("last");
  std::string seg = MakeLog(dir, 5, 40);
  auto bytes = test::ReadFileBytes(seg);
  auto positions = test::RecordPositions(bytes);
  bytes[positions[4] + kRecordHeaderBytes + 3] ^= 1;
  test::WriteFileBytes(seg, bytes);
  // Closed cleanly: the durable mark vouches for the whole file, so this is rot.
  auto refused = DurableLog::Open(dir, Opts());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().position, positions[4]);
  // Without a usable mark, a damaged last record with nothing valid after it is torn.
  fs::remove(dir + "/" + kMarkFileName);
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->recovery().torn_tail_repaired);
  EXPECT_EQ(log->TailOffset(), Offset(4));
}

TEST(Recovery, DamagePastTheDurableMarkIsRepaired) {
  auto dir = TempDir("mark");
  std::string seg = MakeLog(dir, 8, 40);
  auto bytes = test::ReadFileBytes(seg);
  auto positions = test::RecordPositions(bytes);
  // The mark says only records 0..4 were synced; record 6 (interior) is damaged.
  uint8_t mark[kMarkBytes];
  EncodeDurableMark(DurableMark{0, positions[5]}, mark);
  test::WriteFileBytes(dir + "/" + kMarkFileName, std::vector<uint8_t>(mark, mark + kMarkBytes));
  bytes[positions[6] + 12] ^= 0x40;
  test::WriteFileBytes(seg, bytes);
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->recovery().torn_tail_repaired);
  EXPECT_NE(log->recovery().torn_reason.find("durable mark"), std::string::npos);
  EXPECT_EQ(log->TailOffset(), Offset(6));
  ExpectRecords(*log, Offset(0), Offset(6), 40);
}

// Zeros after the last record, past what the mark vouches for, are the space preallocation
// wrote ahead: the end of the log, cut without calling it a torn tail. Where the mark vouches
// for bytes the zeros replaced, it stays a torn tail (counted and logged).
TEST(Recovery, ZerosAfterTheLastRecordAreTheEndUnlessTheMarkVouchesForThem) {
  auto dir = TempDir("zeros");
  std::string seg = MakeLog(dir, 4, 40);
  auto bytes = test::ReadFileBytes(seg);
  size_t good = bytes.size();
  bytes.resize(good + 4096, 0);
  test::WriteFileBytes(seg, bytes);
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->recovery().torn_tail_repaired) << log->recovery().torn_reason;
  EXPECT_EQ(log->recovery().truncated_bytes, 0u);
  EXPECT_EQ(log->recovery().preallocated_bytes, 4096u);
  EXPECT_EQ(fs::file_size(seg), good);
  ExpectRecords(*log, Offset(0), Offset(4), 40);
  ASSERT_TRUE(log->Close());

  bytes.resize(good + 4096, 0);
  test::WriteFileBytes(seg, bytes);
  uint8_t mark[kMarkBytes];
  EncodeDurableMark(DurableMark{0, good + 80}, mark);
  test::WriteFileBytes(dir + "/" + kMarkFileName, std::vector<uint8_t>(mark, mark + kMarkBytes));
  auto again = MustOpen(dir, Opts());
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->recovery().torn_tail_repaired);
  EXPECT_EQ(again->recovery().truncated_bytes, 4096u);
  EXPECT_EQ(again->recovery().preallocated_bytes, 0u);
  ExpectRecords(*again, Offset(0), Offset(4), 40);
}

TEST(Recovery, BlankNewestSegmentIsRemoved) {
  auto dir = TempDir("blank");
  MakeLog(dir, 4, 40);
  test::WriteFileBytes(dir + "/" + SegmentFileName(4), std::vector<uint8_t>(10, 0));
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovery().blank_segments_removed, 1u);
  EXPECT_FALSE(fs::exists(dir + "/" + SegmentFileName(4)));
  AppendN(*log, Offset(4), 2, 40);
  ExpectRecords(*log, Offset(0), Offset(6), 40);
}

TEST(Recovery, DamageInASealedSegmentIsRefused) {
  auto dir = TempDir("sealed");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  {
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 100, 100);
    ASSERT_TRUE(log->Close());
  }
  auto files = test::SegmentFiles(dir);
  ASSERT_GT(files.size(), 2u);
  auto bytes = test::ReadFileBytes(files[0]);
  auto positions = test::RecordPositions(bytes);
  bytes[positions.back() + kRecordHeaderBytes + 5] ^= 2;  // last record of a sealed segment
  test::WriteFileBytes(files[0], bytes);
  auto refused = DurableLog::Open(dir, o);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, StorageErrc::kCorruption);
  EXPECT_EQ(refused.error().file, files[0]);
  EXPECT_EQ(refused.error().position, positions.back());
  // A missing segment in the middle is an offset gap, refused too.
  bytes[positions.back() + kRecordHeaderBytes + 5] ^= 2;
  test::WriteFileBytes(files[0], bytes);
  fs::remove(files[1]);
  auto gap = DurableLog::Open(dir, o);
  ASSERT_FALSE(gap);
  EXPECT_EQ(gap.error().file, files[2]);
  EXPECT_NE(gap.error().message.find("gap"), std::string::npos);
}

TEST(Recovery, PlanIsReadOnly) {
  auto dir = TempDir("plan");
  std::string seg = MakeLog(dir, 3, 40);
  auto bytes = test::ReadFileBytes(seg);
  ASSERT_GT(bytes.size(), 100u);
  bytes.erase(bytes.end() - 5, bytes.end());
  test::WriteFileBytes(seg, bytes);
  auto plan = PlanRecovery(dir, 4096, true);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->torn_tail);
  EXPECT_EQ(plan->segments.back().end_offset, 2u);
  EXPECT_EQ(fs::file_size(seg), bytes.size());  // nothing was cut
}

}  // namespace
}  // namespace felix::storage
