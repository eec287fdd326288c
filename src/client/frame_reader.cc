#include "client/frame_reader.h"

#include <algorithm>

#include "client/error_mapping.h"
#include "wire/flx1/frame.h"

namespace felix::client_impl {

FrameReader::FeedResult FrameReader::Feed(std::span<const uint8_t> data, const Handler& handler) {
  FeedResult result;
  size_t pos = 0;
  if (expected_ != 0) {
    size_t take = std::min(expected_ - buffer_.size(), data.size());
    buffer_.insert(buffer_.end(), data.begin(), data.begin() + long(take));
    pos += take;
    result.consume = pos;
    if (buffer_.size() < expected_) return result;
    Verdict v = handler(flags_, std::span<const uint8_t>(buffer_).subspan(wire::flx1::kHeaderSize));
    if (v == Verdict::kPause) {
      result.paused = true;
      return result;
    }
    buffer_.clear();
    buffer_.shrink_to_fit();
    expected_ = 0;
    if (v == Verdict::kStop) {
      result.stopped = true;
      return result;
    }
  }
  while (data.size() - pos >= wire::flx1::kHeaderSize) {
    std::span<const uint8_t> rest = data.subspan(pos);
    auto header = wire::flx1::DecodeEnvelope(rest, max_payload_);
    if (!header) {
      result.error = FromDecode(header.error(), "frame");
      return result;
    }
    size_t total = wire::flx1::kHeaderSize + header->length;
    if (rest.size() < total) {
      // Partial frame: hold its bytes so the transport returns their credit.
      buffer_.assign(rest.begin(), rest.end());
      expected_ = total;
      flags_ = header->flags;
      pos = data.size();
      break;
    }
    Verdict v = handler(header->flags, rest.subspan(wire::flx1::kHeaderSize, header->length));
    if (v == Verdict::kPause) {
      result.paused = true;
      break;
    }
    pos += total;
    if (v == Verdict::kStop) {
      result.stopped = true;
      break;
    }
  }
  result.consume = pos;
  return result;
}

}  // namespace felix::client_impl
