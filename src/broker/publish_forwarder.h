// PublishForwarder: how a broker hands a publish for a shard another broker owns to that
// owner (internal-protocol.md "Forwarded publish"). The broker core only names the interface;
// the cluster library implements it over FLXI (cluster/forward_publisher.h), and a broker
// without one (a single node, or the routing tests' static router) answers such a publish
// `not_leader` instead.
//
// The outcome is the owner's and nothing else's ("Acknowledging a forwarded publish"): offsets
// only from its ForwardPublishOk, a refusal mapped to the client error a client acts on, and a
// forward whose answer was lost after sending reported as `unacknowledged` (class
// outcome_unknown: the owner may have written it) — never as success or failure.
//
// Threading: Forward may be called from any thread; `done` runs exactly once, on a thread of
// the forwarder's (never inline), unless `wait` is false, in which case it is not called at all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "broker/shard_resolver.h"

namespace felix::broker {

struct ForwardPublishRequest {
  RemoteShard target;  // the shard the key routed to, its owner and generation
  std::string tenant, ns, stream;
  std::shared_ptr<const void> owner;  // keeps `payloads` alive until `done`
  std::vector<std::span<const uint8_t>> payloads;
  std::string credential;  // the client's own bearer token (empty: none)
  bool wait = true;        // false: fire-and-forget, `done` is never called
};

struct ForwardPublishOutcome {
  bool ok = false;
  // ok: the inclusive range the owner wrote; nullopt when its stream has no log.
  std::optional<std::pair<uint64_t, uint64_t>> offsets;
  // ok: the broker that answered it (the shard's owner, after any redirect) and the
  // generation it was sent at — what the owner hint (flag 0x0080) names.
  std::string owner_node_id;
  uint64_t owner_generation = 0;
  // !ok: the FLX1 error code (wire/flx1/constants.h ProtocolErrorCode) and its message.
  uint16_t code = 0;
  std::string message;
};

class PublishForwarder {
 public:
  virtual ~PublishForwarder() = default;
  virtual void Forward(ForwardPublishRequest request,
                       std::function<void(ForwardPublishOutcome)> done) = 0;
};

}  // namespace felix::broker
