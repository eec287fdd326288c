#include "cluster/shard_replicator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <utility>

#include "cluster/quorum_mark.h"
#include "cluster/rebuild_policy.h"
#include "cluster/record_marks.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using storage::LogKind;
using Clock = std::chrono::steady_clock;

const char* ReplicaHaltName(ReplicaHalt halt) {
  switch (halt) {
    case ReplicaHalt::kNone:
      return "";
    case ReplicaHalt::kDiverged:
      return "diverged";
    case ReplicaHalt::kFenced:
      return "fenced";
    case ReplicaHalt::kNeedsBootstrap:
      return "needs_bootstrap";
  }
  return "";
}

namespace {

// What a follower is taken to offer before its first answer says (every broker of this build
// offers labels and times). Shipping the first batches without them made the follower stamp
// its own arrival time on every record they carried; a peer that offered less is refused
// locally by the pool (kNotOffered, naming what it offered) and the batch goes again.
constexpr uint64_t kAssumedCapabilities =
    flxi::kCapGenerationLabels | flxi::kCapCacheFence | flxi::kCapRecordTimes;

// How each replicated log travels: its FLXI log id and its bootstrap kind.
struct WireNames {
  LogKind log;
  flxi::ReplicaLog wire;
  flxi::Kind bootstrap;
};
constexpr WireNames kWireNames[] = {
    {LogKind::kStream, flxi::ReplicaLog::kStream, flxi::Kind::kReplicateBootstrap},
    {LogKind::kCache, flxi::ReplicaLog::kCache, flxi::Kind::kReplicateCacheBootstrap},
    {LogKind::kCursors, flxi::ReplicaLog::kGroupCursors, flxi::Kind::kReplicateGroupBootstrap},
    {LogKind::kDeadLetters, flxi::ReplicaLog::kGroupDeadLetters,
     flxi::Kind::kReplicateDeadLetterBootstrap},
    {LogKind::kCounters, flxi::ReplicaLog::kCounters, flxi::Kind::kReplicateCounterBootstrap},
};
const WireNames& NamesOf(LogKind log) {
  for (const WireNames& n : kWireNames) {
    if (n.log == log) return n;
  }
  return kWireNames[0];  // the producers log is never given a cursor
}
flxi::ReplicaLog WireLog(LogKind log) {
  return NamesOf(log).wire;
}
flxi::Kind BootstrapKind(LogKind log) {
  return NamesOf(log).bootstrap;
}

const char* TransportOutcome(PeerErrorKind kind) {
  switch (kind) {
    case PeerErrorKind::kTimeout:
      return "timeout";
    case PeerErrorKind::kDisconnected:
    case PeerErrorKind::kStopped:
      return "disconnected";
    default:
      return "unreachable";
  }
}

constexpr const char* kShippedOutcomes[] = {
    "ok",           "resumed",  "refused", "read_failed",     "unreachable", "timeout",
    "disconnected", "diverged", "fenced",  "needs_bootstrap", "bootstrapped"};

// The series of replication.md §24 this side exports; none carries a shard label, so the
// gauges are sums of every replicator's contribution (see State::PublishGauges).
struct Metrics {
  explicit Metrics(MetricsRegistry& r)
      : lag(r.AddGauge("felix_broker_replication_lag_records",
                       "Records the slowest non-halted follower lacks, summed over the shards "
                       "this broker leads")),
        halted(r.AddGauge("felix_broker_replication_halted",
                          "Follower logs halted (diverged, fenced, needs_bootstrap)")),
        rebuilding(
            r.AddGauge("felix_broker_replication_rebuilding", "Follower logs being rebuilt")),
        rebuild_started(r.AddCounter("felix_broker_replication_rebuilds_total",
                                     "Rebuilds of halted followers", "outcome=\"started\"")),
        rebuild_completed(r.AddCounter("felix_broker_replication_rebuilds_total",
                                       "Rebuilds of halted followers", "outcome=\"completed\"")),
        rebuild_refused(r.AddCounter("felix_broker_replication_rebuilds_total",
                                     "Rebuilds of halted followers", "outcome=\"refused\"")),
        round_trip(r.AddHistogram("felix_broker_replicate_seconds",
                                  "Round trip of a replication exchange, seconds",
                                  LatencyBucketsSeconds())),
        bytes(r.AddCounter("felix_broker_replication_bytes_shipped_total",
                           "Payload bytes of batches followers acknowledged")),
        rebuild_paced(r.AddCounter("felix_broker_replication_rebuild_paced_total",
                                   "Batches to a rebuilding follower held back by "
                                   "FELIX_REPLICATION_REBUILD_BYTES_PER_SEC")) {
    for (size_t i = 0; i < std::size(kShippedOutcomes); ++i) {
      shipped[i] = &r.AddCounter("felix_broker_replication_shipped_total",
                                 "Replication exchanges by outcome",
                                 std::string("outcome=\"") + kShippedOutcomes[i] + "\"");
    }
  }
  void Shipped(std::string_view outcome) {
    for (size_t i = 0; i < std::size(kShippedOutcomes); ++i) {
      if (outcome == kShippedOutcomes[i]) shipped[i]->Increment();
    }
  }
  Gauge& lag;
  Gauge& halted;
  Gauge& rebuilding;
  Counter& rebuild_started;
  Counter& rebuild_completed;
  Counter& rebuild_refused;
  Histogram& round_trip;
  Counter& bytes;
  Counter& rebuild_paced;
  std::array<Counter*, std::size(kShippedOutcomes)> shipped{};
};

// Closed by Stop(): a callback from another thread posts to the executor only while open.
// `inline_runs` counts RunGated calls between their check of `open` and their return (the
// task may be running on the caller's thread meanwhile); Stop() waits for none to be left, so
// nothing touches the executor once Stop() returned, as with PostGated.
struct Gate {
  std::mutex mu;
  std::condition_variable idle;
  bool open = true;
  int inline_runs = 0;
};

}  // namespace

struct ShardReplicator::State : std::enable_shared_from_this<ShardReplicator::State> {
  // One batch as read from the leader's log; kept while in flight so a resend ships the same
  // records.
  // What every frame of it carries whichever follower it goes to (the payloads as views into
  // `records`, the marks, the batch checksum) is made once, when it is read: followers level
  // with each other share one Batch (RunPass).
  struct Batch {
    Batch() = default;
    Batch(const Batch&) = delete;  // `records` and `payloads` view `held`
    Batch& operator=(const Batch&) = delete;
    Offset first;
    Offset end;
    uint64_t bytes = 0;
    std::shared_ptr<const void> held;  // the read's buffers (DurableLog::ReadViews)
    std::vector<storage::RecordView> records;
    std::vector<flxi::Bytes> payloads;
    std::vector<flxi::RecordMark> marks;  // generation-start records (replication.md §17)
    uint64_t checksum = 0;
  };
  struct InFlight {
    uint64_t seq = 0;
    std::shared_ptr<const Batch> batch;
    std::optional<Offset> commit;
    bool labelled = false;
    bool timed = false;
    uint32_t malformed = 0;  // consecutive Malformed answers to these records
    Clock::time_point sent;
  };
  struct Cursor {
    size_t follower = 0;
    LogKind log = LogKind::kStream;
    Offset next;       // the resume point of the answer table
    Offset send_from;  // where the next new batch starts (after what is in flight)
    Offset confirmed;
    bool answered = false;  // confirmed comes from an answer at this generation
    bool stalled = false;
    bool legacy = false;  // refused kind 26/32/36: ship the log's own kind
    bool need_bootstrap = false;
    std::deque<InFlight> in_flight;
    uint64_t control_seq = 0;  // bootstrap or rebuild exchange in flight
    broker::Executor::TimerId retry_timer = 0;
    ReplicaHalt halt = ReplicaHalt::kNone;
    std::string halt_detail;
    bool rebuilding = false;
    bool holds_slot = false;
    uint32_t rebuild_refusals = 0;
    broker::Executor::TimerId rebuild_timer = 0;
  };

  State(storage::ShardStore& s, ShardReplicatorOptions opts, ReplicaTransport& t,
        broker::Executor& e, MetricsRegistry* registry, MarkListener mark, FencedListener fenced)
      : store(s),
        o(std::move(opts)),
        transport(t),
        ex(e),
        on_mark(std::move(mark)),
        on_fenced(std::move(fenced)) {
    if (registry) m.emplace(*registry);
    if (o.max_in_flight == 0) o.max_in_flight = 1;
    if (o.cache_shard) {
      logs = {LogKind::kCounters, LogKind::kCache};  // counters first (§4)
    } else {
      logs = {LogKind::kStream, LogKind::kCursors, LogKind::kDeadLetters};
    }
    follower_caps.resize(o.followers.size());
  }

  // --- threading ------------------------------------------------------------------------------

  // From any thread: runs `fn` on the executor unless Stop() closed the gate.
  void PostGated(std::function<void(State&)> fn) {
    std::lock_guard<std::mutex> lock(gate->mu);
    if (!gate->open) return;
    ex.Post([self = shared_from_this(), fn = std::move(fn)] {
      if (!self->stopped) fn(*self);
    });
  }

  // PostGated, but run on the calling thread when the executor is idle (Executor::RunOrPost):
  // for answers arriving on the peer pool's loop thread. A `Quorum` publish waits for the
  // mark a ReplicateOk moves; run inline, the answer, the mark, the commit gate and the
  // publish's own answer skip two thread wakeups (docs/performance.md, change 8).
  // Unlike PostGated it does not hold the gate's mutex while the task runs (the task may post
  // through the gate itself, and log callbacks take it under the log's locks).
  void RunGated(std::function<void(State&)> fn) {
    {
      std::lock_guard<std::mutex> lock(gate->mu);
      if (!gate->open) return;
      ++gate->inline_runs;
    }
    ex.RunOrPost([self = shared_from_this(), fn = std::move(fn)] {
      if (!self->stopped) fn(*self);
    });
    std::lock_guard<std::mutex> lock(gate->mu);
    if (--gate->inline_runs == 0) gate->idle.notify_all();
  }

  void After(std::chrono::milliseconds delay, broker::Executor::TimerId* slot,
             std::function<void(State&)> fn) {
    *slot = ex.PostAfter(delay, [self = shared_from_this(), slot, fn = std::move(fn)] {
      if (self->stopped) return;
      *slot = 0;
      fn(*self);
    });
  }

  void SchedulePass() {
    if (pass_posted.exchange(true)) return;
    PostGated([](State& s) {
      s.pass_posted = false;
      s.RunPass();
    });
  }

  // --- lifecycle --------------------------------------------------------------------------------

  LogKind OwnLog() const { return o.cache_shard ? LogKind::kCache : LogKind::kStream; }

  std::optional<Offset> OwnStart() const {
    for (const storage::EpochEntry& e : store.generation_history().entries()) {
      if (e.generation == o.generation) return e.start_offset;
    }
    return std::nullopt;
  }

  // Where this generation begins in a cache shard's counter log (§8.3: "a cache counts its
  // cache log and counter log each past its own start record"). The counter log keeps no
  // history of its own, but its records' generations never fall along the log (a leader writes
  // at its generation, a fence takes records with theirs, compaction rewrites at the tail), so
  // the first record at this generation — the promotion fence's start record — is found by a
  // binary search of single-record reads. None: the log held nothing when this generation
  // began (nothing inherited to hold back).
  std::optional<Offset> CounterOwnStart() const {
    const storage::DurableLog& log = store.log(LogKind::kCounters);
    Offset lo = log.BaseOffset(), hi = log.TailOffset();
    while (lo < hi) {
      const Offset mid = lo + (hi - lo) / 2;
      auto read = log.Read(mid, storage::ReadLimits{1, 1});
      if (!read || read->records.empty()) return std::nullopt;  // unreadable: no rule to apply
      if (read->records.front().generation >= o.generation) {
        hi = mid;
      } else {
        lo = read->records.front().offset + 1;
      }
    }
    if (lo >= log.TailOffset()) return std::nullopt;
    return lo;
  }

  void StartOnExecutor() {
    if (started || stopped) return;
    started = true;
    // §20: a `Quorum` shard's retention and compaction never delete at or above the commit
    // offset — on the leader its mark, kept in each log's commit offset as it rises
    // (UpdateMarks). A trimmed follower is offered a base at or below the mark only, so deleting
    // above it would stall followers and writers alike. A `Leader` cache's compaction is held
    // there too: its counter log compacts every few thousand adds, and cutting past followers a
    // batch behind would halt and rebuild both each time; a `Leader` stream is never held.
    // Persisted (storage.md §7.2 bit 0): a restart holds the logs again before any pass runs.
    if (auto held = store.SetRetentionHold(HoldsAtMark()); !held) {
      spdlog::error("replication {}/{}/{}/{}: the retention hold could not be saved: {}", o.tenant,
                    o.ns, o.name, o.shard, held.error().ToString());
    }
    std::optional<Offset> own_start = OwnStart();
    if (o.cache_shard) counter_own_start = CounterOwnStart();
    for (size_t f = 0; f < o.followers.size(); ++f) {
      for (LogKind log : logs) {
        Cursor c;
        c.follower = f;
        c.log = log;
        // §4: one record below where this generation begins, so the first batch overlaps a
        // record the follower should already hold; aux logs (and no history) start at 0. Never
        // below the log's base: a compacted log (a cache's) read there is trimmed, which would
        // take a follower holding everything for one that needs a bootstrap — and a bootstrap
        // waits for a mark that, right after this leader (re)opened, only such followers'
        // answers can raise (found by the Quorum fault run: a restarted cache leader's counter
        // log never replicated again). From the base the first batch is the probe: the follower
        // confirms it, or answers LogGap with its tail, and a real bootstrap follows.
        if (log == OwnLog() && own_start && *own_start > Offset(0)) c.next = *own_start - 1;
        c.next = std::max(c.next, store.log(log).BaseOffset());
        c.send_from = c.next;
        cursors.push_back(std::move(c));
      }
    }
    RunPass();
  }

  void StopOnExecutor(bool lift_hold) {
    if (stopped) return;
    stopped = true;
    if (lift_hold && started) {
      if (auto lifted = store.SetRetentionHold(false); !lifted) {
        spdlog::error("replication {}/{}/{}/{}: lifting the retention hold failed: {}", o.tenant,
                      o.ns, o.name, o.shard, lifted.error().ToString());
      }
    }
    for (size_t i = 0; i < logs.size(); ++i) {
      if (notify_ids[i] != 0) store.log(logs[i]).CancelNotify(notify_ids[i]);
      notify_ids[i] = 0;
      if (written_notify_ids[i] != 0) store.log(logs[i]).CancelWrittenNotify(written_notify_ids[i]);
      written_notify_ids[i] = 0;
    }
    for (Cursor& c : cursors) {
      if (c.retry_timer) ex.Cancel(c.retry_timer);
      if (c.rebuild_timer) ex.Cancel(c.rebuild_timer);
      c.retry_timer = c.rebuild_timer = 0;
      c.in_flight.clear();
    }
    if (m) {
      m->lag.Add(-lag_contrib);
      m->halted.Add(-halted_contrib);
      m->rebuilding.Add(-rebuilding_contrib);
    }
    lag_contrib = halted_contrib = rebuilding_contrib = 0;
  }

  // --- passes -----------------------------------------------------------------------------------

  void ArmNotify(size_t i) {
    if (notify_ids[i] != 0) return;
    storage::DurableLog& log = store.log(logs[i]);
    std::weak_ptr<State> weak = weak_from_this();
    uint64_t id = log.NotifyWhen(log.TailOffset(), [weak, i](storage::WaitOutcome outcome) {
      if (outcome != storage::WaitOutcome::kReady) return;
      if (auto self = weak.lock()) {
        self->PostGated([i](State& s) {
          s.notify_ids[i] = 0;
          s.RunPass();
        });
      }
    });
    notify_ids[i] = id;  // 0 when it already fired inline: the posted pass re-arms
  }

  // o.ship_unflushed: a second watch on the written tail, so records ship while the leader's
  // own flush runs (the durable-tail watch above still moves the marks).
  void ArmWrittenNotify(size_t i) {
    if (!o.ship_unflushed || written_notify_ids[i] != 0) return;
    storage::DurableLog& log = store.log(logs[i]);
    std::weak_ptr<State> weak = weak_from_this();
    uint64_t id =
        log.NotifyWrittenWhen(log.WrittenOffset(), [weak, i](storage::WaitOutcome outcome) {
          if (outcome != storage::WaitOutcome::kReady) return;
          if (auto self = weak.lock()) {
            // On the appending thread when the executor is idle: the batch leaves for the
            // followers without waking the executor's thread, and from the peer loop's own
            // thread (a publish appended inline there) without waking the loop either
            // (docs/performance.md, change 29). The log fires this watch with its append
            // lock released, except at a truncation (the pass never takes that lock). The
            // durable-tail watch above stays posted: a roll fires it under the append lock.
            self->RunGated([i](State& s) {
              s.written_notify_ids[i] = 0;
              s.RunPass();
            });
          }
        });
    written_notify_ids[i] = id;
  }

  // The commit offset `log`'s batches carry: its mark, refreshed at most once per
  // o.commit_carry_interval. Any value at or below the mark is true; on the own log every rise
  // costs each follower a write-through of its `replica` file before it answers (§6).
  Offset CarriedCommit(LogKind log) {
    Carried& carried = carried_commit[size_t(log)];
    const Offset mark = marks[size_t(log)];
    if (carried.commit < mark) {
      const auto now = Clock::now();
      if (!carried.once || now - carried.at >= o.commit_carry_interval) {
        carried.commit = mark;
        carried.at = now;
        carried.once = true;
      }
    }
    return carried.commit;
  }

  // Which logs' batches carry a commit offset (kinds 26/32/36): the own log, whose commit
  // offset guards the follower's truncation and retention, and a cache's counter log, whose
  // commit offset is the floor of the follower's compaction (follower_compaction.h; it is never
  // truncated, so the follower keeps it in memory only).
  bool CarriesCommit(LogKind log) const {
    return log == OwnLog() || (o.cache_shard && log == LogKind::kCounters);
  }

  // Where shipping stops: the durable tail, or with o.ship_unflushed the written one.
  Offset ShipEnd(LogKind log) const {
    const storage::DurableLog& l = store.log(log);
    return o.ship_unflushed ? l.WrittenOffset() : l.TailOffset();
  }

  void RunPass() {
    if (!started || stopped) return;
    for (size_t i = 0; i < logs.size(); ++i) {
      ArmNotify(i);
      ArmWrittenNotify(i);
    }
    // Followers level with each other ship the same batch: read once per log in this pass.
    sharing_reads = true;
    for (Cursor& c : cursors) Pump(c);
    sharing_reads = false;
    shared_reads.fill(nullptr);
    UpdateMarks();
    PublishGauges();
  }

  size_t IndexOf(const Cursor& c) const { return size_t(&c - cursors.data()); }
  const PeerAddress& Peer(const Cursor& c) const { return o.followers[c.follower]; }
  flxi::ShardRef Ref() const {
    return flxi::ShardRef{o.tenant, o.ns, o.name, o.shard, o.generation.value()};
  }
  std::string Where(const Cursor& c) const {
    return o.tenant + "/" + o.ns + "/" + o.name + "/" + std::to_string(o.shard) + "@" +
           to_string(o.generation) + " log=" + storage::LogKindName(c.log) +
           " follower=" + Peer(c).node_id;
  }

  // Ships what the log holds from the cursor's send position, up to the in-flight bound.
  void Pump(Cursor& c) {
    if (stopped) return;
    if (c.halt != ReplicaHalt::kNone) {
      MaybeRebuild(c);
      return;
    }
    if (c.control_seq != 0 || c.retry_timer != 0) return;
    if (c.need_bootstrap) {
      MaybeBootstrap(c);
      return;
    }
    // A stalled cursor probes with one batch until an answer succeeds: a failing follower
    // gets at most one exchange per retry_delay, never a tight loop.
    const size_t limit = c.stalled ? 1 : o.max_in_flight;
    storage::DurableLog& log = store.log(c.log);
    while (c.in_flight.size() < limit) {
      std::shared_ptr<const Batch>& shared = shared_reads[size_t(c.log)];
      if (sharing_reads && shared && shared->first == c.send_from) {
        if (!ShipBatch(c, shared)) return;
        continue;
      }
      const storage::ReadLimits limits{o.max_batch_records, o.max_batch_bytes};
      auto read = o.ship_unflushed ? log.ReadWrittenViews(c.send_from, limits)
                                   : log.ReadViews(c.send_from, limits);
      if (!read) {
        if (read.error().code == storage::StorageErrc::kTrimmed) {
          c.need_bootstrap = true;
          if (c.in_flight.empty()) MaybeBootstrap(c);
          return;
        }
        spdlog::warn("replication {}: reading from {} failed: {}", Where(c), c.send_from,
                     read.error().ToString());
        Count("read_failed");
        c.stalled = true;
        ArmRetry(c);
        return;
      }
      if (read->records.empty()) return;
      for (const storage::RecordView& r : read->records) {
        if (ShippableFlags(r.flags)) continue;
        // An atomic-commit record or one with a publisher (written on a standalone broker; a
        // cluster refuses both) would need FLXI mark byte 4 or kind 25's publishers, which are
        // not shipped yet: stall rather than let the follower store it as a plain event.
        spdlog::warn(
            "replication {}: record {} has flags {} (atomic commit / publisher), which are not "
            "replicated yet",
            Where(c), r.offset, r.flags);
        Count("read_failed");
        c.stalled = true;
        ArmRetry(c);
        return;
      }
      auto batch = std::make_shared<Batch>();
      batch->first = read->records.front().offset;
      batch->end = read->records.back().offset + 1;
      for (const storage::RecordView& r : read->records) batch->bytes += r.payload.size();
      batch->held = std::move(read->bytes);
      batch->records = std::move(read->records);
      batch->payloads.reserve(batch->records.size());
      for (const storage::RecordView& r : batch->records) batch->payloads.emplace_back(r.payload);
      batch->marks = MarksOf(batch->records);
      batch->checksum = flxi::BatchChecksum(batch->payloads, batch->marks);
      if (sharing_reads) shared = batch;
      if (!ShipBatch(c, std::move(batch))) return;
    }
  }

  // Sends `batch` to the cursor's follower; false when the cursor must stop pumping (paced,
  // or the send failed).
  bool ShipBatch(Cursor& c, std::shared_ptr<const Batch> batch) {
    InFlight entry;
    entry.batch = std::move(batch);
    const uint64_t caps = follower_caps[c.follower].value_or(kAssumedCapabilities);
    if (!c.legacy) {
      entry.labelled = Labelled(c.log, caps);
      entry.timed = entry.labelled && (caps & flxi::kCapRecordTimes) != 0;
      if (CarriesCommit(c.log)) entry.commit = CarriedCommit(c.log);
    }
    if (c.rebuilding && !TakeRebuildBytes(c, entry.batch->bytes)) return false;
    return Send(c, std::move(entry));
  }

  // §13 pacing of rebuilds (FELIX_REPLICATION_REBUILD_BYTES_PER_SEC): true when the bucket
  // pays for `bytes` now; else the cursor waits on its retry timer until it can (the batch
  // is read again then).
  bool TakeRebuildBytes(Cursor& c, uint64_t bytes) {
    if (o.rebuild_bytes_per_sec == 0) return true;
    const double rate = static_cast<double>(o.rebuild_bytes_per_sec);
    const double capacity = std::max(rate, static_cast<double>(o.max_batch_bytes));
    const auto now = Clock::now();
    if (!rebuild_bucket_started) {
      rebuild_bucket_started = true;
      rebuild_tokens = capacity;
    } else {
      const double elapsed = std::chrono::duration<double>(now - rebuild_refilled).count();
      rebuild_tokens = std::min(capacity, rebuild_tokens + rate * elapsed);
    }
    rebuild_refilled = now;
    const double need = std::min(static_cast<double>(bytes), capacity);
    if (rebuild_tokens >= need) {
      rebuild_tokens -= need;
      return true;
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(
        std::chrono::duration<double>((need - rebuild_tokens) / rate));
    const size_t index = IndexOf(c);
    if (m) m->rebuild_paced.Increment();
    After(std::max(wait, std::chrono::milliseconds(1)), &c.retry_timer, [index](State& s) {
      s.Pump(s.cursors[index]);
      s.PublishGauges();
    });
    return false;
  }

  static bool Labelled(LogKind log, uint64_t caps) {
    if ((caps & flxi::kCapGenerationLabels) == 0) return false;
    if (log == LogKind::kStream) return true;
    // §7.1: cache and counter logs only to a follower that also offered CACHE_FENCE; group
    // cursors and dead letters never carry labels.
    if (log == LogKind::kCache || log == LogKind::kCounters) {
      return (caps & flxi::kCapCacheFence) != 0;
    }
    return false;
  }

  // Generation labels for a batch: the leader's history entries overlapping [first, end) for
  // the shard's own log when the history covers the batch; otherwise runs of the records' own
  // generations (auxiliary logs, or a log older than its history).
  std::vector<flxi::GenerationStart> Labels(const Cursor& c, const Batch& b) const {
    std::vector<flxi::GenerationStart> out;
    const auto& entries = store.generation_history().entries();
    if (c.log == OwnLog() && !entries.empty() && entries.front().start_offset <= b.first) {
      for (size_t i = 0; i < entries.size(); ++i) {
        Offset end = i + 1 < entries.size() ? entries[i + 1].start_offset : Offset(UINT64_MAX);
        if (entries[i].start_offset < b.end && end > b.first) {
          out.push_back({entries[i].generation.value(), entries[i].start_offset.value()});
        }
      }
      return out;
    }
    for (const storage::RecordView& r : b.records) {
      if (out.empty() || out.back().generation != r.generation.value()) {
        out.push_back({r.generation.value(), r.offset.value()});
      }
    }
    return out;
  }

  // Encodes and sends one in-flight entry; false when nothing more should be sent now.
  bool Send(Cursor& c, InFlight entry) {
    const Batch& b = *entry.batch;
    flxi::Records rec;
    rec.shard = Ref();
    rec.first_offset = b.first.value();
    rec.payloads = b.payloads;
    rec.marks = b.marks;
    rec.checksum = b.checksum;
    if (entry.commit) rec.commit_offset = entry.commit->value();
    if (entry.labelled) {
      rec.generations = Labels(c, b);
      if (entry.timed) {
        rec.times.reserve(b.records.size());
        for (const storage::RecordView& r : b.records) {
          rec.times.push_back(r.timestamp_ms * 1000);
        }
      }
    }
    auto frame =
        flxi::MakeRecordsFrame(WireLog(c.log), std::move(rec), entry.labelled, entry.timed);
    if (!frame) {
      spdlog::error("replication {}: cannot build a batch at {}: {}", Where(c), b.first,
                    frame.error().ToString());
      Count("read_failed");
      c.stalled = true;
      ArmRetry(c);
      return false;
    }
    entry.seq = next_seq++;
    entry.sent = Clock::now();
    const uint64_t seq = entry.seq;
    const size_t index = IndexOf(c);
    c.send_from = b.end;
    c.in_flight.push_back(std::move(entry));
    auto sent = transport.Send(
        Peer(c), *frame,
        [self = shared_from_this(), index, seq](Result<PeerResponse, PeerError> answer) {
          self->RunGated([index, seq, answer = std::move(answer)](State& s) {
            s.OnRecordsAnswer(s.cursors[index], seq, answer);
          });
        });
    if (!sent) {
      spdlog::debug("replication {}: send failed: {}", Where(c), sent.error().ToString());
      Count("unreachable");
      Retry(c, c.in_flight.size() - 1);
      return false;
    }
    return true;
  }

  // --- answers to records ---------------------------------------------------------------------

  void OnRecordsAnswer(Cursor& c, uint64_t seq, const Result<PeerResponse, PeerError>& answer) {
    auto it = std::find_if(c.in_flight.begin(), c.in_flight.end(),
                           [seq](const InFlight& f) { return f.seq == seq; });
    if (it == c.in_flight.end()) return;  // dropped after an earlier failure: stale
    const size_t pos = size_t(it - c.in_flight.begin());
    if (m) {
      m->round_trip.Observe(std::chrono::duration<double>(Clock::now() - it->sent).count());
    }
    if (!answer) {
      Count(TransportOutcome(answer.error().kind));
      if (answer.error().kind == PeerErrorKind::kNotOffered) {
        // The peer did not offer what the kind needs: from now on ship what it did offer
        // (plain frames to a peer that answered a plain HelloOk). Nothing reached it, so
        // when that taught something new the batch goes again at once.
        const uint64_t offered = answer.error().peer_capabilities.value_or(0);
        const bool learned = follower_caps[c.follower] != std::optional<uint64_t>(offered);
        follower_caps[c.follower] = offered;
        if (learned) {
          ResumeAt(c, pos, c.in_flight[pos].batch->first);
          AfterAnswer(c);
          return;
        }
      }
      Retry(c, pos);
      AfterAnswer(c);
      return;
    }
    follower_caps[c.follower] = answer->peer_capabilities.value_or(0);
    auto decoded = answer->Decode();
    if (!decoded) {
      Count("refused");
      Retry(c, pos);
      AfterAnswer(c);
      return;
    }
    const flxi::Frame& frame = *decoded;
    if (const auto* ok = std::get_if<flxi::ReplicateOk>(&frame.body)) {
      OnOk(c, pos, Offset(ok->durable_offset));
    } else if (const auto* err = std::get_if<flxi::ReplicateError>(&frame.body)) {
      OnError(c, pos, *err);
    } else if (const auto* refusal = std::get_if<flxi::ErrorAnswer>(&frame.body);
               refusal && refusal->code == flxi::ErrorCode::kUnsupportedKind &&
               (c.in_flight[pos].commit || c.in_flight[pos].labelled)) {
      // §7.4: an older follower refused kind 26/32/36; nothing was stored. Resend the same
      // records as the log's own kind, and keep doing so.
      Count("refused");
      c.legacy = true;
      InFlight again = std::move(c.in_flight[pos]);
      DropFrom(c, pos);
      again.commit.reset();
      again.labelled = again.timed = false;
      c.send_from = again.batch->first;
      Send(c, std::move(again));
    } else {
      Count("refused");
      Retry(c, pos);
    }
    AfterAnswer(c);
  }

  void OnOk(Cursor& c, size_t pos, Offset durable) {
    const Batch& b = *c.in_flight[pos].batch;
    // Never trust an answer past what was sent (§4; cluster-etcd.md §7 item 1).
    const Offset next = std::min(durable, b.end);
    const Offset end = b.end;
    if (m) m->bytes.Increment(b.bytes);
    Count("ok");
    c.confirmed = c.answered ? std::max(c.confirmed, next) : next;
    c.answered = true;
    c.stalled = false;
    c.next = next;
    if (next < end) {
      // The follower holds less than the batch: resume from where it stands.
      ResumeAt(c, pos, next);
    } else {
      c.in_flight.erase(c.in_flight.begin() + pos);
    }
    CompleteRebuildIfLevel(c, c.confirmed);
  }

  // A rebuild holds its slot until the follower is level with the leader's tail.
  void CompleteRebuildIfLevel(Cursor& c, Offset level) {
    if (!c.rebuilding || level < store.log(c.log).TailOffset()) return;
    c.rebuilding = false;
    if (m) m->rebuild_completed.Increment();
    spdlog::info("replication {}: rebuild completed at {}", Where(c), level);
    ReleaseSlot(c);
  }

  void OnError(Cursor& c, size_t pos, const flxi::ReplicateError& err) {
    switch (err.code) {
      case flxi::ErrorCode::kLogGap: {
        Count("resumed");
        const Offset expected = std::min(Offset(err.expected_offset), ShipEnd(c.log));
        c.next = expected;
        c.confirmed = std::min(c.confirmed, expected);
        ResumeAt(c, pos, expected);
        return;
      }
      case flxi::ErrorCode::kLogConflict:
        Count("diverged");
        Halt(c, ReplicaHalt::kDiverged,
             "LogConflict on the batch at " + to_string(c.in_flight[pos].batch->first) +
                 " (follower tail " + std::to_string(err.expected_offset) +
                 "): " + std::string(err.detail));
        return;
      case flxi::ErrorCode::kFencedEpoch:
        Count("fenced");
        Fenced(c, std::string(err.detail));
        return;
      case flxi::ErrorCode::kMalformed:
        Count("refused");
        if (c.in_flight[pos].malformed == 0) {
          // A checksum mismatch means "resend" (cluster-etcd.md §7 item 8): the same records
          // again, now. A second Malformed in a row waits retry_delay like any refusal.
          InFlight again = std::move(c.in_flight[pos]);
          DropFrom(c, pos);
          again.malformed++;
          c.send_from = again.batch->first;
          Send(c, std::move(again));
          return;
        }
        Retry(c, pos);
        return;
      default:
        Count("refused");
        Retry(c, pos);
        return;
    }
  }

  // Drops the entry at `pos` and everything sent after it; what came before stays in flight.
  void DropFrom(Cursor& c, size_t pos) {
    c.in_flight.erase(c.in_flight.begin() + pos, c.in_flight.end());
    c.send_from = c.in_flight.empty() ? c.next : c.in_flight.back().batch->end;
  }

  // Drops `pos` and what followed it, and continues from `offset` — unless earlier batches
  // still in flight already cover it, then after them.
  void ResumeAt(Cursor& c, size_t pos, Offset offset) {
    c.in_flight.erase(c.in_flight.begin() + pos, c.in_flight.end());
    if (!c.in_flight.empty() && offset >= c.in_flight.front().batch->first &&
        offset <= c.in_flight.back().batch->end) {
      c.send_from = c.in_flight.back().batch->end;
    } else {
      c.in_flight.clear();
      c.send_from = offset;
    }
  }

  // Transport failure, timeout, or a refusal that may clear: resend from where the failed
  // batch began after retry_delay.
  void Retry(Cursor& c, size_t pos) {
    const Offset from = c.in_flight[pos].batch->first;
    ResumeAt(c, pos, from);
    c.stalled = true;
    ArmRetry(c);
  }

  void ArmRetry(Cursor& c) {
    if (c.retry_timer != 0) return;
    const size_t index = IndexOf(c);
    After(o.retry_delay, &c.retry_timer, [index](State& s) {
      s.Pump(s.cursors[index]);
      s.PublishGauges();
    });
  }

  void AfterAnswer(Cursor& c) {
    Pump(c);
    UpdateMarks();
    PublishGauges();
  }

  // --- halts ------------------------------------------------------------------------------------

  void Halt(Cursor& c, ReplicaHalt reason, std::string detail) {
    c.in_flight.clear();
    c.send_from = c.next;
    c.halt = reason;
    c.halt_detail = std::move(detail);
    c.stalled = false;
    c.need_bootstrap = false;
    if (c.retry_timer) ex.Cancel(c.retry_timer);
    c.retry_timer = 0;
    if (c.rebuilding) c.rebuilding = false;
    ReleaseSlot(c);
    spdlog::warn("replication {}: halted {} at next={} confirmed={}: {}", Where(c),
                 ReplicaHaltName(reason), c.next, c.confirmed, c.halt_detail);
  }

  // FencedEpoch: this broker is no longer the leader as far as that follower knows. Every log
  // of the follower stops; the host hears it once.
  void Fenced(Cursor& c, const std::string& detail) {
    const size_t follower = c.follower;
    for (Cursor& other : cursors) {
      if (other.follower != follower || other.halt == ReplicaHalt::kFenced) continue;
      other.control_seq = 0;
      if (other.rebuild_timer) ex.Cancel(other.rebuild_timer);
      other.rebuild_timer = 0;
      Halt(other, ReplicaHalt::kFenced, detail);
    }
    if (!fenced_reported) {
      fenced_reported = true;
      if (on_fenced) on_fenced();
    }
  }

  // --- bootstrap (§12) --------------------------------------------------------------------------

  // Whether retention and compaction stop at the mark (StartOnExecutor, UpdateMarks).
  bool HoldsAtMark() const { return o.acks_wait_for_mark || o.cache_shard; }

  // Below this offset the leader knows its records committed: its own commit offset.
  Offset CommitFloor(LogKind log) const {
    Offset floor = store.log(log).CommitOffset();
    if (log == OwnLog()) floor = std::max(floor, store.replica_state().commit_offset);
    return floor;
  }

  void MaybeBootstrap(Cursor& c) {
    if (c.control_seq != 0 || !c.in_flight.empty() || c.retry_timer != 0) return;
    storage::DurableLog& log = store.log(c.log);
    const Offset base = log.BaseOffset();
    if (c.send_from >= base) {
      c.need_bootstrap = false;
      Pump(c);
      return;
    }
    // Never offer a base above both the mark and the leader's commit offset: the follower
    // waits (publishes time out) rather than acknowledging over a hole. Under `Leader` nothing
    // waits for the mark (acks_wait_for_mark).
    if (o.acks_wait_for_mark && base > marks[size_t(c.log)] && base > CommitFloor(c.log)) {
      c.stalled = true;
      ArmRetry(c);
      return;
    }
    flxi::Bootstrap body;
    body.shard = Ref();
    body.base_offset = base.value();
    SendControl(c, flxi::Frame{BootstrapKind(c.log), body}, base, /*rebuild=*/false);
  }

  void SendControl(Cursor& c, const flxi::Frame& frame, Offset base, bool rebuild) {
    const uint64_t seq = next_seq++;
    const size_t index = IndexOf(c);
    c.control_seq = seq;
    auto sent = transport.Send(
        Peer(c), frame,
        [self = shared_from_this(), index, seq, base, rebuild](Result<PeerResponse, PeerError> a) {
          self->PostGated([index, seq, base, rebuild, a = std::move(a)](State& s) {
            Cursor& c = s.cursors[index];
            if (c.control_seq != seq) return;
            c.control_seq = 0;
            if (!a) {
              s.ControlFailed(c, rebuild, TransportOutcome(a.error().kind));
            } else {
              s.follower_caps[c.follower] = a->peer_capabilities.value_or(0);
              auto decoded = a->Decode();
              const flxi::Frame* frame = decoded ? &*decoded : nullptr;
              if (rebuild) {
                s.OnRebuildAnswer(c, base, frame);
              } else {
                s.OnBootstrapAnswer(c, base, frame);
              }
            }
            s.AfterAnswer(c);
          });
        });
    if (!sent) {
      c.control_seq = 0;
      ControlFailed(c, rebuild, "unreachable");
    }
  }

  // A bootstrap or rebuild exchange that got no answer: try again after retry_delay (a rebuild
  // gives its slot back meanwhile).
  void ControlFailed(Cursor& c, bool rebuild, const char* outcome) {
    Count(outcome);
    if (rebuild) ReleaseSlot(c);
    c.stalled = true;
    ArmRetry(c);
  }

  // `frame` is the decoded answer, nullptr when it did not decode.
  void OnBootstrapAnswer(Cursor& c, Offset base, const flxi::Frame* frame) {
    if (const auto* ok = frame ? std::get_if<flxi::ReplicateOk>(&frame->body) : nullptr) {
      if (Offset(ok->durable_offset) < base) {
        Count("needs_bootstrap");
        Halt(c, ReplicaHalt::kNeedsBootstrap,
             "bootstrap at " + to_string(base) + " answered a tail below it (" +
                 std::to_string(ok->durable_offset) + ")");
        return;
      }
      Count("bootstrapped");
      // The follower's log spans the base; shipping continues from its tail. Nothing is
      // counted until a records exchange confirms it at this generation.
      c.need_bootstrap = false;
      c.stalled = false;
      c.next = c.send_from = std::min(Offset(ok->durable_offset), ShipEnd(c.log));
      return;
    }
    const auto* err = frame ? std::get_if<flxi::ReplicateError>(&frame->body) : nullptr;
    if (err && err->code == flxi::ErrorCode::kLogConflict) {
      Count("needs_bootstrap");
      Halt(c, ReplicaHalt::kNeedsBootstrap,
           "refused the bootstrap at " + to_string(base) + " (follower tail " +
               std::to_string(err->expected_offset) + "): " + std::string(err->detail));
      return;
    }
    if (err && err->code == flxi::ErrorCode::kFencedEpoch) {
      Count("fenced");
      Fenced(c, std::string(err->detail));
      return;
    }
    Count("refused");
    c.stalled = true;
    ArmRetry(c);
  }

  // --- rebuild (§13) ----------------------------------------------------------------------------

  void MaybeRebuild(Cursor& c) {
    if (c.halt != ReplicaHalt::kDiverged && c.halt != ReplicaHalt::kNeedsBootstrap) return;
    // Never when this broker is itself fenced (seed: "Rebuilding a follower").
    if (fenced_reported || o.rebuild_max_concurrent == 0 || c.control_seq != 0 ||
        c.rebuild_timer != 0 || c.retry_timer != 0) {
      return;
    }
    if (!c.holds_slot) {
      if (rebuild_slots >= o.rebuild_max_concurrent) return;  // retried when a slot frees
      rebuild_slots++;
      c.holds_slot = true;
    }
    flxi::Rebuild body;
    body.shard = Ref();
    body.log = WireLog(c.log);
    const Offset base = store.log(c.log).BaseOffset();
    body.base_offset = base.value();
    SendControl(c, flxi::Frame{flxi::Kind::kReplicateRebuild, body}, base, true);
  }

  void ReleaseSlot(Cursor& c) {
    if (!c.holds_slot) return;
    c.holds_slot = false;
    rebuild_slots--;
    for (Cursor& other : cursors) {
      if (&other != &c && !other.holds_slot) MaybeRebuild(other);
    }
  }

  // `frame` is the decoded answer, nullptr when it did not decode.
  void OnRebuildAnswer(Cursor& c, Offset base, const flxi::Frame* frame) {
    if (const auto* ok = frame ? std::get_if<flxi::ReplicateOk>(&frame->body) : nullptr) {
      if (m) m->rebuild_started.Increment();
      spdlog::info("replication {}: rebuild accepted at base {}, shipping from {}", Where(c), base,
                   ok->durable_offset);
      // The slot stays held until the follower is level (OnOk).
      c.halt = ReplicaHalt::kNone;
      c.halt_detail.clear();
      c.rebuilding = true;
      c.rebuild_refusals = 0;
      c.confirmed = Offset(0);
      c.answered = false;
      c.stalled = false;
      c.need_bootstrap = false;
      c.next = c.send_from = Offset(ok->durable_offset);
      // A new copy beginning at the leader's tail (say, an empty log) is level already.
      CompleteRebuildIfLevel(c, Offset(ok->durable_offset));
      return;
    }
    const auto* err = frame ? std::get_if<flxi::ReplicateError>(&frame->body) : nullptr;
    if (err && err->code == flxi::ErrorCode::kFencedEpoch) {
      Count("fenced");
      Fenced(c, std::string(err->detail));
      return;
    }
    // Refused: stays halted; the next attempt waits 5 s, doubling, capped at 5 min.
    if (m) m->rebuild_refused.Increment();
    c.rebuild_refusals++;
    ReleaseSlot(c);
    const auto delay = RebuildBackoff(c.rebuild_refusals, o.rebuild_backoff, o.rebuild_backoff_max);
    spdlog::warn("replication {}: rebuild refused ({}), next attempt in {} ms", Where(c),
                 err ? std::string(err->detail) : std::string("unexpected answer"), delay.count());
    const size_t index = IndexOf(c);
    After(delay, &c.rebuild_timer, [index](State& s) {
      s.MaybeRebuild(s.cursors[index]);
      s.PublishGauges();
    });
  }

  // --- marks and gauges -------------------------------------------------------------------------

  void UpdateMarks() {
    if (!started || stopped) return;
    std::vector<FollowerPosition> positions;
    for (size_t i = 0; i < logs.size(); ++i) {
      const LogKind log = logs[i];
      MarkInputs in;
      in.leader_tail = store.log(log).TailOffset();
      // Read the tail before the generation (§8.2): the leader counts only while its log has
      // accepted nothing newer.
      in.leader_counts = store.replica_state().generation <= o.generation;
      in.replicas = o.followers.size() + 1;
      if (log == OwnLog()) in.own_start = OwnStart();
      if (log == LogKind::kCounters) in.own_start = counter_own_start;
      positions.clear();
      for (const Cursor& c : cursors) {
        if (c.log != log) continue;
        positions.push_back({c.confirmed, c.answered, c.halt != ReplicaHalt::kNone});
      }
      const Offset mark = QuorumMark(in, positions);
      if (mark > marks[size_t(log)]) {
        marks[size_t(log)] = mark;
        if (HoldsAtMark() && mark > store.log(log).CommitOffset()) {
          store.log(log).SetCommitOffset(mark);
        }
        if (on_mark) on_mark(log, mark);
        if (stopped) return;  // the listener stopped us
      }
    }
  }

  void PublishGauges() {
    if (!m || stopped) return;
    int64_t lag = 0, halted = 0, rebuilding = 0;
    for (const Cursor& c : cursors) {
      if (c.halt != ReplicaHalt::kNone) {
        halted++;
        continue;
      }
      if (c.rebuilding) rebuilding++;
      const Offset tail = store.log(c.log).TailOffset();
      lag = std::max<int64_t>(lag, int64_t(tail - std::min(c.confirmed, tail)));
    }
    m->lag.Add(lag - lag_contrib);
    m->halted.Add(halted - halted_contrib);
    m->rebuilding.Add(rebuilding - rebuilding_contrib);
    lag_contrib = lag;
    halted_contrib = halted;
    rebuilding_contrib = rebuilding;
  }

  void Count(std::string_view outcome) {
    if (m) m->Shipped(outcome);
  }

  storage::ShardStore& store;
  ShardReplicatorOptions o;
  ReplicaTransport& transport;
  broker::Executor& ex;
  MarkListener on_mark;
  FencedListener on_fenced;
  std::optional<Metrics> m;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::atomic<bool> pass_posted{false};

  // Executor only from here on.
  std::vector<LogKind> logs;
  std::optional<Offset> counter_own_start;  // cache shards: CounterOwnStart() at start
  std::vector<Cursor> cursors;              // follower-major; never resized after Start
  std::vector<std::optional<uint64_t>> follower_caps;
  // The rebuild pacing bucket (TakeRebuildBytes).
  bool rebuild_bucket_started = false;
  double rebuild_tokens = 0;
  Clock::time_point rebuild_refilled;
  struct Carried {
    Offset commit;
    Clock::time_point at;
    bool once = false;
  };
  std::array<Carried, storage::kLogKindCount> carried_commit{};  // CarriedCommit(), per log
  std::array<Offset, storage::kLogKindCount> marks{};
  std::array<uint64_t, 3> notify_ids{};          // by index into `logs`
  std::array<uint64_t, 3> written_notify_ids{};  // o.ship_unflushed only
  // During RunPass's pumping only: the batch last read from each log (by LogKind), which a
  // cursor at the same position ships without reading the log again.
  bool sharing_reads = false;
  std::array<std::shared_ptr<const Batch>, storage::kLogKindCount> shared_reads{};
  bool started = false;
  bool stopped = false;
  bool fenced_reported = false;
  uint32_t rebuild_slots = 0;
  uint64_t next_seq = 1;
  int64_t lag_contrib = 0, halted_contrib = 0, rebuilding_contrib = 0;
};

ShardReplicator::ShardReplicator(storage::ShardStore& store, ShardReplicatorOptions options,
                                 ReplicaTransport& transport, broker::Executor& executor,
                                 MetricsRegistry* metrics, MarkListener on_mark,
                                 FencedListener on_fenced)
    : state_(std::make_shared<State>(store, std::move(options), transport, executor, metrics,
                                     std::move(on_mark), std::move(on_fenced))) {}

ShardReplicator::~ShardReplicator() {
  Stop();
}

void ShardReplicator::Start() {
  state_->PostGated([](State& s) { s.StartOnExecutor(); });
}

void ShardReplicator::Stop(bool lift_hold) {
  {
    std::unique_lock<std::mutex> lock(state_->gate->mu);
    if (!state_->gate->open) return;
    state_->gate->open = false;
    state_->gate->idle.wait(lock, [&] { return state_->gate->inline_runs == 0; });
  }
  // Everything already posted runs first (the executor is FIFO); then the replicator stops on
  // its own thread and nothing of it runs again. Answers arriving later find the gate closed.
  std::promise<void> done;
  auto state = state_;
  if (state->ex.Post([state, &done, lift_hold] {
        state->StopOnExecutor(lift_hold);
        done.set_value();
      })) {
    done.get_future().wait();
  } else {
    state->StopOnExecutor(lift_hold);  // the executor already stopped: nothing else can run
  }
}

void ShardReplicator::Wake() {
  state_->SchedulePass();
}

Offset ShardReplicator::mark(storage::LogKind log) const {
  return state_->marks[size_t(log)];
}

std::vector<ReplicaCursorStatus> ShardReplicator::status() const {
  std::vector<ReplicaCursorStatus> out;
  const State& s = *state_;
  for (const State::Cursor& c : s.cursors) {
    ReplicaCursorStatus st;
    st.node_id = s.o.followers[c.follower].node_id;
    st.log = c.log;
    st.next_offset = c.next;
    st.confirmed = c.answered ? c.confirmed : Offset(0);
    const Offset tail = s.store.log(c.log).TailOffset();
    st.lag_records = tail - std::min(st.confirmed, tail);
    st.in_sync = c.answered && c.halt == ReplicaHalt::kNone && st.confirmed >= tail;
    st.stalled = c.stalled;
    st.rebuilding = c.rebuilding;
    st.halt = c.halt;
    st.halt_detail = c.halt_detail;
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace felix::cluster
