// Helpers shared by the storage tests: temp directories, payload builders, file surgery.
#pragma once

#include <stdlib.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "storage/durable_log.h"
#include "support/child_process.h"

namespace felix::storage::test {

// All test directories live under one per-process root, removed after a fully passing run
// (kept for inspection when something failed).
inline const std::string& TestRoot() {
  static const std::string root = felix::testing::MakeTempDir("felix-storage-test");
  return root;
}

class CleanupEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (::testing::UnitTest::GetInstance()->Passed()) std::filesystem::remove_all(TestRoot());
  }
};

inline std::string TempDir(const std::string& name) {
  std::string pattern = TestRoot() + "/" + name + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

inline std::string Payload(uint64_t i, size_t size = 0) {
  std::string s = "record-" + std::to_string(i) + "-";
  while (s.size() < size) s += char('a' + (s.size() % 26));
  return s;
}

inline LogOptions Opts(FsyncMode mode = FsyncMode::kNone) {
  LogOptions o;
  o.fsync_mode = mode;
  return o;
}

inline std::unique_ptr<DurableLog> MustOpen(const std::string& dir, LogOptions o) {
  auto log = DurableLog::Open(dir, std::move(o));
  EXPECT_TRUE(log) << (log ? "" : log.error().ToString());
  if (!log) return nullptr;
  return std::move(*log);
}

// Appends `n` records at offsets first, first + 1, ...; the record at offset i carries
// Payload(i, size).
inline void AppendN(DurableLog& log, Offset first, uint64_t n, size_t size = 0,
                    uint64_t generation = 1) {
  for (Offset at = first; at < first + n; at = at.next()) {
    std::string p = Payload(at.value(), size);
    auto r = log.Append(AppendRecord{AsBytes(p), Generation(generation), 0});
    ASSERT_TRUE(r) << r.error().ToString();
    ASSERT_EQ(r->first_offset, at);
  }
}

inline std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline std::vector<std::string> SegmentFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".log") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Byte positions of every record in a segment file (scanning the valid prefix).
inline std::vector<uint64_t> RecordPositions(const std::vector<uint8_t>& file) {
  std::vector<uint64_t> out;
  uint64_t p = kSegmentHeaderBytes;
  while (p + kRecordHeaderBytes <= file.size()) {
    RecordHeader h;
    if (!DecodeRecordHeader(file.data() + p, &h)) break;
    out.push_back(p);
    p += RecordBytes(h.payload_len);
  }
  return out;
}

// Every record in [from, tail) reads back with the payload Payload(offset, size).
inline void ExpectRecords(const LogReader& log, Offset from, Offset tail, size_t size = 0) {
  Offset at = from;
  while (at < tail) {
    auto batch = log.Read(at, ReadLimits{1000, 1 << 20});
    ASSERT_TRUE(batch) << batch.error().ToString();
    ASSERT_FALSE(batch->records.empty()) << "no record at " << at;
    for (const auto& r : batch->records) {
      if (at == tail) break;
      ASSERT_EQ(r.offset, at);
      ASSERT_EQ(r.payload, Payload(at.value(), size));
      at = at.next();
    }
  }
  EXPECT_EQ(at, tail);
}

}  // namespace felix::storage::test
