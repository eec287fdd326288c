// ReplicaFollower's records path (kinds 7, 14, 16, 18, 20, 25, 26, 32, 36): replication.md §5
// steps 5–9, the self-repair of §9.1 and the labels of §9.2.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <vector>

#include "cluster/follower_impl.h"
#include "cluster/record_marks.h"
#include "storage/record_format.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using storage::AppendRecord;
using storage::DurableLog;
using storage::LogKind;
using storage::StorageErrc;
using storage::StorageResult;

namespace {

// §5 step 6: decided from one read of the tail, re-decided if another append moved it.
constexpr int kApplyAttempts = 16;
// Payload bytes read per step while comparing an overlap.
constexpr uint64_t kCompareBytes = 1u << 20;

enum class Step { kOk, kGap, kConflict, kBusy };

struct Applied {
  Step step = Step::kOk;
  Offset offset;          // kOk: durable offset to answer; kGap: expected; kConflict: d
  Offset tail;            // the tail the decision was made against
  Offset appended_from;   // where fresh records were stored (kOk)
  uint64_t appended = 0;  // how many
};

// The first offset in [first, first + overlap.size()) whose stored payload differs from the
// batch's, or nullopt. Records retention already removed are skipped; a short read stops
// comparing (§5 step 6.4).
StorageResult<std::optional<Offset>> FirstDifference(const DurableLog& log, Offset first,
                                                     std::span<const AppendRecord> overlap) {
  const Offset end = first + overlap.size();
  Offset pos = std::max(first, log.BaseOffset());
  while (pos < end) {
    auto read = log.Read(pos, storage::ReadLimits{end - pos, kCompareBytes});
    if (!read) {
      if (read.error().code == StorageErrc::kTrimmed && read.error().oldest > pos) {
        pos = read.error().oldest;
        continue;
      }
      return tl::unexpected(read.error());
    }
    if (read->records.empty()) break;
    for (const storage::Record& r : read->records) {
      if (r.offset < pos || r.offset >= end) return std::optional<Offset>();
      std::span<const uint8_t> want = overlap[r.offset - first].payload;
      if (storage::IsGenerationStart(r.flags) !=
              storage::IsGenerationStart(overlap[r.offset - first].flags) ||
          r.payload.size() != want.size() ||
          !std::equal(want.begin(), want.end(),
                      reinterpret_cast<const uint8_t*>(r.payload.data()))) {
        return std::optional<Offset>(r.offset);
      }
    }
    if (read->next_offset <= pos) break;
    pos = read->next_offset;
  }
  return std::optional<Offset>();
}

// Runs beside the log's flush of freshly appended records (on the calling thread, while the
// flusher thread syncs the log), given the tail that was durable before them; empty = none.
using BesideFlush = std::function<void(Offset durable_tail)>;

// §5 step 6.2–6.6 against the log as it is now. Under on_commit with `beside` set, fresh
// records are flushed on the log's flusher thread while `beside` runs here, and this returns
// once both are done.
StorageResult<Applied> ApplyAt(DurableLog& log, Offset first, std::span<const AppendRecord> records,
                               const BesideFlush& beside = {}) {
  for (int attempt = 0; attempt < kApplyAttempts; ++attempt) {
    const Offset tail = follower::Tail(log);
    // Everything compared or answered below must be readable and durable.
    if (auto d = follower::EnsureDurable(log, tail); !d) return tl::unexpected(d.error());
    const uint64_t count = records.size();
    if (count == 0) return Applied{Step::kOk, tail, tail, Offset(0), 0};
    if (first > tail) return Applied{Step::kGap, tail, tail, Offset(0), 0};
    const uint64_t overlap = std::min<uint64_t>(tail - first, count);
    auto diff = FirstDifference(log, first, records.first(overlap));
    if (!diff) return tl::unexpected(diff.error());
    if (*diff) return Applied{Step::kConflict, **diff, tail, Offset(0), 0};
    // Wholly below the tail: the batch's end, never the tail, so the leader does not resume
    // past records nobody compared (cluster-etcd.md §7 item 1).
    if (overlap == count) return Applied{Step::kOk, first + count, tail, Offset(0), 0};
    std::span<const AppendRecord> fresh = records.subspan(overlap);
    const bool overlapped = beside && log.options().fsync_mode == storage::FsyncMode::kOnCommit;
    std::promise<StorageResult<void>> flushed;
    auto appended =
        overlapped
            ? log.AppendAtAsync(tail, fresh,
                                [&flushed](const StorageResult<void>& r) { flushed.set_value(r); })
            : log.AppendAt(tail, fresh);
    if (!appended) {
      if (appended.error().code == StorageErrc::kOffsetMismatch) continue;
      return tl::unexpected(appended.error());
    }
    if (overlapped) {
      beside(tail);
      if (auto r = flushed.get_future().get(); !r) return tl::unexpected(r.error());
    }
    const Offset end = appended->last_offset + 1;
    if (auto d = follower::EnsureDurable(log, end); !d) {
      return tl::unexpected(d.error());
    }
    return Applied{Step::kOk, end, tail, tail, fresh.size()};
  }
  return Applied{Step::kBusy, follower::Tail(log), Offset(0), Offset(0), 0};
}

// Labels must describe the sender's own past: generations rising, starts not falling, none
// above the generation the sender acts at.
bool ValidLabels(std::span<const flxi::GenerationStart> labels, uint64_t generation) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].generation > generation) return false;
    if (i > 0 && (labels[i].generation <= labels[i - 1].generation ||
                  labels[i].start_offset < labels[i - 1].start_offset)) {
      return false;
    }
  }
  return true;
}

}  // namespace

FollowerAnswer ReplicaFollower::Impl::Records(ReplicaFollower& f, const flxi::Records& batch,
                                              LogKind log, FollowerRole role,
                                              std::string_view sender) {
  const std::string where = Where(batch.shard, log);
  if (auto refused = Admit(f, batch.shard, log, role, sender, where)) return *refused;
  const Generation g(batch.shard.generation);
  const Offset first(batch.first_offset);
  const uint64_t count = batch.payloads.size();
  const std::string range = " [" + to_string(first) + ", +" + std::to_string(count) + ")";

  // The batch must be whole before anything about its position is trusted.
  if (count > std::numeric_limits<uint64_t>::max() - first.value()) {
    return Error(flxi::ErrorCode::kMalformed, Offset(0), where + range + ": offsets overflow",
                 "corrupt");
  }
  if (!batch.times.empty() && batch.times.size() != count) {
    return Error(flxi::ErrorCode::kMalformed, Offset(0),
                 where + range + ": one time per record expected", "corrupt");
  }
  if (!ValidLabels(batch.generations, g.value())) {
    return Error(flxi::ErrorCode::kMalformed, Offset(0),
                 where + range + ": generation labels out of order or above the sender's",
                 "corrupt");
  }
  if (flxi::BatchChecksum(batch.payloads, batch.marks) != batch.checksum) {
    return Error(flxi::ErrorCode::kMalformed, Offset(0),
                 where + range + ": batch checksum mismatch, resend the same records", "corrupt");
  }

  LogState& st = f.logs_[size_t(log)];
  TrackLeader(st, g);
  DurableLog& l = f.store_.log(log);
  const bool own = log == OwnLog(f);
  if (st.halt != FollowerHalt::kNone) {
    return Error(
        flxi::ErrorCode::kLogConflict, follower::Tail(l),
        where + ": halted (" + FollowerHaltName(st.halt) + ") until a rebuild: " + st.halt_detail,
        "conflict");
  }

  // 5. A newer leader must first compare what an older generation wrote here above the commit
  // offset: a batch starting past it is sent back there.
  const auto& history = f.store_.generation_history().entries();
  if (auto from = UncomparedFrom(f, st, log, g); from && first > *from) {
    return Error(flxi::ErrorCode::kLogGap, *from,
                 where + range + ": records from " + to_string(*from) +
                     " were written under generation " + to_string(history.back().generation) +
                     " and are not compared yet",
                 "gap");
  }

  // The records as stored: the leader's generation per record (labels, else the sender's) and
  // its time when sent (µs → ms; 0 lets the log stamp the arrival time).
  std::vector<AppendRecord> records(count);
  size_t label = 0;
  const auto& labels = batch.generations;
  for (uint64_t i = 0; i < count; ++i) {
    const flxi::Bytes p = batch.payloads[i];
    records[i].payload = {reinterpret_cast<const uint8_t*>(p.data()), p.size()};
    records[i].generation = g;
    if (!labels.empty()) {
      while (label + 1 < labels.size() && Offset(labels[label + 1].start_offset) <= first + i) {
        ++label;
      }
      records[i].generation = Generation(labels[label].generation);
    }
    records[i].timestamp_ms = batch.times.empty() ? 0 : batch.times[i] / 1000;
    auto flags = StoredFlags(batch.marks, i, p);
    if (!flags) {
      return Error(flxi::ErrorCode::kMalformed, Offset(0),
                   where + " record " + to_string(first + i) + ": " + flags.error(), "corrupt");
    }
    records[i].flags = *flags;
  }

  // The commit offset is written through before the answer (under on_commit, §6). What this
  // batch carries is almost always at or below the records already durable here (the leader's
  // mark counts earlier batches): that much is written while the log flushes the batch — two
  // flushes at once instead of one after the other (docs/performance.md, change 9).
  storage::StorageResult<void> beside_result;
  BesideFlush beside;
  if (own && batch.commit_offset && Offset(*batch.commit_offset) > CommitOffset(f)) {
    beside = [&](Offset durable_tail) {
      const Offset c = std::min(Offset(*batch.commit_offset), durable_tail);
      if (c <= CommitOffset(f)) return;
      beside_result = f.store_.SetCommitOffset(c);
      if (!beside_result) return;
      f.commit_persisted_at_ = std::chrono::steady_clock::now();
      l.SetCommitOffset(c);
    };
  }

  // 6. Apply; 7. repair a conflict under §9.1 and apply again.
  auto applied = ApplyAt(l, first, records, beside);
  if (!beside_result) return StorageFailed(where, beside_result.error());
  if (!applied) return StorageFailed(where, applied.error());
  const char* ok_outcome = "ok";
  if (applied->step == Step::kConflict) {
    const Offset d = applied->offset;
    const Offset tail = applied->tail;
    std::string detail = where + ": the record at " + to_string(d) + " disagrees with generation " +
                         to_string(g) + "'s (tail " + to_string(tail) + ")";
    auto halt = [&](FollowerHalt why, const std::string& reason, const char* outcome) {
      Halt(f, log, why, detail + "; " + reason);
      return Error(flxi::ErrorCode::kLogConflict, tail, detail + "; " + reason, outcome);
    };
    if (!own)
      return halt(FollowerHalt::kDiverged, "an auxiliary log is never truncated", "conflict");
    if (history.empty()) return halt(FollowerHalt::kDiverged, "no generation history", "conflict");
    const storage::EpochEntry prev = history.back();
    if (g <= prev.generation) {
      return halt(FollowerHalt::kDiverged,
                  "generation " + to_string(prev.generation) +
                      " is the newest here: a leader disagreeing with itself",
                  "conflict");
    }
    if (d < prev.start_offset) {
      return halt(FollowerHalt::kDiverged,
                  "it lies before generation " + to_string(prev.generation) + " began at " +
                      to_string(prev.start_offset),
                  "conflict");
    }
    if (st.verified_through && d < *st.verified_through) {
      return halt(FollowerHalt::kDiverged,
                  "below " + to_string(*st.verified_through) + ", compared with this leader",
                  "conflict");
    }
    const Offset commit = CommitOffset(f);
    auto below_commit = [&] {
      st.committed_mismatch_generation = g;
      return halt(
          FollowerHalt::kBelowCommit,
          "cutting there would discard records below the commit offset " + to_string(commit),
          "below_commit");
    };
    if (d < commit) return below_commit();
    if (auto cut = l.Truncate(d); !cut) {
      if (cut.error().code == StorageErrc::kBelowCommit) return below_commit();
      return StorageFailed(where, cut.error());
    }
    (void)f.store_.RelabelGenerations(d, {});  // advisory
    spdlog::warn(
        "replication: {}: truncated [{}, {}) written under generation {} for generation {}", where,
        d, tail, prev.generation, g);
    applied = ApplyAt(l, first, records, beside);
    if (!beside_result) return StorageFailed(where, beside_result.error());
    if (!applied) return StorageFailed(where, applied.error());
    if (applied->step == Step::kConflict) {
      return halt(FollowerHalt::kDiverged, "still in conflict after truncation", "conflict");
    }
    ok_outcome = "truncated";
  }
  if (applied->step == Step::kGap) {
    return Error(flxi::ErrorCode::kLogGap, applied->offset,
                 where + range + ": begins past the tail " + to_string(applied->offset), "gap");
  }
  if (applied->step == Step::kBusy) {
    return Error(flxi::ErrorCode::kUnavailable, Offset(0), where + ": the tail kept moving",
                 "error");
  }

  // 8. A newer leader fenced this one while storing: the sender must not count the records.
  if (f.store_.replica_state().generation > g) {
    return Error(flxi::ErrorCode::kFencedEpoch, Offset(0), where + ": fenced while storing",
                 "fenced");
  }
  if (own && applied->appended > 0) {
    // §9.2: who wrote what was appended (runs of the records' generations), replacing any
    // history entry at or after the appended range.
    std::vector<storage::EpochEntry> runs;
    for (Offset o = applied->appended_from; o < applied->appended_from + applied->appended;
         o = o.next()) {
      const Generation gen = records[o - first].generation;
      if (runs.empty() || runs.back().generation != gen) runs.push_back({gen, o});
    }
    (void)f.store_.RelabelGenerations(applied->appended_from, runs);  // advisory
  }
  if (count > 0) {
    st.verified_through = std::max(st.verified_through.value_or(Offset(0)), first + count);
  }
  // A cache's counter log carries its mark too: never truncated (it halts instead), it keeps
  // the value in memory only, as the floor of this follower's compaction (follower_compaction.h).
  const bool counters = log == storage::LogKind::kCounters && f.cache_shard_;
  if ((own || counters) && batch.commit_offset) {
    // Only what this batch left level with the leader may be called committed here.
    std::optional<Offset> level;
    if (count > 0) {
      level = first + count;
    } else if (st.verified_through && first <= *st.verified_through) {
      level = first;
    }
    if (level && counters) {
      const Offset c = std::min({Offset(*batch.commit_offset), *level, applied->offset});
      if (c > l.CommitOffset()) l.SetCommitOffset(c);
    } else if (level) {
      const Offset c = std::min({Offset(*batch.commit_offset), *level, applied->offset});
      if (c > CommitOffset(f)) {
        // Under kOnCommit written through before the answer; otherwise at most once a second
        // (read back behind after a crash: a weaker guard until a batch re-carries it, §6).
        const auto now = std::chrono::steady_clock::now();
        if (l.options().fsync_mode == storage::FsyncMode::kOnCommit ||
            now - f.commit_persisted_at_ >= std::chrono::seconds(1)) {
          if (auto w = f.store_.SetCommitOffset(c); !w) return StorageFailed(where, w.error());
          f.commit_persisted_at_ = now;
        }
        l.SetCommitOffset(c);
      }
    }
  }
  st.durable_offset = applied->offset;
  return Ok(applied->offset, ok_outcome);
}

}  // namespace felix::cluster
