// Ed25519 keys for Felix tokens: a tenant's signing key (private, kept by whoever mints) and
// verifying keys (public, published as a JWKS: {"keys":[{"kty":"OKP","kid",...,"x"}]}).
//
// Value types; safe to copy and to share read-only between threads. A SigningKey holds the
// 32-byte seed; the 64-byte libsodium secret key is derived from it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "auth/auth_error.h"

namespace felix::auth {

inline constexpr size_t kPublicKeyBytes = 32;
inline constexpr size_t kSeedBytes = 32;
inline constexpr size_t kSignatureBytes = 64;

using PublicKey = std::array<uint8_t, kPublicKeyBytes>;
using Seed = std::array<uint8_t, kSeedBytes>;

struct VerifyingKey {
  std::string kid;
  PublicKey public_key{};

  bool operator==(const VerifyingKey&) const = default;
};

class SigningKey {
 public:
  // A fresh key from libsodium's CSPRNG.
  static SigningKey Generate(std::string kid);
  static SigningKey FromSeed(std::string kid, const Seed& seed);
  // `seed_b64` is the base64url (unpadded) 32-byte seed, as stored in credential files.
  static AuthResult<SigningKey> FromSeedBase64(std::string kid, std::string_view seed_b64);

  const std::string& kid() const { return kid_; }
  const Seed& seed() const { return seed_; }
  std::string SeedBase64() const;
  VerifyingKey verifying_key() const { return {kid_, public_key_}; }

  // Ed25519 detached signature over `message`.
  std::array<uint8_t, kSignatureBytes> Sign(std::string_view message) const;

 private:
  SigningKey() = default;
  std::string kid_;
  Seed seed_{};
  PublicKey public_key_{};
  std::array<uint8_t, 64> secret_key_{};
};

// A random key id: "k-" followed by 16 hex digits.
std::string NewKeyId();

// Ed25519 signature check.
bool VerifySignature(const PublicKey& key, std::string_view message,
                     std::span<const uint8_t> signature);

// One JWK: {"kty":"OKP","kid":…,"alg":"EdDSA","use":"sig","crv":"Ed25519","x":…}.
std::string ToJwkJson(const VerifyingKey& key);
// {"keys":[JWK, …]}
std::string ToJwksJson(std::span<const VerifyingKey> keys);
// Parses a JWKS document. A key whose `x` is not 32 bytes of base64url, or whose kty/crv say
// something other than OKP/Ed25519, is skipped (auth.md §4); the document itself must parse.
AuthResult<std::vector<VerifyingKey>> ParseJwks(std::string_view json);
// base64url public key (the JWK `x`) to a key.
AuthResult<VerifyingKey> VerifyingKeyFromBase64(std::string kid, std::string_view x);

}  // namespace felix::auth
