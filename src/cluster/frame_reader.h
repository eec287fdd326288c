// FrameReader: splits one FLXI stream's bytes into frames. The 12-byte envelope is decoded by
// the wire library (wire::flxi::DecodeEnvelope: magic and version only, raw kind and length
// even for a kind this build does not know); the reader adds the MAX_BODY_BYTES bound and the
// buffering across QUIC chunks. Bodies are handed out undecoded: the caller decides what a
// kind means (and answers an unknown one with UnsupportedKind, internal-protocol-bodies.md §2).
//
// A wrong magic, a version other than 1 or a length above MAX_BODY_BYTES is fatal for the
// stream: there is no frame boundary to trust after it, so every later Feed returns the same
// error. Not thread-safe: one reader per stream, fed on the endpoint's loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "wire/decode_error.h"

namespace felix::cluster {

class FrameReader {
 public:
  // `kind` is the raw header kind (maybe unknown); `body` is exactly `length` bytes and is
  // valid only during the call.
  using OnFrame = std::function<void(uint16_t kind, std::span<const uint8_t> body)>;

  // Consumes all of `data` (any chunking); calls `on_frame` for each complete frame in order
  // and keeps a partial frame (at most 12 bytes + MAX_BODY_BYTES) until the rest arrives.
  // Complete frames inside one chunk are handed out without copying. Returns the error that
  // stops the stream (kBadMagic, kBadVersion or kFrameTooLarge), if any.
  std::optional<wire::DecodeError> Feed(std::span<const uint8_t> data, const OnFrame& on_frame);
  size_t buffered() const { return partial_.size(); }

 private:
  std::vector<uint8_t> partial_;
  std::optional<wire::DecodeError> error_;
};

}  // namespace felix::cluster
