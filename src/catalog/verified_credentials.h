// VerifiedCredentials: client tokens this broker already verified.
//
// A client authenticates every stream it opens (`auth`), and every forward carries the client's
// token, which the owner checks as a direct `auth` would (kinds 22/23: the owner's check is what
// must hold). Verifying is a JSON parse and an Ed25519 signature check: per request for a
// forward (30 % of an owner's CPU per forwarded publish, docs/benchmarks.md), and per request
// too for the client calls that open a stream each (consumer-group polls and acks: 26 % of the
// broker's CPU in libsodium while one consumer drained a queue, docs/performance.md). This
// table lets a token verified once answer again without the crypto, and only while both hold:
//   - the clock is before the token's `exp` (no leeway: the leeway window re-verifies), and
//   - the tenant's verifying keys are exactly those it was verified with (a key added, removed
//     or rotated, or the tenant deleted, re-verifies, and a removed key refuses).
// Refusals are never remembered. Bounded: at most `capacity` tokens; a full table is emptied.
//
// Threading: any thread (one mutex); the verification itself runs outside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/catalog.h"
#include "common/mutex.h"

namespace felix::catalog {

class VerifiedCredentials {
 public:
  explicit VerifiedCredentials(size_t capacity = 4096) : capacity_(capacity) {}

  // As catalog::VerifyClientToken(catalog, tenant, token, now), from the table when it may be.
  // The context is shared with the table: every stream of a client holds the same one, so
  // authenticating a stream copies none of its strings and permissions.
  auth::AuthResult<std::shared_ptr<const auth::AuthContext>> Verify(const catalog::Catalog& catalog,
                                                                    std::string_view tenant,
                                                                    std::string_view token,
                                                                    int64_t now_unix_seconds);

  // Verifications done (misses) and answers from the table (hits), for tests and metrics.
  uint64_t verified() const;
  uint64_t reused() const;

 private:
  struct Entry {
    std::shared_ptr<const auth::AuthContext> context;
    std::vector<auth::VerifyingKey> keys;  // the tenant's keys it was verified with
  };

  const size_t capacity_;
  mutable Mutex mu_;
  // Key: tenant, NUL, token.
  std::unordered_map<std::string, Entry> entries_ GUARDED_BY(mu_);
  uint64_t verified_ GUARDED_BY(mu_) = 0;
  uint64_t reused_ GUARDED_BY(mu_) = 0;
};

}  // namespace felix::catalog
