// CacheShard: one shard of a cache on the broker that owns it — its key index, its counters,
// and the write → commit → apply pipeline (semantics.md §10, storage.md §17–18).
//
// A durable shard has two logs (a cache log and a counter log, records per cache_record.h).
// Every mutation is a log record: put, delete and the expiry sweep's deletes go to the cache
// log, counter adds to the counter log. A mutation is applied to the in-memory index only when
// its append has committed (per the log's durability mode), strictly in offset order, and only
// then answered; a staged write is invisible to reads. Opening replays both logs, so the index
// is a pure function of the log content: a replica replaying the same records agrees. Values
// are held in the index (reads never touch the disk).
//
// TTL: a put stores an absolute expiry (`now + ttl`, ttl from the request or the cache's
// default). A read reports an entry with expires_at <= now as a miss. A periodic sweep writes
// a delete for expired entries (at most `max_expiry_deletes_per_pass` per pass), skipping keys
// with a write in flight, so an expiry becomes permanent in the log.
//
// Compaction (per log): when the log's bytes exceed `compaction_ratio` × the live bytes and a
// floor, and nothing is in flight on that log, the active segment is sealed (its successor's
// base is the cut), the live records below the cut are copied to the tail (cache: v2 puts
// keeping expiry and version; counters: checkpoints of the sum), and once every live record
// sits above the cut the sealed segments below it are deleted. Offsets are never renumbered.
// Keys with writes in flight are not copied (their newer record lands above the cut anyway);
// after `max_compaction_rounds` rounds with live records still below the cut the segments
// stay for the next pass.
//
// In-memory shards (no logs) apply mutations at once, offer no counters (they need durable
// storage) and expire lazily plus by the sweep. Their versions come from a counter seeded
// with the wall clock in microseconds (semantics.md §10 "Versions").
//
// Watches (durable shards only; cache_shard_watch.cc): a watcher is registered before
// anything is read ("register-before-read"), at the applied frontier (the offset after the
// last applied record). A retained watch (or a resume below the log's start: resnapshot) first
// walks the current values of its keys in key order, a bounded step per executor task, taking
// only entries written below the frontier; a resume from an offset then reads the log from
// there up to the frontier (compaction copies are skipped: compaction is silent to watchers);
// the watcher turns live in the executor task in which the walk reaches the frontier, so live
// changes follow with no gap and no duplicate. The state and history phases wait for queue
// room; a live change that finds the queue full ends the watch lagged at its offset.
// Writes notify watchers in offset order, after they applied and before they are answered.
//
// Quorum (InstallCommitGates, a durable cache led with replication; replication.md §8.2, §16):
// a committed write is held in its log's commit gate (commit_gate.h) — not applied, not
// visible to reads or watches, not answered — until that log's quorum commit offset (the
// replication leader's mark: a majority of the replica set holds it) covers it; then applied
// and answered in offset order. Not covered within the gate's timeout: answered
// `quorum_timeout` (outcome unknown) and applied all the same once covered. Gets read the
// applied index, so they never see a value a failover could still lose; the read-index round
// of §16 (a Fence to a majority before answering) is not done (docs/cluster.md).
//
// Threading: every method runs on `executor` (the shard's owner); other threads Post to it.
// Open() may also run before the shard is shared. The executor and the shard must outlive
// every pending append completion: stop the executor, then CloseLogs(), then destroy.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "broker/cache_record.h"
#include "broker/cache_watch_queue.h"
#include "broker/commit_gate.h"
#include "broker/executor.h"
#include "broker/record_log.h"
#include "broker/shard_router.h"
#include "broker/stream_shard.h"
#include "common/metrics.h"

namespace felix::broker {

// felix_cache_* / felix_counter_* series, shared by every cache shard of a broker.
struct CacheMetrics {
  explicit CacheMetrics(MetricsRegistry& r);
  Counter& hits;         // felix_cache_hits_total
  Counter& misses;       // felix_cache_misses_total (includes expired entries)
  Counter& expiries;     // felix_cache_expiries_total: entries removed because they expired
  Counter& counter_ops;  // felix_counter_ops_total: counter adds and gets served
};

struct CacheShardOptions {
  std::optional<uint64_t> default_ttl_ms;          // the catalog's default TTL for puts without one
  std::chrono::milliseconds sweep_interval{1000};  // 0: no periodic sweep
  size_t max_expiry_deletes_per_pass = 1024;
  uint64_t compaction_ratio = 4;
  uint64_t cache_compaction_floor_bytes = 1u << 20;
  uint64_t counter_compaction_floor_bytes = 64u << 10;
  size_t compaction_batch_records = 64;
  int max_compaction_rounds = 3;
  // Wall clock in Unix milliseconds (injectable for tests).
  std::function<uint64_t()> now_ms;
  CacheMetrics* metrics = nullptr;  // optional; must outlive the shard
  // Watches: each watcher's queue bound (changes, and bytes of keys plus values), and how many
  // changes one executor task hands to a watcher in its state or history phase.
  size_t watch_queue_changes = 4096;
  size_t watch_queue_bytes = 16u << 20;
  size_t watch_changes_per_step = 64;
};

// What a watch follows: one key, or every key starting with a prefix ("" = all keys).
struct CacheWatchFilter {
  bool prefix = false;
  std::string text;
  bool Matches(std::string_view key) const {
    return prefix ? key.substr(0, text.size()) == text : key == text;
  }
};

// Where a watch starts: live at the frontier, from an offset (the first change not yet seen),
// or with the current values first (retained).
struct CacheWatchStart {
  enum class Kind : uint8_t { kLive, kFromOffset, kRetained };
  Kind kind = Kind::kLive;
  Offset from_offset;
};

struct CacheWatchRegistration {
  uint64_t id = 0;
  Offset resume_offset;     // the applied frontier: live changes start here
  bool resnapshot = false;  // the resume point was compacted away: current values come first
  std::optional<uint64_t> retained_count;  // retained watches: matching keys at registration
  std::shared_ptr<CacheWatchQueue> queue;
};

class CacheShard {
 public:
  // `cache_log` and `counter_log` are both null (in-memory cache) or both set (durable).
  CacheShard(ShardId id, Executor& executor, std::unique_ptr<RecordLog> cache_log,
             std::unique_ptr<RecordLog> counter_log, CacheShardOptions options);
  ~CacheShard();
  CacheShard(const CacheShard&) = delete;
  CacheShard& operator=(const CacheShard&) = delete;

  // Rebuilds the index and the counter sums from the logs. kCorruption names the log and
  // offset of a record that does not decode; kIo when a read failed.
  Result<void> Open();
  // Starts the periodic expiry sweep (if configured).
  void StartSweep();

  using PutDone = std::function<void(Result<void>)>;
  using ValueDone = std::function<void(Result<std::optional<std::string>>)>;
  using CounterDone = std::function<void(Result<int64_t>)>;

  // ttl_ms: nullopt = the default TTL (if any), else never expires; 0 = already expired.
  void Put(std::string key, std::string value, std::optional<uint64_t> ttl_ms, PutDone done);
  // The current value; nullopt = missing or expired (an empty string is a stored value).
  std::optional<std::string> Get(const std::string& key);
  // `done` gets the removed value (nullopt if there was none).
  void Delete(std::string key, ValueDone done);
  // `done` gets the sum including `delta` (two's complement wrap on overflow).
  // kInvalidArgument on an in-memory cache.
  void CounterAdd(std::string key, int64_t delta, CounterDone done);
  // nullopt = never written (distinct from 0).
  Result<std::optional<int64_t>> CounterGet(const std::string& key);

  // One expiry pass now (the sweep timer calls this).
  void SweepExpired();
  // Starts a compaction pass of both logs now, whatever the garbage ratio (tests, tools);
  // `done` runs when both passes ended (with the first error). Passes already running or
  // logs with writes in flight are skipped.
  void CompactNow(std::function<void(Result<void>)> done);

  // Stops the sweep and closes the logs (pending appends complete first). Only once the
  // executor has stopped (or on the executor: then held writes are answered `internal`).
  void CloseLogs();

  // Quorum: gates every later write behind its log's quorum commit offset (see the header).
  // Before the shard is shared with any other thread; durable shards only.
  void InstallCommitGates(CommitGateOptions options);
  // The quorum commit offset of the cache (counter) log rose to `offset` (executor only).
  void AdvanceCacheCommit(Offset offset);
  void AdvanceCounterCommit(Offset offset);
  bool gated() const { return cache_gate_ != nullptr; }
  // Writes committed here and held for the commit offset (both logs).
  size_t held_writes() const { return gated() ? cache_gate_->held() + counter_gate_->held() : 0; }

  const ShardId& id() const { return id_; }
  bool durable() const { return cache_log_ != nullptr; }
  size_t entry_count() const { return entries_.size(); }
  size_t counter_count() const { return counters_.size(); }
  Offset cache_log_start() const { return cache_log_ ? cache_log_->start_offset() : Offset(0); }
  Offset cache_log_next() const { return cache_log_ ? cache_log_->next_offset() : Offset(0); }
  Offset counter_log_start() const {
    return counter_log_ ? counter_log_->start_offset() : Offset(0);
  }
  Offset counter_log_next() const { return counter_log_ ? counter_log_->next_offset() : Offset(0); }
  uint64_t disk_bytes() const;
  uint64_t compactions() const { return compactions_; }
  // The version (offset of the put that wrote it) of a live entry.
  std::optional<uint64_t> VersionOf(const std::string& key);
  // A put or delete of `key` is appended but not applied yet (a conditional write must not
  // decide on the value it is about to replace).
  bool WriteInFlight(const std::string& key) const { return pending_keys_.count(key) != 0; }
  // Runs `fn` once no write of `key` is in flight: at once (inline) if none is, else in a later
  // executor task, after the last one in flight applied and was answered.
  void WhenKeyIdle(const std::string& key, std::function<void()> fn);

  // ---- Watches (cache_shard_watch.cc) ----
  // Registers a watcher; `on_ready` runs (any thread) when its queue turns non-empty or ends.
  // kInvalidArgument on an in-memory shard; a from_offset past the frontier is a CursorError
  // (in_future, available = the frontier).
  std::variant<CacheWatchRegistration, CursorError, Error> Watch(CacheWatchFilter filter,
                                                                 CacheWatchStart start,
                                                                 std::function<void()> on_ready);
  void Unwatch(uint64_t id);
  // Ends every watch with `end` (after what is queued) and forgets them.
  void EndWatches(const WatchEnd& end);
  size_t watcher_count() const { return watchers_.size(); }
  Offset applied_next() const { return applied_next_; }

 private:
  struct Entry {
    std::string value;
    uint64_t expires_at = 0;  // Unix ms, 0 = never
    uint64_t version = 0;
    Offset record_offset;  // where the record that holds this value sits
    uint64_t record_bytes = 0;
  };
  struct CounterEntry {
    int64_t sum = 0;
    Offset history_start;        // first record the sum depends on (checkpoint or first delta)
    uint64_t history_bytes = 0;  // live bytes charged: one checkpoint's worth
  };
  enum class LogId { kCache, kCounter };
  struct LogState {
    RecordLog* log = nullptr;
    uint64_t total_bytes = 0;  // payload bytes of records in [start, next)
    uint64_t live_bytes = 0;
    size_t pending = 0;  // appends not yet applied
    bool compacting = false;
    Offset cut;
    uint64_t bytes_below_cut = 0;
    int round = 0;
    bool requested = false;         // CompactNow while writes were in flight
    bool resume_when_idle = false;  // the pass waits for writes in flight to land
    std::vector<std::function<void(Result<void>)>> waiters;  // CompactNow callers
  };
  // A mutation as it is applied (live or replayed).
  void ApplyCache(const CacheRecord& record, Offset offset, uint64_t bytes);
  void ApplyCounter(const CounterRecord& record, Offset offset, uint64_t bytes);
  Result<void> Replay(LogId which);
  // Appends encoded records to a log; `settle` runs on the executor with the first offset once
  // the write may be applied (committed, and on a gated shard covered by the commit offset),
  // or with the error that ends it: it applies the write and answers. On a gated shard a write
  // not covered within the gate's timeout is answered first through `early` (the timeout);
  // `settle` still runs once it is covered, and its answer must then be dropped (AnswerOnce).
  void Append(LogId which, std::vector<std::vector<uint8_t>> records,
              std::function<void(Result<Offset>)> settle,
              std::function<void(const Error&)> early = {});
  void Settle(LogId which, const std::function<void(Result<Offset>)>& settle,
              Result<Offset> result);
  CommitGate* Gate(LogId which) const {
    return which == LogId::kCache ? cache_gate_.get() : counter_gate_.get();
  }
  LogState& State(LogId which) { return which == LogId::kCache ? cache_state_ : counter_state_; }
  // Drops one in-flight count of `key`; the last one wakes WhenKeyIdle callers.
  void ReleaseKey(std::unordered_map<std::string, uint32_t>& pending, const std::string& key);
  // ---- Watches (cache_shard_watch.cc) ----
  struct Watcher {
    enum class Phase : uint8_t { kState, kHistory, kLive };
    CacheWatchFilter filter;
    std::shared_ptr<CacheWatchQueue> queue;
    Phase phase = Phase::kLive;
    std::optional<std::string> state_after;  // state walk: the last key handled
    Offset state_below;                      // state walk: entries written below this only
    Offset history_next;                     // history: next log offset to read
    CacheChangeRef pending;                  // refused for lack of room, offered again first
  };
  // A write applied live: hands it to every live watcher whose filter matches.
  // `value` null for a delete (a pointer: nothing is copied unless a watcher takes it).
  void NotifyWatchers(const std::string& key, const std::string* value, Offset offset,
                      uint64_t expires_at);
  void WatchStep(uint64_t id);
  // One step of each phase; false when the watcher must wait (room) or ended.
  bool StateStep(uint64_t id, Watcher& w, size_t* budget);
  bool HistoryStep(uint64_t id, Watcher& w, size_t* budget);
  void EndWatch(uint64_t id, WatchEnd end);
  bool Expired(const Entry& entry, uint64_t now) const {
    return entry.expires_at != 0 && entry.expires_at <= now;
  }
  void EraseEntry(const std::string& key);
  void SetExpiry(const std::string& key, uint64_t old_expiry, uint64_t new_expiry);
  uint64_t Now() const;
  void ScheduleSweep();
  void MaybeCompact(LogId which);
  void StartCompaction(LogId which);
  void CompactRound(LogId which);
  void FinishCompaction(LogId which, Result<void> result);

  ShardId id_;
  Executor& executor_;
  std::unique_ptr<RecordLog> cache_log_;
  std::unique_ptr<RecordLog> counter_log_;
  CacheShardOptions options_;
  std::unordered_map<std::string, Entry> entries_;
  // The keys of entries_ in byte order (views of the map's own keys, which never move): the
  // state walk of retained watches resumes from a key and scans a prefix.
  std::set<std::string_view> ordered_keys_;
  std::set<std::pair<uint64_t, std::string>> by_expiry_;  // entries with an expiry
  std::unordered_map<std::string, CounterEntry> counters_;
  std::unordered_map<std::string, uint32_t> pending_keys_;      // cache writes in flight
  std::unordered_map<std::string, uint32_t> pending_counters_;  // counter adds in flight
  std::unordered_map<std::string, std::vector<std::function<void()>>> key_waiters_;
  Offset applied_next_;  // cache log: the offset after the last applied record
  std::map<uint64_t, Watcher> watchers_;
  uint64_t next_watcher_id_ = 1;
  LogState cache_state_;
  LogState counter_state_;
  uint64_t memory_version_ = 0;  // in-memory shards: versions from a counter
  Executor::TimerId sweep_timer_ = 0;
  bool sweeping_ = false;
  bool closed_ = false;
  uint64_t compactions_ = 0;
  std::unique_ptr<CommitGate> cache_gate_;    // Quorum shards led with replication only
  std::unique_ptr<CommitGate> counter_gate_;  // set together with cache_gate_
};

}  // namespace felix::broker
