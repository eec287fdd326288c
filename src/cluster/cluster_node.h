// ClusterNode: this broker's membership in the cluster (cluster-etcd.md §2–4).
//
// Start() runs one background thread that, for as long as the node lives:
//   1. checks etcd's version (>= 3.4.20; an older etcd is fatal: on_fatal, nothing else runs);
//      an unreachable etcd is retried with jittered backoff — the broker stays up, not ready;
//   2. raises nodes-incarnation/<id> (one txn per registration), grants the node lease
//      (NodeLease: keepalives every L/4 on one stream, the usable window of §3) and writes
//      nodes/<id> under it;
//   3. when etcd dropped the lease (NodeLease::lost(): our keepalive was answered TTL 0 — its
//      keys are gone), registers again with a fresh lease and incarnation;
//   4. keeps /ready's answer: registered, the lease usable, the nodes/ and assign/ mirrors
//      synced, and `extra_synced` (the catalog's first sync).
// After every registration the node counts as leasing its shards only once its assign/ mirror
// has applied the revision of its own nodes/<id> write (it asks the mirror for a fresh snapshot
// when behind). Every failover away from this broker was written before that revision (the
// controller moves a shard only after this broker's previous nodes/ key was gone), so a broker
// that comes back with a new lease never serves a shard it lost from a view that is still catching
// up (found by fault seed q1622: a stale read 54–85 ms after re-registration).
// The nodes/ and assign/ PrefixMirrors feed a ClusterView, which the EtcdRouter reads.
//
// Roles tied to the lease (the controller campaigns with it) are started through
// on_registered(lease id, granted TTL, incarnation) and stopped through on_unregistered() before a
// re-registration and at Stop().
//
// Threading: router(), view(), lease_valid(), LeaseValidNow(), ready() and registered_*() from
// any thread. Callbacks run on the node's thread (mirror callbacks on the mirrors' threads).
// Start/Stop from the owning thread; Stop revokes the lease, so nodes/<id> goes at once. The
// EtcdClient and the metrics registry must outlive the node.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "cluster/cluster_view.h"
#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "cluster/etcd_router.h"
#include "cluster/node_lease.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "etcd/etcd_client.h"
#include "etcd/prefix_mirror.h"

namespace felix::cluster {

struct ClusterNodeOptions {
  ClusterKeys keys;
  // This node as it registers (incarnation is filled in at each registration).
  NodeRecord self;
  std::chrono::milliseconds lease{2000};  // FELIX_NODE_LEASE_MS
  MetricsRegistry* metrics = nullptr;     // optional
  // Readiness also needs this (the catalog's first sync); empty: nothing else.
  std::function<bool()> extra_synced;
  std::function<void(bool ready)> on_ready_change;
  // etcd is too old to run on (or another condition the broker cannot run under).
  std::function<void(const std::string& why)> on_fatal;
  // The lease etcd granted: its id and TTL (what the controller's arithmetic must use).
  std::function<void(int64_t lease_id, int64_t ttl_ms, uint64_t incarnation)> on_registered;
  std::function<void()> on_unregistered;
  // After each change of the assign/ mirror was applied to the view (ClusterView's listener;
  // the mirror's thread).
  std::function<void()> on_assignments_changed;
  // Test seam: the lease clock (CLOCK_BOOTTIME when null; must outlive the node).
  const LeaseClock* clock = nullptr;
};

class ClusterNode {
 public:
  ClusterNode(etcd::EtcdClient& etcd, ClusterNodeOptions options);
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // The client address to register (known once the client port is bound); before Start().
  void set_client_addr(std::string addr) { options_.self.client_addr = std::move(addr); }
  void Start();
  void Stop();

  const broker::ShardRouter& router() const { return router_; }
  const ClusterView& view() const { return view_; }
  const ClusterKeys& keys() const { return options_.keys; }
  const std::string& node_id() const { return options_.self.node_id; }

  // The cached lease flag (admission) and the exact check (just before an append); both false
  // until the assignments are caught up with the current registration (above).
  bool lease_valid() const;
  bool LeaseValidNow() const;
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  bool registered() const { return registered_.load(std::memory_order_acquire); }
  uint64_t incarnation() const { return incarnation_.load(std::memory_order_acquire); }

 private:
  void Run();
  // One registration attempt; false when it must be retried.
  bool Register();
  void Unregister();
  void RefreshState();
  void WaitFor(std::chrono::milliseconds d);
  // The assign/ mirror has applied the revision of this registration's nodes/<id> write.
  bool AssignmentsCaughtUp() const;

  etcd::EtcdClient& etcd_;
  ClusterNodeOptions options_;  // set_client_addr before Start; read-only after
  BoottimeClock boottime_;
  const LeaseClock& clock_;

  ClusterView view_;
  EtcdRouter router_;
  std::unique_ptr<etcd::PrefixMirror> nodes_mirror_;
  std::unique_ptr<etcd::PrefixMirror> assign_mirror_;

  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::shared_ptr<NodeLease> lease_ GUARDED_BY(mu_);

  std::atomic<bool> registered_{false};
  std::atomic<bool> ready_{false};
  std::atomic<uint64_t> incarnation_{0};
  // The revision of the current registration's nodes/<id> write (0: none yet) and the newest
  // revision the assign/ mirror applied to the view.
  std::atomic<int64_t> registered_revision_{0};
  std::atomic<int64_t> assignments_revision_{0};
  bool version_checked_ = false;   // node thread only
  bool node_key_written_ = false;  // node thread only
  std::thread thread_;

  Gauge* lease_valid_gauge_ = nullptr;
  Gauge* keepalive_age_gauge_ = nullptr;
  Gauge* registered_gauge_ = nullptr;
  Gauge* nodes_revision_gauge_ = nullptr;
  Gauge* assign_revision_gauge_ = nullptr;
  Counter* registrations_ = nullptr;
  Counter* etcd_errors_ = nullptr;
};

}  // namespace felix::cluster
