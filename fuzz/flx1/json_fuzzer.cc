// fuzz_flx1_json: arbitrary bytes as an FLX1 JSON payload. Decoding never crashes and answers as
// the full parser alone (DecodeMessageJsonFully) does; whatever
// decodes re-encodes, and the re-encoding decodes to the same message and is a fixed point
// (encode(decode(encode(m))) == encode(m)). The canonical rendering reads back to the same
// message.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "wire/flx1/frame.h"
#include "wire/flx1/json_codec.h"

using namespace felix::wire::flx1;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto message = DecodeMessageJson(text);
  // The flat-object reading answers exactly as the full parser alone.
  auto fully = DecodeMessageJsonFully(text);
  if (message.has_value() != fully.has_value()) abort();
  if (message && !(*message == *fully)) abort();
  if (!message) return 0;
  auto encoded = EncodeMessageJson(*message);
  if (!encoded) abort();  // a decoded message must always be encodable
  auto again = DecodeMessageJson(*encoded);
  if (!again || !(*again == *message)) abort();
  auto encoded2 = EncodeMessageJson(*again);
  if (!encoded2 || *encoded2 != *encoded) abort();
  auto canonical = FrameToCanonicalJson(*message);
  if (!canonical) abort();
  auto back = FrameFromCanonicalJson(*canonical);
  if (!back) abort();
  if (const auto* unknown = std::get_if<UnknownMessage>(&*message)) {
    // An unknown message's raw text is re-dumped compactly; its identity is type + request_id.
    const auto* m = std::get_if<Message>(&back->frame);
    const auto* u = m ? std::get_if<UnknownMessage>(m) : nullptr;
    if (!u || u->type != unknown->type || u->request_id != unknown->request_id) abort();
  } else if (!(back->frame == Flx1Frame(*message))) {
    abort();
  }
  return 0;
}
