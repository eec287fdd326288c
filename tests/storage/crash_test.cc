// Crash tests with real processes: crash_writer appends and prints every acknowledged offset;
// the test SIGKILLs it mid-stream, reopens the log and checks that every acknowledged record is
// there (with its payload) and that the log reopens cleanly — over repeated crash cycles.
#include <signal.h>

#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "storage/durable_log.h"
#include "support/child_process.h"
#include "test_util.h"

namespace felix::storage {
namespace {

[[maybe_unused]] const auto* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new test::CleanupEnvironment);

using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;

std::string PayloadFor(uint64_t thread, uint64_t seq, size_t size) {
  std::string s = "crash-" + std::to_string(thread) + "-" + std::to_string(seq) + "-";
  while (s.size() < size) s += char('A' + (seq + s.size()) % 26);
  return s;
}

// offset -> expected payload, from complete "ack <offset> <thread> <seq>" lines.
std::map<Offset, std::string> Acks(const std::string& out, size_t size) {
  std::map<Offset, std::string> acks;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a last line without its newline may be cut short
    std::istringstream l(line);
    std::string word;
    uint64_t off = 0, thread = 0, seq = 0;
    if (l >> word >> off >> thread >> seq && word == "ack") {
      acks[Offset(off)] = PayloadFor(thread, seq, size);
    }
  }
  return acks;
}

void CrashCycles(const std::string& mode, int threads, size_t size, int cycles,
                 uint64_t preallocate_bytes = 0) {
  auto dir = test::TempDir("crash-" + mode);
  Offset acked_so_far(0);
  std::map<Offset, std::string> all_acks;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    ChildProcess writer(BuiltProgram("tests/storage/crash_writer"),
                        {dir, mode, std::to_string(threads), std::to_string(size), "65536",
                         std::to_string(preallocate_bytes)});
    ASSERT_TRUE(writer.WaitForLine("ready")) << writer.stderr_text();
    // Let it get well into the stream (past a few segment rolls), then kill it mid-append.
    std::string target = "ack " + felix::to_string(acked_so_far + 300) + " ";
    ASSERT_TRUE(writer.WaitForLine(target)) << writer.stderr_text();
    int code = writer.Stop(SIGKILL);
    EXPECT_EQ(code, 128 + SIGKILL);
    auto acks = Acks(writer.stdout_text(), size);
    ASSERT_FALSE(acks.empty());
    all_acks.insert(acks.begin(), acks.end());

    LogOptions o;
    o.fsync_mode = FsyncMode::kNone;
    o.segment_bytes = 65536;
    auto log = DurableLog::Open(dir, o);
    ASSERT_TRUE(log) << log.error().ToString();
    const Offset tail = (*log)->TailOffset();
    ASSERT_GT(tail, all_acks.rbegin()->first) << "cycle " << cycle;
    for (const auto& [off, payload] : all_acks) {
      auto rec = (*log)->ReadOne(off);
      ASSERT_TRUE(rec) << "acknowledged offset " << off << ": " << rec.error().ToString();
      ASSERT_EQ(rec->payload, payload) << off;
    }
    // Every record present (acknowledged or not) is intact and gap-free.
    auto batch = (*log)->Read(Offset(0), ReadLimits{1000000, 1ull << 40});
    ASSERT_TRUE(batch) << batch.error().ToString();
    EXPECT_EQ(batch->records.size(), tail.value());
    ASSERT_TRUE((*log)->Close());
    // Reopening again changes nothing.
    auto again = DurableLog::Open(dir, o);
    ASSERT_TRUE(again);
    EXPECT_FALSE((*again)->recovery().torn_tail_repaired);
    EXPECT_EQ((*again)->TailOffset(), tail);
    acked_so_far = tail;
  }
}

TEST(Crash, OnCommitSingleWriterKeepsEveryAcknowledgedRecord) {
  CrashCycles("on_commit", 1, 100, 3);
}

TEST(Crash, OnCommitConcurrentWritersKeepEveryAcknowledgedRecord) {
  CrashCycles("on_commit", 8, 300, 2);
}

// With zeroed space kept ahead of the records (rolling every 64 KiB, so sealed segments are
// cut back to their last record too): killed mid-stream, the zeros are read as the end.
TEST(Crash, OnCommitWithPreallocationKeepsEveryAcknowledgedRecord) {
  CrashCycles("on_commit", 4, 300, 3, 16384);
}

TEST(Crash, PeriodicWriterReopensCleanAfterKill) {
  CrashCycles("periodic", 2, 1000, 2);
}

}  // namespace
}  // namespace felix::storage
