// What a direct cache request (ClientSession) and a forwarded one (cluster::ForwardCacheHandler,
// internal-protocol.md "Forwarded cache operation") share, so that the owner of a cache shard
// checks and applies a forwarded operation exactly as it would the same request from a client:
//   - CacheCommand: one put / get / delete / counter add / counter get, as both paths carry it;
//   - CacheActionOf: the permission each needs (get and counter get: cache.read, the rest
//     cache.write — client-protocol.md §6.5, auth.md §6.3);
//   - CacheAuthorizationRefusal: the permission check of a request against an auth context (the
//     token's tenant, then the cache-key rule for the action on that key);
//   - RunCacheCommandWhenOpen: the command applied to the shard once its logs are open, through
//     CacheShard's own pipeline (a write is answered after it committed).
//
// Threading: CacheActionOf and CacheAuthorizationRefusal are pure (any thread);
// RunCacheCommandWhenOpen runs on the shard's executor, and `done` runs there too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "auth/permissions.h"
#include "auth/token.h"
#include "broker/broker_core.h"
#include "broker/cache_shard.h"

namespace felix::broker {

// A conditional write's condition (semantics.md §10 "Versions"): no live entry, or the live
// entry at exactly `version`.
struct CacheCondition {
  enum class Type : uint8_t { kAbsent, kVersion };
  Type type = Type::kAbsent;
  uint64_t version = 0;
};

struct CacheCommand {
  enum class Op : uint8_t { kPut, kGet, kDelete, kCounterAdd, kCounterGet };
  Op op = Op::kGet;
  std::string key{};
  std::string value{};               // kPut
  std::optional<uint64_t> ttl_ms{};  // kPut: nullopt = the cache's default TTL (if any)
  int64_t delta = 0;                 // kCounterAdd
  // kPut / kDelete: written only if the condition holds when the shard decides. Writes to the
  // key still in flight are awaited first, so that two racing conditional writes cannot both
  // see the same state.
  std::optional<CacheCondition> condition{};
  bool want_version = false;  // kGet: report the value's version

  bool is_write() const { return op != Op::kGet && op != Op::kCounterGet; }
  bool is_counter() const { return op == Op::kCounterAdd || op == Op::kCounterGet; }
};

// What a command answers: nothing for a put; the value read or removed (nullopt = miss) for a
// get or delete; the sum (nullopt = never written; an add always has one) for the counters.
// Conditional writes and versioned gets: whether the write applied (a get always "applies"),
// and the version written by an applied put, the value's version for a get, otherwise the
// key's current version (nullopt: no live entry).
struct CacheCommandResult {
  std::optional<std::string> value{};
  std::optional<int64_t> sum{};
  bool applied = true;
  std::optional<uint64_t> version{};
};

auth::Action CacheActionOf(CacheCommand::Op op);

// nullptr when `auth` may do `action` on `key` of (tenant, ns, cache); otherwise why not:
// "tenant mismatch" (the request names another tenant than the token's) or "forbidden".
const char* CacheAuthorizationRefusal(const auth::AuthContext& auth, auth::Action action,
                                      std::string_view tenant, std::string_view ns,
                                      std::string_view cache, std::string_view key);

using CacheCommandDone = std::function<void(Result<CacheCommandResult>)>;

// Applies `command` to `shard` (on its executor). kInvalidArgument for a counter on an
// in-memory cache or a condition on anything but a put or delete; the log's error when a
// write failed. A conditional write waits for writes to its key in flight.
void RunCacheCommand(CacheShard& shard, CacheCommand command, CacheCommandDone done);

// RunCacheCommand once the shard of `cell` is open (or the error that refused the open).
void RunCacheCommandWhenOpen(ShardCell<OpenedCache>& cell, CacheCommand command,
                             CacheCommandDone done);

}  // namespace felix::broker
