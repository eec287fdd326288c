// CacheForwarder: how a broker hands a cache or counter operation on a key another broker owns
// to that owner (internal-protocol.md "Forwarded cache operation"; semantics.md §10: "any
// broker forwards operations to the owner"). The broker core only names the interface; the
// cluster library implements it over FLXI (cluster/forward_publisher.h), and a broker without
// one (a single node, or the routing tests' static router) answers such a request `not_leader`.
//
// The outcome is the owner's and nothing else's: the value or sum from its ForwardCacheOk, a
// refusal mapped to the client error a client acts on, and a write whose answer was lost after
// sending reported as `unacknowledged` (class outcome_unknown: the owner may have applied it) —
// never as success or failure, and never re-sent (re-sending a put restarts its TTL). A read
// whose answer was lost may be re-sent within the attempt budget; one that still has no answer
// is refused `shard_unavailable` (a read that cannot be routed is an error, never a miss).
//
// Threading: ForwardCache may be called from any thread; `done` runs exactly once, on a thread
// of the forwarder's (never inline).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "broker/cache_path.h"
#include "broker/shard_resolver.h"

namespace felix::broker {

struct ForwardCacheRequest {
  RemoteShard target;  // the shard the key routed to, its owner and generation
  std::string tenant, ns, cache;
  CacheCommand command;
  std::string credential;  // the client's own bearer token (empty: none)
};

struct ForwardCacheOutcome {
  bool ok = false;
  CacheCommandResult result;  // ok: what the owner answered
  // !ok: the FLX1 error code (wire/flx1/constants.h ProtocolErrorCode) and its message.
  uint16_t code = 0;
  std::string message;
};

class CacheForwarder {
 public:
  virtual ~CacheForwarder() = default;
  virtual void ForwardCache(ForwardCacheRequest request,
                            std::function<void(ForwardCacheOutcome)> done) = 0;
};

}  // namespace felix::broker
