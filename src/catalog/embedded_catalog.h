// EmbeddedCatalog: the single-node catalog kept in the data directory (spec README: "keeps its
// catalog in its data directory, and needs nothing else running").
//
// Files (each replaced atomically, WriteFileAtomically):
//   <data_dir>/catalog.json       tenants, namespaces, streams, caches, public keys (0644)
//   <data_dir>/signing-keys.json  tenants' private Ed25519 seeds (0600)
// A mutation is written to disk before it becomes visible; if writing fails the catalog is
// unchanged and the caller gets kIo.
//
// First start (no catalog.json): creates tenant `default` and namespace `default` with a fresh
// signing key (unless OpenOptions says otherwise). Thread-safety as for Catalog.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace felix::catalog {

inline constexpr const char* kDefaultTenant = "default";
inline constexpr const char* kDefaultNamespace = "default";

struct OpenOptions {
  bool create_default_tenant = true;
};

class EmbeddedCatalog final : public Catalog {
 public:
  // Loads the catalog from `data_dir` (created if missing); kCorruption names the file and
  // field when a stored file does not parse or validate.
  static Result<std::unique_ptr<EmbeddedCatalog>> Open(const std::string& data_dir,
                                                       const OpenOptions& options = {});

  // True when this Open() created a fresh catalog (first start).
  bool first_start() const { return first_start_; }
  const std::string& data_dir() const { return data_dir_; }

  std::shared_ptr<const CatalogSnapshot> Snapshot() const override;
  Result<Tenant> CreateTenant(const Tenant& tenant) override;
  Result<void> DeleteTenant(std::string_view tenant) override;
  Result<Namespace> CreateNamespace(const Namespace& ns) override;
  Result<void> DeleteNamespace(std::string_view tenant, std::string_view ns) override;
  Result<Stream> CreateStream(const Stream& stream) override;
  Result<void> DeleteStream(std::string_view tenant, std::string_view ns,
                            std::string_view stream) override;
  Result<Cache> CreateCache(const Cache& cache) override;
  Result<void> DeleteCache(std::string_view tenant, std::string_view ns,
                           std::string_view cache) override;
  Result<auth::SigningKey> SigningKeyFor(std::string_view tenant) const override;
  ListenerId AddListener(Listener listener) override;
  void RemoveListener(ListenerId id) override;

 private:
  using Secrets = std::map<std::string, auth::SigningKey, std::less<>>;  // tenant → current key

  explicit EmbeddedCatalog(std::string data_dir);
  Result<void> Load();
  // Persists `next` (and `secrets` when non-null), publishes them, then tells listeners.
  Result<void> Commit(std::shared_ptr<CatalogSnapshot> next, std::shared_ptr<const Secrets> secrets,
                      const std::vector<CatalogChange>& changes);

  const std::string data_dir_;
  bool first_start_ = false;

  std::mutex write_mu_;    // serialises mutations and listener calls
  mutable std::mutex mu_;  // guards the two pointers below
  std::shared_ptr<const CatalogSnapshot> snapshot_;
  std::shared_ptr<const Secrets> secrets_;

  std::mutex listeners_mu_;
  std::map<ListenerId, Listener> listeners_;
  ListenerId next_listener_ = 1;
};

}  // namespace felix::catalog
