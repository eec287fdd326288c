// ShardResolver: the one place that decides, for a client request, which shard it names and
// who serves that shard.
//
// Every client request path asks it — publish (keyed and unkeyed), subscribe, cache and
// counter operations, consumer groups — and gets one of the outcomes of cluster-etcd.md's
// routing contract:
//   - Local:   this broker serves the shard; the handle (opened on first use) and the
//              generation it serves at;
//   - Remote:  another broker serves it (owner node id, its client-facing address if known,
//              the assignment's generation); the caller forwards or redirects, never touches
//              local state for that shard;
//   - Refused: no such stream/cache (kNotFound), a shard out of range (kInvalidArgument), the
//              shard cannot be served here now (kUnavailable, or the storage error that refused
//              its logs at open).
// The key → shard mapping is the stream's routing (modulo or jump hash, semantics.md §4.2);
// caches always use modulo.
//
// Threading: thread-safe (the catalog snapshot, the router and the core are). The core and the
// router must outlive the resolver.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "broker/broker_core.h"
#include "broker/shard_router.h"
#include "catalog/model.h"
#include "common/result.h"

namespace felix::broker {

struct RemoteShard {
  uint32_t shard = 0;
  Generation generation;
  std::string owner_node_id;
  std::string owner_client_addr;  // empty if unknown (never the internal address)
};

struct LocalStreamShard {
  StreamShardHandle handle;
  // The catalog's stream as resolved (shared with its snapshot, never null): a request reads
  // its durability and consistency without copying the stream.
  std::shared_ptr<const catalog::Stream> stream;
  uint32_t shard = 0;
  Generation generation;
};

struct LocalCacheShard {
  CacheShardHandle handle;
  catalog::Cache cache;
  uint32_t shard = 0;
  Generation generation;
};

template <typename Local>
using Resolution = std::variant<Local, RemoteShard, Error>;

class ShardResolver {
 public:
  ShardResolver(BrokerCore& core, const ShardRouter& router) : core_(core), router_(router) {}

  // The shard `key` routes to (shard 0 without a key).
  Resolution<LocalStreamShard> ResolvePublish(std::string_view tenant, std::string_view ns,
                                              std::string_view stream,
                                              std::optional<std::string_view> key);
  // A shard named by the request (subscribe, consumer groups).
  Resolution<LocalStreamShard> ResolveStreamShard(std::string_view tenant, std::string_view ns,
                                                  std::string_view stream, uint32_t shard);
  // The cache shard `key` routes to.
  Resolution<LocalCacheShard> ResolveCacheKey(std::string_view tenant, std::string_view ns,
                                              std::string_view cache, std::string_view key);
  // A cache shard named by the request (prefix cache watches); the caller checked `shard`
  // against the cache's shard count.
  Resolution<LocalCacheShard> ResolveCacheShard(std::string_view tenant, std::string_view ns,
                                                std::string_view cache, uint32_t shard);

  // Who serves one shard (no shard is opened): shard_owners and topology answers.
  Route RouteOf(const ShardId& shard) const { return router_.RouteShard(shard); }
  const ShardRouter& router() const { return router_; }

  // Discovery, read from the catalog alone (no shard is opened).
  std::optional<catalog::Stream> FindStream(std::string_view tenant, std::string_view ns,
                                            std::string_view stream) const {
    return core_.FindStream(tenant, ns, stream);
  }
  std::optional<catalog::Cache> FindCache(std::string_view tenant, std::string_view ns,
                                          std::string_view cache) const {
    return core_.FindCache(tenant, ns, cache);
  }

 private:
  Resolution<LocalStreamShard> RouteStream(std::shared_ptr<const catalog::Stream> stream,
                                           uint32_t shard);
  Resolution<LocalCacheShard> RouteCache(catalog::Cache cache, uint32_t shard);

  BrokerCore& core_;
  const ShardRouter& router_;
};

// The shard a key routes to in `stream` (its routing mode), and in a cache (modulo).
uint32_t StreamShardForKey(const catalog::Stream& stream, std::optional<std::string_view> key);
uint32_t CacheShardForKey(const catalog::Cache& cache, std::string_view key);

}  // namespace felix::broker
