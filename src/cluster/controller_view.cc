#include "cluster/controller_view.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "catalog/model.h"

namespace felix::cluster {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "streams/<t>/<ns>/<name>" or "caches/<t>/<ns>/<name>" (the part after catalog/); nullopt for
// every other catalog key (tenants, namespaces, keys) and for malformed names. It names the
// same entity as the shard path "stream/<t>/<ns>/<name>/0", whose parser checks the segments.
std::optional<EntityRef> ParseCatalogEntity(std::string_view rest) {
  for (auto [plural, singular] :
       {std::pair{"streams/", "stream/"}, std::pair{"caches/", "cache/"}}) {
    if (!StartsWith(rest, plural)) continue;
    auto ref =
        ParseShardPath(singular + std::string(rest.substr(std::string_view(plural).size())) + "/0");
    if (!ref) return std::nullopt;
    return EntityOf(*ref);
  }
  return std::nullopt;
}

// The shape of a stream/cache from its catalog value; nullopt (logged) when it does not decode
// or names another entity than its key.
std::optional<CatalogShape> DecodeShape(const EntityRef& e, const std::string& key,
                                        const std::string& value) {
  if (value.size() > kMaxRecordBytes) {
    spdlog::warn("catalog value too large key={} bytes={}", key, value.size());
    return std::nullopt;
  }
  auto json = catalog::Json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    spdlog::warn("catalog value is not JSON key={}", key);
    return std::nullopt;
  }
  if (e.kind == ShardKind::kStream) {
    auto s = catalog::StreamFromJson(e.tenant, e.ns, json);
    if (s && s->name == e.name) return CatalogShape{s->shards, s->replication_factor};
    spdlog::warn("catalog stream does not decode key={}: {}", key,
                 s ? "name differs from the key" : s.error().ToString());
    return std::nullopt;
  }
  auto c = catalog::CacheFromJson(e.tenant, e.ns, json);
  if (c && c->name == e.name) return CatalogShape{c->shards, c->replication_factor};
  spdlog::warn("catalog cache does not decode key={}: {}", key,
               c ? "name differs from the key" : c.error().ToString());
  return std::nullopt;
}

}  // namespace

EntityRef EntityOf(const ShardRef& shard) {
  return EntityRef{shard.kind, shard.tenant, shard.ns, shard.name};
}

void ControllerView::Clear() {
  revision_ = 0;
  nodes_.clear();
  catalog_.clear();
  assignments_.clear();
  controller_.reset();
  reports_.clear();
  moves_.clear();
  drains_.clear();
}

std::set<std::string> ControllerView::RegisteredIds() const {
  std::set<std::string> ids;
  for (const auto& [id, record] : nodes_) ids.insert(id);
  return ids;
}

ControllerView::Area ControllerView::Put(const etcd::KeyValue& kv) {
  const std::string& key = kv.key;
  if (key == keys_.Controller()) {
    controller_ = kv;
    return Area::kController;
  }
  if (StartsWith(key, keys_.NodesPrefix())) {
    auto id = keys_.ParseNode(key);
    if (!id) return Area::kOther;
    auto record = DecodeNodeRecord(kv.value);
    if (!record)
      spdlog::warn("node record does not decode key={}: {}", key, record.error().ToString());
    nodes_[*id] = record ? std::optional<NodeRecord>(*record) : std::nullopt;
    return Area::kNodes;
  }
  if (StartsWith(key, keys_.CatalogPrefix())) {
    auto entity = ParseCatalogEntity(std::string_view(key).substr(keys_.CatalogPrefix().size()));
    if (!entity) return Area::kOther;
    catalog_[*entity] = DecodeShape(*entity, key, kv.value);
    return Area::kCatalog;
  }
  if (StartsWith(key, keys_.AssignPrefix())) {
    auto shard = keys_.ParseAssign(key);
    if (!shard) return Area::kOther;
    AssignmentSlot slot;
    slot.read.mod_revision = kv.mod_revision;
    auto value = DecodeAssignment(kv.value);
    if (value) {
      slot.read.value = std::move(*value);
    } else {
      slot.corrupt = true;
      spdlog::warn("assignment does not decode key={}: {}", key, value.error().ToString());
    }
    assignments_[*shard] = std::move(slot);
    return Area::kAssign;
  }
  if (StartsWith(key, keys_.MovesPrefix())) {
    auto shard = keys_.ParseMove(key);
    if (!shard) return Area::kOther;
    auto request = DecodeMoveRequest(kv.value);
    if (request) {
      moves_[*shard] = std::move(*request);
    } else {
      moves_.erase(*shard);
      spdlog::warn("move request does not decode key={}: {}", key, request.error().ToString());
    }
    return Area::kMoves;
  }
  if (StartsWith(key, keys_.DrainsPrefix())) {
    auto node = keys_.ParseDrain(key);
    if (!node) return Area::kOther;
    drains_.insert(*node);
    return Area::kMoves;
  }
  if (StartsWith(key, keys_.ReportsPrefix())) {
    auto shard = keys_.ParseReport(key);
    if (!shard) return Area::kOther;
    auto report = DecodeReport(kv.value);
    if (report) {
      reports_[*shard] = std::move(*report);
    } else {
      reports_.erase(*shard);
      spdlog::warn("report does not decode key={}: {}", key, report.error().ToString());
    }
    return Area::kReports;
  }
  return Area::kOther;
}

ControllerView::Area ControllerView::Delete(std::string_view key) {
  if (key == keys_.Controller()) {
    controller_.reset();
    return Area::kController;
  }
  if (StartsWith(key, keys_.NodesPrefix())) {
    auto id = keys_.ParseNode(key);
    if (!id) return Area::kOther;
    nodes_.erase(*id);
    return Area::kNodes;
  }
  if (StartsWith(key, keys_.CatalogPrefix())) {
    auto entity = ParseCatalogEntity(key.substr(keys_.CatalogPrefix().size()));
    if (!entity) return Area::kOther;
    catalog_.erase(*entity);
    return Area::kCatalog;
  }
  if (StartsWith(key, keys_.AssignPrefix())) {
    auto shard = keys_.ParseAssign(key);
    if (!shard) return Area::kOther;
    assignments_.erase(*shard);
    return Area::kAssign;
  }
  if (StartsWith(key, keys_.ReportsPrefix())) {
    auto shard = keys_.ParseReport(key);
    if (!shard) return Area::kOther;
    reports_.erase(*shard);
    return Area::kReports;
  }
  if (StartsWith(key, keys_.MovesPrefix())) {
    auto shard = keys_.ParseMove(key);
    if (!shard) return Area::kOther;
    moves_.erase(*shard);
    return Area::kMoves;
  }
  if (StartsWith(key, keys_.DrainsPrefix())) {
    auto node = keys_.ParseDrain(key);
    if (!node) return Area::kOther;
    drains_.erase(*node);
    return Area::kMoves;
  }
  return Area::kOther;
}

}  // namespace felix::cluster
