// FollowerCompaction: what a follower of a durable cache does in place of compaction
// (replication.md §20; docs/cluster.md "Retention, compaction and the leader's base").
//
// The leader compacts by copying each live record above a cut and deleting the segments below
// it. A follower cannot copy: every offset it holds is the leader's. What it can do is delete
// a prefix of whole sealed segments in which every record is *superseded* — a promoted
// replica folding the log without them reaches the same state:
//   cache log:   a put or delete of the same key later in the log, below the floor; a delete
//                (with every earlier record of its key gone too, the key is absent either
//                way); a put this broker's clock reads as expired (absent either way);
//   counter log: a checkpoint of the same counter later in the log, below the floor;
//   either:      a generation-start record (it carries no state).
// Anything else — a live put, a delta or checkpoint not yet followed by a checkpoint, a record
// that does not decode — stops the prefix there. The leader's copies supersede everything below
// its cut, so once the follower holds them below its floor it drops what the leader dropped.
//
// The floor is where superseding records are kept for good: the cache log's commit offset
// (truncation never cuts below it), the counter log's carried commit offset (an auxiliary log
// is never truncated at all; a rebuild keeps what lies below it), each capped at the log's
// durable offset. The logs are held at their commit offsets as well (retention hold), so a
// drop never reaches a segment holding an offset at or above it.
//
// Incremental: the key index covers [base, scanned_to) and only grows; everything below
// `verified_to` is known superseded (supersession only grows as the floor and the clock move
// on). The state starts over when the log was truncated or reset (DurableLog::Rewrites) or its
// base moved past what was scanned. A pass reads at most `scan_bytes_per_pass` of payload and
// says whether more remains: the caller runs the next one as a new task, so the replicated
// batches queued on the same executor are applied in between (a follower's first pass over a
// large log would otherwise hold them back for its whole length). The index holds each key
// once (no values).
//
// Threading: one caller at a time (the follower's executor); the log is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/strong_types.h"
#include "storage/durable_log.h"
#include "storage/storage_error.h"

namespace felix::cluster {

enum class CompactedLog { kCache, kCounters };

struct FollowerCompactionPass {
  uint64_t records_scanned = 0;  // indexed or checked this pass
  uint64_t segments_deleted = 0;
  uint64_t bytes_reclaimed = 0;
  Offset base;                // the log's base after the pass
  Offset superseded_through;  // everything below this is known superseded
  bool more = false;          // the byte budget ran out before the floor
  uint64_t undecodable = 0;   // records that stopped the prefix because they do not decode
};

class FollowerCompaction {
 public:
  explicit FollowerCompaction(CompactedLog which, uint64_t scan_bytes_per_pass = 1u << 20)
      : which_(which), scan_bytes_per_pass_(scan_bytes_per_pass) {}

  // One pass over `log` with records below `floor` kept for good (see above), `now_ms` this
  // broker's wall clock (expiry). Storage errors are returned; the state is kept.
  storage::StorageResult<FollowerCompactionPass> Run(storage::DurableLog& log, Offset floor,
                                                     uint64_t now_ms);

  size_t indexed_keys() const { return latest_.size(); }

 private:
  // Whether the record at `offset` is superseded (see the file comment).
  bool Superseded(const storage::RecordView& r, uint64_t now_ms, bool* undecodable) const;
  // Notes what the record at r.offset tells the index.
  void Index(const storage::RecordView& r);
  void StartOver(const storage::DurableLog& log);

  CompactedLog which_;
  uint64_t scan_bytes_per_pass_;
  uint64_t rewrites_seen_ = 0;
  bool started_ = false;
  Offset scanned_to_;   // the index covers [.., scanned_to_)
  Offset verified_to_;  // everything in [base, verified_to_) is superseded
  // Looked up by the views a read returns, without building a string per record.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  // Cache log: key → offset of its newest record below scanned_to_. Counter log: counter →
  // offset of its newest checkpoint below scanned_to_.
  std::unordered_map<std::string, uint64_t, KeyHash, std::equal_to<>> latest_;
};

}  // namespace felix::cluster
