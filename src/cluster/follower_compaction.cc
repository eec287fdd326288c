#include "cluster/follower_compaction.h"

#include <algorithm>
#include <span>

#include "broker/cache_record.h"
#include "storage/record_format.h"

namespace felix::cluster {

namespace {

// One read's bounds: enough records to amortise the call, bytes within the pass's budget.
constexpr uint64_t kRecordsPerRead = 4096;
constexpr uint64_t kBytesPerRead = 1u << 20;

std::span<const uint8_t> Bytes(std::string_view payload) {
  return {reinterpret_cast<const uint8_t*>(payload.data()), payload.size()};
}

}  // namespace

void FollowerCompaction::StartOver(const storage::DurableLog& log) {
  started_ = true;
  rewrites_seen_ = log.Rewrites();
  scanned_to_ = verified_to_ = log.BaseOffset();
  latest_.clear();
}

void FollowerCompaction::Index(const storage::RecordView& r) {
  if (r.flags != 0) return;  // a generation-start record (or one Superseded refuses) names no key
  std::string_view key;
  if (which_ == CompactedLog::kCache) {
    auto record = broker::DecodeCacheRecord(Bytes(r.payload));
    if (!record) return;
    key = record->key;
  } else {
    auto record = broker::DecodeCounterRecord(Bytes(r.payload));
    if (!record || record->op != broker::CounterRecord::Op::kCheckpoint) return;
    key = record->key;
  }
  // The key views the read's buffer: copied only the first time it is seen.
  if (auto it = latest_.find(key); it != latest_.end()) {
    it->second = r.offset.value();
  } else {
    latest_.emplace(std::string(key), r.offset.value());
  }
}

bool FollowerCompaction::Superseded(const storage::RecordView& r, uint64_t now_ms,
                                    bool* undecodable) const {
  if (storage::IsGenerationStart(r.flags)) return true;
  if (r.flags != 0) {
    *undecodable = true;  // no flag but the generation-start one belongs in these logs
    return false;
  }
  auto newer = [&](std::string_view key) {
    auto it = latest_.find(key);
    return it != latest_.end() && it->second > r.offset.value();
  };
  if (which_ == CompactedLog::kCache) {
    auto record = broker::DecodeCacheRecord(Bytes(r.payload));
    if (!record) {
      *undecodable = true;
      return false;
    }
    if (record->op == broker::CacheRecord::Op::kDelete) return true;
    if (record->expires_at_millis != 0 && record->expires_at_millis <= now_ms) return true;
    return newer(record->key);
  }
  auto record = broker::DecodeCounterRecord(Bytes(r.payload));
  if (!record) {
    *undecodable = true;
    return false;
  }
  return newer(record->key);
}

storage::StorageResult<FollowerCompactionPass> FollowerCompaction::Run(storage::DurableLog& log,
                                                                       Offset floor,
                                                                       uint64_t now_ms) {
  if (!started_ || log.Rewrites() != rewrites_seen_ || log.BaseOffset() > scanned_to_) {
    StartOver(log);
  }
  FollowerCompactionPass pass;
  const Offset base = log.BaseOffset();
  verified_to_ = std::max(verified_to_, base);
  const Offset limit = std::min({floor, log.TailOffset(), log.DurableOffset()});
  uint64_t budget = scan_bytes_per_pass_;

  // Reads [from, end) record by record within the budget; `visit` returns false to stop.
  // Returns whether it stopped at `visit`'s word (not the end or the budget).
  auto walk = [&](Offset from, Offset end, const auto& visit) -> storage::StorageResult<bool> {
    while (from < end && budget > 0) {
      auto read = log.ReadViews(from, storage::ReadLimits{std::min(end - from, kRecordsPerRead),
                                                          std::min(budget, kBytesPerRead)});
      if (!read) return tl::unexpected(read.error());
      if (read->records.empty()) return false;
      for (const storage::RecordView& r : read->records) {
        if (r.offset >= end) return false;
        budget -= std::min<uint64_t>(budget, std::max<uint64_t>(1, r.payload.size()));
        ++pass.records_scanned;
        if (!visit(r)) return true;
        from = r.offset + 1;
      }
    }
    return false;
  };

  // 1. The index learns what lies below the floor.
  auto indexed = walk(scanned_to_, limit, [&](const storage::RecordView& r) {
    Index(r);
    scanned_to_ = r.offset + 1;
    return true;
  });
  // 2. The superseded prefix grows from where it stopped.
  storage::StorageResult<bool> blocked = false;
  if (indexed) {
    blocked = walk(verified_to_, scanned_to_, [&](const storage::RecordView& r) {
      bool undecodable = false;
      if (!Superseded(r, now_ms, &undecodable)) {
        if (undecodable) ++pass.undecodable;
        return false;
      }
      verified_to_ = r.offset + 1;
      return true;
    });
  }
  if (!indexed || !blocked) {
    const storage::StorageError& e = !indexed ? indexed.error() : blocked.error();
    // The base moved under the pass (a bootstrap or rebuild reset the log): start over next time.
    if (e.code == storage::StorageErrc::kTrimmed) {
      StartOver(log);
      pass.base = log.BaseOffset();
      pass.superseded_through = verified_to_;
      return pass;
    }
    return tl::unexpected(e);
  }
  pass.more = budget == 0 && (scanned_to_ < limit || (!*blocked && verified_to_ < scanned_to_));

  // 3. Whole sealed segments below the prefix go (never the active one, never past the hold).
  if (verified_to_ > base) {
    auto dropped = log.DropSegmentsBelow(verified_to_);
    if (!dropped) return tl::unexpected(dropped.error());
    pass.segments_deleted = dropped->segments_deleted;
    pass.bytes_reclaimed = dropped->bytes_reclaimed;
    if (dropped->segments_deleted > 0) {
      // Keys whose newest record went (deletes, expired puts) are gone for good.
      const uint64_t kept_from = log.BaseOffset().value();
      std::erase_if(latest_, [&](const auto& e) { return e.second < kept_from; });
    }
  }
  pass.base = log.BaseOffset();
  pass.superseded_through = verified_to_;
  return pass;
}

}  // namespace felix::cluster
