// In-process X.509 generation with GnuTLS: the broker's self-signed `localhost` certificate when
// no operator certificate is configured, and (in tests) CAs and leaf certificates. All keys are
// ECDSA P-256, all signatures SHA-256. Thread-safe (no shared state).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"

namespace felix::transport {

struct PemCertAndKey {
  std::string cert_pem;
  std::string key_pem;
};

struct CertSpec {
  std::string common_name;
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
  bool is_ca = false;
  std::chrono::system_clock::time_point not_before =
      std::chrono::system_clock::now() - std::chrono::hours(1);
  std::chrono::system_clock::time_point not_after =
      std::chrono::system_clock::now() + std::chrono::hours(24 * 365);
};

// Self-signed when `issuer` is null, otherwise signed by the issuer (a CA from this function).
Result<PemCertAndKey> GenerateCertificate(const CertSpec& spec,
                                          const PemCertAndKey* issuer = nullptr);

// The default broker certificate: self-signed, CN and DNS SAN `name`.
Result<PemCertAndKey> GenerateSelfSigned(const std::string& name);

}  // namespace felix::transport
