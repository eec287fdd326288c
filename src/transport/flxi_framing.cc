#include "transport/flxi_framing.h"

#include <algorithm>

namespace felix::transport {
namespace {

uint32_t Be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}
uint16_t Be16(const uint8_t* p) {
  return uint16_t(uint16_t(p[0]) << 8 | p[1]);
}
void PutBe(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(uint8_t(v >> (8 * i)));
}

}  // namespace

const char* FlxiFramingErrorName(FlxiFramingError e) {
  switch (e) {
    case FlxiFramingError::kBadMagic:
      return "bad magic";
    case FlxiFramingError::kBadVersion:
      return "unsupported version";
    case FlxiFramingError::kTooLarge:
      return "frame too large";
  }
  return "?";
}

uint64_t FlxiCorrelationId(std::span<const uint8_t> body) {
  if (body.size() < 8) return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = v << 8 | body[i];
  return v;
}

void AppendFlxiFrame(std::vector<uint8_t>& out, uint16_t kind, std::span<const uint8_t> body) {
  PutBe(out, kFlxiMagic, 4);
  PutBe(out, kFlxiVersion, 2);
  PutBe(out, kind, 2);
  PutBe(out, body.size(), 4);
  out.insert(out.end(), body.begin(), body.end());
}

void AppendFlxiFrame(std::vector<uint8_t>& out, uint16_t kind, uint64_t correlation_id,
                     std::span<const uint8_t> rest) {
  PutBe(out, kFlxiMagic, 4);
  PutBe(out, kFlxiVersion, 2);
  PutBe(out, kind, 2);
  PutBe(out, 8 + rest.size(), 4);
  PutBe(out, correlation_id, 8);
  out.insert(out.end(), rest.begin(), rest.end());
}

std::optional<FlxiFramingError> FlxiFrameSplitter::CheckHeader(const uint8_t* h, uint32_t* length,
                                                               uint16_t* kind) {
  if (Be32(h) != kFlxiMagic) return FlxiFramingError::kBadMagic;
  if (Be16(h + 4) != kFlxiVersion) return FlxiFramingError::kBadVersion;
  *kind = Be16(h + 6);
  *length = Be32(h + 8);
  if (*length > kFlxiMaxBodyBytes) return FlxiFramingError::kTooLarge;
  return std::nullopt;
}

std::optional<FlxiFramingError> FlxiFrameSplitter::Feed(std::span<const uint8_t> data,
                                                        const OnFrame& on_frame) {
  if (error_) return error_;
  size_t pos = 0;
  const size_t n = data.size();
  uint32_t length = 0;
  uint16_t kind = 0;
  while (pos < n) {
    if (!partial_.empty()) {
      // Complete the header first, then exactly the body: never copy past this frame.
      if (partial_.size() < kFlxiHeaderBytes) {
        size_t take = std::min(kFlxiHeaderBytes - partial_.size(), n - pos);
        partial_.insert(partial_.end(), data.begin() + long(pos), data.begin() + long(pos + take));
        pos += take;
        if (partial_.size() < kFlxiHeaderBytes) return std::nullopt;
      }
      if (auto e = CheckHeader(partial_.data(), &length, &kind)) {
        error_ = e;
        partial_.clear();
        return error_;
      }
      size_t want = kFlxiHeaderBytes + length - partial_.size();
      size_t take = std::min(want, n - pos);
      partial_.insert(partial_.end(), data.begin() + long(pos), data.begin() + long(pos + take));
      pos += take;
      if (partial_.size() < kFlxiHeaderBytes + length) return std::nullopt;
      std::vector<uint8_t> frame = std::move(partial_);
      partial_.clear();
      on_frame(kind, std::span<const uint8_t>(frame.data() + kFlxiHeaderBytes, length));
      continue;
    }
    if (n - pos < kFlxiHeaderBytes) {
      partial_.assign(data.begin() + long(pos), data.end());
      return std::nullopt;
    }
    if (auto e = CheckHeader(data.data() + pos, &length, &kind)) {
      error_ = e;
      return error_;
    }
    if (n - pos - kFlxiHeaderBytes < length) {
      partial_.assign(data.begin() + long(pos), data.end());
      return std::nullopt;
    }
    on_frame(kind, data.subspan(pos + kFlxiHeaderBytes, length));
    pos += kFlxiHeaderBytes + length;
  }
  return std::nullopt;
}

}  // namespace felix::transport
