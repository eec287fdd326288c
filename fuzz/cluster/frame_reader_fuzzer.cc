// Fuzzes the FLXI stream reader: the input is split into chunks at positions taken from its
// first byte, and the frames and the error found must be the same whatever the chunking.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <vector>

#include "cluster/frame_reader.h"
#include "wire/flxi/flxi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = 1 + data[0] % 64;
  std::span<const uint8_t> input(data + 1, size - 1);

  using Frames = std::vector<std::pair<uint16_t, std::vector<uint8_t>>>;
  auto run = [&](size_t chunk, Frames& out) {
    felix::cluster::FrameReader reader;
    std::optional<felix::wire::DecodeError> err;
    for (size_t off = 0; off < input.size() && !err; off += chunk) {
      err = reader.Feed(input.subspan(off, std::min(chunk, input.size() - off)),
                        [&](uint16_t kind, std::span<const uint8_t> body) {
                          if (body.size() > felix::wire::flxi::kMaxBodyBytes) std::abort();
                          out.emplace_back(kind, std::vector<uint8_t>(body.begin(), body.end()));
                        });
    }
    return err;
  };
  Frames whole, chunked;
  auto e1 = run(input.size() + 1, whole);
  auto e2 = run(step, chunked);
  if (e1.has_value() != e2.has_value() || (e1 && e1->code != e2->code) || whole != chunked) {
    std::abort();
  }
  return 0;
}
