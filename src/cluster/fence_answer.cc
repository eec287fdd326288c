#include "cluster/fence_answer.h"

#include <algorithm>

#include "cluster/record_marks.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using storage::LogKind;

namespace {

constexpr size_t kMaxDetail = 512;

std::string Clip(std::string s) {
  if (s.size() > kMaxDetail) s.resize(kMaxDetail);
  return s;
}

// The storage log a fence or fetch may name on this shard; nullopt → Malformed.
std::optional<LogKind> FenceableLog(flxi::ReplicaLog log, bool cache_shard) {
  if (!cache_shard) {
    if (log == flxi::ReplicaLog::kStream) return LogKind::kStream;
    return std::nullopt;
  }
  if (log == flxi::ReplicaLog::kCache) return LogKind::kCache;
  if (log == flxi::ReplicaLog::kCounters) return LogKind::kCounters;
  return std::nullopt;
}

// The checks both kinds share (log, store, role). nullopt = continue.
struct Refusal {
  flxi::ErrorCode code;
  std::string detail;
  const char* outcome;
};

std::optional<Refusal> CommonChecks(storage::ShardStore* store, bool cache_shard,
                                    flxi::ReplicaLog log, FollowerRole role,
                                    Generation generation) {
  if (!FenceableLog(log, cache_shard)) {
    return Refusal{flxi::ErrorCode::kMalformed,
                   std::string("log ") + flxi::ReplicaLogName(log) + " is not fenceable on a " +
                       (cache_shard ? "cache" : "stream") + " shard",
                   "malformed"};
  }
  if (store == nullptr) {
    return Refusal{flxi::ErrorCode::kUnauthorized, "no log for this shard here", "unauthorized"};
  }
  if (role == FollowerRole::kNotReplica) {
    return Refusal{flxi::ErrorCode::kUnauthorized, "not in the replica set", "unauthorized"};
  }
  if (role == FollowerRole::kViewNewer) {
    return Refusal{flxi::ErrorCode::kFencedEpoch,
                   "routing view is past generation " + to_string(generation), "fenced"};
  }
  return std::nullopt;
}

// The ballot at the accepted generation names another leader.
bool BallotRefuses(const storage::ShardStore& store, std::string_view sender) {
  const auto& ballot = store.ballot();
  return ballot && ballot->generation == store.replica_state().generation &&
         ballot->leader != sender;
}

FenceAnswer FenceError(flxi::ErrorCode code, std::string detail, const char* outcome) {
  FenceAnswer a{flxi::ReplicateError{0, code, 0, {}}, Clip(std::move(detail)), outcome};
  return a;
}

}  // namespace

flxi::Frame FenceAnswer::ToFrame(uint64_t correlation_id) const {
  if (const auto* ok = std::get_if<flxi::FenceOk>(&answer)) {
    flxi::FenceOk body = *ok;
    body.correlation_id = correlation_id;
    return flxi::Frame{flxi::Kind::kFenceOk, body};
  }
  flxi::ReplicateError body = std::get<flxi::ReplicateError>(answer);
  body.correlation_id = correlation_id;
  body.detail = detail;
  return flxi::Frame{flxi::Kind::kReplicateError, body};
}

FenceAnswer AnswerFence(storage::ShardStore* store, bool cache_shard, const flxi::Fence& fence,
                        FollowerRole role, std::string_view sender) {
  const Generation g(fence.shard.generation);
  if (auto refusal = CommonChecks(store, cache_shard, fence.log, role, g)) {
    return FenceError(refusal->code, std::move(refusal->detail), refusal->outcome);
  }
  const Generation accepted = store->replica_state().generation;
  const char* outcome = "accepted";
  if (g < accepted) {
    return FenceError(
        flxi::ErrorCode::kFencedEpoch,
        "generation " + to_string(g) + " is older than the accepted " + to_string(accepted),
        "fenced");
  }
  if (g == accepted) {
    if (BallotRefuses(*store, sender)) {
      return FenceError(
          flxi::ErrorCode::kFencedEpoch,
          "generation " + to_string(g) + " was promised to " + store->ballot()->leader, "fenced");
    }
    outcome = "confirmed";
  } else if (auto w = store->AcceptGeneration(g, std::string(sender), std::nullopt); !w) {
    return FenceError(flxi::ErrorCode::kStorageFailed,
                      "persisting generation " + to_string(g) + ": " + w.error().ToString(),
                      "storage_failed");
  }
  // Read only after the generation is durable: anything the old leader lands later is refused.
  const LogKind kind = *FenceableLog(fence.log, cache_shard);
  auto end = ReadLogPosition(store->log(kind));
  if (!end) {
    return FenceError(flxi::ErrorCode::kStorageFailed, end.error().ToString(), "storage_failed");
  }
  const Offset commit =
      kind == LogKind::kCounters ? Offset(0) : store->replica_state().commit_offset;
  return FenceAnswer{
      flxi::FenceOk{0, end->log_end.value(), commit.value(), end->last_generation}, {}, outcome};
}

storage::StorageResult<LogPosition> ReadLogPosition(const storage::DurableLog& log) {
  const Offset tail = log.TailOffset();
  if (tail == log.BaseOffset()) return LogPosition{tail, 0};
  auto batch = log.Read(tail - 1, storage::ReadLimits{1, 1});
  if (!batch) return tl::unexpected(batch.error());
  if (batch->records.empty()) return LogPosition{tail, 0};
  return LogPosition{tail, batch->records.back().generation.value()};
}

std::vector<flxi::GenerationStart> GenerationRuns(const std::vector<storage::Record>& records) {
  std::vector<flxi::GenerationStart> runs;
  for (const auto& r : records) {
    if (runs.empty() || runs.back().generation != r.generation.value()) {
      runs.push_back({r.generation.value(), r.offset.value()});
    }
  }
  return runs;
}

flxi::Frame FetchAnswer::ToFrame(uint64_t correlation_id) const {
  auto error = [&](flxi::ErrorCode c, std::string_view d) {
    return flxi::Frame{flxi::Kind::kReplicateError,
                       flxi::ReplicateError{correlation_id, c, expected_offset.value(), d}};
  };
  if (!ok) return error(code, detail);
  flxi::Records r;
  r.correlation_id = correlation_id;
  r.shard = flxi::ShardRef{tenant, ns, stream, shard, generation};
  r.first_offset = first_offset.value();
  r.payloads.reserve(records.size());
  for (const auto& rec : records) r.payloads.emplace_back(rec.payload);
  r.marks = MarksOf(records);  // generation-start records travel as they are stored
  r.checksum = flxi::BatchChecksum(r.payloads, r.marks);
  const bool labelled = request_kind != flxi::Kind::kReplicateFetch;
  const bool timed = request_kind == flxi::Kind::kReplicateTimedFetch;
  if (labelled) r.generations = GenerationRuns(records);
  if (timed) {
    for (const auto& rec : records) r.times.push_back(rec.timestamp_ms * 1000);
  }
  auto frame = flxi::MakeRecordsFrame(log, std::move(r), labelled, timed);
  if (!frame) return error(flxi::ErrorCode::kStorageFailed, "cannot frame the records");
  return *frame;
}

FetchAnswer AnswerFetch(storage::ShardStore* store, bool cache_shard, const flxi::Fetch& fetch,
                        flxi::Kind request_kind, FollowerRole role, std::string_view sender) {
  FetchAnswer a;
  a.request_kind = request_kind;
  a.log = fetch.log;
  a.tenant = fetch.shard.tenant;
  a.ns = fetch.shard.ns;
  a.stream = fetch.shard.stream;
  a.shard = fetch.shard.shard;
  a.generation = fetch.shard.generation;
  auto fail = [&](flxi::ErrorCode code, std::string detail, const char* outcome) {
    a.ok = false;
    a.code = code;
    a.detail = Clip(std::move(detail));
    a.outcome = outcome;
    return std::move(a);
  };
  const Generation g(fetch.shard.generation);
  if (auto refusal = CommonChecks(store, cache_shard, fetch.log, role, g)) {
    return fail(refusal->code, std::move(refusal->detail), refusal->outcome);
  }
  const Generation accepted = store->replica_state().generation;
  if (g < accepted || (g == accepted && BallotRefuses(*store, sender))) {
    return fail(flxi::ErrorCode::kFencedEpoch,
                "fetch at generation " + to_string(g) + " from " + std::string(sender) +
                    "; accepted " + to_string(accepted),
                "fenced");
  }
  if (g > accepted) {
    return fail(flxi::ErrorCode::kStaleRoute, "not fenced at generation " + to_string(g) + " yet",
                "stale");
  }
  const storage::DurableLog& log = store->log(*FenceableLog(fetch.log, cache_shard));
  const Offset tail = log.TailOffset();
  const Offset from(fetch.from_offset);
  a.first_offset = from;
  if (from < log.BaseOffset()) {
    a.expected_offset = log.BaseOffset();
    return fail(flxi::ErrorCode::kLogGap,
                "offset " + std::to_string(fetch.from_offset) + " is below the base", "gap");
  }
  a.ok = true;
  a.outcome = "sent";
  if (from >= tail) return a;
  const uint32_t budget = flxi::ClampFetchBytes(fetch.max_bytes);
  storage::ReadLimits limits{log.options().max_records_per_read, budget};
  auto batch = log.Read(from, limits);
  if (!batch) {
    return fail(flxi::ErrorCode::kStorageFailed, batch.error().ToString(), "storage_failed");
  }
  // Read returns at least one record even past the budget; keep the answer inside 4 MiB.
  uint64_t bytes = 0;
  for (auto& rec : batch->records) {
    if (rec.offset >= tail) break;
    bytes += rec.payload.size();
    if (bytes > budget && !a.records.empty()) break;
    a.records.push_back(std::move(rec));
  }
  return a;
}

}  // namespace felix::cluster
