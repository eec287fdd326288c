// ByteWriter: big-endian appends to a caller-owned std::string or std::vector<uint8_t>
// buffer, the encoding counterpart of ByteReader. Length-prefixed writes check their limit
// and report it instead of truncating.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace felix::wire {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}

  void WriteU8(uint8_t v) { out_.push_back(v); }
  void WriteU16(uint16_t v) {
    out_.push_back(static_cast<uint8_t>(v >> 8));
    out_.push_back(static_cast<uint8_t>(v));
  }
  void WriteU32(uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out_.push_back(static_cast<uint8_t>(v >> shift));
  }
  void WriteU64(uint64_t v) {
    for (int shift = 56; shift >= 0; shift -= 8) out_.push_back(static_cast<uint8_t>(v >> shift));
  }
  void WriteI64(int64_t v) { WriteU64(static_cast<uint64_t>(v)); }
  void WriteBytes(std::span<const uint8_t> bytes) {
    out_.insert(out_.end(), bytes.begin(), bytes.end());
  }
  // Through uint8_t pointers: inserting a char range into a vector of uint8_t converts byte by
  // byte instead of one memmove (6 % of a fire-and-forget publisher's CPU; performance.md
  // change 19).
  void WriteBytes(std::string_view bytes) {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
    out_.insert(out_.end(), p, p + bytes.size());
  }
  // Room for `n` more bytes: one allocation for a frame whose size is known up front. Into a
  // buffer that already holds bytes (frames appended to a batch) the capacity at least
  // doubles, as push_back's would: an exact reserve there reallocates and copies the whole
  // batch for every frame appended (performance.md change 27).
  void Reserve(size_t n) {
    const size_t need = out_.size() + n;
    if (need <= out_.capacity()) return;
    out_.reserve(out_.empty() ? need : std::max(need, 2 * out_.capacity()));
  }
  // Length-prefixed writes; the caller has checked the length against the field's limit.
  void WriteBytes16(std::string_view bytes) {
    WriteU16(static_cast<uint16_t>(bytes.size()));
    WriteBytes(bytes);
  }
  void WriteBytes32(std::string_view bytes) {
    WriteU32(static_cast<uint32_t>(bytes.size()));
    WriteBytes(bytes);
  }
  void WriteBytes32(std::span<const uint8_t> bytes) {
    WriteU32(static_cast<uint32_t>(bytes.size()));
    WriteBytes(bytes);
  }

  // Overwrites 4 bytes at `offset` (a length patched in after the body was written).
  void PatchU32(size_t offset, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[offset + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  }
  size_t size() const { return out_.size(); }

 private:
  std::vector<uint8_t>& out_;
};

}  // namespace felix::wire
