// EventRouter: pairs broker-opened event streams with subscriptions (client-protocol §1.3).
// The broker opens the event stream (first frame `event_stream_hello{subscription_id}`)
// *before* it answers `subscribed` on the subscribe stream, so either side may come first:
// whichever arrives first waits here, keyed by subscription id, until its partner arrives.
// At most `max_pending` streams wait; beyond that the oldest is evicted (handed back to the
// caller to reset), as the reference client bounds its router.
//
// Generic over the waiting stream and the subscription sink so it can be tested alone.
// Not thread-safe: used on the endpoint's loop thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>

namespace felix::client_impl {

template <typename StreamT, typename SinkT>
class EventRouter {
 public:
  explicit EventRouter(size_t max_pending = 16384) : max_pending_(max_pending) {}

  // An event stream announced `id`. Returns the subscription to attach it to when `subscribed`
  // came first; otherwise the stream waits (an evicted older stream goes to *evicted).
  std::optional<SinkT> OnHello(uint64_t id, StreamT stream, std::optional<StreamT>* evicted) {
    if (auto it = sinks_.find(id); it != sinks_.end()) {
      SinkT sink = std::move(it->second);
      sinks_.erase(it);
      return sink;
    }
    if (streams_.size() >= max_pending_ && !order_.empty()) {
      uint64_t oldest = order_.front();
      order_.pop_front();
      if (auto old = streams_.find(oldest); old != streams_.end()) {
        if (evicted) *evicted = std::move(old->second);
        streams_.erase(old);
      }
    }
    streams_.insert_or_assign(id, std::move(stream));
    order_.push_back(id);
    return std::nullopt;
  }

  // `subscribed{id}` arrived. Returns the waiting event stream, or remembers the sink.
  std::optional<StreamT> OnSubscribed(uint64_t id, SinkT sink) {
    if (auto it = streams_.find(id); it != streams_.end()) {
      StreamT stream = std::move(it->second);
      streams_.erase(it);
      std::erase(order_, id);
      return stream;
    }
    sinks_.insert_or_assign(id, std::move(sink));
    return std::nullopt;
  }

  // Drops whatever waits for `id` (a subscription closed before its stream came).
  void Forget(uint64_t id) {
    sinks_.erase(id);
    if (streams_.erase(id)) std::erase(order_, id);
  }

  // Everything waiting, e.g. to fail it when the connection closes.
  void Clear() {
    sinks_.clear();
    streams_.clear();
    order_.clear();
  }

  size_t waiting_streams() const { return streams_.size(); }
  size_t waiting_subscriptions() const { return sinks_.size(); }

 private:
  size_t max_pending_;
  std::map<uint64_t, StreamT> streams_;
  std::deque<uint64_t> order_;
  std::map<uint64_t, SinkT> sinks_;
};

}  // namespace felix::client_impl
