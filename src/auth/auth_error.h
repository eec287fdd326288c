// AuthError: why a Felix token was refused. Every refusal has its own kind (tests, logs and
// metrics key on it); towards a client every kind is answered the same way, as auth.md §5
// step 8 requires: error code `unauthenticated`, message "auth failed".
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace felix::auth {

enum class AuthErrorKind : uint8_t {
  kInvalidTenantId,       // tenant id empty, > 256 bytes, "." / "..", or with control chars
  kMalformedToken,        // not three base64url parts, bad JSON, a missing or mistyped claim
  kUnsupportedAlgorithm,  // header alg is not EdDSA (none, HS256, RS256, ...)
  kNoVerificationKey,     // the tenant has no usable key
  kBadSignature,          // no key verified the signature (wrong key, unknown kid, tampering)
  kWrongIssuer,           // iss != felix-auth
  kWrongAudience,         // aud != the expected audience
  kExpired,               // now > exp + leeway
  kNotYetValid,           // nbf present and now < nbf - leeway
  kTenantMismatch,        // tid != the tenant the client named
  kInvalidPermission,     // a perms entry without ':' or with an unknown action
  kInvalidKey,            // a key (JWK, seed) that is not a 32-byte Ed25519 key
};

const char* AuthErrorName(AuthErrorKind kind);

struct AuthError {
  AuthErrorKind kind = AuthErrorKind::kMalformedToken;
  std::string detail;  // for logs only; never sent to a client

  std::string ToString() const;
  bool operator==(const AuthError& other) const { return kind == other.kind; }
};

template <typename T>
using AuthResult = Result<T, AuthError>;

inline tl::unexpected<AuthError> AuthFail(AuthErrorKind kind, std::string detail) {
  return tl::unexpected<AuthError>(AuthError{kind, std::move(detail)});
}

// What the broker answers to a refused `auth` (client-protocol.md §6.1, §8.2): the same for
// every kind, so a client cannot probe which check failed.
inline constexpr const char* kAuthFailedCode = "unauthenticated";
inline constexpr uint16_t kAuthFailedCodeNumber = 1;
inline constexpr const char* kAuthFailedMessage = "auth failed";

}  // namespace felix::auth
