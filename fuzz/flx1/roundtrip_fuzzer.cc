// fuzz_flx1_roundtrip: arbitrary bytes as one whole FLX1 frame (header + payload).
// Properties where decoding succeeds:
//   * binary frames: encode(decode(x)) == x exactly (flags are derived from content and each
//     layout has one encoding per value);
//   * JSON frames: decode(encode(decode(x))) == decode(x), and encode is a fixed point after
//     one pass (x itself may be non-canonical: key order, whitespace, unknown keys, escapes);
//   * an unknown `type` is kept verbatim, so its frame re-encodes to x exactly.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "wire/flx1/frame.h"

using namespace felix::wire::flx1;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> input(data, size);
  auto frame = DecodeFrame(input, kDefaultMaxFrameBytes);
  if (!frame) return 0;
  auto bytes = EncodeFrame(*frame);
  if (!bytes) abort();
  const auto* message = std::get_if<Message>(&*frame);
  const bool exact = message == nullptr || std::holds_alternative<UnknownMessage>(*message);
  if (exact && !std::equal(input.begin(), input.end(), bytes->begin(), bytes->end())) abort();
  auto again = DecodeFrame(*bytes, kDefaultMaxFrameBytes);
  if (!again || !(*again == *frame)) abort();
  auto bytes2 = EncodeFrame(*again);
  if (!bytes2 || *bytes2 != *bytes) abort();
  return 0;
}
