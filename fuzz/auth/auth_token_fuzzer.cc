// Fuzzes the Felix token parser and verifier (header/payload base64url + JSON, claim types,
// permission parsing) and the JWKS parser. Keys are fixed so the signature check runs too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "auth/keys.h"
#include "auth/token.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  static const felix::auth::SigningKey key = [] {
    felix::auth::Seed seed;
    seed.fill(0x2A);
    return felix::auth::SigningKey::FromSeed("demo-k1", seed);
  }();
  auto parsed = felix::auth::ParseToken(input);
  if (parsed) {
    auto perms = felix::auth::PermissionSet::Compile(parsed->claims.perms);
    if (perms) (void)perms->AllowsStream(felix::auth::Action::kStreamPublish, "t", "ns", "s");
  }
  felix::auth::VerifyingKey vk = key.verifying_key();
  felix::auth::VerifyOptions options;
  options.now_unix_seconds = 1767225600;
  (void)felix::auth::VerifyToken(input, "t1", {&vk, 1}, options);
  (void)felix::auth::ParseJwks(input);
  return 0;
}
