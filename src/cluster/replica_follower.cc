// ReplicaFollower: names, answers, the checks every replication message shares (§5 steps 1–4)
// and the per-log status. The records path is follower_apply.cc; bootstrap and rebuild are
// follower_bootstrap.cc.
#include "cluster/replica_follower.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster/follower_impl.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using storage::LogKind;

namespace {

constexpr const char* kReplicatedTotal = "felix_broker_replicated_total";
constexpr const char* kReplicatedHelp =
    "Replication messages this broker answered as a follower, by outcome";

// Every outcome the follower counts, registered up front so the series exist at zero.
constexpr const char* kOutcomes[] = {"ok",       "fenced",       "behind",  "gap",
                                     "conflict", "truncated",    "corrupt", "bootstrapped",
                                     "rebuilt",  "below_commit", "refused", "error"};

// The detail of a ReplicateError is a Str (≤ 512 bytes): cut at a UTF-8 boundary.
std::string_view Bounded(const std::string& detail) {
  if (detail.size() <= flxi::kMaxIdentBytes) return detail;
  size_t n = flxi::kMaxIdentBytes;
  while (n > 0 && (uint8_t(detail[n]) & 0xC0) == 0x80) --n;
  return std::string_view(detail).substr(0, n);
}

}  // namespace

const char* FollowerHaltName(FollowerHalt halt) {
  switch (halt) {
    case FollowerHalt::kNone:
      return "";
    case FollowerHalt::kDiverged:
      return "diverged";
    case FollowerHalt::kBelowCommit:
      return "below_commit";
  }
  return "";
}

flxi::Frame FollowerAnswer::ToFrame(uint64_t correlation_id) const {
  if (const auto* ok = std::get_if<flxi::ReplicateOk>(&answer)) {
    flxi::ReplicateOk out = *ok;
    out.correlation_id = correlation_id;
    return flxi::Frame{flxi::Kind::kReplicateOk, out};
  }
  flxi::ReplicateError out = std::get<flxi::ReplicateError>(answer);
  out.correlation_id = correlation_id;
  out.detail = Bounded(detail);  // a view of this answer's own string, set now (moves are safe)
  return flxi::Frame{flxi::Kind::kReplicateError, out};
}

std::optional<flxi::ReplicaLog> WireLog(LogKind log) {
  switch (log) {
    case LogKind::kStream:
      return flxi::ReplicaLog::kStream;
    case LogKind::kCache:
      return flxi::ReplicaLog::kCache;
    case LogKind::kCursors:
      return flxi::ReplicaLog::kGroupCursors;
    case LogKind::kDeadLetters:
      return flxi::ReplicaLog::kGroupDeadLetters;
    case LogKind::kCounters:
      return flxi::ReplicaLog::kCounters;
    case LogKind::kProducers:
      return std::nullopt;
  }
  return std::nullopt;
}

LogKind StorageLog(flxi::ReplicaLog log) {
  switch (log) {
    case flxi::ReplicaLog::kStream:
      return LogKind::kStream;
    case flxi::ReplicaLog::kCache:
      return LogKind::kCache;
    case flxi::ReplicaLog::kGroupCursors:
      return LogKind::kCursors;
    case flxi::ReplicaLog::kGroupDeadLetters:
      return LogKind::kDeadLetters;
    case flxi::ReplicaLog::kCounters:
      return LogKind::kCounters;
  }
  return LogKind::kStream;
}

ReplicaFollower::ReplicaFollower(storage::ShardStore& store, bool cache_shard,
                                 MetricsRegistry* metrics)
    : store_(store), cache_shard_(cache_shard) {
  // The storage layer refuses to cut below the commit offset; it keeps it in memory only, so
  // hand it the persisted one (replication.md §6).
  storage::DurableLog& own = store_.log(Impl::OwnLog(*this));
  own.SetCommitOffset(std::max(own.CommitOffset(), store_.replica_state().commit_offset));
  for (size_t i = 0; i < storage::kLogKindCount; ++i) {
    logs_[i].durable_offset = store_.log(LogKind(i)).DurableOffset();
  }
  static_assert(std::size(kOutcomes) == kOutcomeCount);
  if (metrics != nullptr) {
    for (size_t i = 0; i < kOutcomeCount; ++i) {
      outcome_counters_[i] = &metrics->AddCounter(kReplicatedTotal, kReplicatedHelp,
                                                  std::string("outcome=\"") + kOutcomes[i] + "\"");
    }
  }
}

FollowerAnswer ReplicaFollower::ApplyRecords(const flxi::Records& batch, LogKind log,
                                             FollowerRole role, std::string_view sender) {
  return Impl::Finish(*this, Impl::Records(*this, batch, log, role, sender));
}

FollowerLogStatus ReplicaFollower::status(LogKind log) const {
  const storage::DurableLog& l = store_.log(log);
  const LogState& st = logs_[size_t(log)];
  FollowerLogStatus s;
  s.log = log;
  s.base_offset = l.BaseOffset();
  s.tail = follower::Tail(l);
  s.durable_offset = st.durable_offset;
  s.halt = st.halt;
  s.halt_detail = st.halt_detail;
  return s;
}

// --- Impl: answers --------------------------------------------------------------------------

FollowerAnswer ReplicaFollower::Impl::Ok(Offset durable_offset, const char* outcome) {
  return FollowerAnswer{flxi::ReplicateOk{0, durable_offset.value()}, std::string(), outcome};
}

FollowerAnswer ReplicaFollower::Impl::Error(flxi::ErrorCode code, Offset expected_offset,
                                            std::string detail, const char* outcome) {
  return FollowerAnswer{flxi::ReplicateError{0, code, expected_offset.value(), {}},
                        std::move(detail), outcome};
}

FollowerAnswer ReplicaFollower::Impl::StorageFailed(const std::string& where,
                                                    const storage::StorageError& error) {
  spdlog::error("replication: {}: storage failed: {}", where, error.ToString());
  return Error(flxi::ErrorCode::kStorageFailed, Offset(0), where + ": " + error.ToString(),
               "error");
}

FollowerAnswer ReplicaFollower::Impl::Finish(ReplicaFollower& f, FollowerAnswer answer) {
  for (size_t i = 0; i < kOutcomeCount; ++i) {
    if (std::string_view(answer.outcome) == kOutcomes[i]) {
      if (f.outcome_counters_[i] != nullptr) f.outcome_counters_[i]->Increment();
      break;
    }
  }
  return answer;
}

// --- Impl: shared checks --------------------------------------------------------------------

LogKind ReplicaFollower::Impl::OwnLog(const ReplicaFollower& f) {
  return f.cache_shard_ ? LogKind::kCache : LogKind::kStream;
}

bool ReplicaFollower::Impl::HasLog(const ReplicaFollower& f, LogKind log) {
  if (f.cache_shard_) return log == LogKind::kCache || log == LogKind::kCounters;
  return log == LogKind::kStream || log == LogKind::kCursors || log == LogKind::kDeadLetters;
}

std::string ReplicaFollower::Impl::Where(const flxi::ShardRef& shard, LogKind log) {
  std::string s;
  s.append(shard.tenant).append("/").append(shard.ns).append("/").append(shard.stream);
  s += "#" + std::to_string(shard.shard) + " " + storage::LogKindName(log);
  return s;
}

std::optional<FollowerAnswer> ReplicaFollower::Impl::Admit(ReplicaFollower& f,
                                                           const flxi::ShardRef& shard, LogKind log,
                                                           FollowerRole role,
                                                           std::string_view sender,
                                                           const std::string& where) {
  const Generation g(shard.generation);
  const std::string at = " (generation " + to_string(g) + ")";
  // 1. Role from the routing view.
  switch (role) {
    case FollowerRole::kFollower:
      break;
    case FollowerRole::kViewNewer:
      return Error(flxi::ErrorCode::kFencedEpoch, Offset(0),
                   where + at + ": the routing view has a newer generation", "fenced");
    case FollowerRole::kViewOlder:
      return Error(flxi::ErrorCode::kStaleRoute, Offset(0),
                   where + at + ": the routing view has not caught up", "behind");
    case FollowerRole::kNotReplica:
      return Error(flxi::ErrorCode::kUnauthorized, Offset(0),
                   where + at + ": this broker is not a follower of the shard", "refused");
  }
  // 3. The log exists for this kind of shard (a configuration error, not transient).
  if (!HasLog(f, log)) {
    return Error(flxi::ErrorCode::kUnauthorized, Offset(0), where + ": no such log for this shard",
                 "refused");
  }
  // 2 and 4. The accepted generation is the shard's (ShardStore keeps one replica state), so
  // the shard-level fence of an auxiliary log and the sender check are one comparison.
  const storage::ReplicaState& replica = f.store_.replica_state();
  if (g < replica.generation) {
    return Error(flxi::ErrorCode::kFencedEpoch, Offset(0),
                 where + at + ": generation " + to_string(replica.generation) + " was accepted",
                 "fenced");
  }
  if (g == replica.generation) {
    const auto& ballot = f.store_.ballot();
    if (ballot && ballot->generation == g && ballot->leader != sender) {
      return Error(flxi::ErrorCode::kFencedEpoch, Offset(0),
                   where + at + ": the ballot names leader " + ballot->leader, "fenced");
    }
    return std::nullopt;
  }
  // A newer generation: durable (ballot, replica file) before anything is stored or answered.
  // The history is not touched here: records are labelled when appended (§9.2).
  if (auto accepted = f.store_.AcceptGeneration(g, std::string(sender), std::nullopt); !accepted) {
    return StorageFailed(where, accepted.error());
  }
  return std::nullopt;
}

void ReplicaFollower::Impl::TrackLeader(LogState& state, Generation generation) {
  if (state.verified_generation == generation) return;
  state.verified_generation = generation;
  state.verified_through.reset();
}

storage::StorageResult<void> follower::EnsureDurable(storage::DurableLog& log, Offset through) {
  if (log.options().fsync_mode != storage::FsyncMode::kOnCommit) return {};
  if (log.DurableOffset() >= through) return {};
  return log.Sync();
}

Offset ReplicaFollower::Impl::CommitOffset(const ReplicaFollower& f) {
  return std::max(f.store_.replica_state().commit_offset, f.store_.log(OwnLog(f)).CommitOffset());
}

std::optional<Offset> ReplicaFollower::Impl::UncomparedFrom(const ReplicaFollower& f,
                                                            const LogState& state, LogKind log,
                                                            Generation generation) {
  if (log != OwnLog(f)) return std::nullopt;
  const auto& history = f.store_.generation_history().entries();
  if (history.empty() || generation <= history.back().generation) return std::nullopt;
  Offset from = std::max(history.back().start_offset, CommitOffset(f));
  if (state.verified_through) from = std::max(from, *state.verified_through);
  if (from >= follower::Tail(f.store_.log(log))) return std::nullopt;
  return from;
}

void ReplicaFollower::Impl::Halt(ReplicaFollower& f, LogKind log, FollowerHalt why,
                                 std::string detail) {
  LogState& st = f.logs_[size_t(log)];
  spdlog::error("replication: halted ({}) {}", FollowerHaltName(why), detail);
  st.halt = why;
  st.halt_detail = std::move(detail);
}

}  // namespace felix::cluster
