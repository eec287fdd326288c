// ForwardPublishHandler: the owner's side of a forwarded publish (internal-protocol.md
// "Forwarded publish", "Authorization across a forward", "Chains are refused, not relayed";
// bodies in internal-protocol-bodies.md §6.1–6.4). Registered on the daemon's PeerServer for
// kind 22 AuthorizedForwardPublish and the legacy kind 1.
//
// For each request, before anything is written (Decide):
//   1. the legacy kind 1 carries no credential: Unauthorized;
// (Steps 2–4 are the shared owner rules of cluster/forward_owner.h.)
//   2. the named shard is routed through the broker's own ShardResolver (the router the client
//      path asks): a stream this broker does not know (yet) → Unavailable; a shard outside the
//      stream → Malformed; unavailable here → Unavailable; the router's error opening the
//      shard's logs → StorageFailed;
//   3. the generation rule, against the route's generation g and the request's r:
//        Local,  r == g → proceed;   Local,  r < g → NotLeader(this node, its address, g);
//        any,    r > g  → StaleRoute (this broker's view lags; it must not write);
//        Remote, r <= g → NotLeader(the owner, its internal address, g) — never relayed;
//   4. the client's token is verified as a direct `auth` is (catalog::VerifyClientToken, the
//      tenant the shard names) and must allow stream.publish on that stream exactly as a
//      direct publish does (broker::AuthorizationRefusal): Unauthorized otherwise;
//   5. an empty batch → Malformed.
// Then the batch (copied out of the frame once) is appended through the shard's executor
// exactly as a direct publish (broker::PublishWhenOpen: LogAppender, fanout), and answered
// after the write: ForwardPublishOk(first, last), or first=1,last=0 for a stream without a log;
// a failed write → StorageFailed (or Unavailable when the failure is one the client path calls
// retryable) — WrittenAnswer. A `Quorum` shard's batch waits at the owner's commit gate like a
// direct publish (broker/commit_gate.h); one not confirmed by a majority in time (or still
// waiting when the shard closed) may still be applied, so it is answered StorageFailed, which
// the ingress never retries and reports `storage` (outcome_unknown) — FLXI has no quorum code,
// and Unavailable would tell the ingress nothing was written.
//
// What the owner cannot check: the body carries payloads, not keys, so it cannot recompute
// key → shard. The named shard is the one the ingress resolved (ForwardPublisher sends
// exactly RemoteShard::shard); here it must be in range and owned at that generation.
//
// Threading: Decide and Handle run on the internal endpoint's loop thread; the append runs on
// the shard's executor and the answer is posted back to the loop the request arrived on. The
// resolver, catalog and metrics registry must outlive the handler (and every pending append).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>

#include "broker/shard_resolver.h"
#include "catalog/catalog.h"
#include "cluster/forward_owner.h"
#include "cluster/peer_server.h"
#include "common/metrics.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// The answer to a forwarded publish once the owner's write settled (the rule above).
ForwardAnswer WrittenAnswer(const Result<Offset>& written, uint64_t count, bool durable);

class ForwardPublishHandler {
 public:
  using Options = ForwardOwnerOptions;
  ForwardPublishHandler(Options options, broker::ShardResolver& resolver,
                        const catalog::Catalog& catalog, MetricsRegistry& metrics);

  // Steps 1–5 above: the shard to append to, or the answer.
  std::variant<broker::LocalStreamShard, ForwardAnswer> Decide(
      const wire::flxi::ForwardPublish& request, wire::flxi::Kind kind);

  // The PeerServer handler (kinds 1 and 22).
  void Handle(const PeerRequest& request, PeerReply reply);
  Result<void> RegisterOn(PeerServer& server);

 private:
  const Options options_;
  broker::ShardResolver& resolver_;
  const catalog::Catalog& catalog_;
  // Tokens already verified (a cache: the decision methods are const).
  mutable catalog::VerifiedCredentials credentials_;
  MetricsRegistry& metrics_;
};

}  // namespace felix::cluster
