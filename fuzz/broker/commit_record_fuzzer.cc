// The atomic-commit record body decoder (storage.md §3.4) on arbitrary bytes: never crashes,
// reads out of bounds or allocates from an unchecked count; a body that decodes re-encodes to
// exactly the input bytes (the layout has one encoding), and CommitEventBytes agrees with the
// full decode on the event.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "broker/commit_record.h"

using namespace felix::broker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> input(data, size);
  auto event = CommitEventBytes(input);
  auto decoded = DecodeCommitRecord(input);
  if (!decoded) return 0;
  if (!event ||
      !std::equal(event->begin(), event->end(), decoded->event.begin(), decoded->event.end())) {
    std::abort();
  }
  if (EncodeCommitRecord(*decoded) != std::vector<uint8_t>(input.begin(), input.end())) {
    std::abort();
  }
  return 0;
}
