// Felix tokens (auth.md §3, §5): compact JWS, header {"typ":"JWT","alg":"EdDSA","kid"},
// Ed25519 over `header_b64 "." payload_b64`, claims iss/aud/sub/tid/exp/iat/perms (+ jti,
// nbf, act). MintToken signs; ParseToken only decodes (the fuzz target); VerifyToken is what
// the broker runs for an `auth` message.
//
// All functions are pure (the clock is a parameter) and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "auth/auth_error.h"
#include "auth/keys.h"
#include "auth/permissions.h"

namespace felix::auth {

inline constexpr const char* kIssuer = "felix-auth";
inline constexpr const char* kBrokerAudience = "felix-broker";
inline constexpr const char* kControlPlaneAudience = "felix-controlplane";
inline constexpr int64_t kDefaultTokenTtlSeconds = 900;
inline constexpr int64_t kDefaultLeewaySeconds = 60;
// Longer tokens are refused as malformed before any decoding (the pre-auth frame limit is
// 64 KiB, so no legitimate token is longer).
inline constexpr size_t kMaxTokenBytes = 65536;

struct TokenClaims {
  std::string iss = kIssuer;
  std::string aud = kBrokerAudience;
  std::string sub;
  std::string tid;
  int64_t exp = 0;
  int64_t iat = 0;
  std::optional<int64_t> nbf;
  std::optional<std::string> jti;
  std::vector<std::string> perms;
  std::optional<std::string> act_sub;  // delegated token: `act: {"sub": …}`
};

struct TokenHeader {
  std::string alg;
  std::optional<std::string> kid;
  std::optional<std::string> typ;
};

// A decoded, not yet verified token.
struct ParsedToken {
  TokenHeader header;
  TokenClaims claims;
  std::string_view signing_input;  // header_b64 "." payload_b64, a view into the input
  std::vector<uint8_t> signature;
};

// Signs `claims` with `key` (header kid = key.kid()). Field order: iss, aud, sub, tid, exp,
// iat, [nbf], [jti], perms, [act].
std::string MintToken(const SigningKey& key, const TokenClaims& claims);

// Decodes the three parts and checks the claim types (required claims present, aud a string,
// exp/iat integers, perms an array of strings). kUnsupportedAlgorithm if alg != EdDSA.
// kMalformedToken for a token longer than kMaxTokenBytes.
// The returned signing_input views `token`, which must outlive it.
AuthResult<ParsedToken> ParseToken(std::string_view token);

struct VerifyOptions {
  int64_t now_unix_seconds = 0;
  std::string_view audience = kBrokerAudience;
  int64_t leeway_seconds = kDefaultLeewaySeconds;
};

// The broker's per-stream auth context (auth.md §5 step 9).
struct AuthContext {
  std::string tenant_id;
  std::string subject;
  std::optional<std::string> publisher_name;  // `sub` when ≤ 255 bytes
  std::optional<std::string> actor;           // act.sub of a delegated token
  int64_t expires_at = 0;
  PermissionSet permissions;
  std::string raw_token;  // kept to forward writes
};

// auth.md §2: non-empty, ≤ 256 bytes, not "." or "..", no control characters.
bool IsValidTenantIdShape(std::string_view tenant_id);

// auth.md §5 steps 2–6: tenant id shape, header, signature with the tenant's keys (the one
// whose kid matches first, then the others), iss, aud, exp (+ nbf when present) with leeway,
// tid == tenant_id, every perms entry parsed. The error is the last key's failure (or the
// first check that failed); answer any of them with kAuthFailedCode / kAuthFailedMessage.
// Cost: one JSON parse and one Ed25519 verification per key tried (normally one).
AuthResult<AuthContext> VerifyToken(std::string_view token, std::string_view tenant_id,
                                    std::span<const VerifyingKey> keys,
                                    const VerifyOptions& options);

// Seconds since the Unix epoch from the system clock (for VerifyOptions and minting).
int64_t NowUnixSeconds();

}  // namespace felix::auth
