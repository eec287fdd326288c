// FakeEtcd: an in-process EtcdClient with etcd's semantics for what Felix uses — one store
// revision raised by every write (a txn is one revision), create/mod revisions and versions,
// compares on absent keys (revisions 0, VALUE false), leases whose revocation or expiry deletes
// their keys, watches that replay history from a start revision, and compaction (a watch or
// range below it gets kCompacted / on_compacted).
//
// Time does not pass by itself: tests expire a lease with ExpireLease(). Faults: SetAvailable
// (false: every call fails kUnavailable), HoldKeepAlives (answers queued until released, like a
// stopped etcd), HoldWatches (watch events recorded but not delivered, like a watch stream that
// lags behind the store), SetVersion (for the version check).
//
// Threading: thread-safe. Watch events and keepalive answers are delivered synchronously on the
// thread whose write caused them, after the store's lock is released, serialised so every
// watcher sees revisions in order. A callback must not write to the fake (it would deadlock).
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "etcd/etcd_client.h"

namespace felix::etcd {

class FakeEtcd final : public EtcdClient {
 public:
  FakeEtcd();
  ~FakeEtcd() override;

  EtcdResult<RangeResult> Range(std::string_view key, const RangeOptions& options) override;
  EtcdResult<PutResult> Put(std::string_view key, std::string_view value,
                            int64_t lease = 0) override;
  EtcdResult<DeleteResult> Delete(std::string_view key, std::string_view range_end = {}) override;
  EtcdResult<TxnResult> Transact(const Txn& txn) override;
  EtcdResult<void> Compact(int64_t revision) override;
  EtcdResult<LeaseGrantResult> LeaseGrant(int64_t ttl_seconds) override;
  EtcdResult<void> LeaseRevoke(int64_t lease_id) override;
  EtcdResult<LeaseTtlResult> LeaseTimeToLive(int64_t lease_id) override;
  EtcdResult<std::unique_ptr<KeepAliveStream>> OpenKeepAlive(KeepAliveCallbacks callbacks) override;
  EtcdResult<std::unique_ptr<WatchHandle>> Watch(const WatchOptions& options,
                                                 WatchCallbacks callbacks) override;
  EtcdResult<ServerStatus> Status() override;

  // --- test controls ---
  // Expires the lease as etcd would when its TTL ran out: deletes its keys (one revision).
  void ExpireLease(int64_t lease_id);
  void SetAvailable(bool available);
  // While held, keepalives are queued unanswered; releasing answers them in send order.
  void HoldKeepAlives(bool hold);
  // While held, writes still apply (a Range sees them) but no watch hears of them; releasing
  // delivers to every watch what it missed, in revision order.
  void HoldWatches(bool hold);
  // Holds the events of `revision` and every later one (those before it are delivered as usual):
  // a watch that lags behind by whatever the next writers write.
  void HoldWatchesFrom(int64_t revision);
  // Delivers the held events up to `revision` (in order) and keeps holding the later ones: a
  // lagging watch catching up part of the way.
  void ReleaseWatchesThrough(int64_t revision);
  void SetVersion(std::string version);
  int64_t revision() const;

  struct Watcher;
  struct Stream;

 private:
  struct Lease {
    int64_t ttl = 0;
    std::set<std::string> keys;
  };
  struct Change {
    std::vector<Event> events;  // of one revision
  };

  EtcdResult<void> CheckAvailable() const;
  // Store mutations under mu_; they append to `out` the events of the current revision.
  void PutLocked(const std::string& key, const std::string& value, int64_t lease,
                 std::vector<Event>& out);
  int64_t DeleteLocked(const std::string& key, const std::string& range_end,
                       std::vector<Event>& out);
  std::vector<KeyValue> RangeLocked(const std::string& key, const std::string& range_end) const;
  bool CompareLocked(const Compare& c) const;
  // Records the revision's events and hands them to the watchers (called with deliver_mu_ held
  // and mu_ released).
  void Publish(std::vector<Event> events);
  bool HeldLocked(int64_t revision) const;
  // Sets the hold and delivers every recorded event below it that a watch has not seen yet.
  void SetWatchHold(int64_t from);
  EtcdResult<void> ApplyRevision(std::vector<Event>& events);
  void Unregister(Watcher* w);
  void CloseStream(Stream* s);

  mutable std::mutex mu_;
  std::mutex deliver_mu_;  // serialises delivery (taken before mu_ by writers)
  bool available_ = true;
  bool hold_keepalives_ = false;
  int64_t hold_watches_from_ = 0;  // events of this revision and later are held; 0: none
  std::string version_ = "3.4.23";
  int64_t revision_ = 1;  // etcd starts at 1; the first write makes 2
  int64_t compacted_ = 0;
  int64_t next_lease_ = 0x1000;
  std::map<std::string, KeyValue> kvs_;
  std::vector<Event> history_;  // every event ever, in revision order (pruned by Compact)
  std::map<int64_t, Lease> leases_;
  std::set<Watcher*> watchers_;
  std::set<Stream*> streams_;
};

}  // namespace felix::etcd
