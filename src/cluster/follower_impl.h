// Internal to ReplicaFollower (replica_follower.cc, follower_apply.cc, follower_bootstrap.cc):
// the checks every replication message shares (§5 steps 1–4), answer builders, durability.
// Same threading as ReplicaFollower: one caller at a time.
#pragma once

#include <optional>
#include <string>

#include "cluster/replica_follower.h"

namespace felix::cluster {

namespace follower {
// The tail decisions are made against: everything written (a follower's appends all wait).
inline Offset Tail(const storage::DurableLog& log) {
  return log.WrittenOffset();
}
// Under kOnCommit, fsyncs unless `through` is already durable; other modes hold records in the
// page cache (cluster-etcd.md §7 item 2), so there is nothing to wait for.
storage::StorageResult<void> EnsureDurable(storage::DurableLog& log, Offset through);
}  // namespace follower

struct ReplicaFollower::Impl {
  // --- answers ---
  static FollowerAnswer Ok(Offset durable_offset, const char* outcome);
  static FollowerAnswer Error(wire::flxi::ErrorCode code, Offset expected_offset,
                              std::string detail, const char* outcome);
  static FollowerAnswer StorageFailed(const std::string& where, const storage::StorageError& error);
  // Counts felix_broker_replicated_total{outcome} and returns the answer.
  static FollowerAnswer Finish(ReplicaFollower& f, FollowerAnswer answer);

  // --- shared checks ---
  // The shard's own log (stream, or cache for a cache shard): it carries the history and the
  // commit offset.
  static storage::LogKind OwnLog(const ReplicaFollower& f);
  // Whether this kind of shard has `log` (stream: stream, cursors, dead letters; cache: cache,
  // counters). The producers log is never replicated by this path.
  static bool HasLog(const ReplicaFollower& f, storage::LogKind log);
  // "t/ns/s#3 stream": names the shard's log in details and log lines.
  static std::string Where(const wire::flxi::ShardRef& shard, storage::LogKind log);
  // §5 steps 1–4: role, shard fence for auxiliary logs, log exists, accept the sender (a newer
  // generation is persisted here, before anything is stored or answered). nullopt = continue.
  static std::optional<FollowerAnswer> Admit(ReplicaFollower& f, const wire::flxi::ShardRef& shard,
                                             storage::LogKind log, FollowerRole role,
                                             std::string_view sender, const std::string& where);
  // Forgets verified_through when the leader's generation changed (progress is per leader).
  static void TrackLeader(LogState& state, Generation generation);

  // The own log's commit offset: the persisted one, or newer in the log's in-memory guard.
  static Offset CommitOffset(const ReplicaFollower& f);
  // §5 step 5: where records an older generation wrote on the own log above the commit offset
  // begin that a leader at `generation` has not compared yet (nothing may land after them until
  // it has), or nullopt when there are none.
  static std::optional<Offset> UncomparedFrom(const ReplicaFollower& f, const LogState& state,
                                              storage::LogKind log, Generation generation);
  // Halts `log` (the leader sees LogConflict until a rebuild) and says so in the log.
  static void Halt(ReplicaFollower& f, storage::LogKind log, FollowerHalt why, std::string detail);

  // --- the records path (follower_apply.cc) ---
  static FollowerAnswer Records(ReplicaFollower& f, const wire::flxi::Records& batch,
                                storage::LogKind log, FollowerRole role, std::string_view sender);
};

}  // namespace felix::cluster
