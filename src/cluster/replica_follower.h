// ReplicaFollower: the follower side of one shard's replication (replication.md §5, §9, §12,
// §13; seed "Replication", "Bootstrapping a follower", "Rebuilding a follower"). It decides and
// applies one replication message against the shard's ShardStore and returns the answer the
// leader gets: ReplicateOk (kind 8) or ReplicateError (kind 9).
//
// What it guarantees:
//   - records are stored only at the leader's offsets (DurableLog::AppendAt at the tail),
//     with the leader's per-record generation (from the batch's labels, else the sender's
//     generation) and time (kind 36, else the arrival time);
//   - ReplicateOk.durable_offset is answered only once the log holds the records under its
//     fsync policy (cluster-etcd.md §7 item 2: after fsync under on_commit);
//   - the batch checksum is verified before anything about position is trusted (a mismatch is
//     Malformed: "resend", nothing stored);
//   - a batch wholly below the tail is answered with the batch's end, not the tail (§7 item 1);
//   - a newer generation is persisted (ShardStore::AcceptGeneration: ballot, replica file,
//     history) before anything is stored or answered; an older one is FencedEpoch, across
//     restarts;
//   - a LogConflict is repaired by truncation only under the rules of replication.md §9.1 (a
//     newer generation than the newest in this log's history, at or after where that older
//     generation began, never below the commit offset); anything else halts (status()).
//
// Which logs: the stream log (or the cache log) is the shard's own log and carries the
// generation history; cursors, dead letters and counters are auxiliary (§5 step 2: refused
// FencedEpoch once the shard's own log accepted a newer generation).
//
// What is not compared yet: storage records hold payload, generation and time only, so an
// overlap is compared by payload bytes; producer marks and publishers (kind 25/26/32/36 marks
// section) are covered by the batch checksum but neither stored nor compared (§5 step 6.4 asks
// for both once storage can hold them). The generation history (ShardStore's, one per shard)
// is kept for the shard's own log only; auxiliary logs store each record's generation (labels
// or the sender's) but keep no history, so a conflict there is never self-repaired (halts).
// The commit offset of kinds 26/32/36 is kept for the shard's own log (ShardStore holds one);
// on auxiliary logs it is ignored. Ballots: at the accepted generation only the leader the
// ballot names is answered; a generation accepted without a ballot answers any sender.
//
// Threading: not thread-safe. The host calls every method from one thread at a time (the
// shard's strand). The store must outlive the follower. Blocking: an apply may wait for the
// log's fsync.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "common/metrics.h"
#include "common/strong_types.h"
#include "storage/shard_store.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// What this broker's routing view (ClusterView's assignment of the shard) says, relative to
// the generation G a message names (replication.md §5 step 1).
enum class FollowerRole {
  kFollower,    // this broker is a follower of the shard at G → continue
  kViewNewer,   // the view has a generation above G → FencedEpoch
  kViewOlder,   // the view is behind G (the watch has not caught up) → StaleRoute
  kNotReplica,  // this broker is not in the replica set (or leads it) → Unauthorized
};

// Why a follower stopped accepting a log's records until a rebuild (replication.md §23).
enum class FollowerHalt { kNone, kDiverged, kBelowCommit };
const char* FollowerHaltName(FollowerHalt halt);

// The answer for the leader, owning its detail text (the wire frames hold views).
struct FollowerAnswer {
  std::variant<wire::flxi::ReplicateOk, wire::flxi::ReplicateError> answer;
  std::string detail;   // the ReplicateError's detail (≤ 512 bytes)
  const char* outcome;  // felix_broker_replicated_total{outcome}: ok, fenced, behind, gap,
                        // conflict, truncated, corrupt, bootstrapped, rebuilt, below_commit,
                        // refused, error

  bool ok() const { return std::holds_alternative<wire::flxi::ReplicateOk>(answer); }
  // The frame to send, correlation id set; valid while this answer lives.
  wire::flxi::Frame ToFrame(uint64_t correlation_id) const;
};

// Per log, for /replication and `felix cluster status`.
struct FollowerLogStatus {
  storage::LogKind log = storage::LogKind::kStream;
  Offset base_offset;
  Offset tail;            // one past the newest record held
  Offset durable_offset;  // what the last ReplicateOk said
  FollowerHalt halt = FollowerHalt::kNone;
  std::string halt_detail;  // names the shard's log and offsets
};

class ReplicaFollower {
 public:
  // `metrics` optional (must outlive the follower): felix_broker_replicated_total{outcome}.
  ReplicaFollower(storage::ShardStore& store, bool cache_shard, MetricsRegistry* metrics);
  ReplicaFollower(const ReplicaFollower&) = delete;
  ReplicaFollower& operator=(const ReplicaFollower&) = delete;

  // Kinds 7, 14, 16, 18, 20, 25, 26, 32, 36, addressed to `log` (wire::flxi::TargetLog mapped
  // to storage). `sender` is the node id from the peer's Hello. Implements §5 steps 2–9 (step
  // 1 is `role`) and the answer table.
  FollowerAnswer ApplyRecords(const wire::flxi::Records& batch, storage::LogKind log,
                              FollowerRole role, std::string_view sender);

  // Kinds 10, 15, 17, 19, 21 (§12, cluster-etcd.md §7 item 3): an empty log is placed at the
  // base; a log whose records span the base is answered with its tail; a log that does not
  // reach the base (or begins after it) is LogConflict(expected = tail). Never places a log
  // over existing records. (Clarified: "empty log placed at the base" means an empty log below
  // the offered base, as replication.md §12 says; an empty log whose base is already above the
  // offer begins after it → LogConflict. A halted log answers LogConflict here too.)
  FollowerAnswer ApplyBootstrap(const wire::flxi::Bootstrap& bootstrap, storage::LogKind log,
                                FollowerRole role, std::string_view sender);

  // Kind 24 (§13, cluster-etcd.md §7 item 4): discards from max(own base, base_offset) unless
  // that would cut below the commit offset, in which case it keeps min(commit, tail) and
  // answers from there; clears the log's halt. (Clarified: "from there" is
  // max(own base, base_offset), as §13 says — the leader re-ships the kept records to compare
  // them. A leader at the generation that already disagreed with a committed record here is
  // refused LogConflict, outcome below_commit, and the log stays halted.)
  FollowerAnswer ApplyRebuild(const wire::flxi::Rebuild& rebuild, FollowerRole role,
                              std::string_view sender);

  FollowerLogStatus status(storage::LogKind log) const;

 private:
  struct Impl;
  storage::ShardStore& store_;
  bool cache_shard_;
  // felix_broker_replicated_total by outcome, resolved once (a registry lookup takes its mutex
  // and scans every series: too dear once per batch). Null without a registry.
  static constexpr size_t kOutcomeCount = 12;
  std::array<Counter*, kOutcomeCount> outcome_counters_{};
  // Per log: halt state, verified_through (in-memory, forgotten on restart), last durable.
  struct LogState {
    FollowerHalt halt = FollowerHalt::kNone;
    std::string halt_detail;
    std::optional<Offset> verified_through;
    Offset durable_offset;
    // The generation verified_through was compared with (progress is per leader).
    Generation verified_generation;
    // §9.1 (4): a leader at this generation disagreed with a committed record here; its
    // rebuilds that would have to cut below the commit offset are refused (§13).
    std::optional<Generation> committed_mismatch_generation;
  };
  LogState logs_[storage::kLogKindCount];
  // Under kPeriodic/kNone the commit offset is persisted at most once a second (§6); the log's
  // in-memory guard always has the newest value.
  std::chrono::steady_clock::time_point commit_persisted_at_{};
};

// storage ↔ wire numbering of a shard's logs. The producers log has no wire id (nullopt).
std::optional<wire::flxi::ReplicaLog> WireLog(storage::LogKind log);
storage::LogKind StorageLog(wire::flxi::ReplicaLog log);

}  // namespace felix::cluster
