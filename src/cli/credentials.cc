#include "cli/credentials.h"

#include <cstdlib>
#include <optional>

#include "auth/token.h"

namespace felix::cli {

std::string ResolveCredentialsPath(const std::string& explicit_path) {
  const char* env = std::getenv("FELIX_DATA_DIR");
  return catalog::CredentialsPath(explicit_path,
                                  env ? std::optional<std::string>(env) : std::nullopt);
}

Result<catalog::AdminCredentials> LoadCliCredentials(const std::string& explicit_path,
                                                     std::string* resolved) {
  std::string path = ResolveCredentialsPath(explicit_path);
  if (resolved) *resolved = path;
  return catalog::LoadAdminCredentials(path);
}

Result<std::string> MintLocalToken(const catalog::AdminCredentials& creds,
                                   const std::string& tenant, const std::string& subject,
                                   const std::vector<std::string>& permissions, int64_t ttl_seconds,
                                   const std::string& audience) {
  if (tenant != creds.tenant_id || creds.signing_seed.empty())
    return Fail(ErrorCode::kNotFound,
                "the credential file holds no signing key for tenant '" + tenant + "'");
  if (ttl_seconds < 1) return Fail(ErrorCode::kInvalidArgument, "--ttl must be at least 1");
  auto key = auth::SigningKey::FromSeedBase64(creds.signing_kid, creds.signing_seed);
  if (!key) return Fail(ErrorCode::kCorruption, "credential file: " + key.error().ToString());
  auth::TokenClaims claims;
  claims.aud = audience;
  claims.sub = subject;
  claims.tid = tenant;
  for (const auto& p : permissions) {
    auto valid = auth::ValidatePolicyPermission(p, tenant);
    if (!valid) return Fail(ErrorCode::kInvalidArgument, valid.error().message);
    claims.perms.push_back(p);
  }
  claims.iat = auth::NowUnixSeconds();
  claims.exp = claims.iat + ttl_seconds;
  return auth::MintToken(*key, claims);
}

}  // namespace felix::cli
