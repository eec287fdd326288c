#include "storage/record_format.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace felix::storage {

uint32_t Crc32c(const void* data, size_t len, uint32_t crc) {
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t raw = ~crc;
  while (len > 0) {
    int chunk = len > size_t(INT_MAX) ? INT_MAX : int(len);
    raw = crc32_iscsi(p, chunk, raw);
    p += chunk;
    len -= size_t(chunk);
  }
  return ~raw;
}

void EncodeSegmentHeader(const SegmentHeader& h, uint8_t out[kSegmentHeaderBytes]) {
  std::memset(out, 0, kSegmentHeaderBytes);
  PutU32(out, kSegmentMagic);
  PutU16(out + 4, kSegmentVersion);
  PutU16(out + 6, 0);
  PutU64(out + 8, h.base_offset);
  PutU64(out + 16, h.created_ms);
  PutU32(out + 28, Crc32c(out, 28));
}

std::optional<SegmentHeader> DecodeSegmentHeader(std::span<const uint8_t> bytes, std::string* why) {
  if (bytes.size() < kSegmentHeaderBytes) {
    *why = "segment header truncated (" + std::to_string(bytes.size()) + " of 32 bytes)";
    return std::nullopt;
  }
  const uint8_t* p = bytes.data();
  if (GetU32(p) != kSegmentMagic) {
    *why = "bad segment magic";
    return std::nullopt;
  }
  if (GetU32(p + 28) != Crc32c(p, 28)) {
    *why = "segment header checksum mismatch";
    return std::nullopt;
  }
  if (GetU16(p + 4) != kSegmentVersion) {
    *why = "unsupported segment version " + std::to_string(GetU16(p + 4));
    return std::nullopt;
  }
  if (GetU16(p + 6) != 0) {
    *why = "unknown segment flags";
    return std::nullopt;
  }
  return SegmentHeader{GetU64(p + 8), GetU64(p + 16)};
}

namespace {
uint32_t HeaderCrc(const uint8_t* p) {
  uint32_t c = Crc32c(p, 4);
  return Crc32c(p + 8, kRecordHeaderBytes - 8, c);
}
}  // namespace

void EncodeRecord(uint8_t* out, uint64_t offset, uint64_t generation, uint64_t timestamp_ms,
                  std::span<const uint8_t> payload, uint32_t flags) {
  PutU32(out, uint32_t(payload.size()));
  PutU32(out + 8, Crc32c(payload.data(), payload.size()));
  PutU32(out + 12, flags);
  PutU64(out + 16, offset);
  PutU64(out + 24, generation);
  PutU64(out + 32, timestamp_ms);
  PutU32(out + 4, HeaderCrc(out));
  if (!payload.empty()) std::memcpy(out + kRecordHeaderBytes, payload.data(), payload.size());
}

bool DecodeRecordHeader(const uint8_t* p, RecordHeader* out) {
  if (GetU32(p + 4) != HeaderCrc(p)) return false;
  out->payload_len = GetU32(p);
  out->payload_crc = GetU32(p + 8);
  out->flags = GetU32(p + 12);
  out->offset = GetU64(p + 16);
  out->generation = GetU64(p + 24);
  out->timestamp_ms = GetU64(p + 32);
  return true;
}

bool PayloadCrcMatches(const RecordHeader& h, const uint8_t* payload) {
  return Crc32c(payload, h.payload_len) == h.payload_crc;
}

std::optional<PublishedBody> SplitPublisher(std::span<const uint8_t> stored) {
  if (stored.empty()) return std::nullopt;
  size_t len = stored.back();
  if (len + 1 > stored.size()) return std::nullopt;
  size_t payload = stored.size() - 1 - len;
  return PublishedBody{stored.first(payload), stored.subspan(payload, len)};
}

std::array<uint8_t, kGenerationStartPayloadBytes> GenerationStartPayload(uint64_t generation) {
  std::array<uint8_t, kGenerationStartPayloadBytes> out{};
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(generation >> (8 * (out.size() - 1 - i)));
  }
  return out;
}

std::optional<uint64_t> GenerationStartOf(std::span<const uint8_t> payload) {
  if (payload.size() != kGenerationStartPayloadBytes) return std::nullopt;
  uint64_t g = 0;
  for (uint8_t b : payload) g = (g << 8) | b;
  return g;
}

std::vector<uint8_t> WithPublisher(std::span<const uint8_t> payload,
                                   std::span<const uint8_t> publisher) {
  publisher = publisher.first(std::min(publisher.size(), kMaxPublisherBytes));
  std::vector<uint8_t> out;
  out.reserve(payload.size() + publisher.size() + 1);
  out.insert(out.end(), payload.begin(), payload.end());
  out.insert(out.end(), publisher.begin(), publisher.end());
  out.push_back(static_cast<uint8_t>(publisher.size()));
  return out;
}

std::vector<uint8_t> EncodeIndexFile(uint64_t base_offset, std::span<const IndexEntry> entries) {
  std::vector<uint8_t> out(kIndexHeaderBytes + entries.size() * kIndexEntryBytes);
  PutU32(out.data(), kIndexMagic);
  PutU16(out.data() + 4, 1);
  PutU16(out.data() + 6, 0);
  PutU64(out.data() + 8, base_offset);
  uint8_t* p = out.data() + kIndexHeaderBytes;
  for (const auto& e : entries) {
    PutU64(p, e.offset);
    PutU64(p + 8, e.position);
    p += kIndexEntryBytes;
  }
  return out;
}

std::optional<std::vector<IndexEntry>> DecodeIndexFile(std::span<const uint8_t> bytes,
                                                       uint64_t expected_base) {
  if (bytes.size() < kIndexHeaderBytes) return std::nullopt;
  const uint8_t* p = bytes.data();
  if (GetU32(p) != kIndexMagic || GetU16(p + 4) != 1 || GetU16(p + 6) != 0 ||
      GetU64(p + 8) != expected_base) {
    return std::nullopt;
  }
  std::vector<IndexEntry> entries;
  size_t n = (bytes.size() - kIndexHeaderBytes) / kIndexEntryBytes;
  entries.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* e = p + kIndexHeaderBytes + i * kIndexEntryBytes;
    IndexEntry entry{GetU64(e), GetU64(e + 8)};
    if (entry.offset < expected_base || entry.position < kSegmentHeaderBytes) break;
    if (!entries.empty() &&
        (entry.offset <= entries.back().offset || entry.position <= entries.back().position)) {
      break;
    }
    entries.push_back(entry);
  }
  return entries;
}

void EncodeDurableMark(const DurableMark& m, uint8_t out[kMarkBytes]) {
  std::memset(out, 0, kMarkBytes);
  PutU32(out, kMarkMagic);
  PutU16(out + 4, 1);
  PutU64(out + 8, m.segment_base);
  PutU64(out + 16, m.synced_bytes);
  PutU32(out + 24, Crc32c(out, 24));
}

std::optional<DurableMark> DecodeDurableMark(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMarkBytes) return std::nullopt;
  const uint8_t* p = bytes.data();
  if (GetU32(p) != kMarkMagic || GetU16(p + 4) != 1 || GetU32(p + 24) != Crc32c(p, 24)) {
    return std::nullopt;
  }
  return DurableMark{GetU64(p + 8), GetU64(p + 16)};
}

ScanOutcome ScanRecords(std::span<const uint8_t> file, uint64_t start, uint64_t expected_offset,
                        IndexBuilder* builder, std::vector<IndexEntry>* index) {
  ScanOutcome out;
  out.valid_end = start;
  out.next_offset = expected_offset;
  const uint64_t size = file.size();
  if (start > size) {
    out.valid_end = size;
    out.stop = ScanStop::kTruncated;
    out.damage = "file ends before position " + std::to_string(start);
    return out;
  }
  uint64_t p = start;
  const uint8_t* data = file.data();
  while (p < size) {
    if (size - p < kRecordHeaderBytes) {
      out.stop = ScanStop::kTruncated;
      out.damage = "short record header (" + std::to_string(size - p) + " of 40 bytes)";
      break;
    }
    RecordHeader h;
    if (!DecodeRecordHeader(data + p, &h)) {
      out.stop = ScanStop::kDamaged;
      out.damage = "record header checksum mismatch";
      break;
    }
    if (h.payload_len > kMaxPayloadBytes) {
      out.stop = ScanStop::kDamaged;
      out.damage = "record too large (" + std::to_string(h.payload_len) + " bytes)";
      break;
    }
    if ((h.flags & ~kKnownRecordFlags) != 0) {
      out.stop = ScanStop::kDamaged;
      out.damage = "unknown record flags " + std::to_string(h.flags);
      break;
    }
    if (h.offset != out.next_offset) {
      out.stop = ScanStop::kDamaged;
      out.damage = "offset out of order (expected " + std::to_string(out.next_offset) + ", found " +
                   std::to_string(h.offset) + ")";
      break;
    }
    if (h.payload_len > size - p - kRecordHeaderBytes) {
      out.stop = ScanStop::kTruncated;
      out.damage = "record at offset " + std::to_string(h.offset) + " needs " +
                   std::to_string(h.payload_len) + " payload bytes, " +
                   std::to_string(size - p - kRecordHeaderBytes) + " present";
      break;
    }
    if (!PayloadCrcMatches(h, data + p + kRecordHeaderBytes)) {
      out.stop = ScanStop::kDamaged;
      out.damage = "record checksum mismatch at offset " + std::to_string(h.offset);
      break;
    }
    uint64_t step = RecordBytes(h.payload_len);
    if (builder != nullptr && index != nullptr) builder->Add(h.offset, p, step, index);
    if (out.records == 0) out.first_timestamp_ms = h.timestamp_ms;
    out.last_timestamp_ms = h.timestamp_ms;
    out.last_generation = h.generation;
    ++out.records;
    ++out.next_offset;
    p += step;
    out.valid_end = p;
  }
  return out;
}

bool ValidRecordAfter(std::span<const uint8_t> file, uint64_t from, uint64_t min_offset) {
  const uint64_t size = file.size();
  if (size < kRecordHeaderBytes) return false;
  const uint64_t max_offset = min_offset + size / kRecordHeaderBytes + 1;
  const uint8_t* data = file.data();
  for (uint64_t pos = from; pos + kRecordHeaderBytes <= size; ++pos) {
    uint64_t off = GetU64(data + pos + 16);
    if (off < min_offset || off > max_offset) continue;
    RecordHeader h;
    if (DecodeRecordHeader(data + pos, &h) && h.payload_len <= kMaxPayloadBytes) return true;
  }
  return false;
}

TailDecision ClassifyTail(std::span<const uint8_t> file, const ScanOutcome& scan,
                          std::optional<uint64_t> durable_limit) {
  TailDecision d;
  if (scan.stop == ScanStop::kEnd) return d;
  const uint64_t p = scan.valid_end;
  const uint64_t size = file.size();
  uint64_t zeros_from = size;
  while (zeros_from > p && file[zeros_from - 1] == 0) --zeros_from;
  if (zeros_from == p && (!durable_limit.has_value() || p >= *durable_limit)) {
    d.verdict = TailVerdict::kPreallocated;
    d.reason = std::to_string(size - p) + " zero bytes after the last record";
    return d;
  }
  if (scan.stop == ScanStop::kTruncated) {
    d.verdict = TailVerdict::kTorn;
    d.reason = "truncated record: " + scan.damage;
    return d;
  }
  // Damaged: from where the trailing zeros begin.
  if (zeros_from == p) {
    d.verdict = TailVerdict::kTorn;
    d.reason = "zero-filled tail (" + scan.damage + ")";
    return d;
  }
  uint64_t record_end = p + kRecordHeaderBytes;
  RecordHeader h;
  if (p + kRecordHeaderBytes <= size && DecodeRecordHeader(file.data() + p, &h) &&
      h.payload_len <= kMaxPayloadBytes) {
    record_end = p + RecordBytes(h.payload_len);
  }
  uint64_t boundary = (zeros_from + 511) / 512 * 512;
  if (boundary < size && boundary > p && boundary < record_end) {
    d.verdict = TailVerdict::kTorn;
    d.reason = "zero-filled from byte " + std::to_string(boundary) + " (" + scan.damage + ")";
    return d;
  }
  if (durable_limit.has_value()) {
    if (p >= *durable_limit) {
      d.verdict = TailVerdict::kTorn;
      d.reason = "damage past the durable mark at byte " + std::to_string(*durable_limit) + " (" +
                 scan.damage + ")";
    } else {
      d.verdict = TailVerdict::kCorrupt;
      d.reason = scan.damage + " below the durable mark (" + std::to_string(*durable_limit) + ")";
    }
    return d;
  }
  if (ValidRecordAfter(file, p + 1, scan.next_offset)) {
    d.verdict = TailVerdict::kCorrupt;
    d.reason = scan.damage + " with valid records after it";
  } else {
    d.verdict = TailVerdict::kTorn;
    d.reason = "damaged last record (" + scan.damage + ")";
  }
  return d;
}

}  // namespace felix::storage
