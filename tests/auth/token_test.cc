// Felix tokens: minting, verification and every refusal of auth.md §3–§5.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "auth/base64url.h"
#include "auth/keys.h"
#include "auth/token.h"

namespace felix::auth {
namespace {

constexpr int64_t kNow = 1767225600;

Seed DemoSeed() {
  Seed seed;
  seed.fill(0x2A);
  return seed;
}

TokenClaims Claims(std::string tenant = "acme") {
  TokenClaims c;
  c.sub = "p:alice";
  c.tid = tenant;
  c.iat = kNow;
  c.exp = kNow + 900;
  c.perms = {"stream.publish:stream:" + tenant + "/payments/*",
             "stream.subscribe:stream:" + tenant + "/payments/orders",
             "cache.read:cache:" + tenant + "/*/*"};
  return c;
}

VerifyOptions At(int64_t now) {
  VerifyOptions o;
  o.now_unix_seconds = now;
  return o;
}

// A token with arbitrary header and payload JSON, signed with `key`.
std::string Forge(const SigningKey& key, const std::string& header, const std::string& payload) {
  std::string input = Base64UrlEncode(header) + "." + Base64UrlEncode(payload);
  return input + "." + Base64UrlEncode(key.Sign(input));
}

AuthErrorKind Refusal(const AuthResult<AuthContext>& r) {
  EXPECT_FALSE(r.has_value());
  return r ? AuthErrorKind::kInvalidKey : r.error().kind;
}

TEST(Base64Url, RoundTripAndStrictness) {
  EXPECT_EQ(Base64UrlEncode(std::string_view("\xfb\xff", 2)), "-_8");
  auto decoded = Base64UrlDecode("-_8");
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, (std::vector<uint8_t>{0xfb, 0xff}));
  EXPECT_FALSE(Base64UrlDecode("-_8="));  // padding
  EXPECT_FALSE(Base64UrlDecode("+/8"));   // standard alphabet
  EXPECT_FALSE(Base64UrlDecode("ab c"));
  EXPECT_FALSE(Base64UrlDecode("-_9"));  // non-zero trailing bits
  EXPECT_TRUE(Base64UrlDecode(""));
}

TEST(Keys, DemoKeyVectorFromSpec) {
  SigningKey key = SigningKey::FromSeed("demo-k1", DemoSeed());
  PublicKey pk = key.verifying_key().public_key;
  char hex[65];
  static const char* digits = "0123456789abcdef";
  for (size_t i = 0; i < 32; ++i) {
    hex[2 * i] = digits[pk[i] >> 4];
    hex[2 * i + 1] = digits[pk[i] & 15];
  }
  hex[64] = 0;
  EXPECT_STREQ(hex, "197f6b23e16c8532c6abc838facd5ea789be0c76b2920334039bfa8b3d368d61");
  EXPECT_EQ(Base64UrlEncode(pk), "GX9rI-FshTLGq8g4-s1ep4m-DHaykgM0A5v6iz02jWE");
  auto again = SigningKey::FromSeedBase64("demo-k1", key.SeedBase64());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->verifying_key(), key.verifying_key());
}

TEST(Keys, JwksRoundTripSkipsUnusableKeys) {
  SigningKey a = SigningKey::Generate("k1");
  SigningKey b = SigningKey::Generate(NewKeyId());
  std::vector<VerifyingKey> keys = {a.verifying_key(), b.verifying_key()};
  std::string jwks = ToJwksJson(keys);
  EXPECT_NE(jwks.find(R"({"kty":"OKP","kid":"k1","alg":"EdDSA","use":"sig","crv":"Ed25519","x":")"),
            std::string::npos)
      << jwks;
  auto parsed = ParseJwks(jwks);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, keys);

  auto filtered = ParseJwks(
      R"({"keys":[{"kty":"OKP","kid":"short","crv":"Ed25519","x":"AAAA"},)"
      R"({"kty":"RSA","kid":"rsa","n":"x","e":"AQAB"},)"
      R"({"kty":"OKP","kid":"nocrv","x":"GX9rI-FshTLGq8g4-s1ep4m-DHaykgM0A5v6iz02jWE"},)"
      R"({"kty":"OKP","kid":"ok","crv":"Ed25519","x":"GX9rI-FshTLGq8g4-s1ep4m-DHaykgM0A5v6iz02jWE"}]})");
  ASSERT_TRUE(filtered);
  ASSERT_EQ(filtered->size(), 1u);
  EXPECT_EQ((*filtered)[0].kid, "ok");
  EXPECT_FALSE(ParseJwks("[]"));
  EXPECT_FALSE(ParseJwks("{"));
}

TEST(Token, MintVerifyRoundTrip) {
  SigningKey key = SigningKey::Generate("k1");
  std::string token = MintToken(key, Claims());
  // Header exactly as the reference mints it.
  EXPECT_EQ(token.substr(0, token.find('.')),
            Base64UrlEncode(std::string_view(R"({"typ":"JWT","alg":"EdDSA","kid":"k1"})")));
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  auto ctx = VerifyToken(token, "acme", keys, At(kNow));
  ASSERT_TRUE(ctx) << ctx.error().ToString();
  EXPECT_EQ(ctx->tenant_id, "acme");
  EXPECT_EQ(ctx->subject, "p:alice");
  EXPECT_EQ(ctx->publisher_name, "p:alice");
  EXPECT_EQ(ctx->expires_at, kNow + 900);
  EXPECT_EQ(ctx->raw_token, token);
  EXPECT_EQ(ctx->permissions.size(), 3u);
  EXPECT_TRUE(ctx->permissions.AllowsStream(Action::kStreamPublish, "acme", "payments", "x"));
  EXPECT_FALSE(ctx->permissions.AllowsStream(Action::kStreamPublish, "acme", "other", "x"));

  auto parsed = ParseToken(token);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->claims.perms, Claims().perms);
  EXPECT_EQ(parsed->header.kid, "k1");
  EXPECT_EQ(parsed->header.typ, "JWT");
}

// Our own regression vector (Ed25519 is deterministic): the spec's demo key and demo grants
// for tenant t1. Pins header and claim order and the encoding, so a change is deliberate.
TEST(Token, DemoKeyRegressionVector) {
  SigningKey key = SigningKey::FromSeed("demo-k1", DemoSeed());
  TokenClaims c;
  c.sub = "p:demo";
  c.tid = "t1";
  c.iat = kNow;
  c.exp = kNow + 900;
  c.perms = {"tenant.manage:tenant:t1",      "ns.manage:namespace:t1/*",
             "stream.publish:stream:t1/*/*", "stream.subscribe:stream:t1/*/*",
             "cache.read:cache:t1/*/*",      "cache.write:cache:t1/*/*"};
  const std::string expected =
      "eyJ0eXAiOiJKV1QiLCJhbGciOiJFZERTQSIsImtpZCI6ImRlbW8tazEifQ."
      "eyJpc3MiOiJmZWxpeC1hdXRoIiwiYXVkIjoiZmVsaXgtYnJva2VyIiwic3ViIjoicDpkZW1vIiwidGlkIjoidDEiLCJl"
      "eHAiOjE3NjcyMjY1MDAsImlhdCI6MTc2NzIyNTYwMCwicGVybXMiOlsidGVuYW50Lm1hbmFnZTp0ZW5hbnQ6dDEiLCJu"
      "cy5tYW5hZ2U6bmFtZ"
      "XNwYWNlOnQxLyoiLCJzdHJlYW0ucHVibGlzaDpzdHJlYW06dDEvKi8qIiwic3RyZWFtLnN1YnNjcmliZTpzdHJlYW06d"
      "DEvKi8qIiwiY2FjaGUucmVhZDpjYWNoZTp0MS8qLyoiLCJjYWNoZS53cml0ZTpjYWNoZTp0MS8qLyoiXX0."
      "5aTA2AxhglhJj7ybdgKGBrV0-mVFK2G-K3lZiwfNeyolGirdJvh4ngtH0E3toQBcvEh7WhpsL52AkJNNCIBkBA";
  EXPECT_EQ(MintToken(key, c), expected);
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  EXPECT_TRUE(VerifyToken(expected, "t1", keys, At(kNow)));
}

TEST(Token, OptionalClaimsRoundTrip) {
  SigningKey key = SigningKey::Generate("k1");
  TokenClaims c = Claims();
  c.jti = "j-1";
  c.nbf = kNow;
  c.act_sub = "p:gateway";
  c.sub = std::string(300, 's');
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  auto ctx = VerifyToken(MintToken(key, c), "acme", keys, At(kNow));
  ASSERT_TRUE(ctx) << ctx.error().ToString();
  EXPECT_EQ(ctx->actor, "p:gateway");
  EXPECT_FALSE(ctx->publisher_name);  // sub longer than 255 bytes
  auto parsed = ParseToken(MintToken(key, c));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->claims.jti, "j-1");
  EXPECT_EQ(parsed->claims.nbf, kNow);
}

TEST(Token, KeyOrderKidFirstThenOthers) {
  SigningKey current = SigningKey::Generate("k2");
  SigningKey old = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {old.verifying_key(), current.verifying_key()};
  EXPECT_TRUE(VerifyToken(MintToken(current, Claims()), "acme", keys, At(kNow)));
  EXPECT_TRUE(VerifyToken(MintToken(old, Claims()), "acme", keys, At(kNow)));
  // Unknown kid: every key is tried, so the right key still verifies.
  SigningKey relabelled = SigningKey::FromSeed("k-unknown", current.seed());
  EXPECT_TRUE(VerifyToken(MintToken(relabelled, Claims()), "acme", keys, At(kNow)));
  // Known kid but signed by a key the tenant does not have: refused.
  SigningKey stranger = SigningKey::Generate("k2");
  EXPECT_EQ(Refusal(VerifyToken(MintToken(stranger, Claims()), "acme", keys, At(kNow))),
            AuthErrorKind::kBadSignature);
  // No kid at all: every key is tried.
  std::string no_kid = Forge(current, R"({"alg":"EdDSA"})",
                             R"({"iss":"felix-auth","aud":"felix-broker","sub":"s","tid":"acme",)"
                             R"("exp":1767226500,"iat":1767225600,"perms":[]})");
  EXPECT_TRUE(VerifyToken(no_kid, "acme", keys, At(kNow)));
}

TEST(Token, BadSignatureWrongKeyAndTampering) {
  SigningKey key = SigningKey::Generate("k1");
  SigningKey other = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  EXPECT_EQ(Refusal(VerifyToken(MintToken(other, Claims()), "acme", keys, At(kNow))),
            AuthErrorKind::kBadSignature);

  std::string token = MintToken(key, Claims());
  size_t dot1 = token.find('.'), dot2 = token.rfind('.');
  // Payload swapped for another (valid) payload: signature no longer covers it.
  TokenClaims wider = Claims();
  wider.perms = {"stream.publish:stream:acme/*/*"};
  std::string other_token = MintToken(key, wider);
  std::string spliced =
      token.substr(0, dot1) +
      other_token.substr(other_token.find('.'), other_token.rfind('.') - other_token.find('.')) +
      token.substr(dot2);
  EXPECT_EQ(Refusal(VerifyToken(spliced, "acme", keys, At(kNow))), AuthErrorKind::kBadSignature);
  // A flipped signature byte.
  std::string flipped = token;
  flipped[dot2 + 5] = flipped[dot2 + 5] == 'A' ? 'B' : 'A';
  EXPECT_EQ(Refusal(VerifyToken(flipped, "acme", keys, At(kNow))), AuthErrorKind::kBadSignature);
  // A truncated signature (not 64 bytes).
  EXPECT_EQ(Refusal(VerifyToken(token.substr(0, dot2 + 1) + Base64UrlEncode(std::string(63, 'x')),
                                "acme", keys, At(kNow))),
            AuthErrorKind::kBadSignature);
  EXPECT_EQ(Refusal(VerifyToken(token, "acme", {}, At(kNow))), AuthErrorKind::kNoVerificationKey);
}

TEST(Token, ExpiryWithSixtySecondLeeway) {
  SigningKey key = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  std::string token = MintToken(key, Claims());
  EXPECT_TRUE(VerifyToken(token, "acme", keys, At(kNow + 900)));
  EXPECT_TRUE(VerifyToken(token, "acme", keys, At(kNow + 960)));
  EXPECT_EQ(Refusal(VerifyToken(token, "acme", keys, At(kNow + 961))), AuthErrorKind::kExpired);
}

TEST(Token, NotBeforeWhenPresent) {
  SigningKey key = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  TokenClaims c = Claims();
  c.nbf = kNow + 100;
  std::string token = MintToken(key, c);
  EXPECT_EQ(Refusal(VerifyToken(token, "acme", keys, At(kNow + 39))), AuthErrorKind::kNotYetValid);
  EXPECT_TRUE(VerifyToken(token, "acme", keys, At(kNow + 40)));
}

TEST(Token, IssuerAudienceAndTenantChecks) {
  SigningKey key = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  TokenClaims c = Claims();
  c.iss = "someone-else";
  EXPECT_EQ(Refusal(VerifyToken(MintToken(key, c), "acme", keys, At(kNow))),
            AuthErrorKind::kWrongIssuer);
  c = Claims();
  c.aud = kControlPlaneAudience;
  EXPECT_EQ(Refusal(VerifyToken(MintToken(key, c), "acme", keys, At(kNow))),
            AuthErrorKind::kWrongAudience);
  VerifyOptions cp = At(kNow);
  cp.audience = kControlPlaneAudience;
  EXPECT_TRUE(VerifyToken(MintToken(key, c), "acme", keys, cp));
  // A valid tenant-A token is useless as tenant B.
  EXPECT_EQ(Refusal(VerifyToken(MintToken(key, Claims("acme")), "globex", keys, At(kNow))),
            AuthErrorKind::kTenantMismatch);
}

TEST(Token, TenantIdShape) {
  SigningKey key = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  std::string token = MintToken(key, Claims());
  for (std::string bad : {std::string(), std::string("."), std::string(".."), std::string(257, 'a'),
                          std::string("a\nb"), std::string("a\x7f")}) {
    EXPECT_EQ(Refusal(VerifyToken(token, bad, keys, At(kNow))), AuthErrorKind::kInvalidTenantId)
        << bad;
  }
  EXPECT_TRUE(IsValidTenantIdShape(std::string(256, 'a')));
}

TEST(Token, RefusesOtherAlgorithms) {
  SigningKey key = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  std::string payload =
      R"({"iss":"felix-auth","aud":"felix-broker","sub":"s","tid":"acme","exp":1767226500,)"
      R"("iat":1767225600,"perms":[]})";
  for (const char* alg : {"none", "HS256", "RS256", "ES256", "eddsa", "Ed25519"}) {
    std::string header = std::string(R"({"typ":"JWT","alg":")") + alg + R"(","kid":"k1"})";
    EXPECT_EQ(Refusal(VerifyToken(Forge(key, header, payload), "acme", keys, At(kNow))),
              AuthErrorKind::kUnsupportedAlgorithm)
        << alg;
  }
  // alg none with an empty signature part.
  std::string unsigned_token =
      Base64UrlEncode(std::string_view(R"({"alg":"none"})")) + "." + Base64UrlEncode(payload) + ".";
  EXPECT_EQ(Refusal(VerifyToken(unsigned_token, "acme", keys, At(kNow))),
            AuthErrorKind::kUnsupportedAlgorithm);
}

TEST(Token, RefusesMalformedTokens) {
  SigningKey key = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  const std::string header = R"({"typ":"JWT","alg":"EdDSA","kid":"k1"})";
  auto malformed = [&](const std::string& token) {
    SCOPED_TRACE(token);
    auto r = VerifyToken(token, "acme", keys, At(kNow));
    return !r && r.error().kind == AuthErrorKind::kMalformedToken;
  };
  std::string good = MintToken(key, Claims());
  EXPECT_TRUE(malformed(""));
  EXPECT_TRUE(malformed("a.b"));
  EXPECT_TRUE(malformed(good + ".x"));
  EXPECT_TRUE(malformed("!!!" + good.substr(good.find('.'))));
  EXPECT_TRUE(malformed(good.substr(0, good.rfind('.')) + ".sig=="));
  EXPECT_TRUE(malformed(Forge(key, "not json", "{}")));
  EXPECT_TRUE(malformed(Forge(key, "[]", "{}")));
  EXPECT_TRUE(malformed(Forge(key, R"({"kid":"k1"})", "{}")));
  EXPECT_TRUE(malformed(Forge(key, R"({"alg":"EdDSA","kid":7})", "{}")));
  EXPECT_TRUE(malformed(Forge(key, header, "not json")));

  const std::string full =
      R"("iss":"felix-auth","aud":"felix-broker","sub":"s","tid":"acme","exp":1767226500,)"
      R"("iat":1767225600,"perms":[])";
  EXPECT_FALSE(malformed(Forge(key, header, "{" + full + "}")));
  // Each required claim missing.
  for (const char* name : {"iss", "aud", "sub", "tid", "exp", "iat", "perms"}) {
    nlohmann::ordered_json body = nlohmann::ordered_json::parse("{" + full + "}");
    body.erase(name);
    EXPECT_TRUE(malformed(Forge(key, header, body.dump()))) << name;
  }
  // aud as an array, exp as a float or a string, perms with a non-string.
  EXPECT_TRUE(malformed(Forge(
      key, header,
      R"({"iss":"felix-auth","aud":["felix-broker"],"sub":"s","tid":"acme","exp":1767226500,"iat":1,"perms":[]})")));
  EXPECT_TRUE(malformed(Forge(
      key, header,
      R"({"iss":"felix-auth","aud":"felix-broker","sub":"s","tid":"acme","exp":1767226500.5,"iat":1,"perms":[]})")));
  EXPECT_TRUE(malformed(Forge(
      key, header,
      R"({"iss":"felix-auth","aud":"felix-broker","sub":"s","tid":"acme","exp":"1767226500","iat":1,"perms":[]})")));
  EXPECT_TRUE(malformed(Forge(
      key, header,
      R"({"iss":"felix-auth","aud":"felix-broker","sub":"s","tid":"acme","exp":1767226500,"iat":1,"perms":[1]})")));
  EXPECT_TRUE(malformed(Forge(
      key, header,
      R"({"iss":"felix-auth","aud":"felix-broker","sub":"s","tid":"acme","exp":18446744073709551615,"iat":1,"perms":[]})")));
  // Oversized tokens are refused before decoding.
  EXPECT_TRUE(malformed(std::string(kMaxTokenBytes + 1, 'a')));
  // Extra claims are ignored.
  EXPECT_FALSE(malformed(Forge(key, header, "{" + full + R"(,"extra":{"x":[1,2]}})")));
}

TEST(Token, UnknownActionOrMissingColonFailsWholeAuthentication) {
  SigningKey key = SigningKey::Generate("k1");
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  for (const char* bad : {"stream.publish", "stream.fly:stream:acme/a/b", ":stream:acme/a/b"}) {
    TokenClaims c = Claims();
    c.perms.push_back(bad);
    EXPECT_EQ(Refusal(VerifyToken(MintToken(key, c), "acme", keys, At(kNow))),
              AuthErrorKind::kInvalidPermission)
        << bad;
  }
}

TEST(Token, EveryRefusalMapsToUnauthenticatedAuthFailed) {
  EXPECT_STREQ(kAuthFailedCode, "unauthenticated");
  EXPECT_EQ(kAuthFailedCodeNumber, 1);
  EXPECT_STREQ(kAuthFailedMessage, "auth failed");
  EXPECT_STREQ(AuthErrorName(AuthErrorKind::kExpired), "expired");
}

}  // namespace
}  // namespace felix::auth
