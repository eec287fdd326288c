#include "broker/shard_resolver.h"

#include "wire/shard_hash.h"

namespace felix::broker {

uint32_t StreamShardForKey(const catalog::Stream& stream, std::optional<std::string_view> key) {
  return stream.routing == catalog::Routing::kJumpHash ? wire::ShardJump(stream.shards, key)
                                                       : wire::ShardModulo(stream.shards, key);
}

uint32_t CacheShardForKey(const catalog::Cache& cache, std::string_view key) {
  return wire::ShardModulo(cache.shards, key);
}

namespace {

Error OutOfRange(const char* what, uint32_t shard, uint32_t shards) {
  return Error{ErrorCode::kInvalidArgument, "shard " + std::to_string(shard) +
                                                " out of range: " + what + " has " +
                                                std::to_string(shards) + " shards"};
}

RemoteShard ToRemote(const Route& route, uint32_t shard) {
  return RemoteShard{shard, route.generation, route.owner_node_id, route.owner_client_addr};
}

Error Unavailable(const Route& route, const ShardId& id) {
  return Error{ErrorCode::kUnavailable,
               "shard " + id.ToString() + " unavailable: " + route.unavailable_reason};
}

}  // namespace

Resolution<LocalStreamShard> ShardResolver::RouteStream(
    std::shared_ptr<const catalog::Stream> stream, uint32_t shard) {
  if (shard >= stream->shards) return OutOfRange("stream", shard, stream->shards);
  const ShardId id{stream->tenant_id, stream->namespace_name, stream->name, ShardKind::kStream,
                   shard};
  Route route = router_.RouteShard(id);
  if (route.is_remote()) return ToRemote(route, shard);
  if (!route.is_local()) return Unavailable(route, id);
  auto handle = core_.OpenStreamShard(*stream, id);
  if (!handle) return handle.error();
  return LocalStreamShard{std::move(*handle), std::move(stream), shard, route.generation};
}

Resolution<LocalStreamShard> ShardResolver::ResolvePublish(std::string_view tenant,
                                                           std::string_view ns,
                                                           std::string_view stream,
                                                           std::optional<std::string_view> key) {
  auto found = core_.StreamNow(tenant, ns, stream);
  if (!found) return Error{ErrorCode::kNotFound, "stream not found"};
  uint32_t shard = StreamShardForKey(*found, key);
  return RouteStream(std::move(found), shard);
}

Resolution<LocalStreamShard> ShardResolver::ResolveStreamShard(std::string_view tenant,
                                                               std::string_view ns,
                                                               std::string_view stream,
                                                               uint32_t shard) {
  auto found = core_.StreamNow(tenant, ns, stream);
  if (!found) return Error{ErrorCode::kNotFound, "stream not found"};
  return RouteStream(std::move(found), shard);
}

Resolution<LocalCacheShard> ShardResolver::ResolveCacheKey(std::string_view tenant,
                                                           std::string_view ns,
                                                           std::string_view cache,
                                                           std::string_view key) {
  auto found = core_.FindCache(tenant, ns, cache);
  if (!found) {
    return Error{ErrorCode::kNotFound, "cache scope not found: " + std::string(tenant) + "/" +
                                           std::string(ns) + "/" + std::string(cache)};
  }
  uint32_t shard = CacheShardForKey(*found, key);
  return RouteCache(std::move(*found), shard);
}

Resolution<LocalCacheShard> ShardResolver::ResolveCacheShard(std::string_view tenant,
                                                             std::string_view ns,
                                                             std::string_view cache,
                                                             uint32_t shard) {
  auto found = core_.FindCache(tenant, ns, cache);
  if (!found) {
    return Error{ErrorCode::kNotFound, "cache scope not found: " + std::string(tenant) + "/" +
                                           std::string(ns) + "/" + std::string(cache)};
  }
  return RouteCache(std::move(*found), shard);
}

Resolution<LocalCacheShard> ShardResolver::RouteCache(catalog::Cache cache, uint32_t shard) {
  ShardId id{cache.tenant_id, cache.namespace_name, cache.name, ShardKind::kCache, shard};
  Route route = router_.RouteShard(id);
  if (route.is_remote()) return ToRemote(route, shard);
  if (!route.is_local()) return Unavailable(route, id);
  auto handle = core_.OpenCacheShard(cache, shard);
  if (!handle) return handle.error();
  return LocalCacheShard{std::move(*handle), std::move(cache), shard, route.generation};
}

}  // namespace felix::broker
