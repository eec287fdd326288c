// DurableLog behaviour: appends and reads, rollover, range limits, conditional appends,
// tail following, group commit, retention, truncation and reset, index rebuilds.
#include <atomic>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "common/metrics.h"
#include "storage/durable_log.h"
#include "storage/record_format.h"
#include "storage/ring_log.h"
#include "test_util.h"

namespace felix::storage {
namespace {

using namespace std::chrono_literals;
using test::AppendN;
using test::ExpectRecords;
using test::MustOpen;
using test::Opts;
using test::Payload;
using test::TempDir;

TEST(DurableLog, AppendsReadBackWithGenerationAndTimestamp) {
  auto dir = TempDir("basic");
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->recovery().fresh);
  std::string a = "alpha", b = "beta", c = "";
  AppendRecord batch[] = {{AsBytes(a), Generation(3), 111},
                          {AsBytes(b), Generation(4), 222},
                          {AsBytes(c), Generation(4), 0}};
  auto r = log->Append(batch);
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->first_offset, Offset(0));
  EXPECT_EQ(r->last_offset, Offset(2));
  EXPECT_EQ(log->TailOffset(), Offset(3));
  auto read = log->Read(Offset(0), ReadLimits{});
  ASSERT_TRUE(read);
  ASSERT_EQ(read->records.size(), 3u);
  EXPECT_EQ(read->records[0].payload, "alpha");
  EXPECT_EQ(read->records[0].generation, Generation(3));
  EXPECT_EQ(read->records[0].timestamp_ms, 111u);
  EXPECT_EQ(read->records[1].generation, Generation(4));
  EXPECT_GT(read->records[2].timestamp_ms, 1000000000000u);  // assigned wall clock
  EXPECT_EQ(read->next_offset, Offset(3));
  auto one = log->ReadOne(Offset(1));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->payload, "beta");
  auto past = log->Read(Offset(3), ReadLimits{});
  ASSERT_TRUE(past);
  EXPECT_TRUE(past->records.empty());
  EXPECT_FALSE(log->Append(std::span<const AppendRecord>{}));
}

TEST(DurableLog, ReopenKeepsRecordsAndContinuesOffsets) {
  auto dir = TempDir("reopen");
  {
    auto log = MustOpen(dir, Opts());
    AppendN(*log, Offset(0), 50);
    ASSERT_TRUE(log->Close());
  }
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->recovery().fresh);
  EXPECT_FALSE(log->recovery().torn_tail_repaired);
  EXPECT_EQ(log->TailOffset(), Offset(50));
  AppendN(*log, Offset(50), 10);
  ExpectRecords(*log, Offset(0), Offset(60));
}

TEST(DurableLog, RollSealsAndDropSegmentsBelowTrimsWholeSegmentsOnly) {
  auto dir = TempDir("compaction-support");
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  ASSERT_TRUE(log->Roll());  // empty active segment: nothing to seal
  EXPECT_EQ(log->SegmentCount(), 1u);
  AppendN(*log, Offset(0), 10);
  ASSERT_TRUE(log->Roll());
  EXPECT_EQ(log->SegmentCount(), 2u);
  AppendN(*log, Offset(10), 5);
  ASSERT_TRUE(log->Roll());
  AppendN(*log, Offset(15), 5);
  uint64_t before = log->DiskBytes();
  // 12 is inside the second segment [10, 15): only [0, 10) can go.
  auto dropped = log->DropSegmentsBelow(Offset(12));
  ASSERT_TRUE(dropped) << dropped.error().ToString();
  EXPECT_EQ(dropped->segments_deleted, 1u);
  EXPECT_EQ(log->BaseOffset(), Offset(10));
  EXPECT_EQ(log->TailOffset(), Offset(20));
  EXPECT_LT(log->DiskBytes(), before);
  // The active segment is never dropped, whatever the offset.
  ASSERT_TRUE(log->DropSegmentsBelow(Offset(1000)));
  EXPECT_EQ(log->BaseOffset(), Offset(15));
  EXPECT_EQ(log->SegmentCount(), 1u);
  EXPECT_FALSE(log->Read(Offset(3), ReadLimits{}));  // trimmed
  ExpectRecords(*log, Offset(15), Offset(20));
  ASSERT_TRUE(log->Close());
  // Offsets survive a reopen: nothing was renumbered.
  auto again = MustOpen(dir, Opts());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->BaseOffset(), Offset(15));
  EXPECT_EQ(again->TailOffset(), Offset(20));
  ExpectRecords(*again, Offset(15), Offset(20));
}

TEST(DurableLog, RollsOverAtSegmentSizeAndReadsAcrossSegments) {
  auto dir = TempDir("roll");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  o.index_spacing_bytes = 256;
  {
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 200, 100);
    EXPECT_GT(log->SegmentCount(), 5u);
    ExpectRecords(*log, Offset(0), Offset(200), 100);
    ExpectRecords(*log, Offset(137), Offset(200), 100);
    ASSERT_TRUE(log->Close());
  }
  for (const auto& f : test::SegmentFiles(dir)) {
    EXPECT_LE(std::filesystem::file_size(f), 4096u) << f;
  }
  auto log = MustOpen(dir, o);
  EXPECT_EQ(log->TailOffset(), Offset(200));
  ExpectRecords(*log, Offset(0), Offset(200), 100);
  AppendN(*log, Offset(200), 5, 100);
}

// --- preallocation (LogOptions::preallocate_bytes) ---

// The active segment's file size, waited for (bounded) until `pred` holds: the flusher
// zero-fills between flushes, on its own thread.
template <typename Pred>
uint64_t ActiveFileSizeWhen(const std::string& dir, Pred pred) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  uint64_t size = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    size = std::filesystem::file_size(test::SegmentFiles(dir).back());
    if (pred(size)) break;
    std::this_thread::sleep_for(1ms);  // polling a file's size with a deadline, not a delay
  }
  return size;
}

TEST(DurableLog, PreallocationKeepsZeroesAheadAndEverySealedOrClosedSegmentEndsAtItsLastRecord) {
  auto dir = TempDir("prealloc");
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.segment_bytes = 64 << 10;
  o.preallocate_bytes = 16 << 10;
  const uint64_t rec = RecordBytes(100);
  {
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 10, 100);
    const uint64_t used = kSegmentHeaderBytes + 10 * rec;
    // Zeroed space appears ahead of the records, up to preallocate_bytes past them.
    const uint64_t size = ActiveFileSizeWhen(dir, [&](uint64_t s) { return s > used; });
    ASSERT_GT(size, used);
    EXPECT_LE(size, used + o.preallocate_bytes);
    // Appends land in it: the file does not grow for records that fit (and leave more than
    // half of preallocate_bytes ahead, so no further fill starts).
    ASSERT_GE(size, used + 5 * rec + o.preallocate_bytes / 2);
    AppendN(*log, Offset(10), 5, 100);
    EXPECT_EQ(std::filesystem::file_size(test::SegmentFiles(dir).back()), size);
    ExpectRecords(*log, Offset(0), Offset(15), 100);
    // Past a roll the sealed segment ends at its last record (recovery refuses zeros in one).
    AppendN(*log, Offset(15), 1000, 100);
    ASSERT_GE(log->SegmentCount(), 3u);
    ExpectRecords(*log, Offset(0), Offset(1015), 100);
    ASSERT_TRUE(log->Close());
  }
  auto again = MustOpen(dir, o);
  EXPECT_FALSE(again->recovery().torn_tail_repaired);
  EXPECT_EQ(again->recovery().preallocated_bytes, 0u) << "Close cut the zeros";
  EXPECT_EQ(again->TailOffset(), Offset(1015));
  ExpectRecords(*again, Offset(0), Offset(1015), 100);
}

// A read at the tail copies the records it returns, not the zeros preallocated after them: a
// replicator or a live reader following the tail reads each batch's bytes once.
TEST(DurableLog, AReadAtThePreallocatedTailReadsOnlyTheRecordsWritten) {
  auto dir = TempDir("prealloc-read");
  MetricsRegistry registry;
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.metrics = &registry;
  o.preallocate_bytes = 1 << 20;
  auto log = MustOpen(dir, o);
  const Counter& read = *StorageMetrics::Register(registry, "log").read_bytes;
  AppendN(*log, Offset(0), 1, 100);
  const uint64_t used = kSegmentHeaderBytes + RecordBytes(100);
  ASSERT_GT(ActiveFileSizeWhen(dir, [&](uint64_t s) { return s > used; }), used);
  uint64_t before = read.Value();
  ExpectRecords(*log, Offset(0), Offset(1), 100);
  EXPECT_EQ(read.Value() - before, RecordBytes(100));
  // The next appends, read from where the last read ended, as a follower of the tail does.
  AppendN(*log, Offset(1), 8, 100);
  before = read.Value();
  auto batch = log->ReadWritten(Offset(1), ReadLimits{});
  ASSERT_TRUE(batch) << batch.error().ToString();
  EXPECT_EQ(batch->records.size(), 8u);
  EXPECT_EQ(read.Value() - before, 8 * RecordBytes(100));
  before = read.Value();
  auto views = log->ReadWrittenViews(Offset(1), ReadLimits{});
  ASSERT_TRUE(views) << views.error().ToString();
  EXPECT_EQ(views->records.size(), 8u);
  EXPECT_EQ(read.Value() - before, 8 * RecordBytes(100));
  ExpectRecords(*log, Offset(0), Offset(9), 100);
}

// Records read in place are the records Read copies, under the same limits: a read goes on
// across segments and refills (new buffers) as Read does, and a reader resuming at
// next_offset gets every record once.
TEST(DurableLog, ReadViewsReturnsWhatReadDoesUnderTheSameLimits) {
  auto dir = TempDir("views");
  LogOptions o = Opts(FsyncMode::kNone);
  o.segment_bytes = 4096;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 200, 50, 7);
  ASSERT_GT(log->SegmentCount(), 3u);
  auto all = log->Read(Offset(0), ReadLimits{1000, 1 << 20});
  ASSERT_TRUE(all) << all.error().ToString();
  ASSERT_EQ(all->records.size(), 200u);
  for (const ReadLimits limits : {ReadLimits{1000, 1 << 20}, ReadLimits{13, 1 << 20},
                                  ReadLimits{1000, 333}, ReadLimits{1, 1}}) {
    Offset at(0);
    while (at < Offset(200)) {
      auto copied = log->Read(at, limits);
      auto views = log->ReadViews(at, limits);
      ASSERT_TRUE(copied) << copied.error().ToString();
      ASSERT_TRUE(views) << views.error().ToString();
      ASSERT_EQ(views->records.size(), copied->records.size()) << "at " << at;
      ASSERT_FALSE(views->records.empty()) << "nothing at " << at;
      ASSERT_TRUE(views->bytes);
      for (const RecordView& v : views->records) {
        const Record& r = all->records[v.offset.value()];
        ASSERT_EQ(v.offset, at);
        EXPECT_EQ(v.payload, r.payload);
        EXPECT_EQ(v.generation, r.generation);
        EXPECT_EQ(v.timestamp_ms, r.timestamp_ms);
        EXPECT_EQ(v.flags, r.flags);
        at = at.next();
      }
      EXPECT_EQ(views->next_offset, at);
      EXPECT_EQ(copied->next_offset, at);
    }
  }
}

// An in-place read that outgrows its buffer goes on in a new one: records lying across several
// buffers come back whole, and every view stays valid, whatever is appended or read after.
TEST(DurableLog, ReadViewsRefillIntoNewBuffersAndItsViewsOutliveLaterReads) {
  auto dir = TempDir("views-large");
  auto log = MustOpen(dir, Opts(FsyncMode::kNone));
  AppendN(*log, Offset(0), 6, 100 << 10);  // 100 KiB each: past the first read-ahead
  auto first = log->ReadWrittenViews(Offset(0), ReadLimits{4, 64 << 20});
  ASSERT_TRUE(first) << first.error().ToString();
  ASSERT_EQ(first->records.size(), 4u);
  EXPECT_EQ(first->next_offset, Offset(4));
  auto second = log->ReadViews(first->next_offset, ReadLimits{1000, 64 << 20});
  ASSERT_TRUE(second) << second.error().ToString();
  ASSERT_EQ(second->records.size(), 2u);
  AppendN(*log, Offset(6), 3, 100 << 10);
  auto third = log->ReadViews(Offset(0), ReadLimits{1000, 64 << 20});
  ASSERT_TRUE(third) << third.error().ToString();
  ASSERT_EQ(third->records.size(), 9u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(first->records[i].payload, Payload(i, 100 << 10));
  EXPECT_EQ(second->records[1].payload, Payload(5, 100 << 10));
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(third->records[i].payload, Payload(i, 100 << 10));
  // A record larger than the largest read-ahead is read whole.
  const std::string big = Payload(9, 300 << 10);
  ASSERT_TRUE(log->Append(AppendRecord{AsBytes(big)}));
  auto alone = log->ReadViews(Offset(8), ReadLimits{1000, 64 << 20});
  ASSERT_TRUE(alone) << alone.error().ToString();
  ASSERT_EQ(alone->records.size(), 2u);
  EXPECT_EQ(alone->records[1].payload, big);
}

// A read of a few records from a long segment reads about what it returns: its read-ahead
// starts small and doubles at each refill, so a consumer group's poll of 100 small records
// does not copy a quarter MiB out of the page cache (or allocate as much) to use 30 KiB.
TEST(DurableLog, AReadOfAFewRecordsReadsAboutWhatItReturns) {
  auto dir = TempDir("read-ahead");
  MetricsRegistry registry;
  LogOptions o = Opts(FsyncMode::kNone);
  o.metrics = &registry;
  auto log = MustOpen(dir, o);
  const Counter& read = *StorageMetrics::Register(registry, "log").read_bytes;
  AppendN(*log, Offset(0), 5000, 256);  // ~1.3 MiB in one segment
  for (const bool in_place : {false, true}) {
    const uint64_t before = read.Value();
    size_t got = 0;
    if (in_place) {
      auto views = log->ReadViews(Offset(1000), ReadLimits{100, 1 << 20});
      ASSERT_TRUE(views) << views.error().ToString();
      got = views->records.size();
    } else {
      auto copied = log->Read(Offset(1000), ReadLimits{100, 1 << 20});
      ASSERT_TRUE(copied) << copied.error().ToString();
      got = copied->records.size();
    }
    ASSERT_EQ(got, 100u);
    const uint64_t used = 100 * RecordBytes(256);
    // Locating offset 1000 reads record headers from the index entry below it (a few KiB);
    // the refill reads the 43 records the first 16 KiB missed, and a quarter more.
    EXPECT_LT(read.Value() - before, used + used / 4 + (8 << 10))
        << (in_place ? "in place" : "copied");
  }
  // A subscriber's replay chunk (64 records): the refill reads the few left, not 32 KiB.
  const uint64_t before = read.Value();
  auto chunk = log->ReadViews(Offset(2000), ReadLimits{64, 64 << 10});
  ASSERT_TRUE(chunk) << chunk.error().ToString();
  ASSERT_EQ(chunk->records.size(), 64u);
  EXPECT_LT(read.Value() - before, 64 * RecordBytes(256) + (8 << 10));
  // Records larger than the ones before them are read whole all the same.
  AppendN(*log, Offset(5000), 10, 20 << 10);
  auto mixed = log->ReadViews(Offset(4990), ReadLimits{20, 1 << 20});
  ASSERT_TRUE(mixed) << mixed.error().ToString();
  ASSERT_EQ(mixed->records.size(), 20u);
  for (size_t i = 10; i < 20; ++i) {
    EXPECT_EQ(mixed->records[i].payload, Payload(4990 + i, 20 << 10));
  }
}

// A copy of the directory taken while the log is open holds what a crash would leave: zeros
// after the last record. They open as the end of the log, not as a torn tail.
TEST(DurableLog, PreallocatedZerosLeftByACrashOpenAsTheEnd) {
  auto dir = TempDir("prealloc-crash");
  auto copy = TempDir("prealloc-crash-copy");
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.preallocate_bytes = 32 << 10;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 20, 200);
  const uint64_t used = kSegmentHeaderBytes + 20 * RecordBytes(200);
  ASSERT_GT(ActiveFileSizeWhen(dir, [&](uint64_t s) { return s > used; }), used);
  std::filesystem::remove_all(copy);
  std::filesystem::copy(dir, copy);
  const uint64_t copied = std::filesystem::file_size(test::SegmentFiles(copy).back());
  auto reopened = MustOpen(copy, o);
  EXPECT_FALSE(reopened->recovery().torn_tail_repaired) << reopened->recovery().torn_reason;
  EXPECT_EQ(reopened->recovery().preallocated_bytes, copied - used);
  EXPECT_EQ(reopened->TailOffset(), Offset(20));
  ExpectRecords(*reopened, Offset(0), Offset(20), 200);
  AppendN(*reopened, Offset(20), 5, 200);
  ExpectRecords(*reopened, Offset(0), Offset(25), 200);
}

// Truncation and reset with zeroed space ahead; appends bigger than what the fill keeps ahead
// (they outrun it and wait for it, or grow the file themselves) from several threads.
TEST(DurableLog, PreallocationWithTruncateResetAndAppendsThatOutrunIt) {
  auto dir = TempDir("prealloc-mix");
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.segment_bytes = 256 << 10;
  o.preallocate_bytes = 8 << 10;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 50, 100);
  ASSERT_TRUE(log->Truncate(Offset(30)));
  AppendN(*log, Offset(30), 10, 100);
  ExpectRecords(*log, Offset(0), Offset(40), 100);
  std::atomic<bool> failed{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&] {
      std::vector<std::string> payloads(8, std::string(3000, 'p'));
      std::vector<AppendRecord> batch;
      for (const auto& p : payloads) batch.push_back(AppendRecord{AsBytes(p), Generation(1), 0});
      for (int i = 0; i < 25; ++i) {
        if (!log->Append(batch)) failed = true;
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_FALSE(failed.load());
  const uint64_t tail = log->TailOffset().value();
  EXPECT_EQ(tail, 40u + 4 * 25 * 8);
  auto all = log->Read(Offset(0), ReadLimits{100000, 1ull << 40});
  ASSERT_TRUE(all);
  ASSERT_EQ(all->records.size(), tail);
  for (uint64_t i = 40; i < tail; ++i) EXPECT_EQ(all->records[i].payload, std::string(3000, 'p'));
  ASSERT_TRUE(log->Reset(Offset(5000)));
  AppendN(*log, Offset(5000), 3, 100);
  ExpectRecords(*log, Offset(5000), Offset(5003), 100);
  ASSERT_TRUE(log->Close());
  auto again = MustOpen(dir, o);
  EXPECT_FALSE(again->recovery().torn_tail_repaired);
  EXPECT_EQ(again->TailOffset(), Offset(5003));
}

TEST(DurableLog, RecordLargerThanSegmentIsWrittenAlone) {
  auto dir = TempDir("large");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 3, 10);
  std::string big(10000, 'x');
  auto r = log->Append(AppendRecord{AsBytes(big)});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first_offset, Offset(3));
  AppendN(*log, Offset(4), 2, 10);
  auto one = log->ReadOne(Offset(3));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->payload, big);
}

TEST(DurableLog, RangeReadsRespectCountAndByteBudget) {
  auto dir = TempDir("limits");
  auto log = MustOpen(dir, Opts());
  AppendN(*log, Offset(0), 100, 100);
  auto r = log->Read(Offset(10), ReadLimits{7, 1 << 20});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->records.size(), 7u);
  EXPECT_EQ(r->records.front().offset, Offset(10));
  EXPECT_EQ(r->next_offset, Offset(17));
  r = log->Read(Offset(10), ReadLimits{1000, 250});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->records.size(), 3u);  // 100 + 100 + 100 crosses 250
  r = log->Read(Offset(10), ReadLimits{1000, 1});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->records.size(), 1u);  // at least one record
}

TEST(DurableLog, AppendAtOnlyAtTheTail) {
  auto dir = TempDir("append-at");
  auto log = MustOpen(dir, Opts());
  AppendN(*log, Offset(0), 5);
  std::string p = Payload(5);
  AppendRecord rec{AsBytes(p), Generation(2), 0};
  auto bad = log->AppendAt(Offset(7), {&rec, 1});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, StorageErrc::kOffsetMismatch);
  EXPECT_EQ(bad.error().tail, Offset(5));
  EXPECT_EQ(log->TailOffset(), Offset(5));
  auto ok = log->AppendAt(Offset(5), {&rec, 1});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first_offset, Offset(5));
  ExpectRecords(*log, Offset(0), Offset(6));
}

TEST(DurableLog, WaitForTimesOutThenWakesOnAppend) {
  auto dir = TempDir("wait");
  auto log = MustOpen(dir, Opts());
  EXPECT_EQ(log->WaitFor(Offset(0), std::chrono::steady_clock::now() + 1ms), WaitOutcome::kTimeout);
  std::atomic<int> outcome{-1};
  std::thread reader(
      [&] { outcome = int(log->WaitFor(Offset(0), std::chrono::steady_clock::now() + 30s)); });
  AppendN(*log, Offset(0), 1);
  reader.join();
  EXPECT_EQ(outcome.load(), int(WaitOutcome::kReady));
  EXPECT_EQ(log->WaitFor(Offset(0), std::chrono::steady_clock::now()), WaitOutcome::kReady);
}

TEST(DurableLog, NotifyWhenRunsOnAppendInlineWhenPresentAndOnClose) {
  auto dir = TempDir("notify");
  auto log = MustOpen(dir, Opts());
  std::vector<std::pair<int, WaitOutcome>> fired;
  std::mutex mu;
  auto cb = [&](int tag) {
    return [&, tag](WaitOutcome o) {
      std::lock_guard<std::mutex> l(mu);
      fired.emplace_back(tag, o);
    };
  };
  log->NotifyWhen(Offset(1), cb(1));
  uint64_t cancelled = log->NotifyWhen(Offset(2), cb(2));
  log->NotifyWhen(Offset(5), cb(5));
  EXPECT_TRUE(fired.empty());
  AppendN(*log, Offset(0), 1);
  EXPECT_TRUE(fired.empty());  // offset 1 does not exist yet
  AppendN(*log, Offset(1), 1);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_EQ(fired[0], std::make_pair(1, WaitOutcome::kReady));
  EXPECT_TRUE(log->CancelNotify(cancelled));
  AppendN(*log, Offset(2), 1);
  EXPECT_EQ(fired.size(), 1u);
  EXPECT_EQ(log->NotifyWhen(Offset(0), cb(0)), 0u);  // inline
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[1].first, 0);
  ASSERT_TRUE(log->Close());
  ASSERT_EQ(fired.size(), 3u);
  EXPECT_EQ(fired[2], std::make_pair(5, WaitOutcome::kClosed));
  EXPECT_EQ(log->WaitFor(Offset(100), std::chrono::steady_clock::now() + 30s),
            WaitOutcome::kClosed);
  auto after = log->Append(AppendRecord{AsBytes("x")});
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, StorageErrc::kClosed);
}

TEST(DurableLog, OnCommitConcurrentAppendersGetUniqueDurableOffsets) {
  auto dir = TempDir("group");
  MetricsRegistry registry;
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.metrics = &registry;
  o.segment_bytes = 64 * 1024;
  auto log = MustOpen(dir, o);
  constexpr int kThreads = 8, kPer = 40;
  std::vector<std::vector<Offset>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        std::string p = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto r = log->Append(AppendRecord{AsBytes(p)});
        ASSERT_TRUE(r) << r.error().ToString();
        // Acknowledged means durable and readable.
        EXPECT_GT(log->DurableOffset(), r->last_offset);
        EXPECT_GT(log->TailOffset(), r->last_offset);
        got[size_t(t)].push_back(r->first_offset);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<Offset> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), size_t(kThreads * kPer));
  EXPECT_EQ(*all.rbegin(), Offset(kThreads * kPer - 1));
  EXPECT_EQ(log->DurableOffset(), Offset(kThreads * kPer));
  std::string text = registry.RenderPrometheus();
  EXPECT_NE(text.find("felix_storage_sync_batch_appends_count{log=\"log\"}"), std::string::npos);
  EXPECT_NE(text.find("felix_storage_sync_duration_seconds_count"), std::string::npos);
  EXPECT_NE(text.find("felix_storage_append_duration_seconds_count"), std::string::npos);
}

TEST(DurableLog, AppendAsyncReturnsAtOnceAndCallsBackWhenDurable) {
  for (FsyncMode mode : {FsyncMode::kOnCommit, FsyncMode::kPeriodic, FsyncMode::kNone}) {
    auto dir = TempDir("async");
    LogOptions o = Opts(mode);
    o.fsync_interval = std::chrono::hours(1);  // the flush comes from the request, not a tick
    auto log = MustOpen(dir, o);
    constexpr int kBatches = 20;
    std::vector<std::promise<StorageResult<void>>> done(kBatches);
    for (int i = 0; i < kBatches; ++i) {
      std::string p = Payload(uint64_t(i));
      AppendRecord rec{AsBytes(p)};
      auto r = log->AppendAsync({&rec, 1}, [&done, i](const StorageResult<void>& res) {
        done[size_t(i)].set_value(res);
      });
      ASSERT_TRUE(r) << r.error().ToString();
      EXPECT_EQ(r->first_offset, Offset(i));
    }
    for (int i = 0; i < kBatches; ++i) {
      auto f = done[size_t(i)].get_future();
      ASSERT_EQ(f.wait_for(30s), std::future_status::ready) << FsyncModeName(mode) << " " << i;
      EXPECT_TRUE(f.get());
      EXPECT_GT(log->DurableOffset(), Offset(i));
    }
    EXPECT_EQ(log->WaitFor(Offset(kBatches - 1), std::chrono::steady_clock::now() + 30s),
              WaitOutcome::kReady);
    ExpectRecords(*log, Offset(0), Offset(kBatches));
  }
}

TEST(DurableLog, AppendAtAsyncWritesOnlyAtTheTailAndCallsBackWhenDurable) {
  auto dir = TempDir("at-async");
  auto log = MustOpen(dir, Opts(FsyncMode::kOnCommit));
  AppendN(*log, Offset(0), 3);
  std::string p = Payload(3);
  AppendRecord rec{AsBytes(p)};
  bool called = false;
  auto wrong =
      log->AppendAtAsync(Offset(5), {&rec, 1}, [&](const StorageResult<void>&) { called = true; });
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, StorageErrc::kOffsetMismatch);
  std::promise<StorageResult<void>> done;
  auto r = log->AppendAtAsync(Offset(3), {&rec, 1},
                              [&](const StorageResult<void>& res) { done.set_value(res); });
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(r->first_offset, Offset(3));
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(f.get());
  EXPECT_EQ(log->DurableOffset(), Offset(4));
  EXPECT_FALSE(called) << "a refused append never calls back";
  ExpectRecords(*log, Offset(0), Offset(4));
}

TEST(DurableLog, SyncMakesNoneModeDurable) {
  auto dir = TempDir("sync");
  auto log = MustOpen(dir, Opts(FsyncMode::kNone));
  AppendN(*log, Offset(0), 10);
  EXPECT_EQ(log->DurableOffset(), Offset(0));
  ASSERT_TRUE(log->Sync());
  EXPECT_EQ(log->DurableOffset(), Offset(10));
}

TEST(DurableLog, PeriodicModeAppendsAndClosesDurably) {
  auto dir = TempDir("periodic");
  LogOptions o = Opts(FsyncMode::kPeriodic);
  o.fsync_interval = 5ms;
  {
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 20);
    ASSERT_TRUE(log->Close());
    EXPECT_EQ(log->DurableOffset(), Offset(20));
  }
  auto log = MustOpen(dir, o);
  ExpectRecords(*log, Offset(0), Offset(20));
}

TEST(DurableLog, RetentionBySizeDeletesOldestSealedSegmentsAndTrimsReads) {
  auto dir = TempDir("retention-size");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  o.retention_bytes = 3 * 4096;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 300, 100);
  size_t before = log->SegmentCount();
  auto r = log->EnforceRetention();
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_GT(r->segments_deleted, 0u);
  EXPECT_EQ(log->SegmentCount(), before - r->segments_deleted);
  EXPECT_LE(log->SegmentCount(), 4u);
  Offset base = log->BaseOffset();
  EXPECT_GT(base, Offset(0));
  EXPECT_EQ(r->base_offset, base);
  auto trimmed = log->Read(Offset(0), ReadLimits{});
  ASSERT_FALSE(trimmed);
  EXPECT_EQ(trimmed.error().code, StorageErrc::kTrimmed);
  EXPECT_EQ(trimmed.error().oldest, base);
  ExpectRecords(*log, base, Offset(300), 100);
  ASSERT_TRUE(log->Close());
  auto again = MustOpen(dir, o);
  EXPECT_EQ(again->BaseOffset(), base);
  ExpectRecords(*again, base, Offset(300), 100);
}

TEST(DurableLog, RetentionByAgeUsesRecordTimestampsAndKeepsActiveSegment) {
  auto dir = TempDir("retention-age");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  o.retention_age = std::chrono::seconds(60);
  auto log = MustOpen(dir, o);
  const uint64_t old_ts = 1'000'000;
  for (uint64_t i = 0; i < 100; ++i) {
    std::string p = Payload(i, 100);
    ASSERT_TRUE(log->Append(AppendRecord{AsBytes(p), Generation(1), old_ts}));
  }
  auto r = log->EnforceRetention(old_ts + 30'000);  // not old enough yet
  ASSERT_TRUE(r);
  EXPECT_EQ(r->segments_deleted, 0u);
  r = log->EnforceRetention(old_ts + 120'000);
  ASSERT_TRUE(r);
  EXPECT_GT(r->segments_deleted, 0u);
  EXPECT_EQ(log->SegmentCount(), 1u);  // the active segment is never deleted
  EXPECT_EQ(log->TailOffset(), Offset(100));
  ExpectRecords(*log, log->BaseOffset(), Offset(100), 100);
}

TEST(DurableLog, RetentionHoldKeepsSegmentsAtOrAboveCommitOffset) {
  auto dir = TempDir("retention-hold");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  o.retention_bytes = 1;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 200, 100);
  log->SetCommitOffset(Offset(0));
  log->SetRetentionHold(true);
  auto r = log->EnforceRetention();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->segments_deleted, 0u);
  log->SetCommitOffset(Offset(100));
  r = log->EnforceRetention();
  ASSERT_TRUE(r);
  EXPECT_GT(r->segments_deleted, 0u);
  EXPECT_LE(log->BaseOffset(), Offset(100));
}

TEST(DurableLog, TruncateAboveCommitAcrossSegmentsAndRefusedBelowCommit) {
  auto dir = TempDir("truncate");
  LogOptions o = Opts(FsyncMode::kOnCommit);
  o.segment_bytes = 4096;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 200, 100);
  log->SetCommitOffset(Offset(50));
  auto below = log->Truncate(Offset(49));
  ASSERT_FALSE(below);
  EXPECT_EQ(below.error().code, StorageErrc::kBelowCommit);
  EXPECT_EQ(log->TailOffset(), Offset(200));
  EXPECT_FALSE(log->Truncate(Offset(201)));
  ASSERT_TRUE(log->Truncate(Offset(60)));
  EXPECT_EQ(log->TailOffset(), Offset(60));
  EXPECT_EQ(log->DurableOffset(), Offset(60));
  ExpectRecords(*log, Offset(0), Offset(60), 100);
  // New appends reuse the offsets above the cut, in a new generation.
  std::string p = "gen2";
  auto r = log->Append(AppendRecord{AsBytes(p), Generation(2), 0});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first_offset, Offset(60));
  ASSERT_TRUE(log->Close());
  auto again = MustOpen(dir, o);
  EXPECT_FALSE(again->recovery().torn_tail_repaired);
  EXPECT_EQ(again->TailOffset(), Offset(61));
  auto rec = again->ReadOne(Offset(60));
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->payload, "gen2");
  EXPECT_EQ(rec->generation, Generation(2));
  ExpectRecords(*again, Offset(0), Offset(60), 100);
}

// A read starts at a recent batch's first record without walking record headers from the
// sparse index (the log remembers where its last batches begin). After a truncation those
// places are forgotten: records appended again at the same offsets, with other sizes, are
// found where they now are.
TEST(DurableLog, ReadsFromRecentBatchStartsAndForgetsThemAtATruncation) {
  auto dir = TempDir("batch-starts");
  LogOptions o = Opts(FsyncMode::kNone);
  o.index_spacing_bytes = 1 << 20;  // one index entry: every seek would start at the base
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 20, 10);
  for (uint64_t at : {0u, 5u, 19u, 11u}) {
    auto rec = log->ReadOne(Offset(at));
    ASSERT_TRUE(rec) << rec.error().ToString();
    EXPECT_EQ(rec->payload, Payload(at, 10));
  }
  ASSERT_TRUE(log->Truncate(Offset(12)));
  // Offsets 12..19 again in one batch (one remembered start), each record three times the size
  // it had: the places remembered for 13..19 before the truncation would now be wrong.
  std::vector<std::string> payloads;
  for (uint64_t at = 12; at < 20; ++at) payloads.push_back(Payload(at, 30));
  std::vector<AppendRecord> batch;
  for (const auto& p : payloads) batch.push_back(AppendRecord{AsBytes(p), Generation(2), 0});
  auto again = log->Append(batch);
  ASSERT_TRUE(again) << again.error().ToString();
  ASSERT_EQ(again->first_offset, Offset(12));
  for (uint64_t at = 10; at < 20; ++at) {
    auto rec = log->ReadOne(Offset(at));
    ASSERT_TRUE(rec) << "offset " << at << ": " << rec.error().ToString();
    EXPECT_EQ(rec->payload, Payload(at, at < 12 ? 10 : 30)) << at;
  }
  ExpectRecords(*log, Offset(0), Offset(12), 10);
}

TEST(DurableLog, TruncateToSegmentBoundary) {
  auto dir = TempDir("truncate-boundary");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(0), 100, 100);
  // Find the base of the second segment and cut exactly there.
  auto files = test::SegmentFiles(dir);
  ASSERT_GT(files.size(), 2u);
  const Offset second(std::stoull(std::filesystem::path(files[1]).stem().string()));
  ASSERT_TRUE(log->Truncate(second));
  EXPECT_EQ(log->TailOffset(), second);
  AppendN(*log, second, 10, 100);
  ExpectRecords(*log, Offset(0), second + 10, 100);
}

TEST(DurableLog, ResetBeginsAtBaseAndIsRefusedBelowCommit) {
  auto dir = TempDir("reset");
  auto log = MustOpen(dir, Opts());
  AppendN(*log, Offset(0), 30);
  log->SetCommitOffset(Offset(20));
  auto refused = log->Reset(Offset(10));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, StorageErrc::kBelowCommit);
  ASSERT_TRUE(log->Reset(Offset(1000)));
  EXPECT_EQ(log->BaseOffset(), Offset(1000));
  EXPECT_EQ(log->TailOffset(), Offset(1000));
  auto trimmed = log->Read(Offset(5), ReadLimits{});
  ASSERT_FALSE(trimmed);
  EXPECT_EQ(trimmed.error().code, StorageErrc::kTrimmed);
  EXPECT_EQ(trimmed.error().oldest, Offset(1000));
  AppendN(*log, Offset(1000), 5);
  ASSERT_TRUE(log->Close());
  auto again = MustOpen(dir, Opts());
  EXPECT_EQ(again->BaseOffset(), Offset(1000));
  ExpectRecords(*again, Offset(1000), Offset(1005));
}

TEST(DurableLog, FreshLogStartsAtConfiguredBase) {
  auto dir = TempDir("base");
  LogOptions o = Opts();
  o.initial_base_offset = Offset(77);
  auto log = MustOpen(dir, o);
  AppendN(*log, Offset(77), 3);
  EXPECT_EQ(log->BaseOffset(), Offset(77));
}

TEST(DurableLog, MissingOrDamagedIndexIsRebuilt) {
  auto dir = TempDir("index");
  LogOptions o = Opts();
  o.segment_bytes = 4096;
  o.index_spacing_bytes = 300;
  {
    auto log = MustOpen(dir, o);
    AppendN(*log, Offset(0), 150, 100);
    ASSERT_TRUE(log->Close());
  }
  std::vector<std::string> indexes;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".index") indexes.push_back(e.path().string());
  }
  std::sort(indexes.begin(), indexes.end());
  ASSERT_GT(indexes.size(), 3u);
  std::filesystem::remove(indexes[0]);
  test::WriteFileBytes(indexes[1], std::vector<uint8_t>(100, 0xAB));
  {
    // Entries that point at wrong records (valid header, wrong offsets).
    auto bytes = test::ReadFileBytes(indexes[2]);
    ASSERT_GT(bytes.size(), kIndexHeaderBytes + kIndexEntryBytes);
    bytes[bytes.size() - 1] ^= 0x01;  // last entry's position moves
    test::WriteFileBytes(indexes[2], bytes);
  }
  auto log = MustOpen(dir, o);
  ASSERT_TRUE(log);
  EXPECT_GE(log->recovery().indexes_rebuilt, 3u);
  ExpectRecords(*log, Offset(0), Offset(150), 100);
  ASSERT_TRUE(log->Close());
  EXPECT_TRUE(std::filesystem::exists(indexes[0]));
  auto again = MustOpen(dir, o);
  EXPECT_EQ(again->recovery().indexes_rebuilt, 0u);
}

TEST(DurableLog, RefusesNonsenseOptions) {
  LogOptions o = Opts();
  o.segment_bytes = 10;
  EXPECT_FALSE(DurableLog::Open(TempDir("opts"), o));
  EXPECT_EQ(ParseFsyncMode("on_commit"), FsyncMode::kOnCommit);
  EXPECT_FALSE(ParseFsyncMode("always"));
}

// A record's flags are stored and read back (after a reopen too); unknown flags are refused
// at append, and an in-memory ring holds plain records only.
TEST(DurableLog, RecordFlagsRoundTripAndUnknownOnesAreRefused) {
  std::string dir = TempDir("flags");
  {
    auto log = MustOpen(dir, Opts());
    ASSERT_TRUE(log);
    ASSERT_TRUE(log->Append(AppendRecord{AsBytes("plain")}));
    ASSERT_TRUE(log->Append(AppendRecord{AsBytes("body"), Generation(0), 0, kRecordFlagCommit}));
    const auto start = GenerationStartPayload(9);
    ASSERT_TRUE(log->Append(AppendRecord{start, Generation(9), 0, kRecordFlagGenerationStart}));
    auto refused = log->Append(AppendRecord{AsBytes("x"), Generation(0), 0, 0x8});
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, StorageErrc::kInvalidArgument);
  }
  auto log = MustOpen(dir, Opts());
  ASSERT_TRUE(log);
  EXPECT_EQ(log->TailOffset(), Offset(3));
  auto read = log->Read(Offset(0), ReadLimits{10, 1 << 20});
  ASSERT_TRUE(read);
  ASSERT_EQ(read->records.size(), 3u);
  EXPECT_EQ(read->records[0].flags, 0u);
  EXPECT_EQ(read->records[1].flags, kRecordFlagCommit);
  EXPECT_EQ(read->records[1].payload, "body");
  EXPECT_EQ(read->records[2].flags, kRecordFlagGenerationStart);
  EXPECT_EQ(read->records[2].generation, Generation(9));
  EXPECT_EQ(GenerationStartOf(AsBytes(read->records[2].payload)), 9u);
  RingLog ring(RingOptions{});
  EXPECT_FALSE(ring.Append(AppendRecord{AsBytes("body"), Generation(0), 0, kRecordFlagCommit}));
}

}  // namespace
}  // namespace felix::storage
