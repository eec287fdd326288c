// RingLog: same reader contract as the durable log, bounded by records and bytes.
#include <thread>

#include <gtest/gtest.h>

#include "storage/ring_log.h"
#include "test_util.h"

namespace felix::storage {
namespace {

using namespace std::chrono_literals;

void RingAppend(RingLog& ring, Offset first, uint64_t n, size_t size = 0) {
  for (Offset at = first; at < first + n; at = at.next()) {
    std::string p = test::Payload(at.value(), size);
    auto r = ring.Append(AppendRecord{AsBytes(p), Generation(9), 0});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->first_offset, at);
  }
}

TEST(RingLog, AppendsAndReads) {
  RingLog ring(RingOptions{100, 1 << 20, Offset(0)});
  RingAppend(ring, Offset(0), 10);
  EXPECT_EQ(ring.TailOffset(), Offset(10));
  test::ExpectRecords(ring, Offset(0), Offset(10));
  auto r = ring.Read(Offset(3), ReadLimits{2, 1 << 20});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->records.size(), 2u);
  EXPECT_EQ(r->records[0].generation, Generation(9));
  EXPECT_EQ(r->next_offset, Offset(5));
}

TEST(RingLog, BoundedByRecordsAndBytesWithTrimmedReads) {
  RingLog by_count(RingOptions{5, 1 << 20, Offset(0)});
  RingAppend(by_count, Offset(0), 12);
  EXPECT_EQ(by_count.BaseOffset(), Offset(7));
  auto trimmed = by_count.Read(Offset(2), ReadLimits{});
  ASSERT_FALSE(trimmed);
  EXPECT_EQ(trimmed.error().code, StorageErrc::kTrimmed);
  EXPECT_EQ(trimmed.error().oldest, Offset(7));
  test::ExpectRecords(by_count, Offset(7), Offset(12));

  RingLog by_bytes(RingOptions{1000, 1000, Offset(0)});
  RingAppend(by_bytes, Offset(0), 30, 100);
  EXPECT_LE(by_bytes.bytes(), 1000u);
  EXPECT_EQ(by_bytes.BaseOffset(), Offset(20));
  std::string huge(5000, 'h');
  ASSERT_TRUE(by_bytes.Append(AppendRecord{AsBytes(huge)}));
  EXPECT_EQ(by_bytes.BaseOffset(), Offset(30));  // the newest record stays, alone
}

// A full ring stores new records in the blocks the ones it evicts free (change 60; their buffers
// before): shorter, longer and empty payloads after them read back exactly, batch after batch.
TEST(RingLog, RecordsStoredInRecycledBuffersReadBackExactly) {
  RingLog ring(RingOptions{8, 1 << 20, Offset(0)});
  auto payload = [](uint64_t i) {
    const size_t sizes[] = {300, 20, 0, 1000, 5000, 7, 256};
    return std::string(sizes[i % 7], char('a' + i % 26)) + std::to_string(i);
  };
  uint64_t next = 0;
  for (int batch = 0; batch < 50; ++batch) {
    std::vector<std::string> payloads;
    for (int i = 0; i < 1 + batch % 5; ++i) payloads.push_back(payload(next + i));
    std::vector<AppendRecord> records;
    for (const auto& p : payloads) records.push_back(AppendRecord{AsBytes(p), Generation(1), 0});
    ASSERT_TRUE(ring.Append(records));
    next += payloads.size();
    auto read = ring.Read(ring.BaseOffset(), ReadLimits{100, 1 << 20});
    ASSERT_TRUE(read);
    ASSERT_EQ(read->records.size(), std::min<uint64_t>(next, 8));
    for (const auto& r : read->records) EXPECT_EQ(r.payload, payload(r.offset.value())) << r.offset;
  }
}

// An append evicts the records it pushes out before it stores its own (change 56): batches
// larger than a block, larger than the ring, and ones the byte bound cuts read back
// exactly, and the ring keeps exactly what its bounds allow.
TEST(RingLog, BatchesLargerThanTheSparesOrTheRingKeepTheNewestExactly) {
  auto payload = [](uint64_t i) {
    const size_t sizes[] = {256, 17, 0, 3000, 256, 90000, 40};
    return std::string(sizes[i % 7], char('a' + i % 26)) + std::to_string(i);
  };
  const uint64_t max_records = 200;
  const uint64_t max_bytes = 400000;
  RingLog ring(RingOptions{max_records, max_bytes, Offset(0)});
  std::vector<std::string> all;
  const size_t batch_sizes[] = {150, 1, 300, 199, 200, 7, 450, 129, 1};
  for (size_t n : batch_sizes) {
    std::vector<std::string> payloads;
    for (size_t i = 0; i < n; ++i) payloads.push_back(payload(all.size() + i));
    std::vector<AppendRecord> records;
    for (const auto& p : payloads) records.push_back(AppendRecord{AsBytes(p), Generation(2), 0});
    auto appended = ring.Append(records);
    ASSERT_TRUE(appended);
    EXPECT_EQ(appended->first_offset, Offset(all.size()));
    all.insert(all.end(), payloads.begin(), payloads.end());
    // What the bounds keep: the newest records, as many as fit, and always the newest.
    uint64_t kept = 0, bytes = 0;
    while (kept < all.size() && kept < max_records &&
           (kept == 0 || bytes + all[all.size() - 1 - kept].size() <= max_bytes)) {
      bytes += all[all.size() - 1 - kept].size();
      ++kept;
    }
    ASSERT_EQ(ring.BaseOffset(), Offset(all.size() - kept)) << "after a batch of " << n;
    ASSERT_EQ(ring.TailOffset(), Offset(all.size()));
    EXPECT_EQ(ring.bytes(), bytes);
    auto read = ring.Read(ring.BaseOffset(), ReadLimits{1000, 1 << 30});
    ASSERT_TRUE(read);
    ASSERT_EQ(read->records.size(), kept);
    for (const auto& r : read->records) {
      ASSERT_EQ(r.payload, all[r.offset.value()]) << r.offset;
      EXPECT_EQ(r.generation, Generation(2));
    }
  }
}

TEST(RingLog, AppendAtAndTailFollowing) {
  RingLog ring(RingOptions{100, 1 << 20, Offset(50)});
  std::string p = "x";
  AppendRecord rec{AsBytes(p)};
  auto bad = ring.AppendAt(Offset(51), {&rec, 1});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().tail, Offset(50));
  EXPECT_EQ(ring.WaitFor(Offset(50), std::chrono::steady_clock::now() + 1ms),
            WaitOutcome::kTimeout);
  std::atomic<int> fired{-1};
  ring.NotifyWhen(Offset(50), [&](WaitOutcome o) { fired = int(o); });
  std::thread waiter([&] {
    EXPECT_EQ(ring.WaitFor(Offset(50), std::chrono::steady_clock::now() + 30s),
              WaitOutcome::kReady);
  });
  ASSERT_TRUE(ring.AppendAt(Offset(50), {&rec, 1}));
  waiter.join();
  EXPECT_EQ(fired.load(), int(WaitOutcome::kReady));
  ring.Close();
  EXPECT_EQ(ring.WaitFor(Offset(99), std::chrono::steady_clock::now() + 30s), WaitOutcome::kClosed);
}

}  // namespace
}  // namespace felix::storage
