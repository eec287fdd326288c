#include "wire/byte_reader.h"

#include <cstring>
#include <string>

namespace felix::wire {

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII — nearly all of a JSON frame (base64 payloads, names, tokens) — eight bytes at a
    // time.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, p + i, sizeof word);
      if ((word & 0x8080808080808080ULL) != 0) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) {
      return false;  // overlong
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

namespace {

tl::unexpected<DecodeError> Short(const char* field, size_t need, size_t have) {
  return DecodeFail(DecodeErrorCode::kIncomplete, std::string(field) + ": needs " +
                                                      std::to_string(need) + " bytes, " +
                                                      std::to_string(have) + " remain");
}

}  // namespace

DecodeResult<uint8_t> ByteReader::ReadU8(const char* field) {
  if (remaining() < 1) return Short(field, 1, remaining());
  return data_[pos_++];
}

DecodeResult<uint16_t> ByteReader::ReadU16(const char* field) {
  if (remaining() < 2) return Short(field, 2, remaining());
  uint16_t v = static_cast<uint16_t>((data_[pos_] << 8) | data_[pos_ + 1]);
  pos_ += 2;
  return v;
}

DecodeResult<uint32_t> ByteReader::ReadU32(const char* field) {
  if (remaining() < 4) return Short(field, 4, remaining());
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | data_[pos_ + i];
  pos_ += 4;
  return v;
}

DecodeResult<uint64_t> ByteReader::ReadU64(const char* field) {
  if (remaining() < 8) return Short(field, 8, remaining());
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | data_[pos_ + i];
  pos_ += 8;
  return v;
}

DecodeResult<int64_t> ByteReader::ReadI64(const char* field) {
  auto v = ReadU64(field);
  if (!v) return tl::unexpected(v.error());
  return static_cast<int64_t>(*v);
}

DecodeResult<std::span<const uint8_t>> ByteReader::ReadBytes(size_t n, const char* field) {
  if (remaining() < n) return Short(field, n, remaining());
  auto out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

DecodeResult<std::span<const uint8_t>> ByteReader::ReadBytes16(const char* field) {
  auto len = ReadU16(field);
  if (!len) return tl::unexpected(len.error());
  return ReadBytes(*len, field);
}

DecodeResult<std::span<const uint8_t>> ByteReader::ReadBytes32(const char* field, size_t max_len) {
  auto len = ReadU32(field);
  if (!len) return tl::unexpected(len.error());
  if (*len > max_len) {
    return DecodeFail(DecodeErrorCode::kFrameTooLarge, std::string(field) + ": length " +
                                                           std::to_string(*len) + " above " +
                                                           std::to_string(max_len));
  }
  return ReadBytes(*len, field);
}

namespace {

DecodeResult<std::string_view> AsUtf8(std::span<const uint8_t> bytes, const char* field) {
  std::string_view s(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!IsValidUtf8(s)) {
    return DecodeFail(DecodeErrorCode::kInvalidUtf8, std::string(field) + ": not valid UTF-8");
  }
  return s;
}

}  // namespace

DecodeResult<std::string_view> ByteReader::ReadString16(const char* field, size_t max_len) {
  auto len = ReadU16(field);
  if (!len) return tl::unexpected(len.error());
  if (*len > max_len) {
    return DecodeFail(DecodeErrorCode::kStringTooLong,
                      std::string(field) + ": " + std::to_string(*len) + " bytes, at most " +
                          std::to_string(max_len));
  }
  auto bytes = ReadBytes(*len, field);
  if (!bytes) return tl::unexpected(bytes.error());
  return AsUtf8(*bytes, field);
}

DecodeResult<std::string_view> ByteReader::ReadString32(const char* field, size_t max_len) {
  auto len = ReadU32(field);
  if (!len) return tl::unexpected(len.error());
  if (*len > max_len) {
    return DecodeFail(DecodeErrorCode::kStringTooLong,
                      std::string(field) + ": " + std::to_string(*len) + " bytes, at most " +
                          std::to_string(max_len));
  }
  auto bytes = ReadBytes(*len, field);
  if (!bytes) return tl::unexpected(bytes.error());
  return AsUtf8(*bytes, field);
}

DecodeResult<void> ByteReader::CheckCount(uint64_t count, size_t min_item_bytes, uint64_t max_count,
                                          const char* field) const {
  if (count > max_count) {
    return DecodeFail(DecodeErrorCode::kCountTooLarge, std::string(field) + ": count " +
                                                           std::to_string(count) + " above " +
                                                           std::to_string(max_count));
  }
  if (min_item_bytes > 0 && count > remaining() / min_item_bytes) {
    return DecodeFail(DecodeErrorCode::kCountTooLarge,
                      std::string(field) + ": count " + std::to_string(count) + " cannot fit in " +
                          std::to_string(remaining()) + " bytes");
  }
  return {};
}

DecodeResult<void> ByteReader::ExpectEnd(const char* what) const {
  if (remaining() != 0) {
    return DecodeFail(
        DecodeErrorCode::kTrailingBytes,
        std::string(what) + ": " + std::to_string(remaining()) + " bytes after the last field");
  }
  return {};
}

}  // namespace felix::wire
