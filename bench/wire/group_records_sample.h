// The answer both wire benchmarks use for a poll: `group_records` with 100 records of 256 bytes
// (a queue drain's batch).
#pragma once

#include "wire/flx1/messages.h"

namespace felix::wire::flx1 {

inline Message GroupRecords100() {
  GroupRecords answer;
  answer.request_id = 7;
  for (uint64_t i = 0; i < 100; ++i) {
    GroupRecord record;
    record.offset = 100000 + i;
    record.payload.assign(256, static_cast<uint8_t>('a' + i % 26));
    record.attempts = 1;
    answer.records.push_back(std::move(record));
  }
  return answer;
}

}  // namespace felix::wire::flx1
