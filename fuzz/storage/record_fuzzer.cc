// The record decoder and recovery scanner on arbitrary segment bytes: never crashes or reads
// out of bounds; the scan's valid prefix re-scans cleanly to the same records; the verdict is
// consistent (clean only when every byte decoded); the index built points at real records.
// The first 8 input bytes choose the durable mark (or none), the rest is the segment file.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "storage/record_format.h"

using namespace felix::storage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t mark_raw = 0;
  std::memcpy(&mark_raw, data, 8);
  std::span<const uint8_t> file(data + 8, size - 8);
  std::optional<uint64_t> mark;
  if (mark_raw & 1) mark = (mark_raw >> 1) % (file.size() + 64);

  std::string why;
  auto header = DecodeSegmentHeader(file, &why);
  uint64_t base = header ? header->base_offset : 0;
  IndexBuilder builder(mark_raw % 997 + 1);
  std::vector<IndexEntry> index;
  ScanOutcome s = ScanRecords(file, kSegmentHeaderBytes, base, &builder, &index);
  if (s.valid_end > file.size() ||
      (file.size() >= kSegmentHeaderBytes && s.valid_end < kSegmentHeaderBytes)) {
    std::abort();
  }
  if (s.next_offset != base + s.records) std::abort();
  TailDecision d = ClassifyTail(file, s, mark);
  if ((d.verdict == TailVerdict::kClean) != (s.stop == ScanStop::kEnd)) std::abort();
  if (s.stop == ScanStop::kEnd && s.valid_end != file.size() &&
      file.size() >= kSegmentHeaderBytes) {
    std::abort();
  }
  // The valid prefix is a clean log by itself.
  if (s.valid_end >= kSegmentHeaderBytes) {
    auto prefix = file.first(s.valid_end);
    ScanOutcome again = ScanRecords(prefix, kSegmentHeaderBytes, base, nullptr, nullptr);
    if (again.stop != ScanStop::kEnd || again.records != s.records) std::abort();
  }
  for (const auto& e : index) {
    RecordHeader h;
    if (e.position + kRecordHeaderBytes > s.valid_end) std::abort();
    if (!DecodeRecordHeader(file.data() + e.position, &h) || h.offset != e.offset) std::abort();
  }
  // The index file codec never trusts what it reads.
  auto entries = DecodeIndexFile(file, base);
  if (entries) {
    for (size_t i = 1; i < entries->size(); ++i) {
      if ((*entries)[i].offset <= (*entries)[i - 1].offset) std::abort();
    }
  }
  (void)DecodeDurableMark(file);
  return 0;
}
