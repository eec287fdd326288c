// The replica-state side-file decoders (replica, ballot, epochs) on arbitrary bytes: never
// crash or read out of bounds, and whatever decodes re-encodes to the same bytes. The first
// input byte picks the decoder.
#include <algorithm>
#include <cstdlib>
#include <span>

#include "storage/replica_files.h"

using namespace felix::storage;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::span<const uint8_t> bytes(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      if (auto state = DecodeReplicaState(bytes)) {
        auto again = EncodeReplicaState(*state);
        if (!std::equal(again.begin(), again.end(), bytes.begin(), bytes.end())) std::abort();
      }
      break;
    case 1:
      if (auto ballot = DecodeBallot(bytes)) {
        auto again = EncodeBallot(*ballot);
        if (!again || !std::equal(again->begin(), again->end(), bytes.begin(), bytes.end())) {
          std::abort();
        }
      }
      break;
    default: {
      std::string defect;
      auto history = GenerationHistory::Decode(bytes, &defect);
      if (defect.empty()) {
        auto again = history.Encode();
        if (!std::equal(again.begin(), again.end(), bytes.begin(), bytes.end())) std::abort();
      } else if (!history.entries().empty()) {
        std::abort();
      }
    }
  }
  return 0;
}
