#include "auth/token.h"

#include <chrono>
#include <limits>

#include <nlohmann/json.hpp>

#include "auth/base64url.h"

namespace felix::auth {

using nlohmann::ordered_json;

namespace {

AuthResult<ordered_json> DecodeJsonPart(std::string_view part, const char* what) {
  auto bytes = Base64UrlDecode(part);
  if (!bytes)
    return AuthFail(AuthErrorKind::kMalformedToken, std::string(what) + ": bad base64url");
  ordered_json doc = ordered_json::parse(bytes->begin(), bytes->end(), nullptr,
                                         /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return AuthFail(AuthErrorKind::kMalformedToken, std::string(what) + ": not a JSON object");
  }
  return doc;
}

AuthResult<std::string> RequiredString(const ordered_json& doc, const char* name) {
  auto it = doc.find(name);
  if (it == doc.end() || !it->is_string()) {
    return AuthFail(AuthErrorKind::kMalformedToken,
                    std::string("claim '") + name + "' missing or not a string");
  }
  return it->get<std::string>();
}

AuthResult<int64_t> IntegerValue(const ordered_json& value, const char* name) {
  if (value.is_number_unsigned()) {
    auto u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return AuthFail(AuthErrorKind::kMalformedToken,
                      std::string("claim '") + name + "' too large");
    }
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return AuthFail(AuthErrorKind::kMalformedToken,
                  std::string("claim '") + name + "' is not an integer");
}

AuthResult<int64_t> RequiredInteger(const ordered_json& doc, const char* name) {
  auto it = doc.find(name);
  if (it == doc.end()) {
    return AuthFail(AuthErrorKind::kMalformedToken, std::string("claim '") + name + "' missing");
  }
  return IntegerValue(*it, name);
}

}  // namespace

std::string MintToken(const SigningKey& key, const TokenClaims& claims) {
  ordered_json header = ordered_json::object();
  header["typ"] = "JWT";
  header["alg"] = "EdDSA";
  header["kid"] = key.kid();
  ordered_json payload = ordered_json::object();
  payload["iss"] = claims.iss;
  payload["aud"] = claims.aud;
  payload["sub"] = claims.sub;
  payload["tid"] = claims.tid;
  payload["exp"] = claims.exp;
  payload["iat"] = claims.iat;
  if (claims.nbf) payload["nbf"] = *claims.nbf;
  if (claims.jti) payload["jti"] = *claims.jti;
  payload["perms"] = claims.perms;
  if (claims.act_sub) payload["act"] = ordered_json{{"sub", *claims.act_sub}};
  // dump() of strings we built ourselves cannot throw except on invalid UTF-8; replace then.
  auto dump = [](const ordered_json& j) {
    return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  };
  std::string input = Base64UrlEncode(dump(header)) + "." + Base64UrlEncode(dump(payload));
  auto signature = key.Sign(input);
  return input + "." + Base64UrlEncode(signature);
}

AuthResult<ParsedToken> ParseToken(std::string_view token) {
  if (token.size() > kMaxTokenBytes) {
    return AuthFail(AuthErrorKind::kMalformedToken, "token longer than 64 KiB");
  }
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return AuthFail(AuthErrorKind::kMalformedToken, "not three dot-separated parts");
  }
  ParsedToken parsed;
  auto header = DecodeJsonPart(token.substr(0, dot1), "header");
  if (!header) return tl::unexpected(header.error());
  auto alg = RequiredString(*header, "alg");
  if (!alg) return AuthFail(AuthErrorKind::kMalformedToken, "header alg missing");
  parsed.header.alg = *alg;
  if (*alg != "EdDSA") {
    return AuthFail(AuthErrorKind::kUnsupportedAlgorithm, "alg '" + *alg + "'");
  }
  if (auto it = header->find("kid"); it != header->end()) {
    if (!it->is_string()) return AuthFail(AuthErrorKind::kMalformedToken, "kid not a string");
    parsed.header.kid = it->get<std::string>();
  }
  if (auto it = header->find("typ"); it != header->end()) {
    if (!it->is_string()) return AuthFail(AuthErrorKind::kMalformedToken, "typ not a string");
    parsed.header.typ = it->get<std::string>();
  }

  auto payload = DecodeJsonPart(token.substr(dot1 + 1, dot2 - dot1 - 1), "payload");
  if (!payload) return tl::unexpected(payload.error());
  TokenClaims& c = parsed.claims;
  for (auto [name, field] : {std::pair{"iss", &c.iss}, std::pair{"aud", &c.aud},
                             std::pair{"sub", &c.sub}, std::pair{"tid", &c.tid}}) {
    auto value = RequiredString(*payload, name);
    if (!value) return tl::unexpected(value.error());
    *field = std::move(*value);
  }
  auto exp = RequiredInteger(*payload, "exp");
  if (!exp) return tl::unexpected(exp.error());
  c.exp = *exp;
  auto iat = RequiredInteger(*payload, "iat");
  if (!iat) return tl::unexpected(iat.error());
  c.iat = *iat;
  if (auto it = payload->find("nbf"); it != payload->end() && !it->is_null()) {
    auto nbf = IntegerValue(*it, "nbf");
    if (!nbf) return tl::unexpected(nbf.error());
    c.nbf = *nbf;
  }
  if (auto it = payload->find("jti"); it != payload->end() && !it->is_null()) {
    if (!it->is_string()) return AuthFail(AuthErrorKind::kMalformedToken, "jti not a string");
    c.jti = it->get<std::string>();
  }
  auto perms = payload->find("perms");
  if (perms == payload->end() || !perms->is_array()) {
    return AuthFail(AuthErrorKind::kMalformedToken, "claim 'perms' missing or not an array");
  }
  c.perms.reserve(perms->size());
  for (const auto& p : *perms) {
    if (!p.is_string()) return AuthFail(AuthErrorKind::kMalformedToken, "perms entry not a string");
    c.perms.push_back(p.get<std::string>());
  }
  if (auto it = payload->find("act"); it != payload->end() && it->is_object()) {
    if (auto sub = it->find("sub"); sub != it->end() && sub->is_string()) {
      c.act_sub = sub->get<std::string>();
    }
  }

  auto signature = Base64UrlDecode(token.substr(dot2 + 1));
  if (!signature) return AuthFail(AuthErrorKind::kMalformedToken, "signature: bad base64url");
  parsed.signature = std::move(*signature);
  parsed.signing_input = token.substr(0, dot2);
  return parsed;
}

bool IsValidTenantIdShape(std::string_view tenant_id) {
  if (tenant_id.empty() || tenant_id.size() > 256 || tenant_id == "." || tenant_id == "..") {
    return false;
  }
  for (unsigned char ch : tenant_id) {
    if (ch < 0x20 || ch == 0x7f) return false;
  }
  return true;
}

AuthResult<AuthContext> VerifyToken(std::string_view token, std::string_view tenant_id,
                                    std::span<const VerifyingKey> keys,
                                    const VerifyOptions& options) {
  if (!IsValidTenantIdShape(tenant_id)) {
    return AuthFail(AuthErrorKind::kInvalidTenantId, "tenant id shape");
  }
  auto parsed = ParseToken(token);
  if (!parsed) return tl::unexpected(parsed.error());
  if (keys.empty()) return AuthFail(AuthErrorKind::kNoVerificationKey, "tenant has no keys");

  // Key order: the one whose kid matches first, then all others in their order.
  const VerifyingKey* first = nullptr;
  if (parsed->header.kid) {
    for (const auto& key : keys) {
      if (key.kid == *parsed->header.kid) {
        first = &key;
        break;
      }
    }
  }
  const TokenClaims& claims = parsed->claims;
  AuthError last{AuthErrorKind::kBadSignature, "no key verified the signature"};
  bool accepted = false;
  auto try_key = [&](const VerifyingKey& key) {
    if (!VerifySignature(key.public_key, parsed->signing_input, parsed->signature)) {
      last = {AuthErrorKind::kBadSignature, "signature does not verify with key '" + key.kid + "'"};
      return false;
    }
    if (claims.iss != kIssuer) {
      last = {AuthErrorKind::kWrongIssuer, "iss '" + claims.iss + "'"};
      return false;
    }
    if (claims.aud != options.audience) {
      last = {AuthErrorKind::kWrongAudience, "aud '" + claims.aud + "'"};
      return false;
    }
    // now ≤ exp + leeway, computed without overflow.
    if (claims.exp < std::numeric_limits<int64_t>::max() - options.leeway_seconds &&
        options.now_unix_seconds > claims.exp + options.leeway_seconds) {
      last = {AuthErrorKind::kExpired, "expired at " + std::to_string(claims.exp)};
      return false;
    }
    if (claims.nbf && *claims.nbf > std::numeric_limits<int64_t>::min() + options.leeway_seconds &&
        options.now_unix_seconds < *claims.nbf - options.leeway_seconds) {
      last = {AuthErrorKind::kNotYetValid, "not before " + std::to_string(*claims.nbf)};
      return false;
    }
    return true;
  };
  if (first) accepted = try_key(*first);
  for (size_t i = 0; !accepted && i < keys.size(); ++i) {
    if (&keys[i] != first) accepted = try_key(keys[i]);
  }
  if (!accepted) return tl::unexpected(std::move(last));

  if (claims.tid != tenant_id) {
    return AuthFail(AuthErrorKind::kTenantMismatch,
                    "token tenant '" + claims.tid + "' used as '" + std::string(tenant_id) + "'");
  }
  auto permissions = PermissionSet::Compile(claims.perms);
  if (!permissions) return tl::unexpected(permissions.error());

  AuthContext context;
  context.tenant_id = claims.tid;
  context.subject = claims.sub;
  if (claims.sub.size() <= 255) context.publisher_name = claims.sub;
  context.actor = claims.act_sub;
  context.expires_at = claims.exp;
  context.permissions = std::move(*permissions);
  context.raw_token = std::string(token);
  return context;
}

int64_t NowUnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace felix::auth
