// EventStreamWriter: one subscription's broker-opened unidirectional event stream.
//
// It writes `event_stream_hello`, then drains the subscription's SubscriberQueue, writing each
// EventBatch as a shared binary event batch (flag 0x0004) in the variant this client
// negotiated (base offsets 0x0020 on durable streams, timestamps 0x4000). The frame of a
// variant is encoded once per batch and shared with every other subscriber of that variant.
// When QUIC cannot take more (Write answers false) it stops and resumes on on_writable, so a
// slow reader backs up into its queue (see StreamShard for what a full queue does). When the
// queue was ended (SubscriberQueue::End) and is drained, the writer sends the last frame
// (`subscription_lagged`, or `error` naming what could not be read) and finishes the stream.
//
// Threading: lives on the client endpoint's loop thread. `Wake()` may be called from any
// thread (it posts). When the client stops reading (stream reset, connection gone) the writer
// unsubscribes from its shard.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "broker/broker_core.h"
#include "broker/client_metrics.h"
#include "broker/subscriber_queue.h"
#include "transport/endpoint.h"

namespace felix::broker {

class EventStreamWriter : public std::enable_shared_from_this<EventStreamWriter> {
 public:
  struct Variant {
    bool offsets = false;
    bool timestamps = false;
    bool error_codes = false;  // FEATURE_ERROR_CODES: a final `error` carries code and retry
    // Flag 0x0800 offered (with offsets): a batch right after offsets that hold no event
    // (records retention removed during replay) says how many (§5.3 `skipped_before`).
    bool skipped = false;
    // Flag 0x2000 offered: records that carry a stored publisher go out in frames naming it
    // (one publisher per frame, §5.3).
    bool publisher = false;
    // FEATURE_SHARD_MOVED offered: a subscription ended by a move or failover gets
    // `shard_moved` (with where to resume), not the `not_leader` error. Not part of index().
    bool shard_moved = false;
    size_t index() const {
      return (offsets ? 1 : 0) | (timestamps ? 2 : 0) | (offsets && skipped ? 4 : 0) |
             (publisher ? 8 : 0);
    }
  };

  EventStreamWriter(transport::Endpoint& endpoint, std::shared_ptr<transport::Stream> stream,
                    StreamShardHandle shard, uint64_t shard_subscription_id,
                    uint64_t client_subscription_id, Variant variant, ClientMetrics& metrics);

  // Writes the hello; later batches follow as the queue fills.
  void Start(std::shared_ptr<SubscriberQueue> queue);
  // The queue turned non-empty (any thread).
  void Wake();
  // Stops writing and unsubscribes (loop thread). Idempotent.
  void Stop();

  // Stop(), then drops the stream handlers at once (after the endpoint stopped: a release
  // posted during its shutdown may never have run).
  void ForceRelease();

  // Runs once, on the loop thread, when the writer stops (the session's bookkeeping).
  std::function<void()> on_stopped;

 private:
  void Drain();
  // Writes the queue's end as the last frame and finishes the stream (after the queue drained).
  // The wire frame(s) of `events` for this writer's variant.
  std::vector<uint8_t> Encode(const EventBatch& events) const;
  void WriteEnd(const QueueEnd& end);

  transport::Endpoint& endpoint_;
  std::shared_ptr<transport::Stream> stream_;
  StreamShardHandle shard_;
  uint64_t shard_subscription_id_;
  uint64_t client_subscription_id_;
  Variant variant_;
  ClientMetrics& metrics_;
  std::shared_ptr<SubscriberQueue> queue_;
  bool blocked_ = false;
  bool stopped_ = false;
  bool finished_ = false;  // our FIN was sent: Stop() must not reset the stream
  uint64_t dropped_seen_ = 0;
  int64_t reported_depth_ = 0;  // this queue's share of felix_sub_queue_len
  // After the last record written (offsets known): where a moved subscription resumes.
  std::optional<Offset> resume_from_;
};

}  // namespace felix::broker
