// ByteReader: bounds-checked big-endian reads over a borrowed byte span, the one primitive
// every binary decoder in `wire` is built on.
//
// Nothing is read past the end: each Read* returns kIncomplete instead. Length-prefixed
// fields are returned as views into the input (no copy), so the input must outlive what is
// decoded from it. Counts are checked with FitsCount() before any container is sized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "wire/decode_error.h"

namespace felix::wire {

// True when `bytes` is well-formed UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF).
bool IsValidUtf8(std::string_view bytes);

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> data) : data_(data) {}
  ByteReader(const void* data, size_t size) : data_(static_cast<const uint8_t*>(data), size) {}

  size_t remaining() const { return data_.size() - pos_; }
  size_t position() const { return pos_; }
  bool empty() const { return remaining() == 0; }

  DecodeResult<uint8_t> ReadU8(const char* field);
  DecodeResult<uint16_t> ReadU16(const char* field);
  DecodeResult<uint32_t> ReadU32(const char* field);
  DecodeResult<uint64_t> ReadU64(const char* field);
  DecodeResult<int64_t> ReadI64(const char* field);

  // `n` raw bytes as a view.
  DecodeResult<std::span<const uint8_t>> ReadBytes(size_t n, const char* field);
  // Length-prefixed raw bytes (u16 / u32 length), at most `max_len` (else kFrameTooLarge).
  DecodeResult<std::span<const uint8_t>> ReadBytes16(const char* field);
  DecodeResult<std::span<const uint8_t>> ReadBytes32(const char* field, size_t max_len = SIZE_MAX);
  // Length-prefixed UTF-8 (u16 / u32 length); over `max_len` → kStringTooLong.
  DecodeResult<std::string_view> ReadString16(const char* field, size_t max_len = 65535);
  DecodeResult<std::string_view> ReadString32(const char* field, size_t max_len);

  // A declared count of items each at least `min_item_bytes` long can fit in what remains and
  // is at most `max_count`. Call before reserving or allocating for the items.
  DecodeResult<void> CheckCount(uint64_t count, size_t min_item_bytes, uint64_t max_count,
                                const char* field) const;

  // kTrailingBytes unless everything was consumed.
  DecodeResult<void> ExpectEnd(const char* what) const;

  std::span<const uint8_t> Rest() const { return data_.subspan(pos_); }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

}  // namespace felix::wire
