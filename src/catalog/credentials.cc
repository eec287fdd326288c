#include "catalog/credentials.h"

#include <sodium.h>

#include "auth/base64url.h"
#include "catalog/atomic_file.h"
#include "catalog/model.h"

namespace felix::catalog {

Result<void> WriteAdminCredentials(const std::string& path, const AdminCredentials& c) {
  Json doc = Json::object();
  doc["version"] = 1;
  doc["admin_url"] = c.admin_url;
  doc["admin_token"] = c.admin_token;
  if (!c.quic_addr.empty()) doc["quic_addr"] = c.quic_addr;
  if (!c.ca_file.empty()) doc["ca_file"] = c.ca_file;
  doc["tenant_id"] = c.tenant_id;
  doc["namespace"] = c.namespace_name;
  if (!c.signing_seed.empty()) {
    doc["signing_key"] = Json{{"kid", c.signing_kid}, {"seed", c.signing_seed}};
  }
  std::string text = doc.dump(2) + "\n";
  // Written only when it changes: a restart on a full disk must not fail here (issue 12
  // item 9), and an unchanged file keeps its inode for whoever watches it.
  if (auto existing = ReadWholeFile(path); existing && *existing == text) return Ok();
  return WriteFileAtomically(path, text, 0600);
}

Result<AdminCredentials> LoadAdminCredentials(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text) return tl::unexpected(text.error());
  Json doc = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Fail(ErrorCode::kCorruption, path + ": not a JSON object");
  }
  auto str = [](const Json& j, const char* name) {
    auto it = j.find(name);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  AdminCredentials c;
  c.admin_url = str(doc, "admin_url");
  c.admin_token = str(doc, "admin_token");
  c.quic_addr = str(doc, "quic_addr");
  c.ca_file = str(doc, "ca_file");
  if (auto t = str(doc, "tenant_id"); !t.empty()) c.tenant_id = t;
  if (auto ns = str(doc, "namespace"); !ns.empty()) c.namespace_name = ns;
  if (auto key = doc.find("signing_key"); key != doc.end() && key->is_object()) {
    c.signing_kid = str(*key, "kid");
    c.signing_seed = str(*key, "seed");
  }
  if (c.admin_url.empty() || c.admin_token.empty()) {
    return Fail(ErrorCode::kCorruption, path + ": admin_url or admin_token missing");
  }
  return c;
}

std::string CredentialsPath(const std::string& explicit_path,
                            const std::optional<std::string>& data_dir_env) {
  if (!explicit_path.empty()) return explicit_path;
  std::string dir = data_dir_env && !data_dir_env->empty() ? *data_dir_env : "./felix-data";
  return dir + "/" + kCredentialsFile;
}

std::string NewAdminToken() {
  auth::EnsureSodium();
  uint8_t raw[32];
  randombytes_buf(raw, sizeof raw);
  return auth::Base64UrlEncode(std::span<const uint8_t>(raw, sizeof raw));
}

}  // namespace felix::catalog
