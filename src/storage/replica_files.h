// The per-shard side files that carry a shard's replica state across restarts (storage.md §7.1
// to §7.3, replication.md §6), byte for byte:
//   replica  (FLRS, 28 bytes, authoritative): highest accepted generation, commit offset,
//            retention-hold flag;
//   ballot   (FLBL, authoritative): the leader a generation was accepted from;
//   epochs   (FLEP, advisory): where each generation began.
// Big-endian fields, CRC-32 (IEEE, zlib's) as the layouts say.
//
// Pure codecs: no I/O, any thread. Decoders check every length before reading and never
// allocate from an unchecked count.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/strong_types.h"
#include "storage/storage_error.h"

namespace felix::storage {

inline constexpr size_t kReplicaFileBytes = 28;
inline constexpr size_t kMaxBallotLeaderBytes = 1024;
inline constexpr size_t kMaxEpochEntries = 512;

struct ReplicaState {
  Generation generation;        // highest leadership generation accepted
  Offset commit_offset;         // one past the last record known committed
  bool retention_held = false;  // retention held at the commit offset
  bool operator==(const ReplicaState&) const = default;
};

std::vector<uint8_t> EncodeReplicaState(const ReplicaState& state);
// kCorruption unless exactly 28 bytes with the right magic, version 1, known flags and CRC.
StorageResult<ReplicaState> DecodeReplicaState(std::span<const uint8_t> bytes);

struct Ballot {
  Generation generation;
  std::string leader;  // node id, at most 1024 bytes of UTF-8
  bool operator==(const Ballot&) const = default;
};

// kInvalidArgument for a leader longer than 1024 bytes.
StorageResult<std::vector<uint8_t>> EncodeBallot(const Ballot& ballot);
StorageResult<Ballot> DecodeBallot(std::span<const uint8_t> bytes);

struct EpochEntry {
  Generation generation;
  Offset start_offset;
  bool operator==(const EpochEntry&) const = default;
};

// The generation history: which generation wrote the records from which offset on.
class GenerationHistory {
 public:
  GenerationHistory() = default;
  explicit GenerationHistory(std::vector<EpochEntry> entries) : entries_(std::move(entries)) {}

  // Appends (G, start) unless G is not newer than the newest entry; keeps at most 512 entries
  // (the oldest go). Returns whether it changed.
  bool Record(Generation generation, Offset start_offset);
  // Drops every entry starting at or after `offset` (with a log truncation). Returns whether
  // it changed.
  bool TruncateFrom(Offset offset);
  // Where `generation`'s records end: the next entry's start, or `tail` if it is the newest;
  // nullopt if the generation is not in the history (the caller must refuse, not guess).
  std::optional<Offset> EndOf(Generation generation, Offset tail) const;
  std::optional<Generation> newest_generation() const;
  const std::vector<EpochEntry>& entries() const { return entries_; }

  std::vector<uint8_t> Encode() const;
  // Advisory: any defect (short, bad magic/version/CRC, count past the bytes) decodes as an
  // empty history; `defect` (if given) says what was wrong, empty when the bytes were good.
  static GenerationHistory Decode(std::span<const uint8_t> bytes, std::string* defect = nullptr);

 private:
  std::vector<EpochEntry> entries_;
};

}  // namespace felix::storage
