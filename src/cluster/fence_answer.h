// The replica side of the promotion fence (replication.md §10 "Replica side", §11 ballots;
// internal-protocol-bodies.md §6.12–§6.14): answers a Fence (kind 29) and a ReplicateFetch
// (kinds 31/33/37) from a would-be leader against the shard's ShardStore.
//
// AnswerFence, in this order:
//   log not the shard's own (Stream for a stream shard; Cache, or Counters, for a cache
//   shard)                                                  → Malformed
//   no store here, or not in the replica set                → Unauthorized
//   routing view newer than the fence's generation G        → FencedEpoch
//   accepted generation > G                                 → FencedEpoch
//   accepted == G, ballot at G names another leader         → FencedEpoch (ballot)
//   accepted == G, same leader (or no ballot at G)          → FenceOk again ("confirmed")
//   accepted < G  → ShardStore::AcceptGeneration(G, sender) — ballot, then replica file, both
//                   fsynced — and only then FenceOk(log_end, commit_offset, last_generation)
//                   read after persisting; a failed write → StorageFailed, nothing answered Ok.
// A routing view *behind* G is normal (the fence usually arrives before the assignment).
// last_generation is the generation stored with the log's last record (0 for an empty log).
// The commit offset is the shard's (ShardStore keeps one, for its own log); a Counters fence
// answers commit_offset 0 (the leader then compares the whole suffix it fetches).
//
// AnswerFetch: same log / replica / view checks; then only a leader at exactly the accepted
// generation named by the ballot is answered (G < accepted or another leader → FencedEpoch,
// G > accepted → StaleRoute). The answer is a records message as a leader ships it (§7.1):
// kind 31 → the log's own kind, 33 → 32 with the records' own generations as labels, 37 → 36
// with labels and times; commit offset absent; at most ClampFetchBytes(max_bytes) (1 B..4 MiB) of
// payload (one record at least) and never past this replica's tail. A from_offset below the log's
// base → LogGap(base); at or past the tail → an empty batch at from_offset.
//
// Threading: not thread-safe; the host calls from the shard's strand (the one that owns the
// store's replica state). Blocking: AcceptGeneration fsyncs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cluster/replica_follower.h"
#include "common/strong_types.h"
#include "storage/shard_store.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

struct FenceAnswer {
  std::variant<wire::flxi::FenceOk, wire::flxi::ReplicateError> answer;
  std::string detail;   // the ReplicateError's detail (≤ 512 bytes)
  const char* outcome;  // accepted, confirmed, fenced, unauthorized, malformed, storage_failed

  bool ok() const { return std::holds_alternative<wire::flxi::FenceOk>(answer); }
  // The frame to send (kind 30, or 9), correlation id set; valid while this answer lives.
  wire::flxi::Frame ToFrame(uint64_t correlation_id) const;
};

// `store` null = no log for this shard here. `cache_shard` says which log is the shard's own.
FenceAnswer AnswerFence(storage::ShardStore* store, bool cache_shard,
                        const wire::flxi::Fence& fence, FollowerRole role, std::string_view sender);

struct FetchAnswer {
  // Ok: the records read (owning); else the error.
  bool ok = false;
  wire::flxi::ErrorCode code = wire::flxi::ErrorCode::kMalformed;
  Offset expected_offset;
  std::string detail;
  const char* outcome =
      "error";  // sent, fenced, stale, unauthorized, malformed, gap, storage_failed

  wire::flxi::Kind request_kind = wire::flxi::Kind::kReplicateFetch;
  wire::flxi::ReplicaLog log = wire::flxi::ReplicaLog::kStream;
  std::string tenant, ns, stream;  // the ShardRef echoed back
  uint32_t shard = 0;
  uint64_t generation = 0;
  Offset first_offset;
  std::vector<storage::Record> records;

  // The records frame (§7.1 kind selection) or a ReplicateError (kind 9); views point into
  // this answer, so it must outlive the frame.
  wire::flxi::Frame ToFrame(uint64_t correlation_id) const;
};

// `request_kind` is 31, 33 or 37 (the body is the same).
FetchAnswer AnswerFetch(storage::ShardStore* store, bool cache_shard,
                        const wire::flxi::Fetch& fetch, wire::flxi::Kind request_kind,
                        FollowerRole role, std::string_view sender);

// Where a log ends and which generation wrote its last record (0 for an empty log): what a
// FenceOk reports, and what the leader compares the answers with.
struct LogPosition {
  Offset log_end;
  uint64_t last_generation = 0;
};
storage::StorageResult<LogPosition> ReadLogPosition(const storage::DurableLog& log);

// Runs of the records' own generations as FLXI labels: the first record's generation at its
// offset, then each change (oldest first). Shared by the fetch answer and its reader.
std::vector<wire::flxi::GenerationStart> GenerationRuns(
    const std::vector<storage::Record>& records);

}  // namespace felix::cluster
