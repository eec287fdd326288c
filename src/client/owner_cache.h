// OwnerCache: who serves each shard of the streams and caches a cluster-aware Client routes
// to, learned from `shard_owners` answers, `not_leader` redirects and the owner hint of
// forwarded publish acks (client-protocol.md §5.2, §6.2). A shard whose owner is unknown (not
// asked yet, unassigned, or an owner without a client address) is sent to any broker, which
// forwards it (publishes, cache operations) or redirects it (subscribe, groups).
//
// Thread-safe: every method takes one internal mutex; values are copied in and out.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "wire/flx1/messages.h"

namespace felix::client_impl {

enum class NameKind : uint8_t { kStream, kCache };

// A stream or cache of the client's tenant.
struct NameKey {
  NameKind kind = NameKind::kStream;
  std::string namespace_name;
  std::string name;
  std::string ToString() const;  // "stream:ns/name", "cache:ns/name"
};

struct OwnerEntry {
  std::string node_id;      // empty when the answer did not name it
  std::string addr;         // the owner's client-facing host:port
  uint64_t generation = 0;  // assignment epoch the entry is valid for
  bool operator==(const OwnerEntry&) const = default;
};

class OwnerCache {
 public:
  // Replaces what is known of `key` by a `shard_owners` answer of the broker at `answered_by`:
  // an owner listed without node_id is that broker (it serves the shard itself); a shard
  // answered unavailable, or owned by a broker without a client address, stays unknown. An
  // empty answer (a name the broker does not know yet) is remembered as known-empty.
  void Learn(const NameKey& key, const std::vector<wire::flx1::ShardOwner>& owners,
             const std::string& answered_by);
  // Whether `key` was learned (asked) since it was last forgotten.
  bool Learned(const NameKey& key) const;
  // Shard count from the last `shard_owners` answer (absent when not learned or empty).
  std::optional<uint32_t> Shards(const NameKey& key) const;
  // The known owner of `shard`.
  std::optional<OwnerEntry> Owner(const NameKey& key, uint32_t shard) const;
  // A redirect or an owner hint: `shard` is served by `owner`. Ignored when the cache already
  // holds a newer generation for the shard (client-protocol.md §6.2); at the same generation
  // the newer word wins. Returns whether the entry changed.
  bool Update(const NameKey& key, uint32_t shard, const OwnerEntry& owner);
  // Forgets `key`: the next request asks `shard_owners` again.
  void Forget(const NameKey& key);
  // Forgets every shard served at `addr` (the broker could not be reached).
  void ForgetBroker(const std::string& addr);

 private:
  struct Entry {
    bool learned = false;
    std::optional<uint32_t> shards;
    std::map<uint32_t, OwnerEntry> owners;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;  // by NameKey::ToString()
};

}  // namespace felix::client_impl
