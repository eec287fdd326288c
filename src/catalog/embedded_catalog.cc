#include "catalog/embedded_catalog.h"

#include <filesystem>

#include "auth/base64url.h"
#include "catalog/atomic_file.h"

namespace felix::catalog {

namespace {

constexpr const char* kCatalogFile = "catalog.json";
constexpr const char* kKeysFile = "signing-keys.json";
constexpr int kFormatVersion = 1;

std::string Join(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += (out.empty() ? "" : "/") + std::string(p);
  return out;
}

tl::unexpected<Error> Exists(const char* what, std::initializer_list<std::string_view> parts) {
  return Fail(ErrorCode::kAlreadyExists,
              std::string(what) + " '" + Join(parts) + "' already exists");
}

tl::unexpected<Error> Missing(const char* what, std::initializer_list<std::string_view> parts) {
  return Fail(ErrorCode::kNotFound, std::string(what) + " '" + Join(parts) + "' not found");
}

std::string RenderCatalog(const CatalogSnapshot& s) {
  Json doc = Json::object();
  doc["version"] = kFormatVersion;
  doc["tenants"] = Json::array();
  for (const auto& [k, t] : s.tenants_) doc["tenants"].push_back(ToJson(t));
  doc["namespaces"] = Json::array();
  for (const auto& [k, ns] : s.namespaces_) doc["namespaces"].push_back(ToJson(ns));
  doc["streams"] = Json::array();
  for (const auto& [k, st] : s.streams_) doc["streams"].push_back(ToJson(st));
  doc["caches"] = Json::array();
  for (const auto& [k, c] : s.caches_) doc["caches"].push_back(ToJson(c));
  doc["keys"] = Json::array();
  for (const auto& key : s.keys_) {
    doc["keys"].push_back(Json{{"tenant_id", key.tenant_id},
                               {"kid", key.key.kid},
                               {"x", auth::Base64UrlEncode(key.key.public_key)},
                               {"current", key.current}});
  }
  return doc.dump(2) + "\n";
}

std::string StringField(const Json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<CatalogSnapshot> ParseCatalog(const std::string& text, const std::string& path) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto corrupt = [&](const std::string& why) {
    return Fail(ErrorCode::kCorruption, path + ": " + why);
  };
  if (doc.is_discarded() || !doc.is_object()) return corrupt("not a JSON object");
  auto version = doc.find("version");
  if (version == doc.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kFormatVersion) {
    return corrupt("unsupported format version");
  }
  auto array = [&](const char* name) -> const Json* {
    auto it = doc.find(name);
    return it != doc.end() && it->is_array() ? &*it : nullptr;
  };
  CatalogSnapshot s;
  for (const char* name : {"tenants", "namespaces", "streams", "caches", "keys"}) {
    if (!array(name)) return corrupt(std::string("'") + name + "' is not an array");
  }
  for (const auto& j : *array("tenants")) {
    auto t = TenantFromJson(j);
    if (!t) return corrupt("tenant: " + t.error().message);
    s.tenants_.emplace(t->tenant_id, *t);
  }
  for (const auto& j : *array("namespaces")) {
    if (!j.is_object()) return corrupt("namespace is not an object");
    auto ns = NamespaceFromJson(StringField(j, "tenant_id"), j);
    if (!ns) return corrupt("namespace: " + ns.error().message);
    s.namespaces_.emplace(CatalogSnapshot::Key({ns->tenant_id, ns->name}), *ns);
  }
  for (const auto& j : *array("streams")) {
    if (!j.is_object()) return corrupt("stream is not an object");
    auto st = StreamFromJson(StringField(j, "tenant_id"), StringField(j, "namespace"), j);
    if (!st) return corrupt("stream: " + st.error().message);
    s.streams_.emplace(CatalogSnapshot::Key({st->tenant_id, st->namespace_name, st->name}), *st);
  }
  for (const auto& j : *array("caches")) {
    if (!j.is_object()) return corrupt("cache is not an object");
    auto c = CacheFromJson(StringField(j, "tenant_id"), StringField(j, "namespace"), j);
    if (!c) return corrupt("cache: " + c.error().message);
    s.caches_.emplace(CatalogSnapshot::Key({c->tenant_id, c->namespace_name, c->name}), *c);
  }
  for (const auto& j : *array("keys")) {
    if (!j.is_object()) return corrupt("key is not an object");
    auto key = auth::VerifyingKeyFromBase64(StringField(j, "kid"), StringField(j, "x"));
    if (!key) return corrupt("key: " + key.error().ToString());
    auto current = j.find("current");
    s.keys_.push_back(
        TenantKey{StringField(j, "tenant_id"), *key,
                  current == j.end() || !current->is_boolean() || current->get<bool>()});
  }
  return s;
}

template <typename Map>
void EraseIf(Map& map, std::vector<CatalogChange>& changes, auto predicate) {
  for (auto it = map.begin(); it != map.end();) {
    if (predicate(it->second)) {
      changes.push_back({CatalogChange::Op::kDeleted, it->second});
      it = map.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

EmbeddedCatalog::EmbeddedCatalog(std::string data_dir) : data_dir_(std::move(data_dir)) {}

Result<std::unique_ptr<EmbeddedCatalog>> EmbeddedCatalog::Open(const std::string& data_dir,
                                                               const OpenOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec) return Fail(ErrorCode::kIo, "create " + data_dir + ": " + ec.message());
  std::unique_ptr<EmbeddedCatalog> catalog(new EmbeddedCatalog(data_dir));
  auto text = ReadWholeFile(data_dir + "/" + kCatalogFile);
  if (!text && text.error().code != ErrorCode::kNotFound) return tl::unexpected(text.error());
  catalog->snapshot_ = std::make_shared<CatalogSnapshot>();
  catalog->secrets_ = std::make_shared<Secrets>();
  if (text) {
    if (auto r = catalog->Load(); !r) return tl::unexpected(r.error());
    return catalog;
  }
  catalog->first_start_ = true;
  if (options.create_default_tenant) {
    auto t = catalog->CreateTenant(Tenant{kDefaultTenant, "Default tenant"});
    if (!t) return tl::unexpected(t.error());
    auto ns = catalog->CreateNamespace(Namespace{kDefaultTenant, kDefaultNamespace, "Default"});
    if (!ns) return tl::unexpected(ns.error());
  } else {
    auto r = catalog->Commit(std::make_shared<CatalogSnapshot>(), nullptr, {});
    if (!r) return tl::unexpected(r.error());
  }
  return catalog;
}

Result<void> EmbeddedCatalog::Load() {
  std::string catalog_path = data_dir_ + "/" + kCatalogFile;
  auto text = ReadWholeFile(catalog_path);
  if (!text) return tl::unexpected(text.error());
  auto parsed = ParseCatalog(*text, catalog_path);
  if (!parsed) return tl::unexpected(parsed.error());

  auto secrets = std::make_shared<Secrets>();
  std::string keys_path = data_dir_ + "/" + kKeysFile;
  auto keys_text = ReadWholeFile(keys_path);
  if (!keys_text && keys_text.error().code != ErrorCode::kNotFound) {
    return tl::unexpected(keys_text.error());
  }
  if (keys_text) {
    Json doc = Json::parse(*keys_text, nullptr, /*allow_exceptions=*/false);
    auto keys = doc.is_object() ? doc.find("keys") : doc.end();
    if (doc.is_discarded() || !doc.is_object() || keys == doc.end() || !keys->is_array()) {
      return Fail(ErrorCode::kCorruption, keys_path + ": not a signing-key file");
    }
    for (const auto& j : *keys) {
      if (!j.is_object()) return Fail(ErrorCode::kCorruption, keys_path + ": bad entry");
      auto key = auth::SigningKey::FromSeedBase64(StringField(j, "kid"), StringField(j, "seed"));
      if (!key) return Fail(ErrorCode::kCorruption, keys_path + ": " + key.error().ToString());
      secrets->insert_or_assign(StringField(j, "tenant_id"), *key);
    }
  }
  std::lock_guard lock(mu_);
  snapshot_ = std::make_shared<CatalogSnapshot>(std::move(*parsed));
  secrets_ = std::move(secrets);
  return Ok();
}

Result<void> EmbeddedCatalog::Commit(std::shared_ptr<CatalogSnapshot> next,
                                     std::shared_ptr<const Secrets> secrets,
                                     const std::vector<CatalogChange>& changes) {
  // Private keys first: a public key on disk always has its private half next to it.
  if (secrets) {
    Json doc = Json::object();
    doc["version"] = kFormatVersion;
    doc["keys"] = Json::array();
    for (const auto& [tenant, key] : *secrets) {
      doc["keys"].push_back(
          Json{{"tenant_id", tenant}, {"kid", key.kid()}, {"seed", key.SeedBase64()}});
    }
    auto r = WriteFileAtomically(data_dir_ + "/" + kKeysFile, doc.dump(2) + "\n", 0600);
    if (!r) return r;
  }
  auto r = WriteFileAtomically(data_dir_ + "/" + kCatalogFile, RenderCatalog(*next), 0644);
  if (!r) return r;
  {
    std::lock_guard lock(mu_);
    snapshot_ = std::move(next);
    if (secrets) secrets_ = std::move(secrets);
  }
  std::vector<Listener> listeners;
  {
    std::lock_guard lock(listeners_mu_);
    for (const auto& [id, l] : listeners_) listeners.push_back(l);
  }
  for (const auto& change : changes) {
    for (const auto& l : listeners) l(change);
  }
  return Ok();
}

std::shared_ptr<const CatalogSnapshot> EmbeddedCatalog::Snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

Result<Tenant> EmbeddedCatalog::CreateTenant(const Tenant& tenant) {
  if (auto v = Validate(tenant); !v) return tl::unexpected(v.error());
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (current->FindTenant(tenant.tenant_id)) return Exists("tenant", {tenant.tenant_id});
  auto next = std::make_shared<CatalogSnapshot>(*current);
  next->tenants_.emplace(tenant.tenant_id, tenant);
  auth::SigningKey key = auth::SigningKey::Generate(auth::NewKeyId());
  next->keys_.push_back(TenantKey{tenant.tenant_id, key.verifying_key(), true});
  std::shared_ptr<const Secrets> old_secrets;
  {
    std::lock_guard lock(mu_);
    old_secrets = secrets_;
  }
  auto secrets = std::make_shared<Secrets>(*old_secrets);
  secrets->insert_or_assign(tenant.tenant_id, key);
  auto r = Commit(std::move(next), std::move(secrets),
                  {CatalogChange{CatalogChange::Op::kCreated, tenant}});
  if (!r) return tl::unexpected(r.error());
  return tenant;
}

Result<void> EmbeddedCatalog::DeleteTenant(std::string_view tenant) {
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (!current->FindTenant(tenant)) return Missing("tenant", {tenant});
  auto next = std::make_shared<CatalogSnapshot>(*current);
  std::vector<CatalogChange> changes;
  EraseIf(next->streams_, changes, [&](const Stream& s) { return s.tenant_id == tenant; });
  EraseIf(next->caches_, changes, [&](const Cache& c) { return c.tenant_id == tenant; });
  EraseIf(next->namespaces_, changes, [&](const Namespace& n) { return n.tenant_id == tenant; });
  EraseIf(next->tenants_, changes, [&](const Tenant& t) { return t.tenant_id == tenant; });
  std::erase_if(next->keys_, [&](const TenantKey& k) { return k.tenant_id == tenant; });
  std::shared_ptr<const Secrets> old_secrets;
  {
    std::lock_guard lock(mu_);
    old_secrets = secrets_;
  }
  auto secrets = std::make_shared<Secrets>(*old_secrets);
  if (auto it = secrets->find(tenant); it != secrets->end()) secrets->erase(it);
  return Commit(std::move(next), std::move(secrets), changes);
}

Result<Namespace> EmbeddedCatalog::CreateNamespace(const Namespace& ns) {
  if (auto v = Validate(ns); !v) return tl::unexpected(v.error());
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (!current->FindTenant(ns.tenant_id)) return Missing("tenant", {ns.tenant_id});
  if (current->FindNamespace(ns.tenant_id, ns.name)) {
    return Exists("namespace", {ns.tenant_id, ns.name});
  }
  auto next = std::make_shared<CatalogSnapshot>(*current);
  next->namespaces_.emplace(CatalogSnapshot::Key({ns.tenant_id, ns.name}), ns);
  auto r = Commit(std::move(next), nullptr, {CatalogChange{CatalogChange::Op::kCreated, ns}});
  if (!r) return tl::unexpected(r.error());
  return ns;
}

Result<void> EmbeddedCatalog::DeleteNamespace(std::string_view tenant, std::string_view ns) {
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (!current->FindNamespace(tenant, ns)) return Missing("namespace", {tenant, ns});
  auto next = std::make_shared<CatalogSnapshot>(*current);
  std::vector<CatalogChange> changes;
  EraseIf(next->streams_, changes,
          [&](const Stream& s) { return s.tenant_id == tenant && s.namespace_name == ns; });
  EraseIf(next->caches_, changes,
          [&](const Cache& c) { return c.tenant_id == tenant && c.namespace_name == ns; });
  EraseIf(next->namespaces_, changes,
          [&](const Namespace& n) { return n.tenant_id == tenant && n.name == ns; });
  return Commit(std::move(next), nullptr, changes);
}

Result<Stream> EmbeddedCatalog::CreateStream(const Stream& stream) {
  if (auto v = Validate(stream); !v) return tl::unexpected(v.error());
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (!current->FindNamespace(stream.tenant_id, stream.namespace_name)) {
    return Missing("namespace", {stream.tenant_id, stream.namespace_name});
  }
  if (current->FindStream(stream.tenant_id, stream.namespace_name, stream.name)) {
    return Exists("stream", {stream.tenant_id, stream.namespace_name, stream.name});
  }
  auto next = std::make_shared<CatalogSnapshot>(*current);
  next->streams_.emplace(
      CatalogSnapshot::Key({stream.tenant_id, stream.namespace_name, stream.name}), stream);
  auto r = Commit(std::move(next), nullptr, {CatalogChange{CatalogChange::Op::kCreated, stream}});
  if (!r) return tl::unexpected(r.error());
  return stream;
}

Result<void> EmbeddedCatalog::DeleteStream(std::string_view tenant, std::string_view ns,
                                           std::string_view stream) {
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (!current->FindStream(tenant, ns, stream)) return Missing("stream", {tenant, ns, stream});
  auto next = std::make_shared<CatalogSnapshot>(*current);
  std::vector<CatalogChange> changes;
  EraseIf(next->streams_, changes, [&](const Stream& s) {
    return s.tenant_id == tenant && s.namespace_name == ns && s.name == stream;
  });
  return Commit(std::move(next), nullptr, changes);
}

Result<Cache> EmbeddedCatalog::CreateCache(const Cache& cache) {
  if (auto v = Validate(cache); !v) return tl::unexpected(v.error());
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (!current->FindNamespace(cache.tenant_id, cache.namespace_name)) {
    return Missing("namespace", {cache.tenant_id, cache.namespace_name});
  }
  if (current->FindCache(cache.tenant_id, cache.namespace_name, cache.name)) {
    return Exists("cache", {cache.tenant_id, cache.namespace_name, cache.name});
  }
  auto next = std::make_shared<CatalogSnapshot>(*current);
  next->caches_.emplace(CatalogSnapshot::Key({cache.tenant_id, cache.namespace_name, cache.name}),
                        cache);
  auto r = Commit(std::move(next), nullptr, {CatalogChange{CatalogChange::Op::kCreated, cache}});
  if (!r) return tl::unexpected(r.error());
  return cache;
}

Result<void> EmbeddedCatalog::DeleteCache(std::string_view tenant, std::string_view ns,
                                          std::string_view cache) {
  std::lock_guard write(write_mu_);
  auto current = Snapshot();
  if (!current->FindCache(tenant, ns, cache)) return Missing("cache", {tenant, ns, cache});
  auto next = std::make_shared<CatalogSnapshot>(*current);
  std::vector<CatalogChange> changes;
  EraseIf(next->caches_, changes, [&](const Cache& c) {
    return c.tenant_id == tenant && c.namespace_name == ns && c.name == cache;
  });
  return Commit(std::move(next), nullptr, changes);
}

Result<auth::SigningKey> EmbeddedCatalog::SigningKeyFor(std::string_view tenant) const {
  std::lock_guard lock(mu_);
  auto it = secrets_->find(tenant);
  if (it == secrets_->end()) {
    return Fail(ErrorCode::kNotFound, "no signing key for tenant '" + std::string(tenant) + "'");
  }
  return it->second;
}

Catalog::ListenerId EmbeddedCatalog::AddListener(Listener listener) {
  std::lock_guard lock(listeners_mu_);
  ListenerId id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void EmbeddedCatalog::RemoveListener(ListenerId id) {
  std::lock_guard lock(listeners_mu_);
  listeners_.erase(id);
}

}  // namespace felix::catalog
