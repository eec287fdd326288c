// The on-disk format of a Felix log (see docs/storage-format.md) and its pure codecs: segment
// header, record frame, sparse index file, durable mark, and the recovery scanner.
//
// Everything here works on byte spans and does no I/O, so the fuzz target and the `felix log`
// CLI use exactly the code that recovery uses. All integers are little-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace felix::storage {

// CRC-32C (Castagnoli); chain by passing the previous result as `crc` (0 to start).
uint32_t Crc32c(const void* data, size_t len, uint32_t crc = 0);

inline constexpr uint32_t kSegmentMagic = 0x47535846;  // "FXSG" as little-endian bytes
inline constexpr uint16_t kSegmentVersion = 1;
inline constexpr size_t kSegmentHeaderBytes = 32;
inline constexpr size_t kRecordHeaderBytes = 40;
inline constexpr uint32_t kMaxPayloadBytes = 64u << 20;  // 64 MiB
inline constexpr uint32_t kIndexMagic = 0x49535846;      // "FXSI"
inline constexpr size_t kIndexHeaderBytes = 16;
inline constexpr size_t kIndexEntryBytes = 16;
inline constexpr uint32_t kMarkMagic = 0x4D445846;  // "FXDM"
inline constexpr size_t kMarkBytes = 32;

// ---- segment header: magic u32, version u16, flags u16, base u64, created_ms u64,
//      reserved u32, crc32c(bytes 0..28) u32
struct SegmentHeader {
  uint64_t base_offset = 0;
  uint64_t created_ms = 0;
};
void EncodeSegmentHeader(const SegmentHeader& h, uint8_t out[kSegmentHeaderBytes]);
// nullopt with `why` set when the bytes are not a valid header.
std::optional<SegmentHeader> DecodeSegmentHeader(std::span<const uint8_t> bytes, std::string* why);

// ---- record frame (40-byte header, then payload):
//  0 u32 payload_len      4 u32 header_crc (crc32c of bytes 0..4 then 8..40)
//  8 u32 payload_crc     12 u32 flags (0, or kRecordFlagCommit)
// 16 u64 offset          24 u64 generation        32 u64 timestamp_ms
// (flags: kRecordFlagCommit and/or kRecordFlagPublisher)
struct RecordHeader {
  uint32_t payload_len = 0;
  uint32_t payload_crc = 0;
  uint32_t flags = 0;
  uint64_t offset = 0;
  uint64_t generation = 0;
  uint64_t timestamp_ms = 0;
};
// The record's payload is an atomic-commit body (event + state changes, storage.md §3.4; the
// broker's CommitRecord), not a plain event: readers outside replication present its event
// bytes. Any other flag bit is damage.
inline constexpr uint32_t kRecordFlagCommit = 0x1;
// The payload ends with a publisher trailer: `publisher (m bytes) ‖ u8 m`, m ≤
// kMaxPublisherBytes, counted in payload_len and covered by the payload CRC (storage.md §3 bit
// 27; written only with FELIX_RECORD_PUBLISHERS). Combines with kRecordFlagCommit.
inline constexpr uint32_t kRecordFlagPublisher = 0x2;
// A generation-start record (replication.md §17): the first record a `Quorum` leader writes at
// a new generation before it serves; its payload is the generation, u64 big-endian
// (GenerationStartPayload). It keeps its offset, ships and compares like any record, and every
// reader but replication passes over it. Combines with no other flag.
inline constexpr uint32_t kRecordFlagGenerationStart = 0x4;
inline constexpr uint32_t kKnownRecordFlags =
    kRecordFlagCommit | kRecordFlagPublisher | kRecordFlagGenerationStart;
inline constexpr size_t kGenerationStartPayloadBytes = 8;
inline bool IsGenerationStart(uint32_t flags) {
  return (flags & kRecordFlagGenerationStart) != 0;
}
// The 8-byte payload of a generation-start record for `generation`.
std::array<uint8_t, kGenerationStartPayloadBytes> GenerationStartPayload(uint64_t generation);
// The generation a start record's payload names; nullopt when it is not 8 bytes.
std::optional<uint64_t> GenerationStartOf(std::span<const uint8_t> payload);
inline constexpr size_t kMaxPublisherBytes = 255;
inline size_t RecordBytes(size_t payload_len) {
  return kRecordHeaderBytes + payload_len;
}
// Writes RecordBytes(payload.size()) bytes at `out`.
void EncodeRecord(uint8_t* out, uint64_t offset, uint64_t generation, uint64_t timestamp_ms,
                  std::span<const uint8_t> payload, uint32_t flags = 0);
// Decodes the 40 bytes at `p`; false if the header checksum fails.
bool DecodeRecordHeader(const uint8_t* p, RecordHeader* out);
bool PayloadCrcMatches(const RecordHeader& h, const uint8_t* payload);

// A stored payload with its publisher trailer taken off (kRecordFlagPublisher).
struct PublishedBody {
  std::span<const uint8_t> payload;
  std::span<const uint8_t> publisher;
};
// Splits `stored` (the whole stored payload of a record with kRecordFlagPublisher); nullopt
// when its trailing length byte claims more than it holds (storage.md `RecordPublisher`: the
// checksum passed, so the record was written that way).
std::optional<PublishedBody> SplitPublisher(std::span<const uint8_t> stored);
// `payload ‖ publisher ‖ u8 len` (publisher at most kMaxPublisherBytes: longer is cut there).
std::vector<uint8_t> WithPublisher(std::span<const uint8_t> payload,
                                   std::span<const uint8_t> publisher);

// ---- sparse index: header magic u32, version u16, flags u16, base u64; entries
//      {offset u64, position u64}. Never trusted: entries are only scan starting points.
struct IndexEntry {
  uint64_t offset = 0;
  uint64_t position = 0;
};
std::vector<uint8_t> EncodeIndexFile(uint64_t base_offset, std::span<const IndexEntry> entries);
// Parses whatever is usable: nullopt if the header is wrong; a torn last entry is ignored;
// entries that do not strictly ascend (or point into the segment header) end the list.
std::optional<std::vector<IndexEntry>> DecodeIndexFile(std::span<const uint8_t> bytes,
                                                       uint64_t expected_base);

// Emits an index entry for the first record and then once `spacing` bytes have passed.
class IndexBuilder {
 public:
  explicit IndexBuilder(uint64_t spacing) : spacing_(spacing == 0 ? 1 : spacing) {}
  void Add(uint64_t offset, uint64_t position, uint64_t record_bytes,
           std::vector<IndexEntry>* out) {
    if (!started_ || since_ >= spacing_) {
      out->push_back({offset, position});
      since_ = 0;
      started_ = true;
    }
    since_ += record_bytes;
  }
  // Restores the state after a segment whose index has entries (`since` bytes after the last
  // entry's position) or none.
  void Reset(uint64_t since, bool has_entries) {
    since_ = since;
    started_ = has_entries;
  }

 private:
  uint64_t spacing_;
  uint64_t since_ = 0;
  bool started_ = false;
};

// ---- durable mark: magic u32, version u16, reserved u16, segment base u64, synced bytes u64,
//      crc32c(bytes 0..24) u32, reserved u32.
struct DurableMark {
  uint64_t segment_base = 0;
  uint64_t synced_bytes = 0;
};
void EncodeDurableMark(const DurableMark& m, uint8_t out[kMarkBytes]);
std::optional<DurableMark> DecodeDurableMark(std::span<const uint8_t> bytes);

// ---- the scanner
enum class ScanStop {
  kEnd,        // every byte up to the end decoded into valid records
  kTruncated,  // the data ends inside a record (short header, or a verified length past EOF)
  kDamaged,    // a complete record (or a header) fails its checks
};

struct ScanOutcome {
  uint64_t valid_end = 0;    // position just after the last valid record
  uint64_t next_offset = 0;  // offset the next record would have
  uint64_t records = 0;
  uint64_t first_timestamp_ms = 0;
  uint64_t last_timestamp_ms = 0;
  uint64_t last_generation = 0;
  ScanStop stop = ScanStop::kEnd;
  std::string damage;  // what failed, for kTruncated/kDamaged
};

// Decodes records from `start` (a byte position inside `file`, the whole segment file) while
// each is intact and carries `expected_offset`, +1 per record. Appends index entries to
// `index` (if non-null) with the builder's spacing.
ScanOutcome ScanRecords(std::span<const uint8_t> file, uint64_t start, uint64_t expected_offset,
                        IndexBuilder* builder, std::vector<IndexEntry>* index);

enum class TailVerdict {
  kClean,  // nothing to repair
  kTorn,   // provably never acknowledged: cut the file at valid_end
  // Zeros from a record boundary at or past the durable mark to EOF: the space preallocation
  // wrote ahead (or an append that never reached the disk); cut, not a torn tail.
  kPreallocated,
  kCorrupt,  // damage that may hold acknowledged data: refuse to open
};
struct TailDecision {
  TailVerdict verdict = TailVerdict::kClean;
  std::string reason;
};

// Classifies the end of the newest segment. `durable_limit` is the byte position below which
// the durable mark vouches the data was synced (nullopt: no usable mark). Rules, in order:
//   zeros from the record boundary where the scan stopped to EOF, at or past the durable limit
//   (or with no mark) -> preallocated; truncated record -> torn; zeros from the damage (or a
//   512-byte boundary inside the damaged record) to EOF -> torn; damage at/after the durable limit
//   -> torn; damage below the limit
//   -> corrupt; no mark: a valid record anywhere after the damage -> corrupt, else torn.
TailDecision ClassifyTail(std::span<const uint8_t> file, const ScanOutcome& scan,
                          std::optional<uint64_t> durable_limit);

// True if some position after `from` holds a record header whose checksum verifies and whose
// offset is at least `min_offset` (a plausible later record). Used to tell a damaged last
// record from damage in the middle of the data.
bool ValidRecordAfter(std::span<const uint8_t> file, uint64_t from, uint64_t min_offset);

// Little-endian helpers.
inline void PutU16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}
inline void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
inline uint16_t GetU16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}
inline uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace felix::storage
