// The FLX1 error codes (client-protocol §8.2) the broker answers with, and the mapping of its
// internal errors onto them, shared by every request handler of ClientSession.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "wire/flx1/constants.h"

namespace felix::broker {

inline uint16_t Code(wire::flx1::ProtocolErrorCode code) {
  return static_cast<uint16_t>(code);
}

// Storage failures → storage, unavailable → shard_unavailable, invalid argument →
// invalid_request, not found → not_found, timeout → quorum_timeout (the commit gate's),
// anything else → internal.
uint16_t ProtocolCodeFor(const Error& error);

}  // namespace felix::broker
