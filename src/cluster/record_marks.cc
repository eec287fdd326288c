#include "cluster/record_marks.h"

#include "storage/record_format.h"

namespace felix::cluster {

namespace flxi = wire::flxi;

bool ShippableFlags(uint32_t flags) {
  return flags == 0 || flags == storage::kRecordFlagGenerationStart;
}

namespace {

// Copied records and records read in place carry the same flags.
template <typename R>
std::vector<flxi::RecordMark> MarksOfFlags(std::span<const R> records) {
  std::vector<flxi::RecordMark> marks;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!storage::IsGenerationStart(records[i].flags)) continue;
    marks.resize(records.size());
    marks[i].type = flxi::MarkType::kGenerationStart;
  }
  return marks;
}

}  // namespace

std::vector<flxi::RecordMark> MarksOf(std::span<const storage::Record> records) {
  return MarksOfFlags(records);
}

std::vector<flxi::RecordMark> MarksOf(std::span<const storage::RecordView> records) {
  return MarksOfFlags(records);
}

Result<uint32_t, std::string> StoredFlags(std::span<const flxi::RecordMark> marks, size_t index,
                                          flxi::Bytes payload) {
  if (index >= marks.size() || marks[index].type != flxi::MarkType::kGenerationStart) return 0u;
  if (payload.size() != storage::kGenerationStartPayloadBytes) {
    return tl::unexpected("a generation-start record of " + std::to_string(payload.size()) +
                          " bytes (8 expected)");
  }
  return storage::kRecordFlagGenerationStart;
}

}  // namespace felix::cluster
