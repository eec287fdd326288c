// ShardStore: the six durable logs of one shard, each in its own subdirectory of the shard
// directory, opened (and recovered) in one call:
//   <dir>/stream        stream records
//   <dir>/cache         cache operations
//   <dir>/cursors       consumer-group cursors
//   <dir>/dead_letters  dead letters
//   <dir>/counters      counters
//   <dir>/producers     idempotent-producer marks (broker/shard_producers.h)
// Each log keeps its own DurableLog contract (see durable_log.h); the store only owns them.
//
// Beside the logs the store keeps the shard's replica state (storage.md §7.1–§7.3, byte
// layouts in replica_files.h): <dir>/replica (accepted generation, commit offset, retention
// hold; authoritative — a present file that does not decode refuses the open), <dir>/ballot
// (the leader a generation was accepted from; authoritative likewise) and <dir>/epochs (the
// generation history; advisory — a damaged file reads as empty, with `epochs_defect` saying
// why). All three are absent on a shard that never took a generation above 0.
//
// Threading: the logs are thread-safe as documented; the replica state is read and changed
// only by the shard's owner (its executor), after Open. Close (or the destructor) closes all
// six logs. A shard directory written before a kind existed gets that log created empty.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "storage/durable_log.h"
#include "storage/replica_files.h"

namespace felix::storage {

enum class LogKind { kStream = 0, kCache, kCursors, kDeadLetters, kCounters, kProducers };
inline constexpr size_t kLogKindCount = 6;
const char* LogKindName(LogKind kind);  // the subdirectory name
std::optional<LogKind> ParseLogKind(std::string_view name);

struct ShardStoreOptions {
  // Options for each log, indexed by LogKind; metrics_label defaults to the kind's name.
  std::array<LogOptions, kLogKindCount> logs;
  // Convenience: the same options for every kind.
  static ShardStoreOptions Uniform(const LogOptions& options);
};

class ShardStore {
 public:
  static StorageResult<std::unique_ptr<ShardStore>> Open(const std::string& dir,
                                                         ShardStoreOptions options);
  ~ShardStore();

  DurableLog& log(LogKind kind) { return *logs_[size_t(kind)]; }
  const DurableLog& log(LogKind kind) const { return *logs_[size_t(kind)]; }
  const std::string& dir() const { return dir_; }

  const ReplicaState& replica_state() const { return replica_; }
  const std::optional<Ballot>& ballot() const { return ballot_; }
  const GenerationHistory& generation_history() const { return history_; }
  const std::string& epochs_defect() const { return epochs_defect_; }

  // Accepts `generation` from `leader`, whose records begin at `start_offset`: the ballot is
  // durable before the replica file (storage.md §7.3), both before the history. A generation
  // not above the accepted one is refused (kInvalidArgument); nothing changes on failure of
  // the first write. A nullopt `start_offset` leaves the history alone: a follower records
  // who wrote its records only when it appends them (replication.md §9.2, RelabelGenerations).
  StorageResult<void> AcceptGeneration(Generation generation, const std::string& leader,
                                       std::optional<Offset> start_offset);
  // A follower's labels (replication.md §9.2): drops every history entry starting at or after
  // `from` (the appended range, a truncation point, or 0 to forget the history on a rebuild),
  // then records `entries` (oldest first; each only if newer than the newest kept). The
  // in-memory history always changes; the result is that of the advisory epochs write (a
  // failure costs automatic divergence repair, never a record).
  StorageResult<void> RelabelGenerations(Offset from, std::span<const EpochEntry> entries);
  // Raises the commit offset (never lowers it) and persists it.
  StorageResult<void> SetCommitOffset(Offset commit_offset);
  // Holds (or releases) retention and compaction of every log at its commit offset
  // (storage.md §14 "Quorum hold") and persists the flag in `replica` when it changed. Open
  // restores a saved hold on every log before anyone can run a pass, so a shard that was held
  // stays held until its owner decides again (replication.md §20). The logs are held even when
  // the write fails (the error says the flag was not saved).
  StorageResult<void> SetRetentionHold(bool held);
  // Closes every log; returns the first error.
  StorageResult<void> Close();

 private:
  ShardStore() = default;
  StorageResult<void> LoadReplicaState();
  StorageResult<void> WriteReplica(const ReplicaState& state);

  std::string dir_;
  std::array<std::unique_ptr<DurableLog>, kLogKindCount> logs_;
  ReplicaState replica_;
  std::optional<Ballot> ballot_;
  GenerationHistory history_;
  std::string epochs_defect_;
};

}  // namespace felix::storage
