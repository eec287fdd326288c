#include "cluster/promotion_fence.h"

#include <algorithm>
#include <future>
#include <mutex>
#include <optional>

#include <spdlog/spdlog.h>

#include "cluster/fence_answer.h"
#include "cluster/quorum_mark.h"
#include "cluster/record_marks.h"
#include "storage/record_format.h"

namespace felix::cluster {

namespace flxi = wire::flxi;
using storage::LogKind;

std::chrono::milliseconds FenceRetryDelay(uint32_t failures, std::chrono::milliseconds retry,
                                          std::chrono::milliseconds retry_max) {
  if (failures == 0) return std::chrono::milliseconds{0};
  auto delay = retry;
  for (uint32_t i = 1; i < failures && delay < retry_max; ++i) delay *= 2;
  return std::min(delay, retry_max);
}

namespace {

// Closed by Stop(): an answer from another thread posts to the executor only while open.
struct Gate {
  std::mutex mu;
  bool open = true;
};

using Answer = Result<PeerResponse, PeerError>;

}  // namespace

struct PromotionFence::State : std::enable_shared_from_this<PromotionFence::State> {
  State(storage::ShardStore& st, PromotionFenceOptions o, ReplicaTransport& t, broker::Executor& e,
        OpenListener open)
      : store(st),
        opts(std::move(o)),
        transport(t),
        ex(e),
        on_open(std::move(open)),
        fetch_kind(opts.fetch_kind) {}

  storage::ShardStore& store;
  const PromotionFenceOptions opts;
  ReplicaTransport& transport;
  broker::Executor& ex;
  OpenListener on_open;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();

  // Executor-only state.
  bool stopped = false;
  bool done = false;
  uint64_t attempt = 0;   // id of the running attempt; answers to older ones are dropped
  bool deciding = false;  // the running attempt still waits for answers
  size_t oks = 0;         // FenceOk answers, this node counted
  size_t answered = 0;    // replicas answered (any outcome)
  std::vector<std::optional<flxi::FenceOk>> fence_oks;  // per replica
  size_t best = 0;                                      // index of the replica fetched from
  LogPosition target;                                   // its position (FenceOk)
  flxi::Kind fetch_kind;  // lowered (37 → 33 → 31) when the replica does not know it
  uint32_t failures_in_row = 0;
  broker::Executor::TimerId timer = 0;
  std::string last_error;
  // The log being fenced: 0 the shard's own (stream or cache) log; 1 a cache shard's counter
  // log (step 6), fenced once the cache log is done, at the same generation.
  size_t phase = 0;
  Offset start_offset;  // where this leadership begins on the own log (phase 0's end)

  std::atomic<uint32_t> attempts{0};
  std::atomic<uint32_t> failures{0};
  std::atomic<uint64_t> truncated{0};
  std::atomic<uint64_t> start_records{0};
  std::atomic<bool> opened{false};

  bool counter_phase() const { return phase == 1; }
  LogKind own_log() const {
    if (!opts.cache_shard) return LogKind::kStream;
    return counter_phase() ? LogKind::kCounters : LogKind::kCache;
  }
  flxi::ReplicaLog wire_log() const {
    if (!opts.cache_shard) return flxi::ReplicaLog::kStream;
    return counter_phase() ? flxi::ReplicaLog::kCounters : flxi::ReplicaLog::kCache;
  }
  flxi::ShardRef shard_ref() const {
    return flxi::ShardRef{opts.tenant, opts.ns, opts.name, opts.shard, opts.generation.value()};
  }
  storage::DurableLog& log() { return store.log(own_log()); }

  void PostGated(std::function<void(State&)> fn) {
    std::lock_guard<std::mutex> lock(gate->mu);
    if (!gate->open) return;
    ex.Post([self = shared_from_this(), fn = std::move(fn)] {
      if (!self->stopped) fn(*self);
    });
  }

  void ArmTimer(std::chrono::milliseconds delay, std::function<void(State&)> fn) {
    if (timer != 0) ex.Cancel(timer);
    timer = ex.PostAfter(delay, [self = shared_from_this(), fn = std::move(fn)] {
      if (self->stopped) return;
      self->timer = 0;
      fn(*self);
    });
  }

  // The transport's callback for attempt `id`: posts the answer to the executor, with `arg`
  // (the replica asked, or the offset fetched from).
  template <typename Arg>
  PeerCallback Deliver(uint64_t id, void (State::*handler)(uint64_t, Arg, const Answer&), Arg arg) {
    return [weak = weak_from_this(), id, handler, arg](Answer answer) {
      auto self = weak.lock();
      if (!self) return;
      auto shared = std::make_shared<Answer>(std::move(answer));
      self->PostGated([id, handler, arg, shared](State& s) { (s.*handler)(id, arg, *shared); });
    };
  }

  // --- one attempt ------------------------------------------------------------------------------

  void StartAttempt() {
    if (stopped || done) return;
    ++attempt;
    attempts.fetch_add(1);
    // Step 1: our own generation and ballot, durable before anything is sent.
    const Generation g = opts.generation;
    const Generation accepted = store.replica_state().generation;
    if (accepted > g) {
      return Fail("this node accepted generation " + to_string(accepted) + " > " + to_string(g));
    }
    if (accepted == g) {
      const auto& ballot = store.ballot();
      if (ballot && ballot->generation == g && ballot->leader != opts.self_node_id) {
        return Fail("generation " + to_string(g) + " was promised to " + ballot->leader);
      }
    } else if (auto w = store.AcceptGeneration(g, opts.self_node_id, std::nullopt); !w) {
      return Fail("persisting generation: " + w.error().ToString());
    }
    // Steps 3–4.
    deciding = true;
    oks = 1;
    answered = 0;
    fence_oks.assign(opts.replicas.size(), std::nullopt);
    const uint64_t id = attempt;
    ArmTimer(opts.attempt_timeout, [id](State& s) {
      if (s.attempt == id && s.deciding) s.Fail("fence timed out without a majority");
    });
    for (size_t i = 0; i < opts.replicas.size() && attempt == id && deciding; ++i) {
      flxi::Frame frame{flxi::Kind::kFence, flxi::Fence{0, shard_ref(), wire_log()}};
      auto sent = transport.Send(opts.replicas[i], frame, Deliver(id, &State::OnFence, i));
      if (!sent) {
        last_error = "fence to " + opts.replicas[i].node_id + ": " + sent.error().message;
        Count(id);
      }
    }
    if (attempt == id && deciding) Decide(id);
  }

  void OnFence(uint64_t id, size_t replica, const Answer& answer) {
    if (id != attempt || !deciding) return;  // a later answer is not waited for
    const std::string& node = opts.replicas[replica].node_id;
    if (!answer) {
      if (counter_phase() && answer.error().kind == PeerErrorKind::kNotOffered) {
        // A replica of an older build that does not offer CACHE_FENCE (§10): the counter log
        // stays unfenced, as it was before this build; a mixed cluster is only as safe as its
        // oldest broker. The cache log is fenced: open.
        spdlog::warn(
            "promotion fence of cache {}/{}/{}/{} at generation {}: {} does not offer "
            "CACHE_FENCE, the counter log is not fenced",
            opts.tenant, opts.ns, opts.name, opts.shard, opts.generation, node);
        ++attempt;  // later answers of this attempt are dropped
        return Open();
      }
      last_error = "fence to " + node + ": " + answer.error().message;
      return Count(id);
    }
    auto frame = answer->Decode();
    if (!frame) {
      last_error = "fence answer from " + node + " did not decode";
      return Count(id);
    }
    if (const auto* ok = std::get_if<flxi::FenceOk>(&frame->body)) {
      fence_oks[replica] = *ok;
      ++oks;
    } else if (const auto* err = std::get_if<flxi::ReplicateError>(&frame->body)) {
      last_error = "fence refused by " + node + ": " + flxi::ErrorCodeName(err->code) + " " +
                   std::string(err->detail);
    } else {
      last_error =
          std::string("fence answered by ") + node + " with " + flxi::KindName(frame->kind);
    }
    Count(id);
  }

  void Count(uint64_t id) {
    ++answered;
    Decide(id);
  }

  void Decide(uint64_t id) {
    if (id != attempt || !deciding) return;
    const size_t majority = Majority(opts.replicas.size() + 1);
    if (oks >= majority) {
      deciding = false;
      return CatchUp();
    }
    if (oks + (opts.replicas.size() - answered) < majority) {
      Fail("no majority: " + std::to_string(oks) + " of " +
           std::to_string(opts.replicas.size() + 1) + " (last: " + last_error + ")");
    }
  }

  // --- step 5 -----------------------------------------------------------------------------------

  void CatchUp() {
    auto own = ReadLogPosition(log());
    if (!own) return Fail("reading the own log: " + own.error().ToString());
    bool ahead = false;
    for (size_t i = 0; i < fence_oks.size(); ++i) {
      if (!fence_oks[i]) continue;
      LogPosition p{Offset(fence_oks[i]->log_end), fence_oks[i]->last_generation};
      const LogPosition& cur = ahead ? target : *own;
      if (std::tie(p.last_generation, p.log_end) > std::tie(cur.last_generation, cur.log_end)) {
        target = p;
        best = i;
        ahead = true;
      }
    }
    if (!ahead) return Finish();
    // From the own commit offset or the start of the own last generation, whichever is later:
    // below both the logs agree (committed, or written by the same generation's leader). The
    // counter log has neither a commit offset nor a generation history of its own: it is
    // compared from its base (a compacted log: about one checkpoint per live counter).
    Offset from(0);
    if (!counter_phase()) {
      from = store.replica_state().commit_offset;
      for (const auto& e : store.generation_history().entries()) {
        if (e.generation == Generation(own->last_generation)) {
          from = std::max(from, e.start_offset);
        }
      }
    }
    from = std::max(std::min(from, own->log_end), log().BaseOffset());
    Fetch(from);
  }

  void Fetch(Offset next) {
    if (next >= target.log_end) return CutPast(target.log_end);
    const uint64_t id = attempt;
    ArmTimer(opts.attempt_timeout, [id](State& s) {
      if (s.attempt == id && !s.done) s.Fail("fetch timed out");
    });
    flxi::Frame frame{fetch_kind,
                      flxi::Fetch{0, shard_ref(), wire_log(), next.value(), opts.fetch_max_bytes}};
    auto sent = transport.Send(opts.replicas[best], frame, Deliver(id, &State::OnFetch, next));
    if (!sent) Fail("fetch from " + opts.replicas[best].node_id + ": " + sent.error().message);
  }

  void OnFetch(uint64_t id, Offset next, const Answer& answer) {
    if (id != attempt || done) return;
    const std::string& node = opts.replicas[best].node_id;
    if (!answer) return Fail("fetch from " + node + ": " + answer.error().message);
    auto frame = answer->Decode();
    if (!frame) return Fail("fetch answer from " + node + " did not decode");
    if (const auto* old = std::get_if<flxi::ErrorAnswer>(&frame->body);
        old != nullptr && old->code == flxi::ErrorCode::kUnsupportedKind &&
        fetch_kind != flxi::Kind::kReplicateFetch) {
      // An older replica (internal-protocol-bodies.md §7.4): ask again with the older kind.
      fetch_kind = fetch_kind == flxi::Kind::kReplicateTimedFetch
                       ? flxi::Kind::kReplicateLabelledFetch
                       : flxi::Kind::kReplicateFetch;
      return Fetch(next);
    }
    if (const auto* err = std::get_if<flxi::ReplicateError>(&frame->body)) {
      if (err->code == flxi::ErrorCode::kLogGap && Offset(err->expected_offset) > next) {
        return TakeBase(Offset(err->expected_offset), node);
      }
      return Fail("fetch refused by " + node + ": " + flxi::ErrorCodeName(err->code) + " " +
                  std::string(err->detail));
    }
    const auto* records = std::get_if<flxi::Records>(&frame->body);
    if (records == nullptr) {
      return Fail(std::string("fetch answered with ") + flxi::KindName(frame->kind));
    }
    if (Offset(records->first_offset) != next || records->payloads.empty()) {
      return Fail("fetch from " + node + " answered " + std::to_string(records->payloads.size()) +
                  " records at " + std::to_string(records->first_offset) + ", wanted " +
                  to_string(next) + " up to " + to_string(target.log_end));
    }
    if (flxi::BatchChecksum(records->payloads, records->marks) != records->checksum) {
      return Fail("fetch answer from " + node + " fails its checksum");
    }
    auto applied = Apply(*records);
    if (!applied) return Fail(applied.error());
    Fetch(next + records->payloads.size());
  }

  // The log taken begins at `base`, past where this node's comparison starts: the replica
  // compacted (a cache or counter log: checkpoints of every live key/counter from its base on)
  // or trimmed (retention) what lies below. Found by a Quorum fault run: a cache leader that
  // had fallen behind while paused fetched its counter log from 0 and was refused LogGap on
  // every attempt, forever. Records below a commit offset agree (committed), so comparison
  // begins at `base` when the own log's commit offset reaches it; otherwise nothing of the own
  // log at or above the comparison start is known to agree, and the own log is placed at
  // `base` (discarding every own record, all of them behind or above the log taken, which is
  // then fetched in full from `base`).
  void TakeBase(Offset base, const std::string& node) {
    storage::DurableLog& own = log();
    if (own.CommitOffset() >= base) return Fetch(base);
    const Offset first = own.BaseOffset();
    const Offset tail = own.TailOffset();
    if (auto reset = own.Reset(base); !reset) {
      return Fail("placing the own log at " + node + "'s base " + to_string(base) + ": " +
                  reset.error().ToString());
    }
    truncated.fetch_add(tail - first);
    if (!counter_phase()) (void)store.RelabelGenerations(Offset(0), {});  // advisory
    spdlog::warn(
        "promotion fence of {} {}/{}/{}/{} at generation {}: {}'s {} log begins at {}, past "
        "the own [{}, {}); the own log is placed there to take it",
        opts.cache_shard ? "cache" : "stream", opts.tenant, opts.ns, opts.name, opts.shard,
        opts.generation, node, counter_phase() ? "counter" : "own", base, first, tail);
    Fetch(base);
  }

  // The generation of fetched record `offset`: its label, else the replica's last generation.
  uint64_t LabelOf(const flxi::Records& r, Offset offset) const {
    uint64_t g = target.last_generation;
    for (const auto& e : r.generations) {
      if (Offset(e.start_offset) <= offset) g = e.generation;
    }
    return g;
  }

  // Compares the fetched records with the own log, cuts at the first disagreement, appends
  // the rest at exactly the fetched offsets, relabels the history over the batch.
  Result<void, std::string> Apply(const flxi::Records& r) {
    storage::DurableLog& own = log();
    const Offset first(r.first_offset);
    const Offset end = first + r.payloads.size();
    Offset tail = own.TailOffset();
    Offset at = first;
    const bool labelled = !r.generations.empty();
    // Compare the overlap.
    while (at < std::min(end, tail)) {
      auto mine = own.Read(at, storage::ReadLimits{std::min(end, tail) - at, 1 << 20});
      if (!mine) return tl::unexpected("reading the own log: " + mine.error().ToString());
      if (mine->records.empty()) break;
      bool differs = false;
      for (const auto& rec : mine->records) {
        if (rec.offset >= std::min(end, tail)) break;
        const size_t i = rec.offset - first;
        // Without labels (kind 7/14) the generation is a guess: compare the payload only.
        const bool start_fetched =
            i < r.marks.size() && r.marks[i].type == flxi::MarkType::kGenerationStart;
        if (rec.payload != r.payloads[i] ||
            storage::IsGenerationStart(rec.flags) != start_fetched ||
            (labelled && rec.generation != Generation(LabelOf(r, rec.offset)))) {
          differs = true;
          break;
        }
        at = rec.offset + 1;
      }
      if (differs) break;
    }
    if (at < tail && at < end) {
      if (auto t = own.Truncate(at); !t) {
        return tl::unexpected("cutting the own log at " + to_string(at) + ": " +
                              t.error().ToString());
      }
      truncated.fetch_add(tail - at);
      tail = at;
    }
    if (tail < end) {
      std::vector<storage::AppendRecord> fresh;
      for (Offset o = tail; o < end; o = o.next()) {
        const size_t i = o - first;
        const uint64_t ms = i < r.times.size() ? r.times[i] / 1000 : 0;
        auto flags = StoredFlags(r.marks, i, r.payloads[i]);
        if (!flags) return tl::unexpected("fetched record " + to_string(o) + ": " + flags.error());
        fresh.push_back(storage::AppendRecord{storage::AsBytes(r.payloads[i]),
                                              Generation(LabelOf(r, o)), ms, *flags});
      }
      if (auto a = own.AppendAt(tail, fresh); !a) {
        return tl::unexpected("appending fetched records at " + to_string(tail) + ": " +
                              a.error().ToString());
      }
    }
    // Overlay the replica's labels on everything this batch covered (without labels, only on
    // what was appended: the compared records keep their own).
    if (counter_phase()) return {};  // the history describes the own log only
    std::vector<storage::EpochEntry> runs;
    const Offset relabel_from = labelled ? first : std::max(first, tail);
    for (Offset o = relabel_from; o < end; o = o.next()) {
      const Generation g(LabelOf(r, o));
      if (runs.empty() || runs.back().generation != g) runs.push_back({g, o});
    }
    if (relabel_from < end) (void)store.RelabelGenerations(relabel_from, runs);  // advisory
    return {};
  }

  // Drops own records past the end of the log taken, then opens.
  void CutPast(Offset end) {
    const Offset tail = log().TailOffset();
    if (tail > end) {
      if (auto t = log().Truncate(end); !t) {
        return Fail("cutting the own log at " + to_string(end) + ": " + t.error().ToString());
      }
      truncated.fetch_add(tail - end);
      if (!counter_phase()) (void)store.RelabelGenerations(end, {});
    }
    Finish();
  }

  // --- step 7 -----------------------------------------------------------------------------------

  void Finish() {
    if (timer != 0) ex.Cancel(timer);
    timer = 0;
    if (!counter_phase()) {
      start_offset = log().TailOffset();
      // Only now: records taken above keep their own generations (replication.md §9.3).
      const storage::EpochEntry entry{opts.generation, start_offset};
      (void)store.RelabelGenerations(start_offset, {&entry, 1});  // advisory
    }
    // The own log's start record; for a cache shard, each of its two logs gets one (§17).
    if (auto written = WriteGenerationStart(); !written) return Fail(written.error());
    if (opts.cache_shard && !counter_phase()) {
      // Step 6: the counter log the same way. Without it a promoted cache leader would miss
      // counter adds a majority acknowledged, and its followers would hold records it lacks
      // (found by the Quorum fault run: they halted, diverged, and the adds were gone).
      phase = 1;
      fetch_kind = opts.fetch_kind;
      failures_in_row = 0;
      return StartAttempt();
    }
    Open();
  }

  // replication.md §17: the first record of this generation, at start_offset, before the
  // shard serves. It makes this log the longest of its generation at once, so that the mark
  // (which counts a majority only past start_offset, §8.3) moves over the inherited records as
  // soon as a majority holds it — not at the first client write — and the next fence prefers
  // a replica holding it. Not written over an empty log (nothing inherited) or when the log
  // already holds a record of this generation (a restart at the same generation).
  Result<void, std::string> WriteGenerationStart() {
    storage::DurableLog& own = log();
    const Offset tail = own.TailOffset();
    if (tail == Offset(0)) return {};
    auto last = ReadLogPosition(own);
    if (!last)
      return tl::unexpected("reading the own log's last record: " + last.error().ToString());
    if (Generation(last->last_generation) >= opts.generation) return {};
    const auto payload = storage::GenerationStartPayload(opts.generation.value());
    const storage::AppendRecord start{payload, opts.generation, 0,
                                      storage::kRecordFlagGenerationStart};
    if (auto a = own.AppendAt(tail, {&start, 1}); !a) {
      const storage::StorageError& e = a.error();
      Counter* full = own_log() == LogKind::kCounters ? opts.counter_log_full : opts.own_log_full;
      if (full != nullptr && e.NoSpace()) full->Increment();
      return tl::unexpected("writing the generation-start record at " + to_string(tail) + ": " +
                            e.ToString());
    }
    if (auto synced = own.Sync(); !synced) {
      return tl::unexpected("syncing the generation-start record: " + synced.error().ToString());
    }
    start_records.fetch_add(1);
    return {};
  }

  void Open() {
    if (timer != 0) ex.Cancel(timer);
    timer = 0;
    done = true;
    deciding = false;
    failures_in_row = 0;
    opened.store(true);
    if (on_open) on_open(start_offset);
  }

  // --- step 8 -----------------------------------------------------------------------------------

  void Fail(std::string why) {
    last_error = std::move(why);
    deciding = false;
    ++attempt;  // answers to the failed attempt are dropped
    failures.fetch_add(1);
    ++failures_in_row;
    ArmTimer(FenceRetryDelay(failures_in_row, opts.retry, opts.retry_max),
             [](State& s) { s.StartAttempt(); });
  }

  void StopOnExecutor() {
    stopped = true;
    if (timer != 0) ex.Cancel(timer);
    timer = 0;
  }
};

PromotionFence::PromotionFence(storage::ShardStore& store, PromotionFenceOptions options,
                               ReplicaTransport& transport, broker::Executor& executor,
                               OpenListener on_open)
    : state_(std::make_shared<State>(store, std::move(options), transport, executor,
                                     std::move(on_open))) {}

PromotionFence::~PromotionFence() {
  Stop();
}

void PromotionFence::Start() {
  state_->PostGated([](State& s) { s.StartAttempt(); });
}

void PromotionFence::Stop() {
  {
    std::lock_guard<std::mutex> lock(state_->gate->mu);
    if (!state_->gate->open) return;
    state_->gate->open = false;
  }
  // Everything already posted runs first (FIFO); then nothing of this fence runs again.
  std::promise<void> stopped;
  auto state = state_;
  if (state->ex.Post([state, &stopped] {
        state->StopOnExecutor();
        stopped.set_value();
      })) {
    stopped.get_future().wait();
  } else {
    state->StopOnExecutor();  // the executor already stopped: nothing else can run
  }
}

uint32_t PromotionFence::attempts() const {
  return state_->attempts.load();
}
uint32_t PromotionFence::failures() const {
  return state_->failures.load();
}
uint64_t PromotionFence::start_records_written() const {
  return state_->start_records.load();
}

uint64_t PromotionFence::truncated() const {
  return state_->truncated.load();
}
bool PromotionFence::opened() const {
  return state_->opened.load();
}
std::string PromotionFence::last_error() const {
  return state_->last_error;
}

}  // namespace felix::cluster
