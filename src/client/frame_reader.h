// FrameReader: cuts FLX1 frames out of a QUIC stream's receive buffer with consume-driven flow
// control (transport/endpoint.h): whole frames are handed to the handler as views into the
// transport's buffer and consumed once accepted; a frame that has only partly arrived is
// copied into the reader (growing as its bytes arrive, never sized from the header alone) so
// that a frame larger than the stream window cannot stall the stream.
//
// The handler may answer kPause (e.g. a full subscription queue): that frame and everything
// after it stay unconsumed in the transport, which stops the sender through flow control.
// Feed again (with the transport's bytes, which SetHandlers re-delivers) to resume.
//
// Not thread-safe: used by the one thread that reads the stream (the endpoint's loop thread).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "felix/errors.h"

namespace felix::client_impl {

class FrameReader {
 public:
  enum class Verdict { kAccept, kPause, kStop };
  // `payload` views either the transport's buffer or the reader's; copy what you keep.
  using Handler = std::function<Verdict(uint16_t flags, std::span<const uint8_t> payload)>;

  struct FeedResult {
    size_t consume = 0;  // bytes the caller must now Consume() on the stream
    bool paused = false;
    bool stopped = false;              // the handler answered kStop (that frame is consumed)
    std::optional<ClientError> error;  // bad magic/version, frame over max_payload
  };

  explicit FrameReader(uint32_t max_payload) : max_payload_(max_payload) {}

  // `data` = every byte the transport holds unconsumed for this stream (possibly empty, to
  // retry a paused frame held by the reader).
  FeedResult Feed(std::span<const uint8_t> data, const Handler& handler);

  // Bytes of a partial (or paused) frame held by the reader.
  size_t held() const { return buffer_.size(); }

 private:
  uint32_t max_payload_;
  std::vector<uint8_t> buffer_;  // header + payload bytes so far of one frame
  size_t expected_ = 0;          // its total size; 0 when buffer_ is empty
  uint16_t flags_ = 0;
};

}  // namespace felix::client_impl
