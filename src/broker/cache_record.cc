#include "broker/cache_record.h"

#include "wire/byte_reader.h"

namespace felix::broker {
namespace {

void PutLe(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

uint64_t GetLe(std::span<const uint8_t> in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | in[at + i];
  return v;
}

Error Corrupt(std::string what) {
  return Error{ErrorCode::kCorruption, std::move(what)};
}

}  // namespace

std::vector<uint8_t> EncodeCacheRecord(const CacheRecord& r) {
  const bool v2 = r.op == CacheRecord::Op::kPut && r.carried_version.has_value();
  std::vector<uint8_t> out;
  out.reserve(kCacheRecordHeaderBytes + (v2 ? 8 : 0) + r.key.size() + r.value.size());
  out.push_back(v2 ? 2 : 1);
  out.push_back(static_cast<uint8_t>(r.op));
  PutLe(out, r.op == CacheRecord::Op::kPut ? r.expires_at_millis : 0, 8);
  PutLe(out, r.key.size(), 4);
  if (v2) PutLe(out, *r.carried_version, 8);
  out.insert(out.end(), r.key.begin(), r.key.end());
  if (r.op == CacheRecord::Op::kPut) out.insert(out.end(), r.value.begin(), r.value.end());
  return out;
}

Result<CacheRecord> DecodeCacheRecord(std::span<const uint8_t> p) {
  if (p.size() < kCacheRecordHeaderBytes) return tl::unexpected(Corrupt("CacheRecordTooShort"));
  uint8_t version = p[0];
  if (version != 1 && version != 2) return tl::unexpected(Corrupt("CacheRecordVersion"));
  size_t header = version == 2 ? kCacheRecordHeaderBytes + 8 : kCacheRecordHeaderBytes;
  if (p.size() < header) return tl::unexpected(Corrupt("CacheRecordTooShort"));
  CacheRecord r;
  uint8_t op = p[1];
  if (op > 1 || (op == 1 && version == 2)) return tl::unexpected(Corrupt("CacheRecordOp"));
  r.op = static_cast<CacheRecord::Op>(op);
  r.expires_at_millis = GetLe(p, 2, 8);
  uint64_t key_len = GetLe(p, 10, 4);
  if (version == 2) r.carried_version = GetLe(p, 14, 8);
  if (key_len > p.size() - header) return tl::unexpected(Corrupt("CacheRecordKeyLength"));
  r.key = std::string_view(reinterpret_cast<const char*>(p.data() + header), key_len);
  if (!wire::IsValidUtf8(r.key)) return tl::unexpected(Corrupt("CacheRecordKeyNotUtf8"));
  if (r.op == CacheRecord::Op::kPut) r.value = p.subspan(header + key_len);
  return r;
}

std::vector<uint8_t> EncodeCounterRecord(const CounterRecord& r) {
  std::vector<uint8_t> out;
  out.reserve(kCounterRecordHeaderBytes + r.key.size());
  out.push_back(1);
  out.push_back(static_cast<uint8_t>(r.op));
  PutLe(out, static_cast<uint64_t>(r.value), 8);
  PutLe(out, r.key.size(), 4);
  out.insert(out.end(), r.key.begin(), r.key.end());
  return out;
}

Result<CounterRecord> DecodeCounterRecord(std::span<const uint8_t> p) {
  auto fail = [](const char* detail) {
    return tl::unexpected(Corrupt(std::string("counter record ") + detail));
  };
  if (p.size() < kCounterRecordHeaderBytes) return fail("is shorter than its fixed header");
  if (p[0] != 1) return fail("version is not readable by this build");
  uint64_t key_len = GetLe(p, 10, 4);
  if (key_len != p.size() - kCounterRecordHeaderBytes) {
    return fail("key length does not match the record");
  }
  CounterRecord r;
  r.key = std::string_view(reinterpret_cast<const char*>(p.data() + kCounterRecordHeaderBytes),
                           key_len);
  if (!wire::IsValidUtf8(r.key)) return fail("key is not valid UTF-8");
  if (p[1] > 1) return fail("op is not one this build knows");
  r.op = static_cast<CounterRecord::Op>(p[1]);
  r.value = static_cast<int64_t>(GetLe(p, 2, 8));
  return r;
}

}  // namespace felix::broker
