#include "catalog/catalog.h"

#include <algorithm>

namespace felix::catalog {

std::string CatalogSnapshot::Key(std::initializer_list<std::string_view> parts) {
  std::string key;
  size_t total = parts.size();
  for (auto p : parts) total += p.size();
  key.reserve(total);
  for (auto p : parts) {
    if (!key.empty()) key.push_back('\x01');
    key.append(p);
  }
  return key;
}

int CatalogSnapshot::CompareToJoined(std::string_view key, const JoinedKey& joined) {
  // Walks `key` against the parts and the separators Key() puts between them (one before each
  // part after the first, once the key built so far is not empty).
  size_t pos = 0;
  bool started = false;
  for (std::string_view part : joined.parts) {
    if (started) {
      if (pos == key.size()) return -1;
      const auto c = static_cast<unsigned char>(key[pos]);
      if (c != 0x01) return c < 0x01 ? -1 : 1;
      ++pos;
    }
    const size_t n = std::min(part.size(), key.size() - pos);
    if (int r = key.substr(pos, n).compare(part.substr(0, n)); r != 0) return r;
    if (n < part.size()) return -1;
    pos += n;
    started = started || !part.empty();
  }
  return pos == key.size() ? 0 : 1;
}

const Tenant* CatalogSnapshot::FindTenant(std::string_view tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? nullptr : &it->second;
}

const Namespace* CatalogSnapshot::FindNamespace(std::string_view tenant,
                                                std::string_view ns) const {
  auto it = namespaces_.find(JoinedKey{{tenant, ns}});
  return it == namespaces_.end() ? nullptr : &it->second;
}

const Stream* CatalogSnapshot::FindStream(std::string_view tenant, std::string_view ns,
                                          std::string_view stream) const {
  auto it = streams_.find(JoinedKey{{tenant, ns, stream}});
  return it == streams_.end() ? nullptr : &it->second;
}

const Cache* CatalogSnapshot::FindCache(std::string_view tenant, std::string_view ns,
                                        std::string_view cache) const {
  auto it = caches_.find(JoinedKey{{tenant, ns, cache}});
  return it == caches_.end() ? nullptr : &it->second;
}

std::vector<auth::VerifyingKey> CatalogSnapshot::VerifyingKeys(std::string_view tenant) const {
  std::vector<auth::VerifyingKey> out;
  for (const auto& k : keys_) {
    if (k.tenant_id == tenant && k.current) out.push_back(k.key);
  }
  for (const auto& k : keys_) {
    if (k.tenant_id == tenant && !k.current) out.push_back(k.key);
  }
  return out;
}

bool CatalogSnapshot::HasVerifyingKeys(std::string_view tenant,
                                       std::span<const auth::VerifyingKey> keys) const {
  size_t next = 0;
  // The order VerifyingKeys lists them in: current keys first.
  for (bool current : {true, false}) {
    for (const auto& k : keys_) {
      if (k.tenant_id != tenant || k.current != current) continue;
      if (next == keys.size() || !(k.key == keys[next])) return false;
      ++next;
    }
  }
  return next == keys.size();
}

std::vector<Tenant> CatalogSnapshot::Tenants() const {
  std::vector<Tenant> out;
  for (const auto& [key, t] : tenants_) out.push_back(t);
  return out;
}

std::vector<Namespace> CatalogSnapshot::Namespaces(std::string_view tenant) const {
  std::vector<Namespace> out;
  for (const auto& [key, ns] : namespaces_) {
    if (ns.tenant_id == tenant) out.push_back(ns);
  }
  return out;
}

std::vector<Stream> CatalogSnapshot::Streams(std::string_view tenant, std::string_view ns) const {
  std::vector<Stream> out;
  for (const auto& [key, s] : streams_) {
    if (s.tenant_id == tenant && s.namespace_name == ns) out.push_back(s);
  }
  return out;
}

std::vector<Cache> CatalogSnapshot::Caches(std::string_view tenant, std::string_view ns) const {
  std::vector<Cache> out;
  for (const auto& [key, c] : caches_) {
    if (c.tenant_id == tenant && c.namespace_name == ns) out.push_back(c);
  }
  return out;
}

std::vector<Stream> CatalogSnapshot::AllStreams() const {
  std::vector<Stream> out;
  for (const auto& [key, s] : streams_) out.push_back(s);
  return out;
}

std::vector<Cache> CatalogSnapshot::AllCaches() const {
  std::vector<Cache> out;
  for (const auto& [key, c] : caches_) out.push_back(c);
  return out;
}

namespace {

std::string Path(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += (out.empty() ? "" : "/") + std::string(p);
  return out;
}

tl::unexpected<Error> NotFound(const char* what, std::initializer_list<std::string_view> parts) {
  return Fail(ErrorCode::kNotFound, std::string(what) + " '" + Path(parts) + "' not found");
}

}  // namespace

Result<Tenant> Catalog::GetTenant(std::string_view tenant) const {
  auto snap = Snapshot();
  if (const Tenant* t = snap->FindTenant(tenant)) return *t;
  return NotFound("tenant", {tenant});
}

Result<Namespace> Catalog::GetNamespace(std::string_view tenant, std::string_view ns) const {
  auto snap = Snapshot();
  if (const Namespace* n = snap->FindNamespace(tenant, ns)) return *n;
  return NotFound("namespace", {tenant, ns});
}

Result<Stream> Catalog::GetStream(std::string_view tenant, std::string_view ns,
                                  std::string_view stream) const {
  auto snap = Snapshot();
  if (const Stream* s = snap->FindStream(tenant, ns, stream)) return *s;
  return NotFound("stream", {tenant, ns, stream});
}

Result<Cache> Catalog::GetCache(std::string_view tenant, std::string_view ns,
                                std::string_view cache) const {
  auto snap = Snapshot();
  if (const Cache* c = snap->FindCache(tenant, ns, cache)) return *c;
  return NotFound("cache", {tenant, ns, cache});
}

Result<std::vector<Namespace>> Catalog::ListNamespaces(std::string_view tenant) const {
  auto snap = Snapshot();
  if (!snap->FindTenant(tenant)) return NotFound("tenant", {tenant});
  return snap->Namespaces(tenant);
}

Result<std::vector<Stream>> Catalog::ListStreams(std::string_view tenant,
                                                 std::string_view ns) const {
  auto snap = Snapshot();
  if (!snap->FindNamespace(tenant, ns)) return NotFound("namespace", {tenant, ns});
  return snap->Streams(tenant, ns);
}

Result<std::vector<Cache>> Catalog::ListCaches(std::string_view tenant, std::string_view ns) const {
  auto snap = Snapshot();
  if (!snap->FindNamespace(tenant, ns)) return NotFound("namespace", {tenant, ns});
  return snap->Caches(tenant, ns);
}

}  // namespace felix::catalog
