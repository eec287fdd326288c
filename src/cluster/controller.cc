#include "cluster/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "cluster/controller_pass.h"
#include "etcd/backoff.h"

namespace felix::cluster {
namespace {

using std::chrono::milliseconds;

int64_t ToNs(milliseconds ms) {
  return static_cast<int64_t>(ms.count()) * 1'000'000;
}

}  // namespace

Controller::Controller(ControllerOptions options)
    : options_(std::move(options)),
      pass_interval_(options_.pass_interval.count() > 0 ? options_.pass_interval
                                                        : options_.lease_ttl),
      retry_interval_(options_.retry_interval.count() > 0
                          ? options_.retry_interval
                          : std::max(milliseconds(10), options_.lease_ttl / 8)),
      view_(options_.keys),
      down_(ToNs(options_.lease_ttl), ToNs(options_.margin)) {
  if (options_.metrics) {
    controller_gauge_ = &options_.metrics->AddGauge(
        "felix_cluster_controller", "1 while this broker is the cluster's controller");
    passes_counter_ = &options_.metrics->AddCounter(
        "felix_cluster_placement_passes_total", "placement passes this broker ran as controller");
    writes_counter_ = &options_.metrics->AddCounter(
        "felix_cluster_assignment_writes_total",
        "assignment transactions (puts and deletes) this broker committed as controller");
    failovers_counter_ = &options_.metrics->AddCounter(
        "felix_cluster_failovers_total",
        "shards this broker, as controller, handed from a down leader to a caught-up follower");
    move_steps_counter_ =
        &options_.metrics->AddCounter("felix_cluster_move_steps_total",
                                      "planned-move steps (stage, fence, cut over, retake, "
                                      "abandon) this broker, as controller, wrote");
    restores_counter_ = &options_.metrics->AddCounter(
        "felix_cluster_restore_steps_total",
        "replica restores this broker, as controller, started, seated or abandoned (a follower "
        "down past FELIX_SHARD_RESTORE_AFTER_MS replaced by a live broker)");
    unavailable_gauge_ = &options_.metrics->AddGauge(
        "felix_cluster_unavailable_shards",
        "shards nobody may serve after this controller's last pass: led by a down node with no "
        "caught-up follower, or with no node to go to (0 on brokers that are not controller)");
    controller_gauge_->Set(0);
  }
}

Controller::~Controller() {
  Stop();
}

void Controller::Start() {
  {
    MutexLock lock(mu_);
    if (started_) return;
    started_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

void Controller::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Controller::is_controller() const {
  MutexLock lock(mu_);
  return term_.has_value();
}

std::optional<ControllerTerm> Controller::term() const {
  MutexLock lock(mu_);
  return term_;
}

uint64_t Controller::passes() const {
  MutexLock lock(mu_);
  return passes_;
}

bool Controller::WaitForPass(int64_t min_revision,
                             std::chrono::steady_clock::time_point deadline) const {
  MutexLock lock(mu_);
  return cv_.wait_until(lock.native(), deadline, [&]() NO_THREAD_SAFETY_ANALYSIS {
    return passed_revision_ >= min_revision;
  });
}

bool Controller::WaitForRole(bool controller,
                             std::chrono::steady_clock::time_point deadline) const {
  MutexLock lock(mu_);
  return cv_.wait_until(lock.native(), deadline, [&]() NO_THREAD_SAFETY_ANALYSIS {
    return term_.has_value() == controller;
  });
}

std::vector<std::string> Controller::DownNodes() const {
  MutexLock lock(mu_);
  if (!term_) return {};
  return down_.Down(options_.clock.NowNs());
}

bool Controller::LeaseValid() const {
  return !options_.lease_valid || options_.lease_valid();
}

bool Controller::Pause(milliseconds d) {
  MutexLock lock(mu_);
  return !cv_.wait_for(lock.native(), d, [&]() NO_THREAD_SAFETY_ANALYSIS { return stopping_; });
}

void Controller::SetRole(std::optional<ControllerTerm> term) {
  {
    MutexLock lock(mu_);
    term_ = std::move(term);
    if (controller_gauge_) controller_gauge_->Set(term_ ? 1 : 0);
    if (unavailable_gauge_ && !term_) unavailable_gauge_->Set(0);
  }
  cv_.notify_all();
}

void Controller::Run() {
  etcd::Backoff backoff(retry_interval_, pass_interval_);
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    if (!LeaseValid()) {
      if (!Pause(retry_interval_)) return;
      continue;
    }
    auto campaign = Campaign(options_.etcd, options_.keys, options_.me, options_.lease_id);
    if (!campaign) {
      spdlog::warn("controller: campaign failed: {}", campaign.error().ToString());
      if (!Pause(backoff.Next())) return;
      continue;
    }
    backoff.Reset();
    const ControllerTerm& holder = campaign->term;
    // Our own key from before (the thread lost track of its term, the lease is the same): the
    // same term, resumed.
    bool ours = !campaign->won && holder.record == options_.me &&
                holder.lease == options_.lease_id && holder.lease != 0;
    if (campaign->won || ours) {
      Lead(holder);
      continue;
    }
    AwaitVacancy();
  }
}

void Controller::AwaitVacancy() {
  auto current = options_.etcd.Get(options_.keys.Controller());
  if (!current) {
    spdlog::warn("controller: reading the controller key failed: {}",
                 current.error().ToError().ToString());
    Pause(retry_interval_);
    return;
  }
  if (!current->first) return;  // already gone: campaign again
  {
    MutexLock lock(mu_);
    vacancy_ = false;
  }
  auto mark = [this] {
    {
      MutexLock lock(mu_);
      vacancy_ = true;
    }
    cv_.notify_all();
  };
  etcd::WatchOptions watch;
  watch.key = options_.keys.Controller();
  watch.start_revision = current->second + 1;  // nothing between the read and the watch is lost
  etcd::WatchCallbacks cb;
  cb.on_events = [mark](const std::vector<etcd::Event>& events) {
    for (const auto& e : events) {
      if (e.type == etcd::Event::Type::kDelete) mark();
    }
  };
  cb.on_compacted = [mark](int64_t) { mark(); };  // re-read by campaigning again
  auto handle = options_.etcd.Watch(watch, std::move(cb));
  if (!handle) {
    spdlog::warn("controller: watching the controller key failed: {}",
                 handle.error().ToError().ToString());
    Pause(retry_interval_);
    return;
  }
  {
    MutexLock lock(mu_);
    cv_.wait_for(lock.native(), pass_interval_,
                 [&]() NO_THREAD_SAFETY_ANALYSIS { return stopping_ || vacancy_; });
  }
  handle->reset();  // not under mu_: its callbacks take it
}

void Controller::Lead(const ControllerTerm& term) {
  spdlog::info("controller: elected node={} incarnation={} term={}", term.record.node_id,
               term.record.incarnation, term.create_revision);
  {
    MutexLock lock(mu_);
    deposed_ = false;
    dirty_ = false;
    view_.Clear();
    down_.Elected(options_.clock.NowNs());
  }
  SetRole(term);

  etcd::MirrorCallbacks callbacks;
  callbacks.on_snapshot = [this](const std::vector<etcd::KeyValue>& kvs, int64_t revision) {
    OnSnapshot(kvs, revision);
  };
  callbacks.on_events = [this](const std::vector<etcd::Event>& events) { OnEvents(events); };
  callbacks.on_error = [](const etcd::EtcdError& error) {
    spdlog::warn("controller: cluster mirror: {}", error.ToError().ToString());
  };
  auto mirror = std::make_unique<etcd::PrefixMirror>(
      options_.etcd, options_.keys.prefix(), std::move(callbacks),
      etcd::Backoff(retry_interval_, pass_interval_));
  mirror->Start();

  etcd::Backoff error_backoff(retry_interval_, pass_interval_);
  std::map<ShardRef, std::chrono::steady_clock::time_point> fenced_since;
  auto next_periodic = std::chrono::steady_clock::now() + pass_interval_;
  // The newest revision this term wrote, and when a view still short of it asks for a fresh
  // snapshot. Our own writes come back through the mirror's watch, a few events at a time: a pass
  // planned from a view holding only some of them places from a half-old picture and moves again
  // what the last pass just moved. So a pass waits for the view to hold them all; a watch that
  // lags past retry_interval_ is overtaken by a snapshot (which holds every completed write).
  int64_t own_writes_revision = 0;
  auto resync_at = std::chrono::steady_clock::time_point::max();
  bool stopping = false;
  while (true) {
    std::optional<ControllerView> view;
    std::set<std::string> down;
    std::set<std::string> lost;
    bool view_behind = false;
    bool resync = false;
    const int64_t restore_ns = ToNs(options_.restore_after);
    const bool usable = LeaseValid();  // the caller's callback, not under mu_
    {
      MutexLock lock(mu_);
      // A node observed gone becomes down at a known time: wake then, so its shards fail over
      // without waiting for the safety-net pass.
      auto wake = next_periodic;
      const int64_t now_ns = options_.clock.NowNs();
      auto wake_at = [&](std::optional<int64_t> at) {
        if (at) {
          wake = std::min(
              wake, std::chrono::steady_clock::now() + std::chrono::nanoseconds(*at - now_ns + 1));
        }
      };
      wake_at(down_.NextDownAt(now_ns));
      // ... and again when one has been down for the restore grace period.
      if (restore_ns > 0) wake_at(down_.NextDownAt(now_ns, restore_ns));
      const bool behind = view_.revision() < own_writes_revision;
      const auto timer = wake;
      if (behind) wake = std::min(wake, resync_at);
      cv_.wait_until(lock.native(), wake, [&]() NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || deposed_ ||
               (dirty_ && view_.revision() > 0 && view_.revision() >= own_writes_revision);
      });
      stopping = stopping_;
      if (stopping_ || deposed_) break;
      const auto steady_now = std::chrono::steady_clock::now();
      if (steady_now >= timer && view_.revision() > 0) dirty_ = true;
      if (steady_now >= next_periodic) {
        next_periodic = steady_now + pass_interval_;
        if (view_.revision() > 0) dirty_ = true;  // the safety-net pass
      }
      view_behind = view_.revision() < own_writes_revision;
      if (view_behind) {  // dirty_ waits for the view to catch up
        if (steady_now >= resync_at) {
          resync_at = steady_now + retry_interval_;
          resync = true;
        }
      } else if (!dirty_) {
        continue;
      } else if (usable) {
        dirty_ = false;  // changes from here on call for another pass
        view.emplace(view_);
        const int64_t now = options_.clock.NowNs();
        for (auto& id : down_.Down(now)) down.insert(std::move(id));
        if (restore_ns > 0) {
          for (auto& id : down_.Down(now, restore_ns)) lost.insert(std::move(id));
        }
      }
    }
    if (view_behind) {
      if (resync) mirror->Resync();  // not under mu_: the mirror's thread calls back into it
      continue;
    }
    if (!view) {  // lease not usable: no writes until it is
      if (!Pause(retry_interval_)) {
        stopping = true;
        break;
      }
      continue;
    }
    PassOptions pass_options;
    pass_options.can_write = [this] { return LeaseValid(); };
    pass_options.down = std::move(down);
    pass_options.lost = std::move(lost);
    {
      // How long each fenced move has been fenced, on this controller's clock (a new
      // controller starts counting afresh): past move_fence_timeout it is retaken.
      const auto now = std::chrono::steady_clock::now();
      std::map<ShardRef, std::chrono::steady_clock::time_point> still;
      for (const auto& [shard, slot] : view->assignments()) {
        const auto& a = slot.read.value;
        if (!a || a->state != AssignmentState::kMoving || !a->move ||
            a->move->step != MoveStep::kFence) {
          continue;  // only a fence has a timeout (a stage copies for as long as it takes)
        }
        auto it = fenced_since.find(shard);
        const auto since = it == fenced_since.end() ? now : it->second;
        still.emplace(shard, since);
        if (now - since > options_.move_fence_timeout) pass_options.fence_expired.insert(shard);
      }
      fenced_since = std::move(still);
    }
    PassResult result = RunPass(options_.etcd, term, *view, pass_options);
    if (result.written_revision > own_writes_revision) {
      own_writes_revision = result.written_revision;
      resync_at = std::chrono::steady_clock::now() + retry_interval_;
    }
    if (writes_counter_) writes_counter_->Increment(result.writes + result.deletes);
    if (failovers_counter_) failovers_counter_->Increment(result.promotions);
    if (restores_counter_) restores_counter_->Increment(result.restores);
    if (move_steps_counter_) move_steps_counter_->Increment(result.move_steps);
    for (const auto& shard : result.leaderless) {
      spdlog::warn(
          "controller: {} is led by a down node and no follower is reported caught up; it "
          "stays unavailable until its leader returns",
          shard);
    }
    if (result.deposed) {
      spdlog::warn("controller: deposed (a write found another term)");
      break;
    }
    if (!result.complete()) {
      MutexLock lock(mu_);
      dirty_ = true;  // try again
    }
    if (result.errors > 0) {
      if (!Pause(error_backoff.Next())) {
        stopping = true;
        break;
      }
      continue;
    }
    if (!result.complete()) continue;
    if (unavailable_gauge_) {
      unavailable_gauge_->Set(
          static_cast<int64_t>(result.leaderless.size() + result.unplaced.size()));
    }
    error_backoff.Reset();
    if (passes_counter_) passes_counter_->Increment();
    {
      MutexLock lock(mu_);
      ++passes_;
      passed_revision_ = std::max(passed_revision_, view->revision());
    }
    cv_.notify_all();
  }

  mirror.reset();  // not under mu_: its callbacks take it
  SetRole(std::nullopt);
  if (stopping) {
    auto resigned = Resign(options_.etcd, options_.keys, term);
    if (!resigned) {
      spdlog::warn("controller: resigning failed (the key goes with the lease): {}",
                   resigned.error().ToString());
    }
  }
  spdlog::info("controller: term {} ended ({})", term.create_revision,
               stopping ? "stopping" : "deposed");
}

void Controller::CheckTermLocked() {
  const auto& key = view_.controller();
  if (!term_) return;
  if (!key || key->create_revision != term_->create_revision) {
    if (!deposed_) spdlog::warn("controller: the controller key is no longer this term's");
    deposed_ = true;
  }
}

void Controller::OnSnapshot(const std::vector<etcd::KeyValue>& kvs, int64_t revision) {
  {
    MutexLock lock(mu_);
    const int64_t now = options_.clock.NowNs();
    view_.Clear();
    for (const auto& kv : kvs) view_.Put(kv);
    view_.set_revision(revision);
    down_.Snapshot(view_.RegisteredIds(), now);
    for (const auto& [ref, slot] : view_.assignments()) {
      if (!slot.read.value) continue;
      for (const auto& node : slot.read.value->replicas) down_.Mentioned(node, now);
    }
    CheckTermLocked();
    dirty_ = true;
  }
  cv_.notify_all();
}

bool Controller::ApplyLocked(const etcd::Event& event, int64_t now_ns) {
  const bool deleted = event.type == etcd::Event::Type::kDelete;
  ControllerView::Area area = deleted ? view_.Delete(event.kv.key) : view_.Put(event.kv);
  switch (area) {
    case ControllerView::Area::kNodes: {
      auto id = options_.keys.ParseNode(event.kv.key);
      if (id && deleted) down_.Absent(*id, now_ns);
      if (id && !deleted) down_.Present(*id);
      return true;
    }
    case ControllerView::Area::kAssign: {
      if (!deleted) {
        auto shard = options_.keys.ParseAssign(event.kv.key);
        auto it = shard ? view_.assignments().find(*shard) : view_.assignments().end();
        if (it != view_.assignments().end() && it->second.read.value) {
          for (const auto& node : it->second.read.value->replicas) down_.Mentioned(node, now_ns);
        }
      }
      return true;
    }
    case ControllerView::Area::kCatalog:
      return true;
    case ControllerView::Area::kReports: {
      // Read by the next pass; a report alone changes no placement — except the drain report
      // of a fenced move, which the cut-over waits for.
      auto shard = options_.keys.ParseReport(event.kv.key);
      auto it = shard ? view_.assignments().find(*shard) : view_.assignments().end();
      return !deleted && it != view_.assignments().end() && it->second.read.value &&
             it->second.read.value->state == AssignmentState::kMoving;
    }
    case ControllerView::Area::kMoves:
      return true;  // a move request or a drain came or went
    case ControllerView::Area::kController:
      CheckTermLocked();
      return false;
    case ControllerView::Area::kOther:
      return false;
  }
  return false;
}

void Controller::OnEvents(const std::vector<etcd::Event>& events) {
  {
    MutexLock lock(mu_);
    const int64_t now = options_.clock.NowNs();
    for (const auto& event : events) {
      if (ApplyLocked(event, now)) dirty_ = true;
      view_.set_revision(std::max(view_.revision(), event.kv.mod_revision));
    }
  }
  cv_.notify_all();
}

}  // namespace felix::cluster
