// ClusterServices: what cluster mode (FELIX_NODE_ID + FELIX_ETCD_ENDPOINTS) adds to the
// daemon, composed in one place (docs/cluster.md): the etcd client, the catalog on etcd
// (EtcdCatalog: the admin API writes through it, every broker watches it), this node's
// membership (ClusterNode: lease, registration, the nodes/ and assign/ watches, readiness), the
// router the ShardResolver asks (EtcdRouter), and the controller (campaigns with the node's
// lease; one broker at a time places shards).
//
// Replication: the ReplicationHost (follower custody, the peer handlers, the leader's
// replicators) driven by this node's ClusterView; see replication().
//
// Lifecycle: Create() before the catalog's users (it does no I/O: an unreachable etcd only
// keeps the broker not ready); Start() once the client port is bound (the advertised client
// address may default to it); Stop() after the client listener drained (it resigns the
// controller, revokes the lease, so this node leaves nodes/ at once, and stops following the
// catalog: no catalog listener runs after it, so call it before the listeners' targets stop).
//
// Threading: accessors from any thread; on_ready_change and on_fatal run on the node's thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/broker_core.h"
#include "broker/shard_router.h"
#include "broker/store_custody.h"
#include "catalog/catalog.h"
#include "cluster/cluster_node.h"
#include "cluster/controller.h"
#include "cluster/etcd_catalog.h"
#include "cluster/replication_host.h"
#include "cluster/report_writer.h"
#include "cluster/shard_replicator.h"
#include "common/metrics.h"
#include "common/net_address.h"
#include "common/result.h"
#include "etcd/etcd_client.h"
#include "server/broker_config.h"

namespace felix::server {

class ClusterServices {
 public:
  struct Callbacks {
    std::function<void(bool ready)> on_ready_change;
    std::function<void(const std::string& why)> on_fatal;
  };

  // kInvalidArgument for endpoints or names the config check let through (it should not).
  static Result<std::unique_ptr<ClusterServices>> Create(const BrokerConfig& config,
                                                         MetricsRegistry& metrics,
                                                         Callbacks callbacks);
  ~ClusterServices();

  catalog::Catalog& catalog();
  const broker::ShardRouter& router() const;
  // The internal (FLXI) address nodes/ advertises for `node_id`; nullopt when it is not
  // registered or its address does not parse. Forwarding dials it.
  std::optional<HostPort> InternalAddrOf(std::string_view node_id) const;
  // For BrokerCoreOptions::lease_valid: the exact check just before an append.
  std::function<bool()> LeaseCheck() const;

  // Replication (cluster/replication_host.h): the host follows this node's view of the
  // assignments. Give the core `custody()` and the hooks of ReplicationHooks(); register the
  // host's peer handlers on the internal service (replication()); StartReplication once the
  // core and the peer transport exist. StopReplication (also run by Stop) before the
  // transport goes.
  broker::StoreCustody& custody() { return custody_; }
  cluster::ReplicationHost& replication() { return *replication_; }
  void SetReplicationHooks(broker::BrokerCoreOptions& core_options);
  void StartReplication(broker::BrokerCore& core, cluster::ReplicaTransport& transport);
  void StopReplication();
  // GET /replication.
  nlohmann::ordered_json ReplicationStatus() const;

  // `client_addr`: the bound client address, advertised unless FELIX_CLIENT_ADVERTISE_ADDR.
  void Start(const HostPort& client_addr);
  void Stop();

  bool ready() const;
  // GET /v1/cluster: nodes, controller, per-shard leader/replicas/generation/state.
  nlohmann::ordered_json Status() const;

  // POST /v1/shard-moves (`felix cluster move`): {"kind":"stream"|"cache" (stream),
  // "tenant" (default), "namespace" (default), "name", "shard" (0), "to"} asks the controller
  // to move the shard's leadership to `to` (move_plan.h: stage when not a replica, fence, cut
  // over), by writing moves/<shard> = {target} (a `to` outside the replica set is copied in first:
  // "copy_first"). kInvalidArgument: a bad body or an unregistered `to`; kNotFound: no such shard
  // assignment; kAlreadyExists (409): a move, failover or restore is under way. `to` leading
  // already answers {"status":"already_leader"}. Any thread.
  Result<nlohmann::ordered_json> RequestMove(const nlohmann::ordered_json& body);

  // The graceful shutdown's handoff (control-plane.md §12.6): writes drains/<self> under this
  // node's lease, so the controller moves every shard this broker leads (RF > 1) to a caught-up
  // replica. False when there is nothing to hand over (no shard another registered replica
  // could take) or the key could not be written. Any thread.
  bool BeginHandoff();
  // Shards this broker still leads (or leads in a fenced move), by the view, that another
  // registered replica could take over.
  size_t LedReplicatedShards() const;

 private:
  ClusterServices(const BrokerConfig& config, MetricsRegistry& metrics, Callbacks callbacks,
                  std::unique_ptr<etcd::EtcdClient> etcd, cluster::ClusterKeys keys,
                  std::unique_ptr<cluster::EtcdCatalog> catalog);
  void StartController(int64_t lease_id, int64_t ttl_ms, uint64_t incarnation);
  void StopController();

  const BrokerConfig config_;
  MetricsRegistry& metrics_;
  Callbacks callbacks_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  cluster::BoottimeClock clock_;
  const cluster::ClusterKeys keys_;
  std::unique_ptr<cluster::EtcdCatalog> catalog_;
  std::unique_ptr<cluster::ClusterNode> node_;
  broker::StoreCustody custody_;
  std::unique_ptr<cluster::ReplicationHost> replication_;
  std::mutex reports_mu_;  // StartReplication / StopReplication (two threads may stop)
  std::unique_ptr<cluster::ReportWriter> reports_;
  std::mutex controller_mu_;  // the node's thread starts/stops it; Stop() too
  std::unique_ptr<cluster::Controller> controller_;
  std::atomic<int64_t> lease_id_{0};  // the node lease this broker registered with (0: none)
};

}  // namespace felix::server
