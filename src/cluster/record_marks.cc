#include "cluster/record_marks.h"

#include "storage/record_format.h"

namespace felix::cluster {

namespace flxi = wire::flxi;

bool ShippableFlags(uint32_t flags) {
  return flags == 0 || flags == storage::kRecordFlagGenerationStart;
}

std::vector<flxi::RecordMark> MarksOf(std::span<const storage::Record> records) {
  std::vector<flxi::RecordMark> marks;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!storage::IsGenerationStart(records[i].flags)) continue;
    marks.resize(records.size());
    marks[i].type = flxi::MarkType::kGenerationStart;
  }
  return marks;
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
