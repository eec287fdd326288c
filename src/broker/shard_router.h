// ShardRouter: answers, for one shard of a stream or cache, whether this broker serves it
// (Local) or which broker does (Remote), and at which generation.
//
// Every broker request that touches shard state asks the router first. On a single node the
// embedded router answers Local at generation 0 for every shard; the cluster milestone adds a
// router fed by etcd assignments that can answer Remote(owner, generation). Implementations
// are thread-safe: routing is read on every QUIC stream's thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/strong_types.h"

namespace felix::broker {

enum class ShardKind : uint8_t { kStream, kCache };

struct ShardId {
  std::string tenant;
  std::string name_space;  // "namespace" is a keyword
  std::string name;        // stream or cache name
  ShardKind kind = ShardKind::kStream;
  uint32_t shard = 0;

  bool operator==(const ShardId&) const = default;
  // "tenant/namespace/name#shard" (with "cache:" before caches), for logs and metrics-free ids.
  std::string ToString() const;
  // <0, 0, >0 as key.compare(ToString()) would be, without building the string.
  int CompareKey(std::string_view key) const;
};

// Orders ShardId::ToString() keys as std::less<std::string> does, and finds a ShardId among
// them without building its key (a lookup per request: docs/performance.md, change 35).
struct ShardKeyLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a < b; }
  bool operator()(std::string_view a, const ShardId& b) const { return b.CompareKey(a) < 0; }
  bool operator()(const ShardId& a, std::string_view b) const { return a.CompareKey(b) > 0; }
};

struct Route {
  // kUnavailable: nobody may serve the shard now (not assigned yet, held unplaced, or this
  // broker leads it but its node lease is not usable); `unavailable_reason` says which.
  enum class Where : uint8_t { kLocal, kRemote, kUnavailable };
  Where where = Where::kLocal;
  Generation generation;
  std::string owner_node_id;      // kRemote: the owner's node id
  std::string owner_client_addr;  // kRemote: its client-facing host:port, empty if unknown
  std::string unavailable_reason;

  bool is_local() const { return where == Where::kLocal; }
  bool is_remote() const { return where == Where::kRemote; }
};

// One broker a client may dial (FLX1 `topology_view`).
struct BrokerEndpoint {
  std::string node_id;
  std::string client_addr;
};

class ShardRouter {
 public:
  virtual ~ShardRouter() = default;
  virtual Route RouteShard(const ShardId& shard) const = 0;
  // Brokers able to serve with a client-facing address (cluster routers; empty on one node).
  virtual std::vector<BrokerEndpoint> Brokers() const { return {}; }
};

// The single-node router: this broker owns every shard at generation 0.
class SingleNodeRouter final : public ShardRouter {
 public:
  Route RouteShard(const ShardId&) const override { return Route{}; }
};

}  // namespace felix::broker
