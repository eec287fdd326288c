// StoreCustody: who holds a durable shard directory's ShardStore on this broker — the broker
// core (the shard's leader side: clients, groups, the leader's replicator read it) or the
// replication host (a follower applying the leader's records). A ShardStore has no lock of
// its own, and two opens of one directory would corrupt it, so both sides claim the directory
// here before opening and release it after closing.
//
// Handover rule: a claim never waits and never steals. The core refuses to open a shard whose
// directory a follower holds (the request is answered retryably and opens once the follower
// released it); the replication host does not open a follower over the core's store (it
// retries on its next reconcile). Moving a store from one side to the other is the owner's
// close + release followed by the other side's claim + open; promotion (issue 16) drives that.
//
// A claim is exclusive even against its own side: one claim per open store. A shard the core
// stepped down from and is named leader of again a moment later is refused (retryably) until
// the old store's close has released the directory — the reopen never runs beside the close,
// and "closing" of the old store always precedes "opened" of the new one for the replication
// side's bookkeeping. The same holds for a follower or a move's drain on the replication side.
//
// Threading: thread-safe (one mutex, no I/O under it).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/mutex.h"

namespace felix::broker {

enum class StoreHolder { kCore, kFollower };
const char* StoreHolderName(StoreHolder holder);

class StoreCustody {
 public:
  // True when `dir` was free (now held by `holder`); false when anyone holds it (the holder,
  // for the refusal's wording: HolderOf).
  bool Claim(const std::string& dir, StoreHolder holder);
  // Releases `dir` if `holder` holds it.
  void Release(const std::string& dir, StoreHolder holder);
  std::optional<StoreHolder> HolderOf(const std::string& dir) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, StoreHolder> held_ GUARDED_BY(mu_);
};

}  // namespace felix::broker
