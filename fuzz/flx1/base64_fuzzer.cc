// fuzz_flx1_base64: arbitrary bytes as base64 text, and as bytes to encode. Decoding never
// crashes or reads past the text; decoding is strict, so whatever it accepts re-encodes to the
// very same text; and every encoding decodes back to its bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "wire/flx1/base64.h"

using namespace felix::wire::flx1;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto bytes = Base64Decode(text)) {
    if (Base64Encode(*bytes) != text) abort();
  }
  const std::string encoded = Base64Encode(std::span<const uint8_t>(data, size));
  auto back = Base64Decode(encoded);
  if (!back || back->size() != size || !std::equal(back->begin(), back->end(), data)) abort();
  return 0;
}
