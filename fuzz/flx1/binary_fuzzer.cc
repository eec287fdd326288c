// fuzz_flx1_binary: the first two bytes are a frame flag word, the rest a binary payload.
// Decoding never crashes or over-reads; a decoded binary payload re-encodes to exactly the
// same flags and bytes (binary layouts have one encoding per value), and its canonical JSON
// reads back to the same frame.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "wire/flx1/frame.h"

using namespace felix::wire::flx1;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint16_t flags = static_cast<uint16_t>((data[0] << 8) | data[1]);
  if (flags == 0) return 0;  // JSON payloads are fuzz_flx1_json's
  std::span<const uint8_t> payload(data + 2, size - 2);
  auto frame = DecodePayload(flags, payload);
  if (!frame) return 0;
  if (FrameFlags(*frame) != flags) abort();
  auto bytes = EncodeFrame(*frame);
  if (!bytes) abort();
  if (bytes->size() != kHeaderSize + payload.size()) abort();
  if (!std::equal(payload.begin(), payload.end(), bytes->begin() + kHeaderSize)) abort();
  auto canonical = FrameToCanonicalJson(*frame);
  if (!canonical) abort();
  auto back = FrameFromCanonicalJson(*canonical);
  if (!back || !(back->frame == *frame)) abort();
  return 0;
}
