#include "cluster/cluster_node.h"

#include <spdlog/spdlog.h>

#include "cluster/assignment_txn.h"
#include "etcd/backoff.h"
#include "etcd/etcd_version.h"

namespace felix::cluster {

namespace {

constexpr std::chrono::milliseconds kStateEvery{50};

}  // namespace

ClusterNode::ClusterNode(etcd::EtcdClient& etcd, ClusterNodeOptions options)
    : etcd_(etcd),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : boottime_),
      view_(options_.keys, options_.metrics),
      router_(view_, options_.self.node_id, [this] { return lease_valid(); }) {
  if (options_.on_assignments_changed) {
    view_.SetAssignmentsListener(options_.on_assignments_changed);
  }
  if (MetricsRegistry* m = options_.metrics) {
    lease_valid_gauge_ = &m->AddGauge("felix_node_lease_valid",
                                      "1 while this broker's etcd lease is usable (cluster mode)");
    keepalive_age_gauge_ = &m->AddGauge(
        "felix_node_lease_keepalive_age_ms",
        "milliseconds since etcd last answered this broker's lease keepalive (-1: never)");
    registered_gauge_ =
        &m->AddGauge("felix_node_registered", "1 while this broker is registered under nodes/");
    nodes_revision_gauge_ =
        &m->AddGauge("felix_cluster_watch_revision",
                     "newest etcd revision applied, per watched prefix", "prefix=\"nodes\"");
    assign_revision_gauge_ =
        &m->AddGauge("felix_cluster_watch_revision",
                     "newest etcd revision applied, per watched prefix", "prefix=\"assign\"");
    registrations_ = &m->AddCounter("felix_node_registrations_total",
                                    "registrations under a fresh lease (1 + re-registrations)");
    etcd_errors_ = &m->AddCounter("felix_cluster_etcd_errors_total",
                                  "failed etcd calls and broken watches of this broker");
  }
}

ClusterNode::~ClusterNode() {
  Stop();
}

void ClusterNode::Start() {
  auto on_error = [this](const std::string& what) {
    return [this, what](const etcd::EtcdError& error) {
      if (etcd_errors_ != nullptr) etcd_errors_->Increment();
      spdlog::warn("cluster: {} watch: {} (resuming)", what, error.message);
    };
  };
  etcd::MirrorCallbacks nodes;
  nodes.on_snapshot = [this](const std::vector<etcd::KeyValue>& kvs, int64_t) {
    view_.ReplaceNodes(kvs);
  };
  nodes.on_events = [this](const std::vector<etcd::Event>& events) {
    view_.ApplyNodeEvents(events);
  };
  nodes.on_error = on_error("nodes/");
  etcd::MirrorCallbacks assign;
  assign.on_snapshot = [this](const std::vector<etcd::KeyValue>& kvs, int64_t revision) {
    view_.ReplaceAssignments(kvs);
    assignments_revision_.store(revision, std::memory_order_release);
    cv_.notify_all();  // RefreshState: perhaps caught up now
  };
  assign.on_events = [this](const std::vector<etcd::Event>& events) {
    view_.ApplyAssignmentEvents(events);
    assignments_revision_.store(events.back().kv.mod_revision, std::memory_order_release);
    cv_.notify_all();
  };
  assign.on_error = on_error("assign/");
  nodes_mirror_ =
      std::make_unique<etcd::PrefixMirror>(etcd_, options_.keys.NodesPrefix(), std::move(nodes));
  assign_mirror_ =
      std::make_unique<etcd::PrefixMirror>(etcd_, options_.keys.AssignPrefix(), std::move(assign));
  nodes_mirror_->Start();
  assign_mirror_->Start();
  thread_ = std::thread([this] { Run(); });
}

void ClusterNode::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Unregister();
  nodes_mirror_.reset();
  assign_mirror_.reset();
}

bool ClusterNode::lease_valid() const {
  std::shared_ptr<NodeLease> lease;
  {
    MutexLock lock(mu_);
    lease = lease_;
  }
  return lease != nullptr && registered() && lease->valid() && AssignmentsCaughtUp();
}

bool ClusterNode::AssignmentsCaughtUp() const {
  int64_t registered_at = registered_revision_.load(std::memory_order_acquire);
  return registered_at != 0 &&
         assignments_revision_.load(std::memory_order_acquire) >= registered_at;
}

bool ClusterNode::LeaseValidNow() const {
  std::shared_ptr<NodeLease> lease;
  {
    MutexLock lock(mu_);
    lease = lease_;
  }
  return lease != nullptr && lease->ValidNow() && AssignmentsCaughtUp();
}

void ClusterNode::WaitFor(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  if (stopping_) return;
  cv_.wait_for(lock.native(), d);
}

bool ClusterNode::Register() {
  std::shared_ptr<NodeLease> lease;
  {
    MutexLock lock(mu_);
    lease = lease_;
  }
  if (lease == nullptr || lease->lost()) {
    if (lease != nullptr) {
      spdlog::error("cluster: etcd dropped this broker's lease id={}: registering again",
                    lease->id());
      Unregister();
    }
    auto incarnation = NextIncarnation(etcd_, options_.keys, options_.self.node_id);
    if (!incarnation) {
      spdlog::warn("cluster: cannot raise the incarnation: {}", incarnation.error().message);
      return false;
    }
    NodeLeaseOptions lo;
    lo.lease = options_.lease;
    lo.on_change = [this](bool) { cv_.notify_all(); };
    auto fresh = std::make_shared<NodeLease>(etcd_, lo, clock_);
    if (auto started = fresh->Start(); !started) {
      spdlog::warn("cluster: cannot grant the node lease: {}", started.error().message);
      return false;
    }
    incarnation_.store(*incarnation, std::memory_order_release);
    node_key_written_ = false;
    registered_revision_.store(0, std::memory_order_release);
    MutexLock lock(mu_);
    lease_ = std::move(fresh);
    lease = lease_;
  }
  if (!node_key_written_) {
    NodeRecord record = options_.self;
    record.incarnation = incarnation_.load();
    auto put = etcd_.Put(options_.keys.Node(record.node_id), EncodeNodeRecord(record), lease->id());
    if (!put) {
      spdlog::warn("cluster: cannot write nodes/{}: {}", record.node_id, put.error().message);
      return false;
    }
    node_key_written_ = true;
    registered_revision_.store(put->revision, std::memory_order_release);
    // The mirror's watch may lag, and may hear nothing more under assign/ for a long time: a
    // fresh read makes it catch up with everything written before this registration.
    if (assignments_revision_.load(std::memory_order_acquire) < put->revision) {
      assign_mirror_->Resync();
    }
    registered_.store(true, std::memory_order_release);
    if (registrations_ != nullptr) registrations_->Increment();
    spdlog::info("cluster: registered node={} incarnation={} lease={} ttl_ms={}", record.node_id,
                 record.incarnation, lease->id(), lease->ttl_ms());
    if (options_.on_registered)
      options_.on_registered(lease->id(), lease->ttl_ms(), record.incarnation);
  }
  return true;
}

void ClusterNode::Unregister() {
  std::shared_ptr<NodeLease> lease;
  {
    MutexLock lock(mu_);
    lease = std::move(lease_);
    lease_.reset();
  }
  bool was_registered = registered_.exchange(false);
  if (was_registered && options_.on_unregistered) options_.on_unregistered();
  if (lease != nullptr && !lease->lost()) {
    // Clean leave: the nodes/ key (and a controller key) go at once, not after the TTL.
    if (auto r = lease->Revoke(); !r) {
      spdlog::warn("cluster: revoking the lease failed (it expires by itself): {}",
                   r.error().message);
    }
  }
  node_key_written_ = false;
  registered_revision_.store(0, std::memory_order_release);
  RefreshState();
}

void ClusterNode::RefreshState() {
  std::shared_ptr<NodeLease> lease;
  {
    MutexLock lock(mu_);
    lease = lease_;
  }
  bool valid = lease != nullptr && lease->valid();
  bool synced = nodes_mirror_ != nullptr && nodes_mirror_->snapshots() > 0 &&
                assign_mirror_ != nullptr && assign_mirror_->snapshots() > 0 &&
                (!options_.extra_synced || options_.extra_synced());
  bool caught_up = AssignmentsCaughtUp();
  bool ready = registered() && valid && synced && caught_up;
  if (ready_.exchange(ready) != ready) {
    spdlog::info("cluster: ready={} (registered={} lease_valid={} synced={} caught_up={})", ready,
                 registered(), valid, synced, caught_up);
    if (options_.on_ready_change) options_.on_ready_change(ready);
  }
  if (lease_valid_gauge_ != nullptr) {
    lease_valid_gauge_->Set(valid ? 1 : 0);
    registered_gauge_->Set(registered() ? 1 : 0);
    int64_t last = lease != nullptr ? lease->last_answer_ns() : 0;
    keepalive_age_gauge_->Set(last == 0 ? -1 : (clock_.NowNs() - last) / 1'000'000);
    if (nodes_mirror_) nodes_revision_gauge_->Set(nodes_mirror_->revision());
    if (assign_mirror_) assign_revision_gauge_->Set(assign_mirror_->revision());
  }
}

void ClusterNode::Run() {
  etcd::Backoff backoff(std::chrono::milliseconds(100), std::chrono::milliseconds(2000));
  bool last_valid = false;
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    if (!version_checked_) {
      auto version = etcd::VerifyServerVersion(etcd_);
      if (!version) {
        if (version.error().code == etcd::EtcdErrc::kVersionTooOld) {
          spdlog::error("cluster: {}", version.error().message);
          if (options_.on_fatal) options_.on_fatal(version.error().message);
          return;
        }
        if (etcd_errors_ != nullptr) etcd_errors_->Increment();
        spdlog::warn("cluster: etcd not reachable yet: {} (retrying; not ready)",
                     version.error().message);
        RefreshState();
        WaitFor(backoff.Next());
        continue;
      }
      version_checked_ = true;
      spdlog::info("cluster: etcd version {}.{}.{}", version->major, version->minor,
                   version->patch);
    }
    if (!Register()) {
      if (etcd_errors_ != nullptr) etcd_errors_->Increment();
      RefreshState();
      WaitFor(backoff.Next());
      continue;
    }
    backoff.Reset();
    RefreshState();
    bool valid = lease_valid();
    if (valid != last_valid) {
      if (valid) {
        spdlog::info("cluster: node lease usable again: serving this broker's shards");
      } else if (!AssignmentsCaughtUp()) {
        spdlog::warn(
            "cluster: assignments not yet read up to this registration: refusing requests for "
            "this broker's shards until they are");
      } else {
        spdlog::error(
            "cluster: node lease not provably valid (etcd keepalives unanswered): refusing "
            "requests for this broker's shards until it is");
      }
      last_valid = valid;
    }
    WaitFor(kStateEvery);
  }
}

}  // namespace felix::cluster
