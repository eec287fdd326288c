#include "catalog/verified_credentials.h"

#include "catalog/verify.h"

namespace felix::catalog {

auth::AuthResult<std::shared_ptr<const auth::AuthContext>> VerifiedCredentials::Verify(
    const catalog::Catalog& catalog, std::string_view tenant, std::string_view token,
    int64_t now_unix_seconds) {
  std::string key;
  key.reserve(tenant.size() + 1 + token.size());
  key.append(tenant).push_back('\0');
  key.append(token);
  // An entry answers only while the tenant has exactly the keys it was verified with (none
  // once the tenant is gone; entries never hold an empty set): compared in place, since this
  // runs for every stream a client opens and a copy of the keys is several allocations.
  auto snapshot = catalog.Snapshot();
  {
    MutexLock lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      const Entry& e = it->second;
      if (now_unix_seconds < e.context->expires_at && snapshot->HasVerifyingKeys(tenant, e.keys)) {
        ++reused_;
        return e.context;
      }
      entries_.erase(it);  // expired or the keys changed: verify again below
    }
  }
  std::vector<auth::VerifyingKey> keys = snapshot->VerifyingKeys(tenant);
  auto verified = catalog::VerifyClientToken(catalog, tenant, token, now_unix_seconds);
  MutexLock lock(mu_);
  ++verified_;
  if (!verified) return tl::unexpected(verified.error());
  auto context = std::make_shared<const auth::AuthContext>(std::move(*verified));
  if (keys.empty()) return context;
  if (entries_.size() >= capacity_) entries_.clear();
  entries_.insert_or_assign(std::move(key), Entry{context, std::move(keys)});
  return context;
}

uint64_t VerifiedCredentials::verified() const {
  MutexLock lock(mu_);
  return verified_;
}

uint64_t VerifiedCredentials::reused() const {
  MutexLock lock(mu_);
  return reused_;
}

}  // namespace felix::catalog
