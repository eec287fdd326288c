// Maps what the broker and the transport report onto felix::ClientError (client-protocol §8):
// JSON `error` / `publish_error`, binary publish acknowledgements, cursor refusals and
// transport failures. Pure functions; any thread.
#pragma once

#include <string>

#include "common/result.h"
#include "felix/errors.h"
#include "wire/decode_error.h"
#include "wire/flx1/binary.h"
#include "wire/flx1/messages.h"

namespace felix::client_impl {

// A code/retry pair as strings (JSON) → ClientError. Absent code → kUnknown; absent retry →
// the code's default class (§8.2), or `fallback` when there is no code either.
ClientError FromWire(const std::optional<std::string>& code,
                     const std::optional<std::string>& retry,
                     const std::optional<wire::flx1::ErrorDetail>& detail, std::string message,
                     RetryClass fallback);
ClientError FromErrorMessage(const wire::flx1::Error& error, RetryClass fallback);
ClientError FromPublishError(const wire::flx1::PublishError& error);
// A failed binary acknowledgement (status error).
ClientError FromBinaryAck(const wire::flx1::BinaryPublishAck& ack);
ClientError FromCursorError(const wire::flx1::SubscribeCursorError& error);
ClientError FromNotLeader(const wire::flx1::NotLeader& not_leader);
// Transport failures: `what` says which operation ("dial", "publish", ...).
ClientError FromTransport(const Error& error, const std::string& what, RetryClass retry);
ClientError FromDecode(const wire::DecodeError& error, const std::string& where);

}  // namespace felix::client_impl
