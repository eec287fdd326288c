#include "broker/cache_shard.h"

#include <algorithm>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "broker/protocol_codes.h"

namespace felix::broker {

#if FELIX_FAULT_INJECTION
namespace {

// Test seam FELIX_TEST_STALE_GET_EVERY=<N> (a deliberately broken cache for the fault harness's
// linearizability check, docs/reliability.md): a get of a key whose current value was written
// at a log offset divisible by N answers "absent" — the value of every Nth write is invisible to
// gets, as if read from a copy that has not applied it (a stale read). Read once from the
// environment here, not carried in CacheShardOptions, so that a seam of test builds adds
// nothing to a header most of the broker includes; immutable after that first read. 0 = off.
uint64_t StaleGetEvery() {
  static const uint64_t every = [] {
    const char* text = std::getenv("FELIX_TEST_STALE_GET_EVERY");
    return text == nullptr ? uint64_t{0} : std::strtoull(text, nullptr, 10);
  }();
  return every;
}

}  // namespace
#endif

namespace {

constexpr size_t kReplayRecords = 4096;
constexpr size_t kReplayBytes = 16u << 20;

std::span<const uint8_t> Bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t*>(text.data()), text.size()};
}

int64_t WrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

uint64_t WallMicros() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

uint64_t WallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

CacheMetrics::CacheMetrics(MetricsRegistry& r)
    : hits(r.AddCounter("felix_cache_hits_total", "cache gets that found a value")),
      misses(r.AddCounter("felix_cache_misses_total", "cache gets that found no live value")),
      expiries(r.AddCounter("felix_cache_expiries_total", "cache entries removed on expiry")),
      counter_ops(r.AddCounter("felix_counter_ops_total", "counter adds and gets served")) {}

CacheShard::CacheShard(ShardId id, Executor& executor, std::unique_ptr<RecordLog> cache_log,
                       std::unique_ptr<RecordLog> counter_log, CacheShardOptions options)
    : id_(std::move(id)),
      executor_(executor),
      cache_log_(std::move(cache_log)),
      counter_log_(std::move(counter_log)),
      options_(std::move(options)) {
  cache_state_.log = cache_log_.get();
  counter_state_.log = counter_log_.get();
  // semantics.md §10: without a log, versions come from a counter seeded by the wall clock, so
  // a version handed out before a restart is not handed out again for another value.
  if (!durable()) memory_version_ = WallMicros();
}

CacheShard::~CacheShard() = default;

uint64_t CacheShard::Now() const {
  return options_.now_ms ? options_.now_ms() : WallMs();
}

Result<void> CacheShard::Open() {
  if (!durable()) return {};
  if (auto replayed = Replay(LogId::kCache); !replayed) return replayed;
  if (auto replayed = Replay(LogId::kCounter); !replayed) return replayed;
  applied_next_ = cache_log_->next_offset();
  spdlog::info("cache shard opened shard={} entries={} counters={} cache_next={} counter_next={}",
               id_.ToString(), entries_.size(), counters_.size(), cache_log_->next_offset(),
               counter_log_->next_offset());
  return {};
}

Result<void> CacheShard::Replay(LogId which) {
  RecordLog& log = *State(which).log;
  const char* name = which == LogId::kCache ? "cache" : "counter";
  Offset from = log.start_offset();
  const Offset end = log.next_offset();
  while (from < end) {
    RecordLog::ReadOutcome read = log.Read(from, kReplayRecords, kReplayBytes);
    if (auto* trimmed = std::get_if<Trimmed>(&read)) {
      from = std::max(from + 1, trimmed->oldest_offset);
      continue;
    }
    if (auto* error = std::get_if<Error>(&read)) {
      return Fail(error->code, std::string(name) + " log of " + id_.ToString() +
                                   " unreadable at offset " + to_string(from) + ": " +
                                   error->message);
    }
    auto& records = std::get<RecordRead>(read);
    if (records.records.empty()) break;
    for (const RecordView& r : records.records) {
      if (which == LogId::kCache) {
        auto record = DecodeCacheRecord(r.payload);
        if (!record) {
          return Fail(ErrorCode::kCorruption, "cache log of " + id_.ToString() + " offset " +
                                                  to_string(r.offset) + ": " +
                                                  record.error().message);
        }
        ApplyCache(*record, r.offset, r.payload.size());
      } else {
        auto record = DecodeCounterRecord(r.payload);
        if (!record) {
          return Fail(ErrorCode::kCorruption, "counter log of " + id_.ToString() + " offset " +
                                                  to_string(r.offset) + ": " +
                                                  record.error().message);
        }
        ApplyCounter(*record, r.offset, r.payload.size());
      }
      from = r.offset + 1;
    }
  }
  return {};
}

void CacheShard::SetExpiry(const std::string& key, uint64_t old_expiry, uint64_t new_expiry) {
  if (old_expiry == new_expiry) return;
  if (old_expiry != 0) by_expiry_.erase({old_expiry, key});
  if (new_expiry != 0) by_expiry_.emplace(new_expiry, key);
}

void CacheShard::EraseEntry(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  cache_state_.live_bytes -= std::min(cache_state_.live_bytes, it->second.record_bytes);
  SetExpiry(key, it->second.expires_at, 0);
  ordered_keys_.erase(std::string_view(it->first));
  entries_.erase(it);
}

void CacheShard::ApplyCache(const CacheRecord& record, Offset offset, uint64_t bytes) {
  cache_state_.total_bytes += bytes;
  if (durable()) applied_next_ = std::max(applied_next_, offset + 1);
  std::string key(record.key);
  if (record.op == CacheRecord::Op::kDelete) {
    EraseEntry(key);
    return;
  }
  auto [slot, created] = entries_.try_emplace(key);
  if (created) ordered_keys_.insert(std::string_view(slot->first));
  Entry& entry = slot->second;
  uint64_t old_expiry = entry.expires_at;
  cache_state_.live_bytes -= std::min(cache_state_.live_bytes, entry.record_bytes);
  entry.value.assign(record.value.begin(), record.value.end());
  entry.expires_at = record.expires_at_millis;
  entry.version = record.carried_version.value_or(offset.value());
  entry.record_offset = offset;
  entry.record_bytes = bytes;
  cache_state_.live_bytes += bytes;
  SetExpiry(key, old_expiry, entry.expires_at);
}

void CacheShard::ApplyCounter(const CounterRecord& record, Offset offset, uint64_t bytes) {
  counter_state_.total_bytes += bytes;
  auto [it, created] = counters_.try_emplace(std::string(record.key));
  CounterEntry& c = it->second;
  if (created) {
    c.history_start = offset;
    c.history_bytes = bytes;
    counter_state_.live_bytes += bytes;
  }
  if (record.op == CounterRecord::Op::kCheckpoint) {
    c.sum = record.value;
    c.history_start = offset;
  } else {
    c.sum = WrappingAdd(c.sum, record.value);
  }
}

void CacheShard::Append(LogId which, std::vector<std::vector<uint8_t>> records,
                        std::function<void(Result<Offset>)> settle,
                        std::function<void(const Error&)> early) {
  LogState& state = State(which);
  auto owner = std::make_shared<std::vector<std::vector<uint8_t>>>(std::move(records));
  auto batch = std::make_shared<PayloadBatch>();
  for (const auto& r : *owner) batch->payloads.emplace_back(r.data(), r.size());
  batch->owner = owner;
  batch->timestamp_micros = Now() * 1000;
  ++state.pending;
  state.log->Append(*batch, [this, which, batch, settle = std::move(settle),
                             early = std::move(early)](Result<Offset> result) mutable {
    // On a durable log's flusher thread when the executor is idle (as StreamShard::Publish).
    executor_.RunAloneOrPost([this, which, batch, settle = std::move(settle),
                              early = std::move(early), result = std::move(result)]() mutable {
      CommitGate* gate = Gate(which);
      if (gate == nullptr || !result) return Settle(which, settle, std::move(result));
      // Quorum: applied and answered once a majority holds it. The gate runs exactly one of
      // the two callbacks with the release (`late` after a timeout answered through `early`).
      auto shared = std::make_shared<std::function<void(Result<Offset>)>>(std::move(settle));
      gate->Hold(
          batch, *result,
          [this, which, shared, early = std::move(early)](Result<Offset> r) {
            if (!r && r.error().code == ErrorCode::kTimeout) {
              // Outcome unknown: answered now (if anyone waits), settled when covered.
              if (early) early(r.error());
              return;
            }
            Settle(which, *shared, std::move(r));
          },
          [this, which, shared](Result<Offset> r) { Settle(which, *shared, std::move(r)); });
    });
  });
}

void CacheShard::Settle(LogId which, const std::function<void(Result<Offset>)>& settle,
                        Result<Offset> result) {
  LogState& st = State(which);
  --st.pending;
  settle(std::move(result));
  if (st.pending == 0 && st.compacting && st.resume_when_idle) {
    st.resume_when_idle = false;
    CompactRound(which);
  }
  MaybeCompact(which);
}

namespace {

// A gated write may be answered twice (the timeout, then its late settling): only the first
// answer goes out.
template <class T>
std::function<void(Result<T>)> AnswerOnce(std::function<void(Result<T>)> done) {
  auto cell = std::make_shared<std::function<void(Result<T>)>>(std::move(done));
  return [cell](Result<T> r) {
    if (!*cell) return;
    auto f = std::move(*cell);
    *cell = nullptr;
    f(std::move(r));
  };
}

// A gated write is answered early on a timeout and settled later: `done` then answers once,
// and the early answer goes through it. An ungated shard has no early answer.
template <class T>
std::function<void(const Error&)> AnswerEarlyWhenGated(bool gated,
                                                       std::function<void(Result<T>)>& done) {
  if (!gated) return {};
  done = AnswerOnce(std::move(done));
  return [done](const Error& e) { done(tl::unexpected(e)); };
}

}  // namespace

void CacheShard::Put(std::string key, std::string value, std::optional<uint64_t> ttl_ms,
                     PutDone done) {
  if (closed_) return done(Fail(ErrorCode::kUnavailable, "cache shard is closed"));
  std::optional<uint64_t> ttl = ttl_ms ? ttl_ms : options_.default_ttl_ms;
  uint64_t expires_at = ttl ? Now() + *ttl : 0;
  CacheRecord record{CacheRecord::Op::kPut, expires_at, std::nullopt, key, Bytes(value)};
  if (!durable()) {
    ApplyCache(record, Offset(++memory_version_), 0);  // no log: the version stands in
    return done({});
  }
  std::vector<std::vector<uint8_t>> records;
  records.push_back(EncodeCacheRecord(record));
  ++pending_keys_[key];
  std::function<void(const Error&)> early = AnswerEarlyWhenGated(gated(), done);
  Append(
      LogId::kCache, std::move(records),
      [this, key = std::move(key), expires_at, value = std::move(value),
       done = std::move(done)](Result<Offset> offset) {
        ReleaseKey(pending_keys_, key);
        if (!offset) return done(tl::unexpected(offset.error()));
        CacheRecord applied{CacheRecord::Op::kPut, expires_at, std::nullopt, key, Bytes(value)};
        ApplyCache(applied, *offset, kCacheRecordHeaderBytes + key.size() + value.size());
        NotifyWatchers(key, &value, *offset, expires_at);
        done({});
      },
      std::move(early));
}

std::optional<std::string> CacheShard::Get(const std::string& key) {
  auto it = entries_.find(key);
  if (it != entries_.end() && Expired(it->second, Now())) {
    if (!durable()) {
      EraseEntry(key);  // in memory, expiry is the removal
      if (options_.metrics) options_.metrics->expiries.Increment();
    }
    it = entries_.end();
  }
  if (it == entries_.end()) {
    if (options_.metrics) options_.metrics->misses.Increment();
    return std::nullopt;
  }
#if FELIX_FAULT_INJECTION
  if (uint64_t every = StaleGetEvery(); every != 0 && it->second.version % every == 0) {
    return std::nullopt;
  }
#endif
  if (options_.metrics) options_.metrics->hits.Increment();
  return it->second.value;
}

std::optional<uint64_t> CacheShard::VersionOf(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end() || Expired(it->second, Now())) return std::nullopt;
  return it->second.version;
}

void CacheShard::Delete(std::string key, ValueDone done) {
  if (closed_) return done(Fail(ErrorCode::kUnavailable, "cache shard is closed"));
  auto live_value = [this](const std::string& k) -> std::optional<std::string> {
    auto it = entries_.find(k);
    if (it == entries_.end() || Expired(it->second, Now())) return std::nullopt;
    return it->second.value;
  };
  if (!durable()) {
    auto removed = live_value(key);
    EraseEntry(key);
    return done(std::move(removed));
  }
  if (!entries_.count(key) && !pending_keys_.count(key)) return done(std::nullopt);
  CacheRecord record{CacheRecord::Op::kDelete, 0, std::nullopt, key, {}};
  std::vector<std::vector<uint8_t>> records;
  records.push_back(EncodeCacheRecord(record));
  ++pending_keys_[key];
  std::function<void(const Error&)> early = AnswerEarlyWhenGated(gated(), done);
  Append(
      LogId::kCache, std::move(records),
      [this, key = std::move(key), live_value, done = std::move(done)](Result<Offset> offset) {
        ReleaseKey(pending_keys_, key);
        if (!offset) return done(tl::unexpected(offset.error()));
        auto removed = live_value(key);
        ApplyCache(CacheRecord{CacheRecord::Op::kDelete, 0, std::nullopt, key, {}}, *offset,
                   kCacheRecordHeaderBytes + key.size());
        NotifyWatchers(key, nullptr, *offset, 0);
        done(std::move(removed));
      },
      std::move(early));
}

void CacheShard::CounterAdd(std::string key, int64_t delta, CounterDone done) {
  if (!durable()) {
    return done(Fail(ErrorCode::kInvalidArgument, "counters need a durable cache"));
  }
  if (closed_) return done(Fail(ErrorCode::kUnavailable, "cache shard is closed"));
  if (options_.metrics) options_.metrics->counter_ops.Increment();
  std::vector<std::vector<uint8_t>> records;
  records.push_back(EncodeCounterRecord(CounterRecord{CounterRecord::Op::kDelta, delta, key}));
  ++pending_counters_[key];
  std::function<void(const Error&)> early = AnswerEarlyWhenGated(gated(), done);
  Append(
      LogId::kCounter, std::move(records),
      [this, key = std::move(key), delta, done = std::move(done)](Result<Offset> offset) {
        ReleaseKey(pending_counters_, key);
        if (!offset) return done(tl::unexpected(offset.error()));
        ApplyCounter(CounterRecord{CounterRecord::Op::kDelta, delta, key}, *offset,
                     kCounterRecordHeaderBytes + key.size());
        done(counters_[key].sum);
      },
      std::move(early));
}

Result<std::optional<int64_t>> CacheShard::CounterGet(const std::string& key) {
  if (!durable()) return Fail(ErrorCode::kInvalidArgument, "counters need a durable cache");
  if (options_.metrics) options_.metrics->counter_ops.Increment();
  auto it = counters_.find(key);
  if (it == counters_.end()) return std::optional<int64_t>();
  return std::optional<int64_t>(it->second.sum);
}

void CacheShard::StartSweep() {
  if (options_.sweep_interval.count() > 0) ScheduleSweep();
}

void CacheShard::ScheduleSweep() {
  if (closed_) return;
  sweep_timer_ = executor_.PostAfter(options_.sweep_interval, [this] {
    SweepExpired();
    ScheduleSweep();
  });
}

void CacheShard::SweepExpired() {
  if (closed_) return;
  const uint64_t now = Now();
  if (!durable()) {
    while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
      std::string key = by_expiry_.begin()->second;
      EraseEntry(key);
      if (options_.metrics) options_.metrics->expiries.Increment();
    }
    return;
  }
  if (sweeping_) return;  // one pass at a time
  std::vector<std::string> keys;
  for (const auto& [expires_at, key] : by_expiry_) {
    if (expires_at > now || keys.size() >= options_.max_expiry_deletes_per_pass) break;
    if (pending_keys_.count(key)) continue;  // its write lands first and decides
    keys.push_back(key);
  }
  if (keys.empty()) return;
  std::vector<std::vector<uint8_t>> records;
  for (const auto& key : keys) {
    records.push_back(
        EncodeCacheRecord(CacheRecord{CacheRecord::Op::kDelete, 0, std::nullopt, key, {}}));
    ++pending_keys_[key];
  }
  sweeping_ = true;
  Append(LogId::kCache, std::move(records), [this, keys = std::move(keys)](Result<Offset> offset) {
    sweeping_ = false;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string& key = keys[i];
      ReleaseKey(pending_keys_, key);
      if (!offset) continue;
      bool existed = entries_.count(key) != 0;
      ApplyCache(CacheRecord{CacheRecord::Op::kDelete, 0, std::nullopt, key, {}}, *offset + i,
                 kCacheRecordHeaderBytes + key.size());
      NotifyWatchers(key, nullptr, *offset + i, 0);  // an expiry is a delete
      if (existed && options_.metrics) options_.metrics->expiries.Increment();
    }
    if (!offset) {
      spdlog::warn("cache expiry pass failed shard={} error={}", id_.ToString(),
                   offset.error().ToString());
    }
  });
}

uint64_t CacheShard::disk_bytes() const {
  if (!durable()) return 0;
  return cache_log_->disk_bytes() + counter_log_->disk_bytes();
}

void CacheShard::MaybeCompact(LogId which) {
  LogState& st = State(which);
  if (st.log == nullptr || st.compacting || st.pending > 0 || closed_) return;
  if (st.requested) {
    st.requested = false;
    StartCompaction(which);
    return;
  }
  uint64_t floor = which == LogId::kCache ? options_.cache_compaction_floor_bytes
                                          : options_.counter_compaction_floor_bytes;
  if (st.total_bytes > floor && st.total_bytes > options_.compaction_ratio * st.live_bytes) {
    StartCompaction(which);
  }
}

void CacheShard::CompactNow(std::function<void(Result<void>)> done) {
  if (!durable()) return done({});
  auto remaining = std::make_shared<int>(2);
  auto first_error = std::make_shared<std::optional<Error>>();
  auto one_done = [remaining, first_error, done = std::move(done)](Result<void> r) {
    if (!r && !*first_error) *first_error = r.error();
    if (--*remaining == 0) {
      if (*first_error) return done(tl::unexpected(**first_error));
      done({});
    }
  };
  for (LogId which : {LogId::kCache, LogId::kCounter}) {
    LogState& st = State(which);
    st.waiters.push_back(one_done);
    if (st.compacting) continue;
    if (st.pending > 0) {
      st.requested = true;  // starts when the log is idle
      continue;
    }
    StartCompaction(which);
  }
}

void CacheShard::StartCompaction(LogId which) {
  LogState& st = State(which);
  st.compacting = true;
  st.round = 0;
  st.resume_when_idle = false;
  if (auto sealed = st.log->Seal(); !sealed) return FinishCompaction(which, sealed);
  st.cut = st.log->next_offset();
  st.bytes_below_cut = st.total_bytes;
  CompactRound(which);
}

void CacheShard::CompactRound(LogId which) {
  LogState& st = State(which);
  if (closed_) return FinishCompaction(which, Fail(ErrorCode::kUnavailable, "closed"));
  ++st.round;
  const uint64_t now = Now();
  std::vector<std::vector<uint8_t>> copies;
  std::vector<std::string> keys;
  bool waiting_on_pending = false;
  if (which == LogId::kCache) {
    for (const auto& [key, e] : entries_) {
      if (e.record_offset >= st.cut || Expired(e, now)) continue;
      if (pending_keys_.count(key)) {
        waiting_on_pending = true;  // its newer record lands above the cut
        continue;
      }
      copies.push_back(EncodeCacheRecord(
          CacheRecord{CacheRecord::Op::kPut, e.expires_at, e.version, key, Bytes(e.value)}));
      keys.push_back(key);
    }
  } else {
    for (const auto& [key, c] : counters_) {
      if (c.history_start >= st.cut) continue;
      if (pending_counters_.count(key)) {
        waiting_on_pending = true;  // a checkpoint now would miss the add in flight
        continue;
      }
      copies.push_back(
          EncodeCounterRecord(CounterRecord{CounterRecord::Op::kCheckpoint, c.sum, key}));
      keys.push_back(key);
    }
  }
  if (copies.empty() && !waiting_on_pending) {
    // Every live record sits above the cut: the sealed segments below it can go.
    if (auto dropped = st.log->DropBelow(st.cut); !dropped) {
      return FinishCompaction(which, dropped);
    }
    st.total_bytes -= std::min(st.total_bytes, st.bytes_below_cut);
    ++compactions_;
    spdlog::info("cache log compacted shard={} log={} cut={} start={} disk_bytes={}",
                 id_.ToString(), which == LogId::kCache ? "cache" : "counters", st.cut,
                 st.log->start_offset(), st.log->disk_bytes());
    return FinishCompaction(which, {});
  }
  if (st.round > options_.max_compaction_rounds) {
    return FinishCompaction(which, {});  // live records remain below the cut: next pass
  }
  if (copies.empty()) {
    st.resume_when_idle = true;  // only keys with writes in flight remain
    if (st.pending == 0) {
      st.resume_when_idle = false;
      executor_.Post([this, which] { CompactRound(which); });
    }
    return;
  }
  // Copies go out in batches; each key counts as in flight until its copy is applied.
  auto& pending = which == LogId::kCache ? pending_keys_ : pending_counters_;
  auto batches_left = std::make_shared<size_t>(0);
  auto failed = std::make_shared<std::optional<Error>>();
  const size_t per_batch = std::max<size_t>(1, options_.compaction_batch_records);
  for (size_t start = 0; start < copies.size(); start += per_batch) {
    size_t end = std::min(copies.size(), start + per_batch);
    std::vector<std::vector<uint8_t>> batch(std::make_move_iterator(copies.begin() + start),
                                            std::make_move_iterator(copies.begin() + end));
    std::vector<std::string> batch_keys(keys.begin() + start, keys.begin() + end);
    for (const auto& k : batch_keys) ++pending[k];
    ++*batches_left;
    auto payloads = std::make_shared<std::vector<std::vector<uint8_t>>>(batch);
    Append(which, std::move(batch),
           [this, which, &pending, batch_keys = std::move(batch_keys), payloads, batches_left,
            failed](Result<Offset> offset) {
             for (size_t i = 0; i < batch_keys.size(); ++i) {
               const std::string& k = batch_keys[i];
               ReleaseKey(pending, k);
               if (!offset) continue;
               const auto& bytes = (*payloads)[i];
               if (which == LogId::kCache) {
                 if (auto record = DecodeCacheRecord(bytes)) {
                   ApplyCache(*record, *offset + i, bytes.size());
                 }
               } else if (auto record = DecodeCounterRecord(bytes)) {
                 ApplyCounter(*record, *offset + i, bytes.size());
               }
             }
             if (!offset && !*failed) *failed = offset.error();
             if (--*batches_left > 0) return;
             if (*failed) return FinishCompaction(which, tl::unexpected(**failed));
             CompactRound(which);
           });
  }
}

void CacheShard::FinishCompaction(LogId which, Result<void> result) {
  LogState& st = State(which);
  st.compacting = false;
  st.resume_when_idle = false;
  if (!result) {
    spdlog::warn("cache log compaction failed shard={} error={}", id_.ToString(),
                 result.error().ToString());
  }
  auto waiters = std::move(st.waiters);
  st.waiters.clear();
  for (auto& w : waiters) w(result);
}

void CacheShard::ReleaseKey(std::unordered_map<std::string, uint32_t>& pending,
                            const std::string& key) {
  auto it = pending.find(key);
  if (it == pending.end() || --it->second > 0) return;
  pending.erase(it);
  if (&pending != &pending_keys_) return;
  auto waiting = key_waiters_.find(key);
  if (waiting == key_waiters_.end()) return;
  // In later tasks: after the write that just landed was applied and answered.
  for (auto& fn : waiting->second) executor_.Post(std::move(fn));
  key_waiters_.erase(waiting);
}

void CacheShard::WhenKeyIdle(const std::string& key, std::function<void()> fn) {
  if (!pending_keys_.count(key)) return fn();
  key_waiters_[key].push_back(std::move(fn));
}

void CacheShard::CloseLogs() {
  closed_ = true;
  WatchEnd end;
  end.kind = WatchEnd::Kind::kError;
  end.code = Code(wire::flx1::ProtocolErrorCode::kShardUnavailable);
  end.message = "cache shard " + id_.ToString() + " is closing";
  EndWatches(end);
  // The sweep task holds `this`: it must not outlive a shard dropped while the broker runs.
  if (sweep_timer_ != 0) executor_.Cancel(sweep_timer_);
  sweep_timer_ = 0;
  if (cache_log_) cache_log_->Close();
  if (counter_log_) counter_log_->Close();
  // As StreamShard::CloseLog: after the executor stopped, held answers go with it.
  if (cache_gate_ && executor_.InExecutorThread()) {
    cache_gate_->Close("cache shard " + id_.ToString() + " closed");
    counter_gate_->Close("cache shard " + id_.ToString() + " closed");
  }
}

void CacheShard::InstallCommitGates(CommitGateOptions options) {
  if (!durable()) return;
  auto release = [](HeldBatch& held) {
    if (held.done) held.done(held.first);
  };
  cache_gate_ = std::make_unique<CommitGate>(executor_, options, release);
  counter_gate_ = std::make_unique<CommitGate>(executor_, options, release);
}

void CacheShard::AdvanceCacheCommit(Offset offset) {
  if (cache_gate_) cache_gate_->Advance(offset);
}

void CacheShard::AdvanceCounterCommit(Offset offset) {
  if (counter_gate_) counter_gate_->Advance(offset);
}

}  // namespace felix::broker
