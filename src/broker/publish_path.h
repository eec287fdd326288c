// What a direct publish (ClientSession) and a forwarded one (cluster::ForwardPublishHandler,
// internal-protocol.md "Authorization across a forward") share, so that the owner of a shard
// checks and writes a forwarded batch exactly as it would the same batch from a client:
//   - AuthorizationRefusal: the permission check of a request against an auth context (the
//     token's tenant, then its permissions for the action on the stream);
//   - PublishWhenOpen: the append of a batch to a stream shard once its logs are open, through
//     the shard's own publish path (LogAppender, fanout), answered after the write.
//
// Threading: AuthorizationRefusal is pure (any thread); PublishWhenOpen runs on the shard's
// executor, and `done` runs there too.
#pragma once

#include <cstdint>
#include <string_view>

#include "auth/permissions.h"
#include "auth/token.h"
#include "broker/broker_core.h"
#include "broker/stream_shard.h"

namespace felix::broker {

// Append time for published records: storage keeps milliseconds, so live events and replayed
// ones carry the same value.
uint64_t NowMicrosRoundedToMillis();

// nullptr when `auth` may do `action` on (tenant, ns, stream); otherwise why not:
// "tenant mismatch" (the request names another tenant than the token's) or "forbidden".
const char* AuthorizationRefusal(const auth::AuthContext& auth, auth::Action action,
                                 std::string_view tenant, std::string_view ns,
                                 std::string_view stream);

// Appends `batch` to the shard of `cell` once it is open; `done` gets the batch's first offset
// (after the write) or the error that refused the open or the write. On the shard's executor.
void PublishWhenOpen(ShardCell<OpenedStream>& cell, PayloadBatch batch,
                     StreamShard::PublishDone done);

}  // namespace felix::broker
