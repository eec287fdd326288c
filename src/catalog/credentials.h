// The admin credential file: what an operator (and the `felix` CLI) needs to administer a
// single-node broker, written by the broker at every start into
// `<data_dir>/admin-credentials.json` with mode 0600:
//
//   {"version":1,
//    "admin_url":"http://127.0.0.1:8080",     admin API base URL (loopback when bound to any)
//    "admin_token":"…",                      Bearer token of the admin API
//    "quic_addr":"127.0.0.1:5000",           client QUIC address (when known)
//    "ca_file":"/abs/felix-data/tls/broker-cert.pem",  PEM that verifies the broker's certificate
//    "tenant_id":"default","namespace":"default",
//    "signing_key":{"kid":"k-…","seed":"<base64url 32-byte Ed25519 seed>"}}
//
// signing_key is the default tenant's current key, so tokens can be minted offline.
#pragma once

#include <optional>
#include <string>

#include "common/result.h"

namespace felix::catalog {

inline constexpr const char* kCredentialsFile = "admin-credentials.json";

struct AdminCredentials {
  std::string admin_url;
  std::string admin_token;
  std::string quic_addr;
  std::string ca_file;  // verifies the broker certificate (its self-signed dev cert by default)
  std::string tenant_id = "default";
  std::string namespace_name = "default";
  std::string signing_kid;
  std::string signing_seed;  // base64url; empty when not included
};

Result<void> WriteAdminCredentials(const std::string& path, const AdminCredentials& creds);
// kNotFound when missing; kCorruption when it does not parse or lacks admin_url/admin_token.
Result<AdminCredentials> LoadAdminCredentials(const std::string& path);

// Where the CLI looks: `explicit_path` (--credentials) if set, else
// `<data_dir_env>/admin-credentials.json` when FELIX_DATA_DIR is set, else
// `./felix-data/admin-credentials.json`.
std::string CredentialsPath(const std::string& explicit_path,
                            const std::optional<std::string>& data_dir_env);

// A fresh random admin API token (32 random bytes, base64url).
std::string NewAdminToken();

}  // namespace felix::catalog
