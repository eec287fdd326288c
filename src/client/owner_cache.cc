#include "client/owner_cache.h"

namespace felix::client_impl {

std::string NameKey::ToString() const {
  return std::string(kind == NameKind::kStream ? "stream:" : "cache:") + namespace_name + "/" +
         name;
}

void OwnerCache::Learn(const NameKey& key, const std::vector<wire::flx1::ShardOwner>& owners,
                       const std::string& answered_by) {
  Entry entry;
  entry.learned = true;
  if (!owners.empty()) entry.shards = static_cast<uint32_t>(owners.size());
  for (const auto& o : owners) {
    if (o.unavailable) continue;
    OwnerEntry owner;
    owner.generation = o.generation;
    if (!o.node_id) {
      owner.addr = answered_by;  // the answering broker serves it
    } else {
      owner.node_id = *o.node_id;
      if (!o.addr || o.addr->empty()) continue;  // no client address: route through any broker
      owner.addr = *o.addr;
    }
    entry.owners[o.shard] = std::move(owner);
  }
  std::lock_guard<std::mutex> lock(mu_);
  // A redirect or hint newer than this answer (it may have been read before the move) stays.
  Entry& current = entries_[key.ToString()];
  for (const auto& [shard, owner] : current.owners) {
    auto it = entry.owners.find(shard);
    if (it == entry.owners.end() || it->second.generation < owner.generation)
      entry.owners[shard] = owner;
  }
  current = std::move(entry);
}

bool OwnerCache::Learned(const NameKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key.ToString());
  return it != entries_.end() && it->second.learned;
}

std::optional<uint32_t> OwnerCache::Shards(const NameKey& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key.ToString());
  if (it == entries_.end()) return std::nullopt;
  return it->second.shards;
}

std::optional<OwnerEntry> OwnerCache::Owner(const NameKey& key, uint32_t shard) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key.ToString());
  if (it == entries_.end()) return std::nullopt;
  auto owner = it->second.owners.find(shard);
  if (owner == it->second.owners.end()) return std::nullopt;
  return owner->second;
}

bool OwnerCache::Update(const NameKey& key, uint32_t shard, const OwnerEntry& owner) {
  if (owner.addr.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = entries_[key.ToString()];
  auto [it, inserted] = entry.owners.emplace(shard, owner);
  if (inserted) return true;
  if (it->second.generation > owner.generation || it->second == owner) return false;
  it->second = owner;
  return true;
}

void OwnerCache::Forget(const NameKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(key.ToString());
}

void OwnerCache::ForgetBroker(const std::string& addr) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [name, entry] : entries_) {
    std::erase_if(entry.owners, [&](const auto& kv) { return kv.second.addr == addr; });
  }
}

}  // namespace felix::client_impl
