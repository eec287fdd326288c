// Controller: the one broker at a time that places shards (cluster-etcd.md §1 D1, §2, §3, §5).
// Every cluster broker runs one; at most one of them is the controller at a time.
//
// Election: create-if-absent of the `controller` key under the broker's node lease (Campaign),
// so the key goes with the node's lease. A broker that did not win watches the key and
// campaigns again when it is deleted (and every `pass_interval` as a safety net). A term is the
// key's create_revision; every write compares it, so a deposed controller cannot write.
//
// As controller it mirrors the whole cluster prefix (one PrefixMirror: nodes/, catalog/,
// assign/ and the controller key at one revision) into a ControllerView and runs a placement pass
// (controller_pass.h) whenever nodes, catalog streams/caches or assignments change — bursts
// coalesce into one pass, one pass at a time — and every `pass_interval` anyway. A pass after one
// that wrote is planned only from a view that holds those writes (the watch brings them back;
// one lagging past `retry_interval` is overtaken by a fresh snapshot). Seeing its
// controller key deleted or replaced, or a write answered kDeposed, ends the term; the thread
// goes back to campaigning. It never campaigns or writes while `lease_valid()` is false.
//
// Down rule (DownTracker): a node is down only after this controller observed its nodes/ key go
// and then waited `margin` on `clock`, and never before `L + margin` after its election.
// DownNodes() reports it. The controller wakes when a node observed gone becomes down and its
// pass fails over every active shard that node leads to the follower the leader's newest
// report names caught up and furthest ahead (PlanFailover, controller_pass.h); a shard with no
// such follower stays with its dead leader (unavailable) and is logged. Planned moves (an
// operator's moves/ request, a draining broker's drains/ key) stage, fence, cut over, or are
// retaken after `move_fence_timeout` (move_plan.h); a leader's report wakes a pass while its
// shard is fenced.
//
// Threading and lifetime: `etcd`, `clock` and `metrics` must outlive the Controller; the node
// lease `lease_id` must exist while it runs (a broker that loses its lease for good stops this
// Controller and starts a new one with the new lease). One internal thread between Start() and
// Stop(), plus the mirror's thread while controller; `lease_valid` is called from the internal
// thread. Start/Stop/destructor from the owning thread; every other method from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/assignment_txn.h"
#include "cluster/controller_view.h"
#include "cluster/down_tracker.h"
#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "cluster/node_lease.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "etcd/etcd_client.h"
#include "etcd/prefix_mirror.h"

namespace felix::cluster {

struct ControllerOptions {
  etcd::EtcdClient& etcd;
  ClusterKeys keys;
  ControllerRecord me;   // this broker's {node_id, incarnation}
  int64_t lease_id = 0;  // the broker's node lease: the controller key is attached to it
  std::chrono::milliseconds lease_ttl{2000};  // L, the TTL etcd granted
  std::chrono::milliseconds margin{0};        // 0: L/4
  const LeaseClock& clock;                    // time for the down rule
  MetricsRegistry* metrics = nullptr;         // optional
  // False while the broker's lease is not usable: no campaign, no write. Null: always usable.
  std::function<bool()> lease_valid;
  std::chrono::milliseconds pass_interval{0};   // safety-net pass / re-campaign; 0: L
  std::chrono::milliseconds retry_interval{0};  // re-check of lease_valid; 0: L/8 (>= 10 ms)
  // FELIX_SHARD_RESTORE_AFTER_MS: a follower down this long (after the down rule) is replaced
  // (restore_plan.h); 0 turns restoring off.
  std::chrono::milliseconds restore_after{300000};
  // A planned move fenced this long without draining is retaken by its leader (move_plan.h).
  std::chrono::milliseconds move_fence_timeout{10000};
};

class Controller {
 public:
  explicit Controller(ControllerOptions options);
  ~Controller();  // Stop()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the thread (campaigning at once). Call once.
  void Start();
  // Stops the thread; resigns (deletes the controller key) if it is the controller. Idempotent.
  void Stop();

  bool is_controller() const;
  // The current term while controller.
  std::optional<ControllerTerm> term() const;
  // Passes that reached their target (no etcd error, not paused, not deposed).
  uint64_t passes() const;
  // Waits until a complete pass planned from a view at revision >= `min_revision`. False at the
  // deadline.
  bool WaitForPass(int64_t min_revision, std::chrono::steady_clock::time_point deadline) const;
  // Waits until is_controller() == `controller`. False at the deadline.
  bool WaitForRole(bool controller, std::chrono::steady_clock::time_point deadline) const;
  // Nodes down by the rule above, now (sorted); empty when not controller.
  std::vector<std::string> DownNodes() const;

 private:
  void Run();
  // Not controller: waits until the controller key changes (or a safety-net timeout).
  void AwaitVacancy();
  // Controller for `term` until deposed or stopping.
  void Lead(const ControllerTerm& term);
  void OnSnapshot(const std::vector<etcd::KeyValue>& kvs, int64_t revision);
  void OnEvents(const std::vector<etcd::Event>& events);
  // Applies one change to view_ and the down bookkeeping (mu_ held); true when it calls for a
  // placement pass.
  bool ApplyLocked(const etcd::Event& event, int64_t now_ns) REQUIRES(mu_);
  void CheckTermLocked() REQUIRES(mu_);
  void SetRole(std::optional<ControllerTerm> term);
  bool LeaseValid() const;
  // Sleeps up to `d` or until Stop(); false when stopping.
  bool Pause(std::chrono::milliseconds d);

  ControllerOptions options_;
  std::chrono::milliseconds pass_interval_;
  std::chrono::milliseconds retry_interval_;

  Gauge* controller_gauge_ = nullptr;
  Counter* passes_counter_ = nullptr;
  Counter* writes_counter_ = nullptr;
  Counter* failovers_counter_ = nullptr;
  Counter* restores_counter_ = nullptr;
  Counter* move_steps_counter_ = nullptr;
  Gauge* unavailable_gauge_ = nullptr;  // felix_cluster_unavailable_shards

  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::optional<ControllerTerm> term_ GUARDED_BY(mu_);
  bool deposed_ GUARDED_BY(mu_) = false;
  bool vacancy_ GUARDED_BY(mu_) = false;  // the watched controller key changed
  bool dirty_ GUARDED_BY(mu_) = false;    // the view changed since the last pass began
  ControllerView view_ GUARDED_BY(mu_);
  DownTracker down_ GUARDED_BY(mu_);
  uint64_t passes_ GUARDED_BY(mu_) = 0;
  int64_t passed_revision_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace felix::cluster
