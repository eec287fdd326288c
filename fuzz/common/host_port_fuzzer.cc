// ParseHostPort on arbitrary bytes: never crashes; whatever it accepts prints back to an
// address that parses to the same value.
#include <cstdlib>
#include <string_view>

#include "common/net_address.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = felix::ParseHostPort(text);
  if (parsed) {
    auto again = felix::ParseHostPort(parsed->ToString());
    if (!again || !(*again == *parsed)) std::abort();
  }
  return 0;
}
