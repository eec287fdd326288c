// Strict decoding makes encode(decode(x)) == x exact: whenever a whole frame decodes, it
// re-encodes to the very same bytes, and decoding those gives the same frame.
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/flxi/flxi.h"

using namespace felix::wire::flxi;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto frame = DecodeFrame(std::span<const uint8_t>(data, size));
  if (!frame) return 0;
  auto bytes = EncodeFrame(*frame);
  if (!bytes) std::abort();
  if (bytes->size() != size || std::memcmp(bytes->data(), data, size) != 0) std::abort();
  auto again = DecodeFrame(*bytes);
  if (!again || !(*again == *frame)) std::abort();
  if (CorrelationId(*frame) != CorrelationIdOfBody(std::span(*bytes).subspan(kHeaderBytes)))
    std::abort();
  return 0;
}
