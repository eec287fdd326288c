// Token verification against the catalog: what the broker calls for an `auth` message.
//
//   auto ctx = felix::catalog::VerifyClientToken(catalog, tenant_id, token,
//                                               felix::auth::NowUnixSeconds());
//   if (!ctx) → answer error kAuthFailedCode ("unauthenticated") / kAuthFailedMessage;
//   else keep *ctx (tenant, subject, compiled permissions, raw token) on the stream and check
//   every request with ctx->permissions.AllowsStream(Action::kStreamPublish, t, ns, s) etc.
//
// Cost: one snapshot pointer copy (a mutex), the tenant's keys copied (1–2 small structs), one
// JSON parse and usually one Ed25519 verification (~50 µs); the permission checks afterwards
// do not allocate.
#pragma once

#include <cstdint>
#include <string_view>

#include "auth/token.h"
#include "catalog/catalog.h"

namespace felix::catalog {

// An unknown tenant fails (kNoVerificationKey) without further work (auth.md §4).
auth::AuthResult<auth::AuthContext> VerifyClientToken(
    const Catalog& catalog, std::string_view tenant_id, std::string_view token,
    int64_t now_unix_seconds, std::string_view audience = auth::kBrokerAudience);

}  // namespace felix::catalog
