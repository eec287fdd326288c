// The credential file the broker writes into its data directory (catalog/credentials.h), as
// every `felix` command finds it, and local token minting from its signing key. Shared by the
// admin commands and by `pub`/`sub`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "catalog/credentials.h"
#include "common/result.h"

namespace felix::cli {

// `explicit_path` (--credentials) if set, else $FELIX_DATA_DIR/admin-credentials.json, else
// ./felix-data/admin-credentials.json.
std::string ResolveCredentialsPath(const std::string& explicit_path);

// Loads the file ResolveCredentialsPath names; *resolved (optional) receives the path.
Result<catalog::AdminCredentials> LoadCliCredentials(const std::string& explicit_path,
                                                     std::string* resolved = nullptr);

// Signs a token locally with the credential file's signing key (which belongs to its tenant).
// Each permission is checked against the policy grammar for `tenant`.
Result<std::string> MintLocalToken(const catalog::AdminCredentials& creds,
                                   const std::string& tenant, const std::string& subject,
                                   const std::vector<std::string>& permissions, int64_t ttl_seconds,
                                   const std::string& audience);

}  // namespace felix::cli
