#include "server/cluster_services.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "cluster/assignment_txn.h"
#include "etcd/grpc_etcd_client.h"
#include "felix/version.h"

namespace felix::server {

namespace {

std::string JoinEndpoints(const std::vector<std::string>& endpoints) {
  std::string out;
  for (const auto& e : endpoints) out += (out.empty() ? "" : ",") + e;
  return out;
}

const char* StateName(cluster::AssignmentState state) {
  switch (state) {
    case cluster::AssignmentState::kActive:
      return "active";
    case cluster::AssignmentState::kMoving:
      return "moving";
    case cluster::AssignmentState::kUnavailable:
      return "unavailable";
  }
  return "?";
}

// A wildcard bind is not an address anyone can dial: advertise loopback instead (a warning
// tells the operator to set FELIX_CLIENT_ADVERTISE_ADDR for other machines).
std::string DialableClientAddr(const BrokerConfig& config, const HostPort& bound) {
  if (!config.client_advertise_addr.empty()) return config.client_advertise_addr;
  HostPort addr = bound;
  if (addr.host == "0.0.0.0" || addr.host.empty()) addr.host = "127.0.0.1";
  if (addr.host == "::") addr.host = "::1";
  spdlog::warn(
      "cluster: FELIX_CLIENT_ADVERTISE_ADDR is not set: advertising {} to clients (set it when "
      "clients run on other machines)",
      addr.ToString());
  return addr.ToString();
}

}  // namespace

Result<std::unique_ptr<ClusterServices>> ClusterServices::Create(const BrokerConfig& config,
                                                                 MetricsRegistry& metrics,
                                                                 Callbacks callbacks) {
  auto keys = cluster::ClusterKeys::Create(config.cluster_name);
  if (!keys)
    return Fail(ErrorCode::kInvalidArgument, "FELIX_CLUSTER_NAME: " + keys.error().message);
  auto client = etcd::GrpcEtcdClient::Create(JoinEndpoints(config.etcd_endpoints));
  if (!client) {
    return Fail(ErrorCode::kInvalidArgument, "FELIX_ETCD_ENDPOINTS: " + client.error().message);
  }
  auto catalog = cluster::EtcdCatalog::Create(**client, *keys);
  if (!catalog) return tl::unexpected(catalog.error());
  return std::unique_ptr<ClusterServices>(new ClusterServices(config, metrics, std::move(callbacks),
                                                              std::move(*client), std::move(*keys),
                                                              std::move(*catalog)));
}

ClusterServices::ClusterServices(const BrokerConfig& config, MetricsRegistry& metrics,
                                 Callbacks callbacks, std::unique_ptr<etcd::EtcdClient> etcd,
                                 cluster::ClusterKeys keys,
                                 std::unique_ptr<cluster::EtcdCatalog> catalog)
    : config_(config),
      metrics_(metrics),
      callbacks_(std::move(callbacks)),
      etcd_(std::move(etcd)),
      keys_(std::move(keys)),
      catalog_(std::move(catalog)) {
  cluster::ClusterNodeOptions o{.keys = keys_};
  o.self.node_id = config_.node_id;
  o.self.internal_addr = config_.node_advertise_addr;
  o.self.zone = config_.node_zone;
  o.self.version = kVersion;
  o.lease = std::chrono::milliseconds(config_.node_lease_ms);
  o.metrics = &metrics_;
  o.extra_synced = [this] { return catalog_->synced(); };
  o.on_ready_change = callbacks_.on_ready_change;
  o.on_fatal = callbacks_.on_fatal;
  o.on_registered = [this](int64_t lease, int64_t ttl_ms, uint64_t incarnation) {
    lease_id_.store(lease);
    // Every broker makes sure the default tenant exists (create-if-absent: one wins).
    if (auto r = catalog_->EnsureDefaults(); !r) {
      spdlog::warn("cluster: default tenant/namespace: {} (retried at the next registration)",
                   r.error().message);
    }
    StartController(lease, ttl_ms, incarnation);
  };
  o.on_unregistered = [this] { StopController(); };
  // The mirrors feed the view only after Start(), by when replication_ is set.
  o.on_assignments_changed = [this] {
    if (replication_) replication_->OnAssignmentsChanged();
  };
  node_ = std::make_unique<cluster::ClusterNode>(*etcd_, std::move(o));
  cluster::ReplicationHostOptions ro;
  ro.own_node_id = config_.node_id;
  ro.internal_addr_of = [this](std::string_view node) { return InternalAddrOf(node); };
  ro.rebuild_max_concurrent = static_cast<uint32_t>(config_.replication_rebuild_max_concurrent);
  ro.rebuild_bytes_per_sec = config_.replication_rebuild_bytes_per_sec;
  ro.inline_apply_max_us = static_cast<uint32_t>(config_.follower_inline_apply_us);
  ro.retention_interval = std::chrono::seconds(config_.durable_retention_interval_seconds);
  replication_ = std::make_unique<cluster::ReplicationHost>(node_->view(), std::move(ro), metrics_);
}

void ClusterServices::SetReplicationHooks(broker::BrokerCoreOptions& core_options) {
  core_options.custody = &custody_;
  // The leader takes the assignment's generation and steps down when the view moves on.
  core_options.router = &router();
  core_options.node_id = config_.node_id;
  core_options.on_shard_store_opened = [host = replication_.get()](const broker::ShardId& id,
                                                                   storage::ShardStore& store) {
    host->OnStoreOpened(id, store);
  };
  core_options.on_shard_store_closing = [host = replication_.get()](const broker::ShardId& id) {
    host->OnStoreClosing(id);
  };
  core_options.gate_quorum_shard = [host = replication_.get()](
                                       const broker::ShardId& id,
                                       broker::BrokerCoreOptions::CommitAdvance advance) {
    return host->GateQuorumShard(id, std::move(advance));
  };
  core_options.fence_quorum_shard = [host = replication_.get()](const broker::ShardId& id,
                                                                storage::ShardStore& store) {
    return host->FenceQuorumShard(id, store);
  };
}

void ClusterServices::StartReplication(broker::BrokerCore& core,
                                       cluster::ReplicaTransport& transport) {
  replication_->Start(core, custody_, transport);
  // The leaders' replica reports, which failover promotes from (controller_pass.h).
  std::lock_guard lock(reports_mu_);
  reports_ = std::make_unique<cluster::ReportWriter>(cluster::ReportWriterOptions{
      .etcd = *etcd_,
      .keys = keys_,
      .node_id = config_.node_id,
      .collect = [host = replication_.get()] { return host->Reports(); },
      .metrics = &metrics_});
  reports_->Start();
}

void ClusterServices::StopReplication() {
  {
    std::lock_guard lock(reports_mu_);
    if (reports_) reports_->Stop();  // it reads the host
    reports_.reset();
  }
  replication_->Stop();
}

nlohmann::ordered_json ClusterServices::ReplicationStatus() const {
  return replication_->Status();
}

ClusterServices::~ClusterServices() {
  Stop();
}

catalog::Catalog& ClusterServices::catalog() {
  return *catalog_;
}

const broker::ShardRouter& ClusterServices::router() const {
  return node_->router();
}

std::optional<HostPort> ClusterServices::InternalAddrOf(std::string_view node_id) const {
  auto node = node_->view().FindNode(node_id);
  if (!node) return std::nullopt;
  auto addr = ParseHostPort(node->internal_addr);
  if (!addr) return std::nullopt;
  return *addr;
}

std::function<bool()> ClusterServices::LeaseCheck() const {
  return [this] { return node_->LeaseValidNow(); };
}

void ClusterServices::Start(const HostPort& client_addr) {
  node_->set_client_addr(DialableClientAddr(config_, client_addr));
  catalog_->Start();
  node_->Start();
}

void ClusterServices::Stop() {
  StopReplication();  // replicators and follower stores first: they read the view
  node_->Stop();      // stops the controller (on_unregistered) and leaves nodes/
  StopController();
  catalog_->Stop();  // no catalog listener (dropping deleted data) runs after this
}

bool ClusterServices::ready() const {
  return node_->ready();
}

void ClusterServices::StartController(int64_t lease, int64_t ttl_ms, uint64_t incarnation) {
  StopController();
  auto controller = std::make_unique<cluster::Controller>(cluster::ControllerOptions{
      .etcd = *etcd_,
      .keys = keys_,
      .me = cluster::ControllerRecord{config_.node_id, incarnation},
      .lease_id = lease,
      .lease_ttl = std::chrono::milliseconds(ttl_ms),
      .clock = clock_,
      .metrics = &metrics_,
      .lease_valid = [this] { return node_->lease_valid(); },
      .restore_after = std::chrono::milliseconds(config_.shard_restore_after_ms),
  });
  controller->Start();
  std::lock_guard lock(controller_mu_);
  controller_ = std::move(controller);
}

void ClusterServices::StopController() {
  std::unique_ptr<cluster::Controller> controller;
  {
    std::lock_guard lock(controller_mu_);
    controller = std::move(controller_);
  }
  if (controller != nullptr) controller->Stop();
}

Result<nlohmann::ordered_json> ClusterServices::RequestMove(const nlohmann::ordered_json& body) {
  using Json = nlohmann::ordered_json;
  auto text = [&](const char* field, const char* fallback) -> Result<std::string> {
    if (!body.contains(field)) {
      if (fallback != nullptr) return std::string(fallback);
      return Fail(ErrorCode::kInvalidArgument, std::string("\"") + field + "\" is required");
    }
    if (!body[field].is_string() || body[field].get<std::string>().empty())
      return Fail(ErrorCode::kInvalidArgument, std::string("\"") + field + "\" must be a name");
    return body[field].get<std::string>();
  };
  auto kind = text("kind", "stream");
  auto tenant = text("tenant", "default");
  auto ns = text("namespace", "default");
  auto name = text("name", nullptr);
  auto to = text("to", nullptr);
  for (const auto* r : {&kind, &tenant, &ns, &name, &to}) {
    if (!*r) return tl::unexpected(r->error());
  }
  if (*kind != "stream" && *kind != "cache")
    return Fail(ErrorCode::kInvalidArgument, "\"kind\" must be stream or cache");
  uint64_t shard = 0;
  if (body.contains("shard")) {
    if (!body["shard"].is_number_unsigned() || body["shard"].get<uint64_t>() > UINT32_MAX)
      return Fail(ErrorCode::kInvalidArgument, "\"shard\" must be a shard number");
    shard = body["shard"].get<uint64_t>();
  }
  auto ref = cluster::ParseShardPath(*kind + "/" + *tenant + "/" + *ns + "/" + *name + "/" +
                                     std::to_string(shard));
  if (!ref) return Fail(ErrorCode::kInvalidArgument, ref.error().message);
  auto assignment = node_->view().FindAssignment(*ref);
  if (!assignment) return Fail(ErrorCode::kNotFound, "no assignment for " + ref->Path());
  if (!node_->view().FindNode(*to))
    return Fail(ErrorCode::kInvalidArgument, "node " + *to + " is not registered");
  Json answer{{"shard", ref->Path()},
              {"from", assignment->leader},
              {"to", *to},
              {"generation", assignment->generation}};
  if (assignment->leader == *to && assignment->state == cluster::AssignmentState::kActive) {
    answer["status"] = "already_leader";
    return answer;
  }
  const bool replica = std::find(assignment->replicas.begin(), assignment->replicas.end(), *to) !=
                       assignment->replicas.end();
  if (assignment->state != cluster::AssignmentState::kActive || assignment->joining) {
    return Fail(ErrorCode::kAlreadyExists,
                ref->Path() + " is " + StateName(assignment->state) +
                    (assignment->joining ? " (a replica is being restored)" : "") +
                    ": a move can start once it is active");
  }
  if (auto put = etcd_->Put(keys_.Move(*ref), cluster::EncodeMoveRequest({*to})); !put) {
    return Fail(ErrorCode::kUnavailable, "etcd: " + put.error().message);
  }
  spdlog::info("cluster: move of {} to {} requested{}", ref->Path(), *to,
               replica ? "" : " (not a replica yet: copied in first)");
  answer["status"] = "requested";
  answer["copy_first"] = !replica;
  return answer;
}

bool ClusterServices::BeginHandoff() {
  if (LedReplicatedShards() == 0) return false;
  const int64_t lease = lease_id_.load();
  if (lease == 0) return false;
  if (auto put = etcd_->Put(keys_.Drain(config_.node_id), "{}", lease); !put) {
    spdlog::warn("cluster: cannot ask for the shutdown handoff (drains/{}): {}", config_.node_id,
                 put.error().message);
    return false;
  }
  return true;
}

size_t ClusterServices::LedReplicatedShards() const {
  size_t led = 0;
  const auto& view = node_->view();
  for (const auto& [shard, a] : view.Assignments()) {
    if (a.leader != config_.node_id || a.state == cluster::AssignmentState::kUnavailable) continue;
    // Only a shard another registered replica could take over waits for the handoff (the last
    // broker of a set standing has nobody to hand over to).
    const bool successor = std::any_of(a.replicas.begin(), a.replicas.end(), [&](const auto& r) {
      return r != config_.node_id && view.FindNode(r).has_value();
    });
    if (successor) ++led;
  }
  return led;
}

nlohmann::ordered_json ClusterServices::Status() const {
  using Json = nlohmann::ordered_json;
  Json out;
  out["cluster"] = config_.cluster_name;
  out["node_id"] = config_.node_id;
  out["ready"] = ready();
  auto controller = cluster::ReadController(*etcd_, keys_);
  if (!controller) {
    out["controller"] = nullptr;
    out["controller_error"] = controller.error().message;
  } else if (!controller->has_value()) {
    out["controller"] = nullptr;
  } else {
    out["controller"] = Json{{"node_id", (*controller)->record.node_id},
                             {"incarnation", (*controller)->record.incarnation}};
  }
  Json nodes = Json::array();
  Json shards = Json::array();
  {
    for (const auto& n : node_->view().Nodes()) {
      nodes.push_back(Json{{"node_id", n.node_id},
                           {"incarnation", n.incarnation},
                           {"internal_addr", n.internal_addr},
                           {"client_addr", n.client_addr},
                           {"zone", n.zone},
                           {"version", n.version}});
    }
    for (const auto& [shard, a] : node_->view().Assignments()) {
      Json entry{{"kind", cluster::ShardKindName(shard.kind)},
                 {"tenant", shard.tenant},
                 {"namespace", shard.ns},
                 {"name", shard.name},
                 {"shard", shard.shard},
                 {"leader", a.leader},
                 {"replicas", a.replicas},
                 {"generation", a.generation},
                 {"state", StateName(a.state)}};
      if (a.joining) entry["joining"] = *a.joining;     // a replica being restored
      if (a.move) entry["moving_to"] = a.move->target;  // a planned move, fenced
      shards.push_back(std::move(entry));
    }
  }
  out["nodes"] = std::move(nodes);
  out["shards"] = std::move(shards);
  return out;
}

}  // namespace felix::server
