// CacheWatchWriter: one cache watch's broker-opened unidirectional event stream
// (client-protocol.md §6.5, §9.4).
//
// It writes `event_stream_hello`, then drains the watch's CacheWatchQueue, writing each change
// as a JSON `cache_event` frame. When QUIC cannot take more (Write answers false) it stops and
// resumes on on_writable, so a slow reader backs up into its queue (where a live change that
// finds no room ends the watch lagged). When the queue was ended and is drained, the writer
// sends the last frame (`cache_watch_lagged`, or `error`) and finishes the stream. When the
// client stops reading (stream reset, connection gone) the writer unwatches.
//
// Threading: lives on the client endpoint's loop thread. `Wake()` may be called from any
// thread (it posts).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "broker/broker_core.h"
#include "broker/cache_watch_queue.h"
#include "transport/endpoint.h"

namespace felix::broker {

class CacheWatchWriter : public std::enable_shared_from_this<CacheWatchWriter> {
 public:
  // `error_codes`: the client offered FEATURE_ERROR_CODES (a final `error` carries code/retry).
  CacheWatchWriter(transport::Endpoint& endpoint, std::shared_ptr<transport::Stream> stream,
                   CacheShardHandle shard, uint64_t shard_watch_id, uint64_t client_id,
                   bool error_codes);

  // Writes the hello; changes follow as the queue fills.
  void Start(std::shared_ptr<CacheWatchQueue> queue);
  // The queue turned non-empty or ended (any thread).
  void Wake();
  // Stops writing and unwatches (loop thread). Idempotent.
  void Stop();
  // Stop(), then drops the stream handlers at once (after the endpoint stopped).
  void ForceRelease();

  // Runs once, on the loop thread, when the writer stops (the session's bookkeeping).
  std::function<void()> on_stopped;

 private:
  void Drain();
  void WriteEnd(const WatchEnd& end);

  transport::Endpoint& endpoint_;
  std::shared_ptr<transport::Stream> stream_;
  CacheShardHandle shard_;
  uint64_t shard_watch_id_;
  uint64_t client_id_;
  bool error_codes_;
  std::shared_ptr<CacheWatchQueue> queue_;
  bool blocked_ = false;
  bool stopped_ = false;
  bool finished_ = false;  // our FIN was sent: Stop() must not reset the stream
};

}  // namespace felix::broker
