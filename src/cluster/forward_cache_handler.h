// ForwardCacheHandler: the owner's side of a forwarded cache or counter operation
// (internal-protocol.md "Forwarded cache operation", "Authorization across a forward", "Chains
// are refused, not relayed"; bodies in internal-protocol-bodies.md §6.3, §6.9, §6.10, §6.15).
// Registered on the daemon's PeerServer for kind 23 AuthorizedForwardCacheOp, kind 34
// ConditionalForwardCacheOp and the legacy kind 11.
//
// For each request, before anything is applied (Decide):
//   1. the legacy kind 11 carries no credential, and kind 34 may carry an empty one (which
//      means "no auth": this broker always authenticates clients): Unauthorized, as the
//      publish handler refuses kind 1;
//   2. the key is routed through the broker's own ShardResolver exactly as a direct request
//      (the frozen hash over the cache's shard count): refusals as cluster/forward_owner.h
//      RefusalOf; and the shard the forward names must be the one the key routes to —
//      Malformed "wrong shard" otherwise (the owner would apply it to a log the key is not in);
//   3. the generation rule (forward_owner.h GenerationRefusal) — a non-owner answers NotLeader
//      and never relays;
//   4. the client's token is verified as a direct `auth` is and must allow the operation on
//      that key exactly as a direct request does (broker::CacheAuthorizationRefusal):
//      cache.read for Get and CounterGet, cache.write for the rest — Unauthorized otherwise;
//   5. the operation must make sense: CounterAdd carries exactly 8 bytes; a kind 34 condition
//      is "none" on a Get (a versioned get) or absent/version on a Put or Delete — Malformed
//      otherwise.
// Then the operation runs on the shard's executor through the same path a direct request
// takes (broker::RunCacheCommandWhenOpen) and is answered after it was applied: kind 12
// ForwardCacheOk (the value a Get found or a Delete removed, the sum of a counter as 8
// big-endian bytes, nothing for a Put), kind 35 for kind 34 (applied, version, value), or kind
// 13 ForwardCacheError: Unavailable (shard closing, a conditional write racing another write),
// Malformed (a counter on an in-memory cache), StorageFailed (the write failed).
//
// Threading: Decide and Handle run on the internal endpoint's loop thread; the operation runs
// on the shard's executor and the answer is posted back to the loop the request arrived on.
// The resolver, catalog and metrics registry must outlive the handler (and every pending op).
#pragma once

#include <variant>

#include "broker/cache_path.h"
#include "broker/shard_resolver.h"
#include "catalog/catalog.h"
#include "cluster/forward_owner.h"
#include "cluster/peer_server.h"
#include "common/metrics.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

class ForwardCacheHandler {
 public:
  using Options = ForwardOwnerOptions;
  ForwardCacheHandler(Options options, broker::ShardResolver& resolver,
                      const catalog::Catalog& catalog, MetricsRegistry& metrics);

  // What Decide lets through: the shard and the command to run on it.
  struct Proceed {
    broker::LocalCacheShard local;
    broker::CacheCommand command;
  };
  // Steps 1–5 above: the shard and command, or the answer (shaped for `kind`).
  std::variant<Proceed, ForwardAnswer> Decide(const wire::flxi::CacheOp& request,
                                              wire::flxi::Kind kind);

  // The PeerServer handler (kinds 11, 23 and 34).
  void Handle(const PeerRequest& request, PeerReply reply);
  Result<void> RegisterOn(PeerServer& server);

 private:
  std::variant<Proceed, ForwardAnswer> DecideUnshaped(const wire::flxi::CacheOp& request,
                                                      wire::flxi::Kind kind);

  const Options options_;
  broker::ShardResolver& resolver_;
  const catalog::Catalog& catalog_;
  // Tokens already verified (a cache: the decision methods are const).
  mutable catalog::VerifiedCredentials credentials_;
  MetricsRegistry& metrics_;
};

}  // namespace felix::cluster
