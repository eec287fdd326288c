#include "storage/replica_files.h"

#include <zlib.h>

#include <algorithm>

namespace felix::storage {
namespace {

constexpr uint32_t kReplicaMagic = 0x464C5253;  // "FLRS"
constexpr uint32_t kBallotMagic = 0x464C424C;   // "FLBL"
constexpr uint32_t kEpochsMagic = 0x464C4550;   // "FLEP"
constexpr uint16_t kVersion = 1;
constexpr uint16_t kFlagRetentionHeld = 0x0001;
constexpr size_t kEpochHeaderBytes = 12;
constexpr size_t kEpochEntryBytes = 16;

uint32_t Crc32(std::span<const uint8_t> bytes) {
  return static_cast<uint32_t>(
      crc32(0L, bytes.data(), static_cast<uInt>(bytes.size())));  // sizes here are small
}

void PutBe(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

uint64_t GetBe(std::span<const uint8_t> bytes, size_t at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) value = (value << 8) | bytes[at + i];
  return value;
}

tl::unexpected<StorageError> Corrupt(const char* file, const std::string& what) {
  return StorageFail(StorageErrc::kCorruption, std::string(file) + " file: " + what);
}

}  // namespace

std::vector<uint8_t> EncodeReplicaState(const ReplicaState& state) {
  std::vector<uint8_t> out;
  out.reserve(kReplicaFileBytes);
  PutBe(out, kReplicaMagic, 4);
  PutBe(out, kVersion, 2);
  PutBe(out, state.retention_held ? kFlagRetentionHeld : 0, 2);
  PutBe(out, state.generation.value(), 8);
  PutBe(out, state.commit_offset.value(), 8);
  PutBe(out, Crc32(out), 4);
  return out;
}

StorageResult<ReplicaState> DecodeReplicaState(std::span<const uint8_t> bytes) {
  if (bytes.size() != kReplicaFileBytes) {
    return Corrupt("replica", "length " + std::to_string(bytes.size()) + ", expected 28");
  }
  if (GetBe(bytes, 0, 4) != kReplicaMagic) return Corrupt("replica", "bad magic");
  if (GetBe(bytes, 4, 2) != kVersion) return Corrupt("replica", "unknown version");
  if (GetBe(bytes, 24, 4) != Crc32(bytes.first(24))) return Corrupt("replica", "CRC mismatch");
  uint64_t flags = GetBe(bytes, 6, 2);
  if ((flags & ~uint64_t{kFlagRetentionHeld}) != 0) return Corrupt("replica", "unknown flags");
  return ReplicaState{Generation(GetBe(bytes, 8, 8)), Offset(GetBe(bytes, 16, 8)),
                      (flags & kFlagRetentionHeld) != 0};
}

StorageResult<std::vector<uint8_t>> EncodeBallot(const Ballot& ballot) {
  if (ballot.leader.size() > kMaxBallotLeaderBytes) {
    return StorageFail(StorageErrc::kInvalidArgument, "ballot leader id longer than 1024 bytes");
  }
  std::vector<uint8_t> out;
  out.reserve(20 + ballot.leader.size());
  PutBe(out, kBallotMagic, 4);
  PutBe(out, kVersion, 2);
  PutBe(out, ballot.leader.size(), 2);
  PutBe(out, ballot.generation.value(), 8);
  out.insert(out.end(), ballot.leader.begin(), ballot.leader.end());
  PutBe(out, Crc32(out), 4);
  return out;
}

StorageResult<Ballot> DecodeBallot(std::span<const uint8_t> bytes) {
  if (bytes.size() < 20) return Corrupt("ballot", "shorter than 20 bytes");
  if (GetBe(bytes, 0, 4) != kBallotMagic) return Corrupt("ballot", "bad magic");
  if (GetBe(bytes, 4, 2) != kVersion) return Corrupt("ballot", "unknown version");
  size_t leader_len = GetBe(bytes, 6, 2);
  if (leader_len > kMaxBallotLeaderBytes) return Corrupt("ballot", "leader longer than 1024");
  if (bytes.size() != 20 + leader_len) return Corrupt("ballot", "length does not match leader");
  size_t crc_at = 16 + leader_len;
  if (GetBe(bytes, crc_at, 4) != Crc32(bytes.first(crc_at))) {
    return Corrupt("ballot", "CRC mismatch");
  }
  Ballot ballot;
  ballot.generation = Generation(GetBe(bytes, 8, 8));
  ballot.leader.assign(reinterpret_cast<const char*>(bytes.data() + 16), leader_len);
  return ballot;
}

bool GenerationHistory::Record(Generation generation, Offset start_offset) {
  if (!entries_.empty() && generation <= entries_.back().generation) return false;
  entries_.push_back(EpochEntry{generation, start_offset});
  if (entries_.size() > kMaxEpochEntries) {
    entries_.erase(entries_.begin(), entries_.end() - kMaxEpochEntries);
  }
  return true;
}

bool GenerationHistory::TruncateFrom(Offset offset) {
  size_t before = entries_.size();
  std::erase_if(entries_, [offset](const EpochEntry& e) { return e.start_offset >= offset; });
  return entries_.size() != before;
}

std::optional<Offset> GenerationHistory::EndOf(Generation generation, Offset tail) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].generation != generation) continue;
    return i + 1 < entries_.size() ? entries_[i + 1].start_offset : tail;
  }
  return std::nullopt;
}

std::optional<Generation> GenerationHistory::newest_generation() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back().generation;
}

std::vector<uint8_t> GenerationHistory::Encode() const {
  std::vector<uint8_t> body;
  body.reserve(entries_.size() * kEpochEntryBytes);
  for (const EpochEntry& e : entries_) {
    PutBe(body, e.generation.value(), 8);
    PutBe(body, e.start_offset.value(), 8);
  }
  std::vector<uint8_t> out;
  out.reserve(kEpochHeaderBytes + body.size());
  PutBe(out, kEpochsMagic, 4);
  PutBe(out, kVersion, 2);
  PutBe(out, entries_.size(), 2);
  PutBe(out, Crc32(body), 4);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

GenerationHistory GenerationHistory::Decode(std::span<const uint8_t> bytes, std::string* defect) {
  auto empty = [&](const char* why) {
    if (defect != nullptr) *defect = why;
    return GenerationHistory{};
  };
  if (defect != nullptr) defect->clear();
  if (bytes.size() < kEpochHeaderBytes) return empty("shorter than 12 bytes");
  if (GetBe(bytes, 0, 4) != kEpochsMagic) return empty("bad magic");
  if (GetBe(bytes, 4, 2) != kVersion) return empty("unknown version");
  size_t count = GetBe(bytes, 6, 2);
  // The count is bounded by the bytes present before anything is allocated.
  if (bytes.size() - kEpochHeaderBytes != count * kEpochEntryBytes) {
    return empty("entry count does not match the length");
  }
  auto body = bytes.subspan(kEpochHeaderBytes);
  if (GetBe(bytes, 8, 4) != Crc32(body)) return empty("CRC mismatch");
  std::vector<EpochEntry> entries;
  entries.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    entries.push_back(EpochEntry{Generation(GetBe(body, i * kEpochEntryBytes, 8)),
                                 Offset(GetBe(body, i * kEpochEntryBytes + 8, 8))});
  }
  return GenerationHistory(std::move(entries));
}

}  // namespace felix::storage
