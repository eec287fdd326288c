// ForwardPublisher: the ingress side of a forwarded publish (broker::PublishForwarder over
// FLXI; internal-protocol.md "Forwarded publish", "Retrying a forwarded publish") and of a
// forwarded cache or counter operation (broker::CacheForwarder; "Forwarded cache operation").
// Both share one retry engine and one table; where they differ is said below.
//
// Sends AuthorizedForwardPublish (kind 22: the client's own token) naming the shard and the
// generation the ingress resolved, to the owner's internal address (nodes/ through
// `internal_addr_of`, or the address a NotLeader named), over the PeerPool, and maps the one
// outcome to what the client is told:
//
//   owner's answer / pool outcome        what happens                       client gets
//   ForwardPublishOk                     done                               ok (+ offsets*)
//   NotLeader(B, g)                      follow to B at g, unless (B, g)    (after the budget or
//                                        was already tried (a loop)          a loop:)
//                                        shard_unavailable
//   StaleRoute, Unavailable, Overload    retry the same owner with backoff  shard_unavailable /
//                                                                           overloaded
//   shed, backoff, connect failed,       (nothing was sent) retry with      shard_unavailable
//   owner address unknown                backoff
//   Unauthorized                         not retried                        forbidden
//   Malformed                            not retried                        invalid_request
//   StorageFailed                        not retried                        storage
//   UnsupportedKind (to kind 22)         the legacy kind 1 once             (its answer)
//   timeout, connection dropped, or an   not retried: the owner may have    unacknowledged
//   answer that does not decode          written it (indeterminate)         (outcome_unknown)
//
// * offsets only from an owner that offered FORWARD_OFFSETS and answered a non-empty range.
//
// A cache operation is sent as AuthorizedForwardCacheOp (kind 23; the legacy kind 11 once on
// UnsupportedKind) and answered from ForwardCacheOk (the value, or a counter's 8-byte sum).
// The one difference in the table is the lost answer (timeout, connection dropped): a write
// (put, delete, counter add) is `unacknowledged` as above — re-sending a put would restart its
// TTL — while a read (get, counter get) is re-sent within the budget, and refused
// `shard_unavailable` once the budget is spent (an unroutable read is an error, never a miss).
// A conditional write or a versioned get (a CacheCommand with a condition or want_version) is
// sent as ConditionalForwardCacheOp (kind 34) and answered from ConditionalForwardCacheOk
// (kind 35: applied, version, value); on UnsupportedKind a versioned get is re-sent as a plain
// get and a conditional write is refused `internal` (never sent unconditionally). A lost answer
// to a conditional write is `unacknowledged` like any write (never re-sent).
// Every send counts against `max_attempts`; a redirect to an untried broker is followed even
// at the same generation (a freshly formed cluster sits at one generation everywhere).
//
// Threading: Forward / ForwardCache from any thread; the first send happens on the caller's thread,
// every later step (answers, backoff timers) on the PeerPool endpoint's loop. `done` runs once, on
// either. The pool, the endpoint and the metrics registry must outlive the publisher and every
// forward in flight (stop the endpoint, or shut the pool down, first).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "broker/cache_forwarder.h"
#include "broker/publish_forwarder.h"
#include "cluster/peer_pool.h"
#include "common/metrics.h"
#include "common/net_address.h"
#include "transport/endpoint.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

struct ForwardPublisherOptions {
  int max_attempts = 5;  // sends per publish, redirects and retries included
  std::chrono::milliseconds backoff_base{20};
  std::chrono::milliseconds backoff_max{400};
  // The internal address nodes/ advertises for a node; nullopt when unknown.
  std::function<std::optional<HostPort>(std::string_view node_id)> internal_addr_of;
};

class ForwardPublisher final : public broker::PublishForwarder, public broker::CacheForwarder {
 public:
  ForwardPublisher(PeerPool& pool, transport::Endpoint& loop, ForwardPublisherOptions options,
                   MetricsRegistry& metrics);

  void Forward(broker::ForwardPublishRequest request,
               std::function<void(broker::ForwardPublishOutcome)> done) override;
  void ForwardCache(broker::ForwardCacheRequest request,
                    std::function<void(broker::ForwardCacheOutcome)> done) override;

  struct Attempt;

 private:
  void Send(const std::shared_ptr<Attempt>& attempt);
  static wire::flxi::Frame PublishFrame(const Attempt& attempt);
  // `counter_bytes` holds a counter delta's bytes while the frame is alive.
  static wire::flxi::Frame CacheFrame(const Attempt& attempt, std::string& counter_bytes);
  void OnCacheOk(const std::shared_ptr<Attempt>& attempt, const wire::flxi::ForwardCacheOk& ok);
  void OnAnswer(const std::shared_ptr<Attempt>& attempt, Result<PeerResponse, PeerError> answer);
  void RetryLater(const std::shared_ptr<Attempt>& attempt, std::string why);
  void Finish(const std::shared_ptr<Attempt>& attempt, broker::ForwardPublishOutcome outcome);
  void Count(const Attempt& attempt, std::string_view outcome);

  PeerPool& pool_;
  transport::Endpoint& loop_;
  const ForwardPublisherOptions options_;
  MetricsRegistry& metrics_;
};

}  // namespace felix::cluster
