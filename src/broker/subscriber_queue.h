// SubscriberQueue: the bounded broker-side queue between a shard's fanout and one
// subscriber's event-stream writer (semantics.md §5).
//
// Items are event batches encoded once and shared by every subscriber (EventBatchRef), so
// fanout costs one reference-count increment per subscriber, never a copy. Capacity counts
// batches ("published batches", default 512). Live fanout uses OfferLive(): a full queue
// refuses the batch (counted as a drop; the shard decides what a refusal means: an in-memory
// stream loses it, a durable one replays it from the log or ends the subscription). History
// replay uses OfferReplay(), which never drops: it refuses when full, and the replayer resumes
// from the on_room callback.
//
// End() closes the queue with a reason (lagged, or a read error): nothing more is accepted,
// what is queued is still popped, and then the writer takes the end (TakeEnd) and writes it as
// the event stream's last frame.
//
// The ring starts at a few slots and doubles up to the capacity as batches back up, so an idle
// subscription costs a few hundred bytes, not capacity × 16 (docs/performance.md, change 15).
//
// Threading: one producer (the shard's executor) and one consumer (the connection's writer)
// may run on different threads; every method is thread-safe. Callbacks run on the calling
// thread of the method that triggers them, outside the queue's lock, and must not block.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "broker/record_log.h"

namespace felix::broker {

// One batch of committed records on its way to subscribers. Built once per publish (or
// per replay read) and shared by every subscriber; payloads are views kept alive by `owner`.
// The wire frame depends on what each subscriber negotiated (offsets, timestamps), so frames
// are encoded lazily, once per variant, by the first writer that needs that variant.
struct EventBatch {
  std::shared_ptr<const void> owner;
  std::shared_ptr<const std::string> publisher;  // keeps live records' `publisher` alive
  Offset base_offset;                            // offset of records[0]; records are contiguous
  uint32_t record_count = 0;
  std::vector<RecordView> records;
  // Offsets directly below base_offset that hold no event and were passed over (records
  // retention removed while this subscriber replayed); 0 = none. Replay batches only, which
  // belong to one subscriber.
  uint64_t skipped_before = 0;

  // The frame for `variant` (a small index the writer derives from its negotiated flags),
  // encoding it with `encode` the first time. Thread-safe.
  using Frame = std::shared_ptr<const std::vector<uint8_t>>;
  Frame GetOrEncode(size_t variant, const std::function<std::vector<uint8_t>()>& encode) const;
  static constexpr size_t kVariants = 16;

 private:
  mutable std::mutex frames_mu_;
  mutable std::array<Frame, kVariants> frames_;
};
using EventBatchRef = std::shared_ptr<const EventBatch>;

// Why a subscription ended on the broker's side (the event stream's last frame).
struct QueueEnd {
  enum class Kind : uint8_t {
    kLagged,  // a durable subscriber's queue overflowed: subscription_lagged{resume_from}
    kError,   // history could not be read (e.g. corruption): `error` naming offset and file
    // The shard is no longer served here (a failover or a planned move): `shard_moved`
    // {resume_from, node_id, addr, generation} to a client that offered FEATURE_SHARD_MOVED,
    // else the `error` (`code` not_leader, `message`) (cluster-etcd.md §7 item 7).
    kMoved,
  };
  Kind kind = Kind::kLagged;
  Offset resume_from;   // kLagged: nothing at or above it was queued
  uint16_t code = 0;    // kError, kMoved: FLX1 error code
  std::string message;  // kError, kMoved
  bool fatal = false;   // kError: retry class `fatal` instead of the code's default
  // kMoved: the new owner when known (empty: not yet, e.g. a move's fence) and its generation.
  std::string node_id;
  std::string addr;
  uint64_t generation = 0;
};

class SubscriberQueue {
 public:
  // on_ready: the queue went from empty to non-empty (the writer should drain it).
  // on_room: a Pop made room after an OfferReplay was refused (the replayer may continue).
  SubscriberQueue(size_t capacity, std::function<void()> on_ready,
                  std::function<void()> on_room = {});

  // Live delivery; false when the batch was dropped because the queue is full.
  bool OfferLive(EventBatchRef batch);
  // History replay; false when full (nothing dropped: retry after on_room).
  bool OfferReplay(EventBatchRef batch);
  // Next batch for the writer, or nullopt when empty.
  std::optional<EventBatchRef> Pop();
  // Ends the queue (first call wins; later offers are refused) and wakes the writer.
  void End(QueueEnd end);
  bool ended() const;
  // The end, once every batch queued before it was popped (then nullopt forever after).
  std::optional<QueueEnd> TakeEnd();

  size_t size() const;
  size_t capacity() const { return capacity_; }
  uint64_t dropped_batches() const;
  uint64_t dropped_records() const;
  // Offset of the first record ever dropped (for subscription_lagged.resume_from).
  std::optional<Offset> first_dropped_offset() const;

 private:
  bool Push(EventBatchRef& batch, bool* was_empty);
  // Doubles the ring (up to capacity_), keeping the queued batches in order (mu_ held).
  void GrowLocked();

  static constexpr size_t kInitialSlots = 8;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<EventBatchRef> ring_;  // slots in use or free; size() <= capacity_
  size_t head_ = 0;
  size_t count_ = 0;
  bool replay_waiting_ = false;
  uint64_t dropped_batches_ = 0;
  uint64_t dropped_records_ = 0;
  std::optional<Offset> first_dropped_offset_;
  std::optional<QueueEnd> end_;
  bool end_taken_ = false;
  std::function<void()> on_ready_;
  std::function<void()> on_room_;
};

}  // namespace felix::broker
