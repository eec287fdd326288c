// The cache and counter record decoders (storage.md §17.1, §18) on arbitrary bytes: never
// crash or read out of bounds; whatever decodes re-encodes to bytes that decode to the same
// record (a delete's ignored trailing bytes aside). The first byte picks the decoder.
#include <cstdlib>

#include "broker/cache_record.h"

using namespace felix::broker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::span<const uint8_t> payload(data + 1, size - 1);
  if (data[0] & 1) {
    auto record = DecodeCounterRecord(payload);
    if (!record) return 0;
    auto bytes = EncodeCounterRecord(*record);
    if (bytes.size() != payload.size() ||
        !std::equal(bytes.begin(), bytes.end(), payload.begin())) {
      std::abort();  // counter records are exact: re-encoding gives the input back
    }
    return 0;
  }
  auto record = DecodeCacheRecord(payload);
  if (!record) return 0;
  if (record->key.size() > payload.size()) std::abort();
  auto bytes = EncodeCacheRecord(*record);
  auto again = DecodeCacheRecord(bytes);
  if (!again || again->op != record->op || again->key != record->key ||
      again->carried_version != record->carried_version ||
      !std::equal(again->value.begin(), again->value.end(), record->value.begin(),
                  record->value.end())) {
    std::abort();
  }
  if (record->op == CacheRecord::Op::kPut && again->expires_at_millis != record->expires_at_millis)
    std::abort();
  return 0;
}
