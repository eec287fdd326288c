#include "broker/store_custody.h"

namespace felix::broker {

const char* StoreHolderName(StoreHolder holder) {
  return holder == StoreHolder::kCore ? "core" : "follower";
}

bool StoreCustody::Claim(const std::string& dir, StoreHolder holder) {
  MutexLock lock(mu_);
  return held_.try_emplace(dir, holder).second;
}

void StoreCustody::Release(const std::string& dir, StoreHolder holder) {
  MutexLock lock(mu_);
  auto it = held_.find(dir);
  if (it != held_.end() && it->second == holder) held_.erase(it);
}

std::optional<StoreHolder> StoreCustody::HolderOf(const std::string& dir) const {
  MutexLock lock(mu_);
  auto it = held_.find(dir);
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

}  // namespace felix::broker
