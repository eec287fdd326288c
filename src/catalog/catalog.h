// Catalog: the broker's metadata (tenants, namespaces, streams, caches, tenant keys) behind
// one interface, so the embedded single-node store (EmbeddedCatalog, in the data directory)
// can later be replaced by an etcd-backed one without touching callers.
//
// Reads come from an immutable CatalogSnapshot: Snapshot() returns the current one (a cheap
// shared_ptr copy under a mutex); it stays valid and unchanged however long the caller holds
// it. Mutations are serialised, persisted before they become visible, then published as a new
// snapshot, then announced to listeners.
//
// Thread-safety: every method may be called from any thread. Listeners run on the mutating
// thread, in commit order, while mutations are serialised: they may read (Snapshot(), Get*)
// but must not mutate the catalog. The catalog must outlive every registered listener's use.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "auth/keys.h"
#include "catalog/model.h"
#include "common/result.h"

namespace felix::catalog {

// Immutable view of the whole catalog. Find* lookups do not allocate.
class CatalogSnapshot {
 public:
  // The key Key(parts) would build, compared with stored keys in place: a stream lookup per
  // request built (and allocated) its key before (docs/performance.md, change 35).
  struct JoinedKey {
    std::initializer_list<std::string_view> parts;
  };
  // Orders keys as std::less<std::string> does, and a JoinedKey as the key it stands for.
  struct KeyLess {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a < b; }
    bool operator()(std::string_view a, const JoinedKey& b) const {
      return CompareToJoined(a, b) < 0;
    }
    bool operator()(const JoinedKey& a, std::string_view b) const {
      return CompareToJoined(b, a) > 0;
    }
  };
  // <0, 0, >0 as std::string_view(key).compare(Key(joined.parts)) would be.
  static int CompareToJoined(std::string_view key, const JoinedKey& joined);

  const Tenant* FindTenant(std::string_view tenant) const;
  const Namespace* FindNamespace(std::string_view tenant, std::string_view ns) const;
  const Stream* FindStream(std::string_view tenant, std::string_view ns,
                           std::string_view stream) const;
  const Cache* FindCache(std::string_view tenant, std::string_view ns,
                         std::string_view cache) const;
  // Public keys of a tenant, current key first (empty for an unknown tenant).
  std::vector<auth::VerifyingKey> VerifyingKeys(std::string_view tenant) const;
  // Whether VerifyingKeys(tenant) would equal `keys` (same keys, same order), without copying.
  bool HasVerifyingKeys(std::string_view tenant, std::span<const auth::VerifyingKey> keys) const;

  std::vector<Tenant> Tenants() const;
  std::vector<Namespace> Namespaces(std::string_view tenant) const;
  std::vector<Stream> Streams(std::string_view tenant, std::string_view ns) const;
  std::vector<Cache> Caches(std::string_view tenant, std::string_view ns) const;
  // Every stream / cache of every tenant (the broker opens their shards at start).
  std::vector<Stream> AllStreams() const;
  std::vector<Cache> AllCaches() const;
  const std::vector<TenantKey>& Keys() const { return keys_; }

  // Keys join names with '\x01', below every name character, so map order is name order.
  static std::string Key(std::initializer_list<std::string_view> parts);

  std::map<std::string, Tenant, std::less<>> tenants_;
  std::map<std::string, Namespace, KeyLess> namespaces_;
  std::map<std::string, Stream, KeyLess> streams_;
  std::map<std::string, Cache, KeyLess> caches_;
  std::vector<TenantKey> keys_;
};

struct CatalogChange {
  enum class Op : uint8_t { kCreated, kDeleted };
  Op op;
  std::variant<Tenant, Namespace, Stream, Cache> entity;
};

class Catalog {
 public:
  using Listener = std::function<void(const CatalogChange&)>;
  using ListenerId = uint64_t;

  virtual ~Catalog() = default;

  virtual std::shared_ptr<const CatalogSnapshot> Snapshot() const = 0;

  // Errors: kInvalidArgument (validation), kAlreadyExists, kNotFound (the parent is missing,
  // or the entity on get/delete), kIo (persisting failed; nothing changed).
  // CreateTenant also generates the tenant's first Ed25519 signing key.
  virtual Result<Tenant> CreateTenant(const Tenant& tenant) = 0;
  virtual Result<void> DeleteTenant(std::string_view tenant) = 0;  // cascades
  virtual Result<Namespace> CreateNamespace(const Namespace& ns) = 0;
  virtual Result<void> DeleteNamespace(std::string_view tenant, std::string_view ns) = 0;
  virtual Result<Stream> CreateStream(const Stream& stream) = 0;
  virtual Result<void> DeleteStream(std::string_view tenant, std::string_view ns,
                                    std::string_view stream) = 0;
  virtual Result<Cache> CreateCache(const Cache& cache) = 0;
  virtual Result<void> DeleteCache(std::string_view tenant, std::string_view ns,
                                   std::string_view cache) = 0;

  // The tenant's current signing key (private). kNotFound when this store does not hold it
  // (an unknown tenant, or a store that keeps only public keys).
  virtual Result<auth::SigningKey> SigningKeyFor(std::string_view tenant) const = 0;

  virtual ListenerId AddListener(Listener listener) = 0;
  virtual void RemoveListener(ListenerId id) = 0;

  // Convenience reads over Snapshot().
  Result<Tenant> GetTenant(std::string_view tenant) const;
  Result<Namespace> GetNamespace(std::string_view tenant, std::string_view ns) const;
  Result<Stream> GetStream(std::string_view tenant, std::string_view ns,
                           std::string_view stream) const;
  Result<Cache> GetCache(std::string_view tenant, std::string_view ns,
                         std::string_view cache) const;
  std::vector<Tenant> ListTenants() const { return Snapshot()->Tenants(); }
  // kNotFound when the parent does not exist.
  Result<std::vector<Namespace>> ListNamespaces(std::string_view tenant) const;
  Result<std::vector<Stream>> ListStreams(std::string_view tenant, std::string_view ns) const;
  Result<std::vector<Cache>> ListCaches(std::string_view tenant, std::string_view ns) const;
};

}  // namespace felix::catalog
