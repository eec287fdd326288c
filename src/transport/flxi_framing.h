// Minimal FLXI framing for the transport: splits a stream's bytes into frames by the frozen
// 12-byte header (magic `FLXI`, version u16 = 1, kind u16, length u32, all big-endian) and
// builds frames. Knows nothing about bodies except that each starts with a u64 correlation id.
// Stands in for the wire library's FLXI envelope decoder until it lands (src/wire/flxi/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace felix::transport {

inline constexpr uint32_t kFlxiMagic = 0x464C5849;  // "FLXI"
inline constexpr uint16_t kFlxiVersion = 1;
inline constexpr size_t kFlxiHeaderBytes = 12;
inline constexpr uint32_t kFlxiMaxBodyBytes = 64u << 20;  // MAX_BODY_BYTES

enum class FlxiFramingError {
  kBadMagic,    // not an FLXI stream: fatal for the connection
  kBadVersion,  // a version this build does not speak: fatal, no answer
  kTooLarge,    // length above MAX_BODY_BYTES: fatal
};
const char* FlxiFramingErrorName(FlxiFramingError e);

// The first 8 body bytes as a big-endian correlation id (0 when the body is shorter).
uint64_t FlxiCorrelationId(std::span<const uint8_t> body);

// Appends one frame: header + body.
void AppendFlxiFrame(std::vector<uint8_t>& out, uint16_t kind, std::span<const uint8_t> body);
// Appends one frame whose body is `correlation_id` (u64 BE) followed by `rest`.
void AppendFlxiFrame(std::vector<uint8_t>& out, uint16_t kind, uint64_t correlation_id,
                     std::span<const uint8_t> rest);

// Incremental splitter. Feed it the stream's bytes in any chunking; it calls `on_frame` for each
// complete frame, in order, and keeps a partial frame (at most 12 bytes + MAX_BODY_BYTES) until
// the rest arrives. Complete frames inside one chunk are handed out without copying. After an
// error every further Feed returns the same error. Not thread-safe (one per stream).
class FlxiFrameSplitter {
 public:
  using OnFrame = std::function<void(uint16_t kind, std::span<const uint8_t> body)>;

  // Consumes all of `data`; returns the error that stops the stream, if any.
  std::optional<FlxiFramingError> Feed(std::span<const uint8_t> data, const OnFrame& on_frame);
  size_t buffered() const { return partial_.size(); }

 private:
  static std::optional<FlxiFramingError> CheckHeader(const uint8_t* h, uint32_t* length,
                                                     uint16_t* kind);
  std::vector<uint8_t> partial_;
  std::optional<FlxiFramingError> error_;
};

}  // namespace felix::transport
