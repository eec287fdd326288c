// What the peer pool and the peer server share about FLXI on a connection: the application
// close codes, the handshake frames, refusals in the shape of the request that caused them,
// and putting the pool's correlation id into an encoded frame. Bodies are encoded and decoded
// by the wire library (wire/flxi/flxi.h); nothing here parses bytes itself.
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

// Application close codes on internal connections.
inline constexpr uint64_t kPeerCloseNormal = 0;        // idle, shutdown, refused Hello
inline constexpr uint64_t kPeerCloseProtocol = 1;      // bad magic/version/length, malformed Hello
inline constexpr uint64_t kPeerCloseUnauthorized = 3;  // Hello node id not in the certificate
inline constexpr uint64_t kPeerCloseWrongPeer = 4;     // HelloOk named another node

// The refusal kind a request kind is answered with (internal-protocol.md "A refusal is answered
// in the shape of the request that caused it"): ForwardCacheError (13) for the cache ops
// 11/23/34, ReplicateError (9) for the replication, fence and fetch kinds, ForwardPublishError
// (3) for everything else, including kinds this build does not know.
wire::flxi::Kind RefusalKind(uint16_t request_kind);

// The refusal frame for `request_kind`: `detail` is cut to MAX_IDENT_BYTES at a UTF-8 boundary
// so that it always encodes; ReplicateError carries expected_offset 0.
wire::flxi::Frame Refusal(uint16_t request_kind, uint64_t correlation_id,
                          wire::flxi::ErrorCode code, std::string_view detail);

// The capability bits a peer must have offered before `frame` may be sent to it
// (internal-protocol-bodies.md §4 and §8 "Gates"): Fence → FENCE, ReplicateFetch → TAIL_FETCH,
// kinds 32/33 → GENERATION_LABELS, 36/37 → RECORD_TIMES, Ping → PING; a fence or fetch of the
// counter log, or labelled records of the cache or counter log, also need CACHE_FENCE. 0 for
// every other kind.
uint64_t RequiredCapabilities(const wire::flxi::Frame& frame);

// Encodes `frame` with its correlation id replaced by `correlation_id`. Fails only for a frame
// the codec refuses (over-limit fields, optional parts that do not match the kind).
Result<std::vector<uint8_t>> EncodeWithCorrelation(wire::flxi::Frame frame,
                                                   uint64_t correlation_id);

// A frame of a raw kind (possibly one this build does not know): header, then
// `correlation_id` (u64 BE), then `rest`. For tests and for kinds newer than the codec.
std::vector<uint8_t> RawFrame(uint16_t kind, uint64_t correlation_id,
                              std::span<const uint8_t> rest);

// Overwrites the correlation id of an encoded frame (bytes 12..20: every body begins with it).
// `frame` must be at least 20 bytes.
void SetCorrelationId(std::vector<uint8_t>& frame, uint64_t correlation_id);

// A refusal body (kinds 3, 9, 13) as "Name (code N): detail" for logs and error messages;
// nullopt when `body` is not a refusal of that kind.
std::optional<std::string> DescribeRefusal(uint16_t kind, std::span<const uint8_t> body);

// An error code as a metrics label: "StaleRoute" → "stale_route".
std::string ErrorCodeLabel(wire::flxi::ErrorCode code);

}  // namespace felix::cluster
