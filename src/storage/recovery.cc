#include "storage/recovery.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>

#include "storage/io_util.h"

namespace felix::storage {

std::string SegmentFileName(uint64_t base) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%020llu.log", static_cast<unsigned long long>(base));
  return buf;
}

std::string IndexFileName(uint64_t base) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%020llu.index", static_cast<unsigned long long>(base));
  return buf;
}

namespace {

std::optional<uint64_t> ParseSegmentName(const std::string& name) {
  if (name.size() != 24 || name.compare(20, 4, ".log") != 0) return std::nullopt;
  uint64_t v = 0;
  for (int i = 0; i < 20; ++i) {
    char c = name[size_t(i)];
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = uint64_t(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

bool AllZero(std::span<const uint8_t> b) {
  return std::all_of(b.begin(), b.end(), [](uint8_t x) { return x == 0; });
}

// Full strict scan of a sealed segment from `start`; builds the index when asked.
StorageResult<ScanOutcome> ScanSealed(std::span<const uint8_t> file, const std::string& path,
                                      uint64_t start, uint64_t expected, IndexBuilder* builder,
                                      std::vector<IndexEntry>* index) {
  ScanOutcome s = ScanRecords(file, start, expected, builder, index);
  if (s.stop != ScanStop::kEnd) {
    return StorageFail(
        CorruptionError("sealed segment damaged: " + s.damage + " (a sealed segment is never torn)",
                        path, s.valid_end));
  }
  return s;
}

}  // namespace

StorageResult<RecoveryPlan> PlanRecovery(const std::string& dir, uint64_t index_spacing,
                                         bool verify_all, uint64_t fresh_base) {
  RecoveryPlan plan;
  plan.fresh_base = fresh_base;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    plan.fresh = true;
    return plan;
  }
  plan.exists = true;
  std::vector<uint64_t> bases;
  while (dirent* e = ::readdir(d)) {
    if (auto b = ParseSegmentName(e->d_name)) bases.push_back(*b);
  }
  ::closedir(d);
  std::sort(bases.begin(), bases.end());

  if (FileExists(dir + "/" + kMarkFileName)) {
    auto bytes = ReadWholeFile(dir + "/" + kMarkFileName);
    if (bytes) plan.mark = DecodeDurableMark(*bytes);
  }
  if (FileExists(dir + "/" + kPoisonFileName)) {
    auto bytes = ReadWholeFile(dir + "/" + kPoisonFileName);
    plan.poison = bytes ? std::string(bytes->begin(), bytes->end()) : std::string("(unreadable)");
  }

  // A newest segment no longer than a header whose header is missing, zero or invalid was
  // never installed (creation interrupted): it is removed; the one before becomes active.
  while (!bases.empty()) {
    std::string path = dir + "/" + SegmentFileName(bases.back());
    auto mapped = MappedFile::Open(path);
    if (!mapped) return tl::unexpected(mapped.error());
    auto bytes = mapped->bytes();
    std::string why;
    bool blank = bytes.size() <= kSegmentHeaderBytes &&
                 (AllZero(bytes) || !DecodeSegmentHeader(bytes, &why).has_value());
    if (!blank) break;
    plan.files_to_delete.push_back(path);
    plan.files_to_delete.push_back(dir + "/" + IndexFileName(bases.back()));
    plan.torn_tail = true;
    plan.torn_reason = "blank segment " + SegmentFileName(bases.back()) + " removed";
    if (bases.size() == 1) plan.fresh_base = bases.back();
    bases.pop_back();
  }
  if (bases.empty()) {
    plan.fresh = true;
    return plan;
  }

  for (size_t i = 0; i < bases.size(); ++i) {
    const bool active = i + 1 == bases.size();
    SegmentPlan seg;
    seg.base = bases[i];
    seg.log_path = dir + "/" + SegmentFileName(seg.base);
    seg.index_path = dir + "/" + IndexFileName(seg.base);
    auto mapped = MappedFile::Open(seg.log_path);
    if (!mapped) return tl::unexpected(mapped.error());
    auto file = mapped->bytes();
    seg.file_bytes = file.size();
    std::string why;
    auto header = DecodeSegmentHeader(file, &why);
    if (!header) return StorageFail(CorruptionError(why, seg.log_path, 0));
    if (header->base_offset != seg.base) {
      return StorageFail(CorruptionError("segment header base " +
                                             std::to_string(header->base_offset) +
                                             " does not match its file name",
                                         seg.log_path, 0));
    }
    if (i > 0 && plan.segments.back().end_offset != seg.base) {
      return StorageFail(CorruptionError("offset gap between segments (expected " +
                                             std::to_string(plan.segments.back().end_offset) +
                                             ", found " + std::to_string(seg.base) + ")",
                                         seg.log_path, 0));
    }
    IndexBuilder builder(index_spacing);
    if (active) {
      ScanOutcome s = ScanRecords(file, kSegmentHeaderBytes, seg.base, &builder, &seg.index);
      plan.records_scanned += s.records;
      plan.bytes_scanned += file.size();
      std::optional<uint64_t> limit;
      if (plan.mark) {
        if (plan.mark->segment_base == seg.base) {
          limit = plan.mark->synced_bytes;
        } else if (plan.mark->segment_base < seg.base) {
          limit = kSegmentHeaderBytes;
        }
      }
      TailDecision verdict = ClassifyTail(file, s, limit);
      if (verdict.verdict == TailVerdict::kCorrupt) {
        return StorageFail(CorruptionError(verdict.reason, seg.log_path, s.valid_end));
      }
      if (verdict.verdict == TailVerdict::kTorn) {
        plan.torn_tail = true;
        plan.torn_reason = verdict.reason;
        plan.truncated_bytes += file.size() - s.valid_end;
      } else if (verdict.verdict == TailVerdict::kPreallocated) {
        plan.preallocated_bytes = file.size() - s.valid_end;
      }
      seg.valid_bytes = s.valid_end;
      seg.end_offset = s.next_offset;
      seg.last_timestamp_ms = s.last_timestamp_ms;
      seg.fully_scanned = true;
      seg.index_rebuilt = true;  // the active index is always rewritten from the scan
      plan.segments.push_back(std::move(seg));
      break;
    }
    // Sealed segment: trust nothing, but check only what the open needs unless asked.
    std::optional<std::vector<IndexEntry>> loaded;
    if (FileExists(seg.index_path)) {
      auto bytes = ReadWholeFile(seg.index_path);
      if (bytes) loaded = DecodeIndexFile(*bytes, seg.base);
    }
    bool quick = false;
    if (!verify_all && loaded && !loaded->empty()) {
      const IndexEntry& last = loaded->back();
      RecordHeader h;
      if (last.position + kRecordHeaderBytes <= file.size() &&
          DecodeRecordHeader(file.data() + last.position, &h) && h.offset == last.offset) {
        auto s = ScanSealed(file, seg.log_path, last.position, last.offset, nullptr, nullptr);
        if (!s) return tl::unexpected(s.error());
        seg.end_offset = s->next_offset;
        seg.last_timestamp_ms = s->last_timestamp_ms;
        seg.index = std::move(*loaded);
        quick = true;
      }
    }
    if (!quick) {
      auto s = ScanSealed(file, seg.log_path, kSegmentHeaderBytes, seg.base, &builder, &seg.index);
      if (!s) return tl::unexpected(s.error());
      plan.records_scanned += s->records;
      plan.bytes_scanned += file.size();
      seg.end_offset = s->next_offset;
      seg.last_timestamp_ms = s->last_timestamp_ms;
      seg.fully_scanned = true;
      bool same = loaded && loaded->size() == seg.index.size() &&
                  std::equal(loaded->begin(), loaded->end(), seg.index.begin(),
                             [](const IndexEntry& a, const IndexEntry& b) {
                               return a.offset == b.offset && a.position == b.position;
                             });
      seg.index_rebuilt = !same;
    }
    seg.valid_bytes = file.size();
    plan.segments.push_back(std::move(seg));
  }
  return plan;
}

}  // namespace felix::storage
