// CacheShard's watches (cache_shard.h "Watches"; client-protocol.md §9.4, storage.md §17.7).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "broker/cache_shard.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace {

// History reads per step: a bounded number of records and bytes.
constexpr size_t kHistoryReadRecords = 64;
constexpr size_t kHistoryReadBytes = 1u << 20;

}  // namespace

std::variant<CacheWatchRegistration, CursorError, Error> CacheShard::Watch(
    CacheWatchFilter filter, CacheWatchStart start, std::function<void()> on_ready) {
  if (!durable()) {
    return Error{ErrorCode::kInvalidArgument, "cache watches need a durable (log-backed) cache; " +
                                                  id_.ToString() + " is in memory"};
  }
  if (closed_) return Error{ErrorCode::kUnavailable, "cache shard is closed"};
  // Register before reading: every change at or above the frontier reaches this watcher live.
  const Offset frontier = applied_next_;
  const Offset oldest = cache_log_->start_offset();
  Watcher w;
  w.filter = std::move(filter);
  CacheWatchRegistration out;
  out.resume_offset = frontier;
  switch (start.kind) {
    case CacheWatchStart::Kind::kLive:
      w.phase = Watcher::Phase::kLive;
      break;
    case CacheWatchStart::Kind::kFromOffset:
      if (start.from_offset > frontier) {
        return CursorError{CursorError::Reason::kInFuture, start.from_offset, frontier};
      }
      if (start.from_offset < oldest) {
        // Compacted away: the current values stand in for the missing history.
        out.resnapshot = true;
        w.phase = Watcher::Phase::kState;
        w.state_below = frontier;
        w.history_next = frontier;
      } else {
        w.phase = start.from_offset == frontier ? Watcher::Phase::kLive : Watcher::Phase::kHistory;
        w.history_next = start.from_offset;
      }
      break;
    case CacheWatchStart::Kind::kRetained: {
      w.phase = Watcher::Phase::kState;
      w.state_below = frontier;
      w.history_next = frontier;
      // Counted now, without copying anything: a key rewritten before the walk reaches it
      // arrives as a live change instead, so the state phase may carry fewer (§10).
      uint64_t count = 0;
      const uint64_t now = Now();
      for (auto it = ordered_keys_.lower_bound(w.filter.text);
           it != ordered_keys_.end() && w.filter.Matches(*it); ++it) {
        const Entry& e = entries_.find(std::string(*it))->second;
        if (!Expired(e, now) && Offset(e.version) < frontier) ++count;
      }
      out.retained_count = count;
      break;
    }
  }
  const uint64_t id = next_watcher_id_++;
  auto on_room = [this, id] { executor_.Post([this, id] { WatchStep(id); }); };
  w.queue =
      std::make_shared<CacheWatchQueue>(options_.watch_queue_changes, options_.watch_queue_bytes,
                                        std::move(on_ready), std::move(on_room));
  out.id = id;
  out.queue = w.queue;
  const bool live = w.phase == Watcher::Phase::kLive;
  watchers_.emplace(id, std::move(w));
  if (!live) executor_.Post([this, id] { WatchStep(id); });
  return out;
}

void CacheShard::Unwatch(uint64_t id) {
  watchers_.erase(id);
}

void CacheShard::EndWatches(const WatchEnd& end) {
  for (auto& [id, w] : watchers_) w.queue->End(end);
  watchers_.clear();
}

void CacheShard::EndWatch(uint64_t id, WatchEnd end) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  it->second.queue->End(std::move(end));
  watchers_.erase(it);
}

void CacheShard::NotifyWatchers(const std::string& key, const std::string* value, Offset offset,
                                uint64_t expires_at) {
  if (watchers_.empty()) return;
  CacheChangeRef change;  // built once, shared by every watcher it goes to
  std::vector<uint64_t> lagged;
  for (auto& [id, w] : watchers_) {
    // Watchers still walking state or history read this change from the log when they get
    // to it.
    if (w.phase != Watcher::Phase::kLive || !w.filter.Matches(key)) continue;
    if (!change) {
      CacheChange c{key, std::nullopt, offset, expires_at};
      if (value) c.value = *value;
      change = std::make_shared<const CacheChange>(std::move(c));
    }
    if (!w.queue->OfferLive(change)) lagged.push_back(id);
  }
  for (uint64_t id : lagged) {
    spdlog::debug("cache watch lagged shard={} watch={} resume_from={}", id_.ToString(), id,
                  offset);
    EndWatch(id, WatchEnd{WatchEnd::Kind::kLagged, offset, 0, {}});
  }
}

void CacheShard::WatchStep(uint64_t id) {
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  Watcher& w = it->second;
  size_t budget = std::max<size_t>(1, options_.watch_changes_per_step);
  if (w.pending) {
    if (!w.queue->OfferReplay(w.pending)) return;  // resumed by on_room
    w.pending.reset();
  }
  if (w.phase == Watcher::Phase::kState && !StateStep(id, w, &budget)) return;
  if (w.phase == Watcher::Phase::kHistory && !HistoryStep(id, w, &budget)) return;
  if (w.phase == Watcher::Phase::kLive) return;
  // Budget spent: yield the executor to other work, then continue.
  executor_.Post([this, id] { WatchStep(id); });
}

bool CacheShard::StateStep(uint64_t id, Watcher& w, size_t* budget) {
  (void)id;
  const uint64_t now = Now();
  auto it = w.state_after ? ordered_keys_.upper_bound(*w.state_after)
                          : ordered_keys_.lower_bound(w.filter.text);
  for (; *budget > 0; --*budget) {
    if (it == ordered_keys_.end() || !w.filter.Matches(*it)) {
      // Keys are in byte order: past the last matching key the state phase is complete.
      w.phase = Watcher::Phase::kHistory;
      w.state_after.reset();
      return true;
    }
    std::string key(*it);
    ++it;
    const Entry& e = entries_.find(key)->second;
    w.state_after = key;
    // Entries written at or above the frontier arrive from the history phase instead.
    if (Expired(e, now) || Offset(e.version) >= w.state_below) continue;
    auto change = std::make_shared<const CacheChange>(
        CacheChange{std::move(key), e.value, Offset(e.version), e.expires_at});
    if (!w.queue->OfferReplay(change)) {
      w.pending = std::move(change);
      return false;
    }
  }
  return true;
}

bool CacheShard::HistoryStep(uint64_t id, Watcher& w, size_t* budget) {
  while (*budget > 0) {
    if (w.history_next >= applied_next_) {
      // Caught up inside this executor task: nothing applies in between, so live delivery
      // starts exactly where the history ends.
      w.phase = Watcher::Phase::kLive;
      return true;
    }
    RecordLog::ReadOutcome read =
        cache_log_->Read(w.history_next, std::min(kHistoryReadRecords, *budget), kHistoryReadBytes);
    if (std::holds_alternative<Trimmed>(read)) {
      // Compaction removed what was still to be read: a re-watch from here resnapshots.
      EndWatch(id, WatchEnd{WatchEnd::Kind::kLagged, w.history_next, 0, {}});
      return false;
    }
    if (auto* error = std::get_if<Error>(&read)) {
      spdlog::error("cache watch read failed shard={} offset={} error={}", id_.ToString(),
                    w.history_next, error->ToString());
      EndWatch(id, WatchEnd{WatchEnd::Kind::kError, Offset(0), ProtocolCodeFor(*error),
                            "cannot read the cache log of " + id_.ToString() + " at offset " +
                                to_string(w.history_next) + ": " + error->message});
      return false;
    }
    auto& records = std::get<RecordRead>(read);
    if (records.records.empty()) {
      w.history_next = applied_next_;
      continue;
    }
    for (const RecordView& r : records.records) {
      if (r.offset >= applied_next_) break;
      w.history_next = r.offset + 1;
      --*budget;
      auto record = DecodeCacheRecord(r.payload);
      if (!record) {
        EndWatch(id, WatchEnd{WatchEnd::Kind::kError, Offset(0),
                              Code(wire::flx1::ProtocolErrorCode::kStorage),
                              "cache log of " + id_.ToString() + " offset " + to_string(r.offset) +
                                  ": " + record.error().message});
        return false;
      }
      // A compaction copy restates a value already seen at its original offset.
      if (record->carried_version || !w.filter.Matches(record->key)) continue;
      CacheChange change{std::string(record->key), std::nullopt, r.offset, 0};
      if (record->op == CacheRecord::Op::kPut) {
        change.value = std::string(record->value.begin(), record->value.end());
        change.expires_at_millis = record->expires_at_millis;
      }
      auto shared = std::make_shared<const CacheChange>(std::move(change));
      if (!w.queue->OfferReplay(shared)) {
        w.pending = std::move(shared);
        return false;
      }
    }
  }
  return true;
}

}  // namespace felix::broker
