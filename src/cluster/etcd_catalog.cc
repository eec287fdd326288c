#include "cluster/etcd_catalog.h"

#include <spdlog/spdlog.h>

#include <array>
#include <vector>

#include "auth/base64url.h"
#include "catalog/embedded_catalog.h"

namespace felix::cluster {

namespace {

using catalog::CatalogChange;
using catalog::Json;

std::string Join(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += (out.empty() ? "" : "/") + std::string(p);
  return out;
}

tl::unexpected<Error> Missing(const char* what, const std::string& display) {
  return Fail(ErrorCode::kNotFound, std::string(what) + " '" + display + "' not found");
}

// An etcd failure as the catalog's error; a write whose outcome is unknown says so.
tl::unexpected<Error> EtcdWriteFailed(const etcd::EtcdError& error) {
  Error e = error.ToError();
  if (e.code != ErrorCode::kTimeout && e.code != ErrorCode::kUnavailable) {
    e.code = ErrorCode::kUnavailable;
  }
  // Only a refusal by etcd itself (a bad request) is definite; a lost connection, a deadline, a
  // local cancel or an unexplained failure may come after etcd applied the write.
  if (error.code != etcd::EtcdErrc::kInvalidArgument) {
    e.message =
        "catalog write indeterminate (etcd may or may not have applied it; re-read "
        "before retrying): " +
        e.message;
  } else {
    e.message = "catalog write failed: " + e.message;
  }
  return tl::unexpected(std::move(e));
}

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t slash = s.find('/', start);
    out.push_back(s.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

std::string StringField(const Json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string EncodeKey(std::string_view tenant, const auth::SigningKey& key, bool current) {
  return Json{{"tenant_id", tenant},
              {"kid", key.kid()},
              {"x", auth::Base64UrlEncode(key.verifying_key().public_key)},
              {"seed", key.SeedBase64()},
              {"current", current}}
      .dump();
}

// A decoded entity whose own name (`field`) must be the last part of its key.
template <typename T>
Result<EtcdCatalog::Entity> Checked(Result<T> r, std::string T::*field, std::string_view want,
                                    const std::string& key) {
  if (!r) return Fail(ErrorCode::kCorruption, key + ": " + r.error().message);
  if ((*r).*field != want) {
    return Fail(ErrorCode::kCorruption,
                key + ": value names '" + (*r).*field + "', not the key's name");
  }
  return EtcdCatalog::Entity(std::move(*r));
}

// Deletes every key under `prefix`.
etcd::TxnOp DeletePrefix(std::string prefix) {
  std::string end = etcd::PrefixEnd(prefix);
  return etcd::TxnOp::Delete(std::move(prefix), std::move(end));
}

// Order of announcements: parents are created before their children and deleted after them.
constexpr std::array<size_t, 4> kCreateOrder = {0, 1, 2, 3};  // tenant, namespace, stream, cache
constexpr std::array<size_t, 4> kDeleteOrder = {2, 3, 1, 0};

std::optional<CatalogChange> Announce(CatalogChange::Op op, const EtcdCatalog::Entity& e) {
  switch (e.index()) {
    case 0:
      return CatalogChange{op, std::get<catalog::Tenant>(e)};
    case 1:
      return CatalogChange{op, std::get<catalog::Namespace>(e)};
    case 2:
      return CatalogChange{op, std::get<catalog::Stream>(e)};
    case 3:
      return CatalogChange{op, std::get<catalog::Cache>(e)};
    default:
      return std::nullopt;  // keys are not announced
  }
}

bool Same(const EtcdCatalog::Entity& a, const EtcdCatalog::Entity& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, EtcdCatalog::StoredKey>) {
          return x.key == y.key && x.secret.seed() == y.secret.seed() &&
                 x.mod_revision == y.mod_revision;
        } else {
          return x == y;
        }
      },
      a);
}

}  // namespace

Result<EtcdCatalog::Entity> DecodeCatalogEntry(const ClusterKeys& keys, const etcd::KeyValue& kv) {
  const std::string prefix = keys.CatalogPrefix();
  if (kv.key.compare(0, prefix.size(), prefix) != 0) {
    return Fail(ErrorCode::kInvalidArgument, kv.key + ": not under " + prefix);
  }
  auto parts = Split(std::string_view(kv.key).substr(prefix.size()));
  for (size_t i = 1; i < parts.size(); ++i) {
    if (!catalog::IsValidName(parts[i])) {
      return Fail(ErrorCode::kCorruption,
                  kv.key + ": '" + std::string(parts[i]) + "' is not a name");
    }
  }
  Json j = Json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Fail(ErrorCode::kCorruption, kv.key + ": value is not a JSON object");
  }
  const std::string_view kind = parts[0];
  if (kind == "tenants" && parts.size() == 2) {
    return Checked(catalog::TenantFromJson(j), &catalog::Tenant::tenant_id, parts[1], kv.key);
  }
  if (kind == "namespaces" && parts.size() == 3) {
    return Checked(catalog::NamespaceFromJson(std::string(parts[1]), j), &catalog::Namespace::name,
                   parts[2], kv.key);
  }
  if (kind == "streams" && parts.size() == 4) {
    return Checked(catalog::StreamFromJson(std::string(parts[1]), std::string(parts[2]), j),
                   &catalog::Stream::name, parts[3], kv.key);
  }
  if (kind == "caches" && parts.size() == 4) {
    return Checked(catalog::CacheFromJson(std::string(parts[1]), std::string(parts[2]), j),
                   &catalog::Cache::name, parts[3], kv.key);
  }
  if (kind == "keys" && parts.size() == 3) {
    std::string kid(parts[2]);
    if (StringField(j, "kid") != kid || StringField(j, "tenant_id") != parts[1]) {
      return Fail(ErrorCode::kCorruption, kv.key + ": tenant_id or kid differ from the key");
    }
    auto pub = auth::VerifyingKeyFromBase64(kid, StringField(j, "x"));
    if (!pub) return Fail(ErrorCode::kCorruption, kv.key + ": x: " + pub.error().ToString());
    auto secret = auth::SigningKey::FromSeedBase64(kid, StringField(j, "seed"));
    if (!secret) {
      return Fail(ErrorCode::kCorruption, kv.key + ": seed: " + secret.error().ToString());
    }
    if (secret->verifying_key() != *pub) {
      return Fail(ErrorCode::kCorruption, kv.key + ": seed does not match the public key x");
    }
    auto current = j.find("current");
    EtcdCatalog::StoredKey stored{
        catalog::TenantKey{std::string(parts[1]), *pub,
                           current == j.end() || !current->is_boolean() || current->get<bool>()},
        *secret, kv.mod_revision};
    return EtcdCatalog::Entity(std::move(stored));
  }
  return Fail(ErrorCode::kCorruption, kv.key + ": not a catalog key");
}

EtcdCatalog::EtcdCatalog(etcd::EtcdClient& client, ClusterKeys keys)
    : client_(client), keys_(std::move(keys)) {
  MutexLock lock(mu_);
  snapshot_ = std::make_shared<catalog::CatalogSnapshot>();
  secrets_ = std::make_shared<Secrets>();
}

Result<std::unique_ptr<EtcdCatalog>> EtcdCatalog::Create(etcd::EtcdClient& client,
                                                         const ClusterKeys& keys) {
  std::unique_ptr<EtcdCatalog> c(new EtcdCatalog(client, keys));
  etcd::MirrorCallbacks cb;
  EtcdCatalog* self = c.get();
  cb.on_snapshot = [self](const std::vector<etcd::KeyValue>& kvs, int64_t revision) {
    self->OnSnapshot(kvs, revision);
  };
  cb.on_events = [self](const std::vector<etcd::Event>& events) { self->OnEvents(events); };
  cb.on_error = [](const etcd::EtcdError& error) {
    spdlog::warn("catalog mirror: {} (retrying)", error.ToString());
  };
  c->mirror_ = std::make_unique<etcd::PrefixMirror>(client, keys.CatalogPrefix(), std::move(cb));
  return c;
}

EtcdCatalog::~EtcdCatalog() {
  mirror_.reset();  // joins the mirror thread before the state it writes goes away
}

void EtcdCatalog::Start() {
  if (mirror_ != nullptr) mirror_->Start();
}

void EtcdCatalog::Stop() {
  mirror_.reset();
  {
    MutexLock lock(mu_);
    stopped_ = true;
  }
  applied_cv_.notify_all();
}

bool EtcdCatalog::synced() const {
  MutexLock lock(mu_);
  return synced_;
}

int64_t EtcdCatalog::revision() const {
  MutexLock lock(mu_);
  return applied_revision_;
}

std::shared_ptr<const catalog::CatalogSnapshot> EtcdCatalog::Snapshot() const {
  MutexLock lock(mu_);
  return snapshot_;
}

Result<auth::SigningKey> EtcdCatalog::SigningKeyFor(std::string_view tenant) const {
  MutexLock lock(mu_);
  auto it = secrets_->find(tenant);
  if (it == secrets_->end()) {
    return Fail(ErrorCode::kNotFound, "no signing key for tenant '" + std::string(tenant) + "'");
  }
  return it->second;
}

Result<void> EtcdCatalog::EnsureDefaults() {
  // Every broker may run this at once: the txns let one win; the others see "already exists".
  auto t = CreateTenant(catalog::Tenant{catalog::kDefaultTenant, "Default tenant"});
  if (!t && t.error().code != ErrorCode::kAlreadyExists) return tl::unexpected(t.error());
  auto ns = CreateNamespace(
      catalog::Namespace{catalog::kDefaultTenant, catalog::kDefaultNamespace, "Default"});
  if (!ns && ns.error().code != ErrorCode::kAlreadyExists) return tl::unexpected(ns.error());
  return Ok();
}

// --- writes ---------------------------------------------------------------------------------

Result<void> EtcdCatalog::CreateTxn(const char* what, const std::string& display,
                                    const std::string& parent, const char* parent_what,
                                    const std::string& parent_display,
                                    std::vector<etcd::TxnOp> puts) {
  const std::string key = puts.front().key;
  etcd::Txn txn;
  if (!parent.empty()) {
    txn.compares.push_back(
        {parent, etcd::CompareTarget::kVersion, etcd::CompareOp::kGreater, 0, {}});
    txn.else_ops.push_back(etcd::TxnOp::Get(parent));
  }
  txn.compares.push_back(etcd::Compare::Absent(key));
  txn.else_ops.push_back(etcd::TxnOp::Get(key));
  txn.then_ops = std::move(puts);
  auto r = client_.Transact(txn);
  if (!r) return EtcdWriteFailed(r.error());
  if (r->succeeded) {
    WaitApplied(r->revision);  // the put's revision: a catalog event this mirror will apply
    return Ok();
  }
  // The else branch read the parent (when there is one) and the key. Wait for the newest of
  // them, so that what the answer rests on is visible to reads here too (a 409 is followed by
  // a GET that finds the entity). Not r->revision: that may belong to a write outside
  // catalog/, which the mirror never sees.
  int64_t seen = 0;
  for (const auto& result : r->results) {
    for (const auto& kv : result.kvs) seen = std::max(seen, kv.mod_revision);
  }
  WaitApplied(seen);
  // A missing parent is answered first, as the embedded catalog checks it first.
  if (!parent.empty() && (r->results.empty() || r->results[0].kvs.empty())) {
    return Missing(parent_what, parent_display);
  }
  return Fail(ErrorCode::kAlreadyExists, std::string(what) + " '" + display + "' already exists");
}

Result<void> EtcdCatalog::DeleteTxn(const char* what, const std::string& display,
                                    const std::string& key, std::vector<etcd::TxnOp> ops) {
  etcd::Txn txn;
  txn.compares.push_back({key, etcd::CompareTarget::kVersion, etcd::CompareOp::kGreater, 0, {}});
  txn.then_ops = std::move(ops);
  auto r = client_.Transact(txn);
  if (!r) return EtcdWriteFailed(r.error());
  if (!r->succeeded) return Missing(what, display);
  WaitApplied(r->revision);  // the deletion's revision: a catalog event this mirror will apply
  return Ok();
}

void EtcdCatalog::WaitApplied(int64_t revision) {
  if (WaitForRevision(revision, kReadYourWritesWait)) return;
  spdlog::warn(
      "catalog: write at revision {} not yet seen by this broker's mirror after {} ms (applied "
      "{}); it is written, reads here may lag",
      revision, kReadYourWritesWait.count(), this->revision());
}

bool EtcdCatalog::WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (!stopped_ && (!synced_ || applied_revision_ < revision)) {
    if (applied_cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout) {
      return synced_ && applied_revision_ >= revision;
    }
  }
  return true;
}

bool EtcdCatalog::WaitUntilSynced(std::chrono::milliseconds timeout) const {
  return WaitForRevision(0, timeout);
}

Result<catalog::Tenant> EtcdCatalog::CreateTenant(const catalog::Tenant& tenant) {
  if (auto v = catalog::Validate(tenant); !v) return tl::unexpected(v.error());
  auth::SigningKey key = auth::SigningKey::Generate(auth::NewKeyId());
  auto r = CreateTxn(
      "tenant", tenant.tenant_id, "", "", "",
      {etcd::TxnOp::Put(keys_.CatalogTenant(tenant.tenant_id), catalog::ToJson(tenant).dump()),
       etcd::TxnOp::Put(keys_.CatalogKey(tenant.tenant_id, key.kid()),
                        EncodeKey(tenant.tenant_id, key, /*current=*/true))});
  if (!r) return tl::unexpected(r.error());
  return tenant;
}

Result<catalog::Namespace> EtcdCatalog::CreateNamespace(const catalog::Namespace& ns) {
  if (auto v = catalog::Validate(ns); !v) return tl::unexpected(v.error());
  auto r = CreateTxn("namespace", Join({ns.tenant_id, ns.name}), keys_.CatalogTenant(ns.tenant_id),
                     "tenant", ns.tenant_id,
                     {etcd::TxnOp::Put(keys_.CatalogNamespace(ns.tenant_id, ns.name),
                                       catalog::ToJson(ns).dump())});
  if (!r) return tl::unexpected(r.error());
  return ns;
}

template <typename T>
Result<T> EtcdCatalog::CreateInNamespace(const char* what, const T& e, std::string key) {
  if (auto v = catalog::Validate(e); !v) return tl::unexpected(v.error());
  auto r = CreateTxn(what, Join({e.tenant_id, e.namespace_name, e.name}),
                     keys_.CatalogNamespace(e.tenant_id, e.namespace_name), "namespace",
                     Join({e.tenant_id, e.namespace_name}),
                     {etcd::TxnOp::Put(std::move(key), catalog::ToJson(e).dump())});
  if (!r) return tl::unexpected(r.error());
  return e;
}

Result<catalog::Stream> EtcdCatalog::CreateStream(const catalog::Stream& s) {
  return CreateInNamespace("stream", s, keys_.CatalogStream(s.tenant_id, s.namespace_name, s.name));
}

Result<catalog::Cache> EtcdCatalog::CreateCache(const catalog::Cache& c) {
  return CreateInNamespace("cache", c, keys_.CatalogCache(c.tenant_id, c.namespace_name, c.name));
}

// Names are checked before they become etcd keys: an invalid name cannot exist (kNotFound, as
// the embedded catalog answers), and a name with '/' must not reach into other keys' ranges.
Result<void> EtcdCatalog::DeleteTenant(std::string_view tenant) {
  if (!catalog::IsValidName(tenant)) return Missing("tenant", std::string(tenant));
  // Children first, so listeners hear streams and caches before their namespace and tenant.
  const std::string t(tenant);
  const std::string prefix = keys_.CatalogPrefix();
  return DeleteTxn(
      "tenant", t, keys_.CatalogTenant(t),
      {DeletePrefix(prefix + "streams/" + t + "/"), DeletePrefix(prefix + "caches/" + t + "/"),
       DeletePrefix(prefix + "namespaces/" + t + "/"), DeletePrefix(prefix + "keys/" + t + "/"),
       etcd::TxnOp::Delete(keys_.CatalogTenant(t))});
}

Result<void> EtcdCatalog::DeleteNamespace(std::string_view tenant, std::string_view ns) {
  const std::string display = Join({tenant, ns});
  if (!catalog::IsValidName(tenant) || !catalog::IsValidName(ns)) {
    return Missing("namespace", display);
  }
  return DeleteTxn("namespace", display, keys_.CatalogNamespace(tenant, ns),
                   {DeletePrefix(keys_.CatalogStream(tenant, ns, "")),
                    DeletePrefix(keys_.CatalogCache(tenant, ns, "")),
                    etcd::TxnOp::Delete(keys_.CatalogNamespace(tenant, ns))});
}

Result<void> EtcdCatalog::DeleteInNamespace(const char* what, std::string_view tenant,
                                            std::string_view ns, std::string_view name,
                                            const std::string& key) {
  const std::string display = Join({tenant, ns, name});
  if (!catalog::IsValidName(tenant) || !catalog::IsValidName(ns) || !catalog::IsValidName(name)) {
    return Missing(what, display);
  }
  return DeleteTxn(what, display, key, {etcd::TxnOp::Delete(key)});
}

Result<void> EtcdCatalog::DeleteStream(std::string_view tenant, std::string_view ns,
                                       std::string_view stream) {
  return DeleteInNamespace("stream", tenant, ns, stream, keys_.CatalogStream(tenant, ns, stream));
}

Result<void> EtcdCatalog::DeleteCache(std::string_view tenant, std::string_view ns,
                                      std::string_view cache) {
  return DeleteInNamespace("cache", tenant, ns, cache, keys_.CatalogCache(tenant, ns, cache));
}

// --- listeners ------------------------------------------------------------------------------

catalog::Catalog::ListenerId EtcdCatalog::AddListener(Listener listener) {
  MutexLock lock(listeners_mu_);
  ListenerId id = next_listener_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void EtcdCatalog::RemoveListener(ListenerId id) {
  MutexLock lock(listeners_mu_);
  listeners_.erase(id);
}

// --- mirror thread --------------------------------------------------------------------------

void EtcdCatalog::OnSnapshot(const std::vector<etcd::KeyValue>& kvs, int64_t revision) {
  std::map<std::string, Entity> next;
  for (const auto& kv : kvs) {
    auto e = DecodeCatalogEntry(keys_, kv);
    if (!e) {
      spdlog::warn("catalog: skipping {}", e.error().message);
      continue;
    }
    next.emplace(kv.key, std::move(*e));
  }
  // The difference to what was there before (everything, on the first snapshot).
  std::vector<CatalogChange> changes;
  for (size_t kind : kDeleteOrder) {
    for (const auto& [key, old] : entities_) {
      if (old.index() != kind) continue;
      auto it = next.find(key);
      if (it == next.end() || !Same(it->second, old)) {
        changes.push_back(*Announce(CatalogChange::Op::kDeleted, old));
      }
    }
  }
  for (size_t kind : kCreateOrder) {
    for (const auto& [key, now] : next) {
      if (now.index() != kind) continue;
      auto it = entities_.find(key);
      if (it == entities_.end() || !Same(it->second, now)) {
        changes.push_back(*Announce(CatalogChange::Op::kCreated, now));
      }
    }
  }
  entities_ = std::move(next);
  Publish(revision, changes);
}

void EtcdCatalog::OnEvents(const std::vector<etcd::Event>& events) {
  std::vector<CatalogChange> changes;
  auto remove = [&](const std::string& key) {
    auto it = entities_.find(key);
    if (it == entities_.end()) return;
    if (auto c = Announce(CatalogChange::Op::kDeleted, it->second)) changes.push_back(*c);
    entities_.erase(it);
  };
  for (const auto& ev : events) {
    if (ev.type == etcd::Event::Type::kDelete) {
      remove(ev.kv.key);
      continue;
    }
    auto e = DecodeCatalogEntry(keys_, ev.kv);
    if (!e) {
      // What the key held before is gone from etcd; the new value is not usable.
      spdlog::warn("catalog: skipping {}", e.error().message);
      remove(ev.kv.key);
      continue;
    }
    auto it = entities_.find(ev.kv.key);
    if (it != entities_.end() && Same(it->second, *e)) continue;
    if (it != entities_.end()) remove(ev.kv.key);
    if (auto c = Announce(CatalogChange::Op::kCreated, *e)) changes.push_back(*c);
    entities_.insert_or_assign(ev.kv.key, std::move(*e));
  }
  Publish(events.back().kv.mod_revision, changes);
}

void EtcdCatalog::Publish(int64_t revision, const std::vector<CatalogChange>& changes) {
  auto snap = std::make_shared<catalog::CatalogSnapshot>();
  auto secrets = std::make_shared<Secrets>();
  std::map<std::string, int64_t, std::less<>> secret_revision;
  for (const auto& [key, e] : entities_) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          using catalog::CatalogSnapshot;
          if constexpr (std::is_same_v<T, catalog::Tenant>) {
            snap->tenants_.emplace(x.tenant_id, x);
          } else if constexpr (std::is_same_v<T, catalog::Namespace>) {
            snap->namespaces_.emplace(CatalogSnapshot::Key({x.tenant_id, x.name}), x);
          } else if constexpr (std::is_same_v<T, catalog::Stream>) {
            snap->streams_.emplace(CatalogSnapshot::Key({x.tenant_id, x.namespace_name, x.name}),
                                   x);
          } else if constexpr (std::is_same_v<T, catalog::Cache>) {
            snap->caches_.emplace(CatalogSnapshot::Key({x.tenant_id, x.namespace_name, x.name}), x);
          } else {
            snap->keys_.push_back(x.key);
            // The newest current key signs (a tenant normally has exactly one).
            auto& seen = secret_revision[x.key.tenant_id];
            if (x.key.current && x.mod_revision >= seen) {
              seen = x.mod_revision;
              secrets->insert_or_assign(x.key.tenant_id, x.secret);
            }
          }
        },
        e);
  }
  {
    MutexLock lock(mu_);
    snapshot_ = std::move(snap);
    secrets_ = std::move(secrets);
  }
  std::vector<Listener> listeners;
  {
    MutexLock lock(listeners_mu_);
    for (const auto& [id, l] : listeners_) listeners.push_back(l);
  }
  for (const auto& change : changes) {
    for (const auto& l : listeners) l(change);
  }
  // Writers waiting for this revision return after this broker's listeners heard it, as with
  // the embedded catalog (whose listeners run before a mutation returns).
  {
    MutexLock lock(mu_);
    applied_revision_ = std::max(applied_revision_, revision);
    synced_ = true;
  }
  applied_cv_.notify_all();
}

}  // namespace felix::cluster
