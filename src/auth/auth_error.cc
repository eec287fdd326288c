#include "auth/auth_error.h"

namespace felix::auth {

const char* AuthErrorName(AuthErrorKind kind) {
  switch (kind) {
    case AuthErrorKind::kInvalidTenantId:
      return "invalid_tenant_id";
    case AuthErrorKind::kMalformedToken:
      return "malformed_token";
    case AuthErrorKind::kUnsupportedAlgorithm:
      return "unsupported_algorithm";
    case AuthErrorKind::kNoVerificationKey:
      return "no_verification_key";
    case AuthErrorKind::kBadSignature:
      return "bad_signature";
    case AuthErrorKind::kWrongIssuer:
      return "wrong_issuer";
    case AuthErrorKind::kWrongAudience:
      return "wrong_audience";
    case AuthErrorKind::kExpired:
      return "expired";
    case AuthErrorKind::kNotYetValid:
      return "not_yet_valid";
    case AuthErrorKind::kTenantMismatch:
      return "tenant_mismatch";
    case AuthErrorKind::kInvalidPermission:
      return "invalid_permission";
    case AuthErrorKind::kInvalidKey:
      return "invalid_key";
  }
  return "unknown";
}

std::string AuthError::ToString() const {
  return std::string(AuthErrorName(kind)) + (detail.empty() ? "" : ": " + detail);
}

}  // namespace felix::auth
