// PrefixMirror: keeps a caller in sync with every key under an etcd prefix, in revision order
// (cluster-etcd.md §4): a full read (the snapshot) at revision R, then a watch from R + 1. A watch
// cancelled with a compact revision triggers a re-read (a new snapshot that replaces everything
// before it) and a new watch from its revision + 1; a read that fails is retried with jittered
// backoff. Broken watch streams resume by themselves (EtcdClient's contract), so no event is lost
// or delivered twice between snapshots.
//
// Threading: callbacks run one at a time on the mirror's own thread, never concurrently with
// each other; the destructor stops that thread (do not destroy the mirror from a callback).
// `revision()` and `snapshots()` may be read from any thread. The client must outlive the mirror.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcd/backoff.h"
#include "etcd/etcd_client.h"

namespace felix::etcd {

struct MirrorCallbacks {
  // Every key under the prefix at `revision`; replaces all state built before. Required.
  std::function<void(const std::vector<KeyValue>& kvs, int64_t revision)> on_snapshot;
  // Changes after the last snapshot, in revision order. Required.
  std::function<void(const std::vector<Event>& events)> on_events;
  // A read or the watch failed (the mirror retries by itself); for logs and metrics.
  std::function<void(const EtcdError& error)> on_error;
};

class PrefixMirror {
 public:
  PrefixMirror(EtcdClient& client, std::string prefix, MirrorCallbacks callbacks,
               Backoff backoff = Backoff());
  ~PrefixMirror();
  PrefixMirror(const PrefixMirror&) = delete;
  PrefixMirror& operator=(const PrefixMirror&) = delete;

  // Starts the mirror thread (the first snapshot follows as soon as etcd answers).
  void Start();

  // Asks for a fresh snapshot (a read at etcd's current revision), as after a compaction: the
  // mirror then holds at least every write etcd had completed when this was called, even when
  // the watch lags or nothing under the prefix changes again. Any thread; no-op once stopping.
  void Resync();

  // The newest revision delivered (snapshot or event); 0 before the first snapshot.
  int64_t revision() const { return revision_.load(); }
  // How many snapshots were delivered (1 after start; +1 per compaction recovery).
  uint64_t snapshots() const { return snapshots_.load(); }

 private:
  struct Item {
    uint64_t watch_epoch = 0;
    bool compacted = false;
    std::vector<Event> events;
  };

  void Run();
  bool Snapshot();  // false when stopping
  void Enqueue(Item item);

  EtcdClient& client_;
  const std::string prefix_;
  MirrorCallbacks callbacks_;
  Backoff backoff_;  // mirror thread only

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  uint64_t epoch_ = 0;  // raised for every new watch; items of older watches are dropped
  // Resync() calls so far, and how many of them the last snapshot's read began after.
  uint64_t resyncs_asked_ = 0;
  uint64_t resyncs_served_ = 0;

  std::unique_ptr<WatchHandle> watch_;  // mirror thread only
  std::atomic<int64_t> revision_{0};
  std::atomic<uint64_t> snapshots_{0};
  std::thread thread_;
};

}  // namespace felix::etcd
