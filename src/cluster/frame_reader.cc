#include "cluster/frame_reader.h"

#include <algorithm>
#include <string>

#include "wire/flxi/flxi.h"

namespace felix::cluster {
namespace {

namespace flxi = wire::flxi;

// The envelope of the 12 bytes at `h`, bounded by MAX_BODY_BYTES (the envelope decoder checks
// magic and version only, so that an unknown kind can be stepped over).
wire::DecodeResult<flxi::Envelope> Header(const uint8_t* h) {
  auto env = flxi::DecodeEnvelope(std::span<const uint8_t>(h, flxi::kHeaderBytes));
  if (!env) return env;
  if (env->length > flxi::kMaxBodyBytes) {
    return wire::DecodeFail(wire::DecodeErrorCode::kFrameTooLarge,
                            "header.length: " + std::to_string(env->length) + " above " +
                                std::to_string(flxi::kMaxBodyBytes));
  }
  return env;
}

}  // namespace

std::optional<wire::DecodeError> FrameReader::Feed(std::span<const uint8_t> data,
                                                   const OnFrame& on_frame) {
  constexpr size_t kHeader = flxi::kHeaderBytes;
  if (error_) return error_;
  size_t pos = 0;
  const size_t n = data.size();
  while (pos < n) {
    if (!partial_.empty()) {
      // Complete the header first, then exactly the body: never copy past this frame.
      if (partial_.size() < kHeader) {
        size_t take = std::min(kHeader - partial_.size(), n - pos);
        partial_.insert(partial_.end(), data.begin() + long(pos), data.begin() + long(pos + take));
        pos += take;
        if (partial_.size() < kHeader) return std::nullopt;
      }
      auto env = Header(partial_.data());
      if (!env) {
        error_ = env.error();
        partial_.clear();
        return error_;
      }
      size_t want = kHeader + env->length - partial_.size();
      size_t take = std::min(want, n - pos);
      partial_.insert(partial_.end(), data.begin() + long(pos), data.begin() + long(pos + take));
      pos += take;
      if (partial_.size() < kHeader + env->length) return std::nullopt;
      std::vector<uint8_t> frame = std::move(partial_);
      partial_.clear();
      on_frame(env->kind, std::span<const uint8_t>(frame.data() + kHeader, env->length));
      continue;
    }
    if (n - pos < kHeader) {
      partial_.assign(data.begin() + long(pos), data.end());
      return std::nullopt;
    }
    auto env = Header(data.data() + pos);
    if (!env) {
      error_ = env.error();
      return error_;
    }
    if (n - pos - kHeader < env->length) {
      partial_.assign(data.begin() + long(pos), data.end());
      return std::nullopt;
    }
    on_frame(env->kind, data.subspan(pos + kHeader, env->length));
    pos += kHeader + env->length;
  }
  return std::nullopt;
}

}  // namespace felix::cluster
