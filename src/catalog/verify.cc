#include "catalog/verify.h"

namespace felix::catalog {

auth::AuthResult<auth::AuthContext> VerifyClientToken(const Catalog& catalog,
                                                      std::string_view tenant_id,
                                                      std::string_view token,
                                                      int64_t now_unix_seconds,
                                                      std::string_view audience) {
  if (!auth::IsValidTenantIdShape(tenant_id)) {
    return auth::AuthFail(auth::AuthErrorKind::kInvalidTenantId, "tenant id shape");
  }
  auto snapshot = catalog.Snapshot();
  if (!snapshot->FindTenant(tenant_id)) {
    return auth::AuthFail(auth::AuthErrorKind::kNoVerificationKey,
                          "unknown tenant '" + std::string(tenant_id) + "'");
  }
  auto keys = snapshot->VerifyingKeys(tenant_id);
  auth::VerifyOptions options;
  options.now_unix_seconds = now_unix_seconds;
  options.audience = audience;
  return auth::VerifyToken(token, tenant_id, keys, options);
}

}  // namespace felix::catalog
