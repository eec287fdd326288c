// RecordMarks: which stored record flags travel between brokers, and how.
//
// A generation-start record (storage::kRecordFlagGenerationStart, replication.md §17) ships
// as FLXI mark byte 3 (MarkType::kGenerationStart) in the marks section of kinds 25, 26, 32
// and 36, and the receiver stores it back with the flag at the same offset. Atomic-commit
// records and publisher trailers (storage flags 0x1, 0x2) would need mark byte 4 and the
// publisher bit, which are not shipped yet: a replicator meeting one stalls (a cluster never
// writes them). A receiver stores any other mark it is sent as a plain record, as before.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "storage/log_reader.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// True when a record with these stored flags can be shipped.
bool ShippableFlags(uint32_t flags);

// One mark per record when any record is a generation-start record; otherwise empty (the
// batch then travels, and is checksummed, without marks).
std::vector<wire::flxi::RecordMark> MarksOf(std::span<const storage::Record> records);
std::vector<wire::flxi::RecordMark> MarksOf(std::span<const storage::RecordView> records);

// The storage flags for received record `index` (0 when `marks` is empty or says nothing we
// keep). Fails with a description when a generation-start mark sits on a payload that is not
// the 8-byte generation.
Result<uint32_t, std::string> StoredFlags(std::span<const wire::flxi::RecordMark> marks,
                                          size_t index, wire::flxi::Bytes payload);

}  // namespace felix::cluster
