// TlsContext: the certificate, key and trust anchors one QUIC role presents and checks, plus the
// ALPN rules of that role. One per listener role (client port, internal port); dialling
// endpoints of the same role share it.
//
// Roles and ALPN (enforced inside the TLS handshake, before any stream frame is read):
//   kClient   : the client-facing port selects `felix/1` when offered, accepts a client that
//               offers no ALPN, and refuses a client offering only other ids.
//   kInternal : broker-to-broker; `felix-internal/1` is required on both ends.
//
// Certificates: operator files (cert chain PEM + key PEM) or, when none are configured, a
// self-signed certificate generated in-process for `self_signed_name`. The certificate and key
// are re-read every `reload_interval` (checked when a handshake starts) and the new pair is used
// for new handshakes only; connections keep the credentials they started with. The CA is read
// once. A load failure names the variable and the path; nothing about key material is logged.
//
// Peer verification: with `ca_file` set, the internal role requires a certificate from both
// ends chained to that CA (and the dialler checks the listener's DNS name against the name it
// dialled); the client role asks clients for an optional certificate and verifies it when
// presented. Without `ca_file`, the peer is not verified (accept any).
//
// Thread-safety: all methods may be called from any thread (an internal mutex guards the
// current credentials). Must outlive every Endpoint that uses it (Endpoints hold a shared_ptr).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"

namespace felix::transport {

enum class Role { kClient, kInternal };

inline constexpr char kClientAlpn[] = "felix/1";
inline constexpr char kInternalAlpn[] = "felix-internal/1";

const char* RoleName(Role role);

struct TlsOptions {
  Role role = Role::kClient;
  std::string cert_file;  // both or neither
  std::string key_file;
  std::string ca_file;  // empty: peers are not verified
  // Names used in error messages ("FELIX_TLS_CERT" ...).
  std::string cert_var = "FELIX_TLS_CERT";
  std::string key_var = "FELIX_TLS_KEY";
  std::string ca_var = "FELIX_TLS_CLIENT_CA";
  std::string self_signed_name = "localhost";
  std::chrono::milliseconds reload_interval{30000};
  // ALPN ids a kClient-role *dialler* offers (tests and the client library); empty = none.
  // The internal role always offers exactly `felix-internal/1`.
  std::vector<std::string> dial_alpn;
  // Hold no certificate at all: a client-role dialler without a client certificate (and tests
  // of a peer that presents none). Listeners always need one.
  bool no_certificate = false;
};

struct TlsCredentials;  // opaque: GnuTLS credentials, shared by the sessions built on them

class TlsContext {
 public:
  // Loads (or generates) the certificate and reads the CA now. Warnings (self-signed, no peer
  // verification) are appended to `warnings`.
  static Result<std::shared_ptr<TlsContext>> Create(TlsOptions options,
                                                    std::vector<std::string>* warnings = nullptr);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  const TlsOptions& options() const { return options_; }
  Role role() const { return options_.role; }
  bool verifies_peers() const { return !options_.ca_file.empty(); }
  bool self_signed() const { return options_.cert_file.empty(); }
  // PEM of the generated self-signed certificate ("" with operator files), for tests/clients
  // that want to pin it.
  const std::string& self_signed_cert_pem() const { return self_signed_pem_; }

  // Re-reads the certificate and key now (tests; the periodic path uses MaybeReload). On
  // failure the previous credentials stay in use and the error is returned.
  Result<void> ReloadNow();
  // Re-reads if `reload_interval` has passed since the last load; failures are logged (with the
  // variable and path) and the previous credentials stay in use.
  void MaybeReload();
  // The credentials for a new handshake.
  std::shared_ptr<TlsCredentials> Current();

 private:
  explicit TlsContext(TlsOptions options);
  Result<std::shared_ptr<TlsCredentials>> Build();

  TlsOptions options_;
  std::string self_signed_pem_;
  std::string self_signed_key_pem_;
  std::string ca_pem_;  // read once
  std::mutex mu_;
  std::shared_ptr<TlsCredentials> current_;
  std::chrono::steady_clock::time_point loaded_at_;
};

}  // namespace felix::transport
