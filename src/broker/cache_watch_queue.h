// CacheWatchQueue: the bounded broker-side queue between a cache shard and one cache watch's
// event-stream writer (client-protocol.md §6.5, §9.4; semantics.md §10 "Watches").
//
// Items are applied cache writes (CacheChange), shared by every watcher a live write fans out
// to (one reference-count increment per watcher, never a copy of the value). The queue is
// bounded by a count of changes and by the bytes of their keys and values (a queue always
// takes one change when empty, so a single large value still gets through). Live fanout uses
// OfferLive(): a full queue refuses the change and the shard ends the watch with
// `cache_watch_lagged{resume_from = that change's offset}` — a writer never blocks on a
// watcher. The state and history phases use OfferReplay(), which never drops: it refuses when
// full and the shard resumes from the on_room callback.
//
// End() closes the queue with a reason (lagged, or an error): what is queued is still popped,
// then the writer takes the end (TakeEnd) and writes it as the event stream's last frame.
//
// Threading: one producer (the shard's executor) and one consumer (the connection's writer)
// may run on different threads; every method is thread-safe. Callbacks run on the thread of
// the method that triggers them, outside the queue's lock, and must not block.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/strong_types.h"

namespace felix::broker {

// One applied write as a watcher sees it: a put (value set) or a delete (no value).
struct CacheChange {
  std::string key;
  std::optional<std::string> value;  // nullopt = deleted (or expired and deleted)
  Offset offset;                     // cache-log offset of the write (retained: its version)
  uint64_t expires_at_millis = 0;    // absolute Unix ms, 0 = never (always 0 for a delete)
  size_t bytes() const { return key.size() + (value ? value->size() : 0); }
};
using CacheChangeRef = std::shared_ptr<const CacheChange>;

// Why a watch ended on the broker's side (the event stream's last frame).
struct WatchEnd {
  enum class Kind : uint8_t {
    kLagged,  // the queue overflowed: cache_watch_lagged{resume_from}
    kError,   // history could not be read, or the cache went away: `error`
  };
  Kind kind = Kind::kLagged;
  Offset resume_from;   // kLagged: the first change not delivered
  uint16_t code = 0;    // kError: FLX1 error code
  std::string message;  // kError
};

class CacheWatchQueue {
 public:
  // on_ready: the queue went from empty to non-empty, or was ended (the writer should drain).
  // on_room: a Pop made room after an OfferReplay was refused (the shard may continue).
  CacheWatchQueue(size_t max_changes, size_t max_bytes, std::function<void()> on_ready,
                  std::function<void()> on_room);

  // Live delivery; false when the queue is full (or ended): the change was not taken.
  bool OfferLive(CacheChangeRef change);
  // State / history delivery; false when full (nothing dropped: retry after on_room).
  bool OfferReplay(CacheChangeRef change);
  std::optional<CacheChangeRef> Pop();
  // Ends the queue (first call wins; later offers are refused) and wakes the writer.
  void End(WatchEnd end);
  bool ended() const;
  // The end, once every change queued before it was popped (then nullopt forever after).
  std::optional<WatchEnd> TakeEnd();
  size_t size() const;

 private:
  bool Push(CacheChangeRef& change, bool* was_empty);

  const size_t max_changes_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::deque<CacheChangeRef> items_;
  size_t bytes_ = 0;
  bool replay_waiting_ = false;
  std::optional<WatchEnd> end_;
  bool end_taken_ = false;
  std::function<void()> on_ready_;
  std::function<void()> on_room_;
};

}  // namespace felix::broker
