// The consumer-group cursor / dead-letter record decoder (storage.md §17.1, §19) on arbitrary
// bytes: never crashes or reads out of bounds; whatever decodes re-encodes (as version 1) to a
// record that decodes to the same thing; cursor values and dead-letter keys and values either
// parse to something that encodes back identically, or fail with a typed error.
#include <cstdlib>
#include <string>

#include "broker/group_log_record.h"

using namespace felix::broker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto decoded = DecodeGroupLogRecord(std::span<const uint8_t>(data, size));
  if (!decoded) return 0;
  auto again = DecodeGroupLogRecord(EncodeGroupLogRecord(*decoded));
  if (!again || !(*again == *decoded)) std::abort();
  if (auto position = DecodeCursorValue(decoded->value)) {
    auto cursor = DecodeGroupLogRecord(EncodeCursorPut(decoded->key, *position));
    if (!cursor || cursor->value != decoded->value) std::abort();
  }
  if (auto parts = ParseDeadLetterKey(decoded->key)) {
    auto reparsed = ParseDeadLetterKey(DeadLetterKey(parts->group, parts->offset));
    if (!reparsed || reparsed->group != parts->group || reparsed->offset != parts->offset) {
      std::abort();
    }
  }
  if (auto state = DecodeDeadLetterValue(decoded->value)) {
    auto put = DecodeGroupLogRecord(EncodeDeadLetterPut("g", 1, *state));
    if (!put || put->value != decoded->value) std::abort();
  }
  return 0;
}
