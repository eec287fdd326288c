// EtcdCatalog: the catalog of a cluster, kept in etcd under `catalog/` (cluster-etcd.md §2, §4),
// so the admin API of every broker writes to one store and every broker reads the same catalog.
//
// Keys and values (under ClusterKeys::CatalogPrefix()):
//   tenants/<t>               catalog::ToJson(tenant).dump()
//   namespaces/<t>/<ns>       catalog::ToJson(namespace).dump()
//   streams/<t>/<ns>/<name>   catalog::ToJson(stream).dump()
//   caches/<t>/<ns>/<name>    catalog::ToJson(cache).dump()
//   keys/<t>/<kid>            {"tenant_id","kid","x","seed","current"}: the tenant's Ed25519 key,
//                             `x` the base64url public key, `seed` the base64url PRIVATE seed,
//                             `current` true for the key tokens are signed with.
// Because the private seed is in etcd (any broker must be able to mint tokens for a tenant,
// SigningKeyFor), read access to etcd is admin access to every tenant: restrict etcd to the
// brokers (client certificates or a private network).
//
// Reads: Snapshot() is an immutable CatalogSnapshot built by the mirror thread from a
// PrefixMirror over the prefix (a full read, then the watch in revision order; a compaction
// forces a re-read). A value that does not decode (bad JSON, failed validation, name not
// matching its key) is logged and skipped; it never stops the mirror.
//
// Writes: every mutation is one etcd transaction. A create compares "the parent key exists"
// and "the key is absent", and puts; CreateTenant also puts the tenant's first (current) key.
// A delete compares "the key exists" and deletes it with everything below it (range deletes).
// A failed compare is answered like EmbeddedCatalog (kAlreadyExists, kNotFound); validation
// failures are kInvalidArgument (the model's Validate functions); an etcd failure is
// kUnavailable or kTimeout, and such a write is INDETERMINATE unless etcd refused it (it may
// have been applied) — the message says so. After a successful write the call waits (at most
// `kReadYourWritesWait`) until the mirror applied that revision, so a read on the same broker
// right after sees it; if the wait runs out the write still succeeded (a warning is logged). A
// refused create likewise waits for the key it conflicted with, so a 409 is followed by a read
// that finds the entity. Listeners of this broker have heard a write before the call returns.
//
// Listeners: kCreated / kDeleted for every tenant, namespace, stream and cache change the mirror
// applies, in revision order, on the mirror thread (the first snapshot is announced as the
// creation of everything in it; a later re-snapshot as the difference to the state before it; a
// value that changed under an existing key as a deletion then a creation). Keys are not
// announced. A listener may read (Snapshot(), Get*) but must not mutate the catalog (the
// mutation would wait for the mirror thread that is running the listener).
//
// Threading and lifetime: every public method may be called from any thread. The EtcdClient
// must outlive the catalog. Destroy the catalog only when no call into it is running; the
// destructor stops the mirror thread (no listener runs afterwards).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "catalog/catalog.h"
#include "cluster/etcd_keys.h"
#include "common/mutex.h"
#include "etcd/etcd_client.h"
#include "etcd/prefix_mirror.h"

namespace felix::cluster {

class EtcdCatalog final : public catalog::Catalog {
 public:
  static constexpr std::chrono::milliseconds kReadYourWritesWait{5000};

  static Result<std::unique_ptr<EtcdCatalog>> Create(etcd::EtcdClient& client,
                                                     const ClusterKeys& keys);
  ~EtcdCatalog() override;
  EtcdCatalog(const EtcdCatalog&) = delete;
  EtcdCatalog& operator=(const EtcdCatalog&) = delete;

  // Starts mirroring catalog/ (call once; the first snapshot follows when etcd answers).
  void Start();
  // Stops following etcd (joins the mirror thread): no listener runs after it returns. Reads
  // keep answering from the last snapshot; a write still goes to etcd but no longer waits to
  // see itself applied. For shutdown, before the listeners' targets go away. Idempotent.
  void Stop();
  // True once the first full read of catalog/ was applied.
  bool synced() const;
  // The newest etcd revision applied, raised after Snapshot() shows it and its listeners ran
  // (0 before the first snapshot).
  int64_t revision() const;
  // Block until synced() / until revision() >= `revision` (its listeners have run); false
  // when `timeout` passed first. For readiness checks and tests.
  bool WaitUntilSynced(std::chrono::milliseconds timeout) const;
  bool WaitForRevision(int64_t revision, std::chrono::milliseconds timeout) const;
  // Creates tenant `default` (with its signing key) and namespace `default/default` when absent.
  // Safe when every broker calls it at once: "already exists" counts as success.
  Result<void> EnsureDefaults();

  std::shared_ptr<const catalog::CatalogSnapshot> Snapshot() const override;
  Result<catalog::Tenant> CreateTenant(const catalog::Tenant& tenant) override;
  Result<void> DeleteTenant(std::string_view tenant) override;
  Result<catalog::Namespace> CreateNamespace(const catalog::Namespace& ns) override;
  Result<void> DeleteNamespace(std::string_view tenant, std::string_view ns) override;
  Result<catalog::Stream> CreateStream(const catalog::Stream& stream) override;
  Result<void> DeleteStream(std::string_view tenant, std::string_view ns,
                            std::string_view stream) override;
  Result<catalog::Cache> CreateCache(const catalog::Cache& cache) override;
  Result<void> DeleteCache(std::string_view tenant, std::string_view ns,
                           std::string_view cache) override;
  Result<auth::SigningKey> SigningKeyFor(std::string_view tenant) const override;
  ListenerId AddListener(Listener listener) override;
  void RemoveListener(ListenerId id) override;

  // A stored tenant key (the decoded keys/<t>/<kid> value).
  struct StoredKey {
    catalog::TenantKey key;
    auth::SigningKey secret;
    int64_t mod_revision = 0;  // which current key wins if a tenant has several
  };
  using Entity =
      std::variant<catalog::Tenant, catalog::Namespace, catalog::Stream, catalog::Cache, StoredKey>;

 private:
  using Secrets = std::map<std::string, auth::SigningKey, std::less<>>;  // tenant → current key

  EtcdCatalog(etcd::EtcdClient& client, ClusterKeys keys);

  // A create-if-absent txn: `parent` (empty: none) must exist and `key` must not.
  Result<void> CreateTxn(const char* what, const std::string& display, const std::string& parent,
                         const char* parent_what, const std::string& parent_display,
                         std::vector<etcd::TxnOp> puts);
  // A delete txn: `key` must exist; `ops` delete it and its children.
  Result<void> DeleteTxn(const char* what, const std::string& display, const std::string& key,
                         std::vector<etcd::TxnOp> ops);
  // A stream or cache: created under its namespace / deleted by its key.
  template <typename T>
  Result<T> CreateInNamespace(const char* what, const T& entity, std::string key);
  Result<void> DeleteInNamespace(const char* what, std::string_view tenant, std::string_view ns,
                                 std::string_view name, const std::string& key);
  // Waits (bounded by kReadYourWritesWait) until the mirror applied `revision`; logs a miss.
  void WaitApplied(int64_t revision);

  // Mirror thread.
  void OnSnapshot(const std::vector<etcd::KeyValue>& kvs, int64_t revision);
  void OnEvents(const std::vector<etcd::Event>& events);
  // Publishes `entities_` as the new snapshot at `revision`, then tells listeners `changes`.
  void Publish(int64_t revision, const std::vector<catalog::CatalogChange>& changes);

  etcd::EtcdClient& client_;
  const ClusterKeys keys_;

  // Mirror thread only: the decoded catalog by etcd key.
  std::map<std::string, Entity> entities_;

  mutable Mutex mu_;
  mutable std::condition_variable applied_cv_;  // waits on mu_
  std::shared_ptr<const catalog::CatalogSnapshot> snapshot_ GUARDED_BY(mu_);
  std::shared_ptr<const Secrets> secrets_ GUARDED_BY(mu_);
  int64_t applied_revision_ GUARDED_BY(mu_) = 0;
  bool synced_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;  // Stop(): waits for the mirror end at once

  Mutex listeners_mu_;
  std::map<ListenerId, Listener> listeners_ GUARDED_BY(listeners_mu_);
  ListenerId next_listener_ GUARDED_BY(listeners_mu_) = 1;

  // Last member: destroyed first, so no callback runs on the state above once it is gone.
  std::unique_ptr<etcd::PrefixMirror> mirror_;
};

// Decodes one catalog/ key-value pair (exposed for tests and for tools); kInvalidArgument or
// kCorruption naming the key when it is not a catalog entity.
Result<EtcdCatalog::Entity> DecodeCatalogEntry(const ClusterKeys& keys, const etcd::KeyValue& kv);

}  // namespace felix::cluster
