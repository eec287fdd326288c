#include "auth/keys.h"

#include <sodium.h>

#include <nlohmann/json.hpp>

#include "auth/base64url.h"

namespace felix::auth {

using nlohmann::json;

SigningKey SigningKey::Generate(std::string kid) {
  EnsureSodium();
  Seed seed;
  randombytes_buf(seed.data(), seed.size());
  SigningKey key = FromSeed(std::move(kid), seed);
  sodium_memzero(seed.data(), seed.size());
  return key;
}

SigningKey SigningKey::FromSeed(std::string kid, const Seed& seed) {
  EnsureSodium();
  SigningKey key;
  key.kid_ = std::move(kid);
  key.seed_ = seed;
  crypto_sign_seed_keypair(key.public_key_.data(), key.secret_key_.data(), seed.data());
  return key;
}

AuthResult<SigningKey> SigningKey::FromSeedBase64(std::string kid, std::string_view seed_b64) {
  auto bytes = Base64UrlDecode(seed_b64);
  if (!bytes || bytes->size() != kSeedBytes) {
    return AuthFail(AuthErrorKind::kInvalidKey, "signing key seed is not 32 bytes of base64url");
  }
  Seed seed;
  std::copy(bytes->begin(), bytes->end(), seed.begin());
  return FromSeed(std::move(kid), seed);
}

std::string SigningKey::SeedBase64() const {
  return Base64UrlEncode(seed_);
}

std::array<uint8_t, kSignatureBytes> SigningKey::Sign(std::string_view message) const {
  std::array<uint8_t, kSignatureBytes> sig{};
  crypto_sign_detached(sig.data(), nullptr, reinterpret_cast<const uint8_t*>(message.data()),
                       message.size(), secret_key_.data());
  return sig;
}

std::string NewKeyId() {
  EnsureSodium();
  uint8_t raw[8];
  randombytes_buf(raw, sizeof raw);
  char hex[sizeof raw * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
  return std::string("k-") + hex;
}

bool VerifySignature(const PublicKey& key, std::string_view message,
                     std::span<const uint8_t> signature) {
  EnsureSodium();
  if (signature.size() != kSignatureBytes) return false;
  return crypto_sign_verify_detached(signature.data(),
                                     reinterpret_cast<const uint8_t*>(message.data()),
                                     message.size(), key.data()) == 0;
}

namespace {

nlohmann::ordered_json JwkObject(const VerifyingKey& key) {
  // Field order as the reference publishes it.
  nlohmann::ordered_json jwk = nlohmann::ordered_json::object();
  jwk["kty"] = "OKP";
  jwk["kid"] = key.kid;
  jwk["alg"] = "EdDSA";
  jwk["use"] = "sig";
  jwk["crv"] = "Ed25519";
  jwk["x"] = Base64UrlEncode(key.public_key);
  return jwk;
}

}  // namespace

std::string ToJwkJson(const VerifyingKey& key) {
  return JwkObject(key).dump();
}

std::string ToJwksJson(std::span<const VerifyingKey> keys) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  doc["keys"] = nlohmann::ordered_json::array();
  for (const auto& key : keys) doc["keys"].push_back(JwkObject(key));
  return doc.dump();
}

AuthResult<VerifyingKey> VerifyingKeyFromBase64(std::string kid, std::string_view x) {
  auto bytes = Base64UrlDecode(x);
  if (!bytes || bytes->size() != kPublicKeyBytes) {
    return AuthFail(AuthErrorKind::kInvalidKey, "key '" + kid + "': x is not 32 bytes");
  }
  VerifyingKey key;
  key.kid = std::move(kid);
  std::copy(bytes->begin(), bytes->end(), key.public_key.begin());
  return key;
}

AuthResult<std::vector<VerifyingKey>> ParseJwks(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return AuthFail(AuthErrorKind::kInvalidKey, "JWKS is not a JSON object");
  }
  auto keys_it = doc.find("keys");
  if (keys_it == doc.end() || !keys_it->is_array()) {
    return AuthFail(AuthErrorKind::kInvalidKey, "JWKS has no keys array");
  }
  std::vector<VerifyingKey> keys;
  for (const auto& jwk : *keys_it) {
    if (!jwk.is_object()) continue;
    auto str = [&jwk](const char* name) -> std::string {
      auto it = jwk.find(name);
      return it != jwk.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (str("kty") != "OKP" || str("crv") != "Ed25519") continue;
    auto key = VerifyingKeyFromBase64(str("kid"), str("x"));
    if (key) keys.push_back(std::move(*key));
  }
  return keys;
}

}  // namespace felix::auth
