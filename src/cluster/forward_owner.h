// What the owner's side of every forward shares (internal-protocol.md "Forwarded publish",
// "Forwarded cache operation", "Authorization across a forward", "Chains are refused, not
// relayed"): the answer it sends, the generation rule, the router's refusals in FLXI terms and
// the client's credential verified as a direct `auth` is. ForwardPublishHandler and
// ForwardCacheHandler decide through these and differ only in what they check and run.
//
// Threading: pure functions (any thread); the catalog must be thread-safe (it is).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "auth/token.h"
#include "broker/shard_resolver.h"
#include "catalog/catalog.h"
#include "catalog/verified_credentials.h"
#include "cluster/peer_server.h"
#include "common/metrics.h"
#include "common/result.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// An answer that owns its strings (a wire::flxi::Frame holds views). A refusal is answered in
// the shape of the request that caused it: `shape` picks the kinds (publish: 2/3; cache:
// 12/13; conditional cache: 35/13; NotLeader 4 for all).
struct ForwardAnswer {
  enum class Type : uint8_t { kOk, kError, kNotLeader };
  enum class Shape : uint8_t { kPublish, kCache, kConditionalCache };
  Type type = Type::kError;
  Shape shape = Shape::kPublish;
  uint64_t first_offset = 1, last_offset = 0;                      // kOk, publish
  std::optional<std::string> value;                                // kOk, cache
  bool applied = true;                                             // kOk, conditional cache
  std::optional<uint64_t> version;                                 // kOk, conditional cache
  wire::flxi::ErrorCode code = wire::flxi::ErrorCode::kMalformed;  // kError
  std::string detail;                                              // kError
  std::string node_id, advertise_addr;                             // kNotLeader
  uint64_t generation = 0;                                         // kNotLeader

  static ForwardAnswer Error(wire::flxi::ErrorCode code, std::string detail);
  static ForwardAnswer NotLeader(std::string node_id, std::string addr, uint64_t generation);
  // The frame to send; its strings are views into this answer.
  wire::flxi::Frame ToFrame(uint64_t correlation_id) const;
  // Metrics label: ok, not_leader, or the error code's snake_case name.
  std::string Outcome() const;
};

struct ForwardOwnerOptions {
  std::string own_node_id;
  std::string own_internal_addr;  // what NotLeader names when this node still owns the shard
  // The internal address nodes/ advertises for a node ("" when unknown).
  std::function<std::string(std::string_view node_id)> internal_addr_of;
};

// The router's refusals, in FLXI terms: an unknown stream/cache → Unavailable (not synced
// yet); a shard out of range → Malformed "wrong shard"; unavailable → Unavailable; anything
// else refused opening the shard's logs → StorageFailed.
ForwardAnswer RefusalOf(const Error& error);

// The generation rule against the route this broker resolved (`remote` set: another broker
// owns it; else this one does, at `route_generation`) and the generation the requester named:
//   Local,  r == g → nullopt (proceed);   Local,  r < g → NotLeader(this node, its address, g);
//   any,    r > g  → StaleRoute (this broker's view lags; it must not write);
//   Remote, r <= g → NotLeader(the owner, its internal address, g) — never relayed.
std::optional<ForwardAnswer> GenerationRefusal(const ForwardOwnerOptions& options,
                                               const broker::RemoteShard* remote,
                                               uint64_t route_generation, uint64_t requested);

// The client's token verified as a direct `auth` is (catalog::VerifyClientToken, the tenant the
// shard names; a token `verified` already holds answers without the crypto): its context, or
// the Unauthorized answer (missing or not verifying).
std::variant<auth::AuthContext, ForwardAnswer> VerifyForwardCredential(
    const catalog::Catalog& catalog, catalog::VerifiedCredentials& verified,
    std::string_view tenant, std::optional<std::string_view> credential);

// felix_forward_received_total{kind, outcome}: one forwarded request answered as owner.
void CountReceived(MetricsRegistry& metrics, wire::flxi::Kind kind, const ForwardAnswer& answer);

// A refusal decided before anything ran: logged (debug) with what it names, counted, sent.
void RefuseNow(MetricsRegistry& metrics, wire::flxi::Kind kind, const wire::flxi::ShardRef& shard,
               std::string_view peer, const ForwardAnswer& answer, const PeerReply& reply,
               uint64_t correlation_id);

}  // namespace felix::cluster
