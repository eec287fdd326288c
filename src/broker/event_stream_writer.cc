#include "broker/event_stream_writer.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "wire/flx1/frame.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;

EventStreamWriter::EventStreamWriter(transport::Endpoint& endpoint,
                                     std::shared_ptr<transport::Stream> stream,
                                     StreamShardHandle shard, uint64_t shard_subscription_id,
                                     uint64_t client_subscription_id, Variant variant,
                                     ClientMetrics& metrics)
    : endpoint_(endpoint),
      stream_(std::move(stream)),
      shard_(std::move(shard)),
      shard_subscription_id_(shard_subscription_id),
      client_subscription_id_(client_subscription_id),
      variant_(variant),
      metrics_(metrics) {}

void EventStreamWriter::Start(std::shared_ptr<SubscriberQueue> queue) {
  queue_ = std::move(queue);
  // The stream's handlers own the writer until Stop() drops them.
  auto self = shared_from_this();
  transport::StreamHandlers handlers;
  handlers.on_writable = [self](transport::Stream&) {
    self->blocked_ = false;
    self->Drain();
  };
  handlers.on_reset = [self](transport::Stream&, uint64_t) { self->Stop(); };
  // The client never sends on this stream; anything it does is ignored.
  handlers.on_data = [](transport::Stream& s, std::span<const uint8_t> data) {
    s.Consume(data.size());
  };
  stream_->SetHandlers(std::move(handlers));
  flx1::EventStreamHello hello;
  hello.subscription_id = client_subscription_id_;
  auto frame = flx1::EncodeMessageFrame(flx1::Message{hello});
  if (!frame || !stream_->Write(*frame)) {
    Stop();
    return;
  }
  Drain();
}

void EventStreamWriter::Wake() {
  std::weak_ptr<EventStreamWriter> weak = weak_from_this();
  endpoint_.Post([weak] {
    if (auto self = weak.lock()) self->Drain();
  });
}

void EventStreamWriter::Drain() {
  if (stopped_ || blocked_ || !queue_) return;
  while (auto batch = queue_->Pop()) {
    const EventBatch& events = **batch;
    auto frame = events.GetOrEncode(variant_.index(), [&] { return Encode(events); });
    if (frame->empty()) continue;
    metrics_.deliveries.Increment(events.records.size());
    uint64_t bytes = 0;
    for (const RecordView& r : events.records) bytes += r.payload.size();
    metrics_.delivered_bytes.Increment(bytes);
    auto written = stream_->Write(*frame);
    if (!written) {  // write side gone
      Stop();
      return;
    }
    // Written (or queued in the stream, which delivers it before the end): the next to send.
    if (!events.records.empty()) resume_from_ = events.records.back().offset + 1;
    if (!*written) {
      blocked_ = true;  // resumes on on_writable
      break;
    }
  }
  if (!blocked_ && queue_) {
    if (auto end = queue_->TakeEnd()) {
      WriteEnd(*end);
      return;
    }
  }
  // Queue depth as of this drain (the gauge sums every subscriber's last reading).
  auto depth = static_cast<int64_t>(queue_->size());
  metrics_.sub_queue_len.Add(depth - reported_depth_);
  reported_depth_ = depth;
  uint64_t dropped = queue_->dropped_batches();
  if (dropped != dropped_seen_) {
    metrics_.sub_dropped.Increment(dropped - dropped_seen_);
    dropped_seen_ = dropped;
  }
}

std::vector<uint8_t> EventStreamWriter::Encode(const EventBatch& events) const {
  // One frame per run of records naming the same publisher (§5.3: one publisher per frame)
  // for a client that offered 0x2000; otherwise one frame for the whole batch.
  std::vector<uint8_t> out;
  const size_t n = events.records.size();
  size_t begin = 0;
  do {
    size_t end = n;
    std::span<const uint8_t> publisher;
    if (variant_.publisher && begin < n) {
      publisher = events.records[begin].publisher;
      end = begin + 1;
      while (end < n && std::ranges::equal(events.records[end].publisher, publisher)) ++end;
    }
    flx1::BinaryEventBatch wire;
    if (variant_.offsets) wire.base_offset = (events.base_offset + begin).value();
    if (begin == 0 && variant_.offsets && variant_.skipped && events.skipped_before != 0) {
      wire.skipped_before = events.skipped_before;  // only when non-zero (§5.3)
    }
    if (!publisher.empty()) {
      wire.publisher =
          std::string_view(reinterpret_cast<const char*>(publisher.data()), publisher.size());
    }
    wire.has_timestamps = variant_.timestamps;
    wire.events.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      const RecordView& r = events.records[i];
      wire.events.push_back(flx1::BinaryEventBatch::Item{
          r.timestamp_micros,
          std::string_view(reinterpret_cast<const char*>(r.payload.data()), r.payload.size())});
    }
    if (auto appended = flx1::AppendFrame(flx1::Flx1Frame{std::move(wire)}, out); !appended) {
      spdlog::error("event batch encode failed: {}", appended.error().ToString());
      return {};
    }
    begin = end;
  } while (begin < n);
  return out;
}

void EventStreamWriter::WriteEnd(const QueueEnd& end) {
  flx1::Message last;
  if (end.kind == QueueEnd::Kind::kLagged) {
    metrics_.sub_lagged.Increment();
    flx1::SubscriptionLagged lagged;
    lagged.subscription_id = client_subscription_id_;
    lagged.resume_from = end.resume_from.value();
    last = lagged;
  } else if (end.kind == QueueEnd::Kind::kMoved && variant_.shard_moved) {
    flx1::ShardMoved moved;
    moved.subscription_id = client_subscription_id_;
    if (variant_.offsets) moved.resume_from = ValueOf(resume_from_);
    if (!end.node_id.empty()) moved.node_id = end.node_id;
    if (!end.addr.empty()) moved.addr = end.addr;
    moved.generation = end.generation;
    last = moved;
  } else {
    flx1::Error error;
    error.message = end.message;
    if (variant_.error_codes) {
      if (auto name = flx1::ErrorCodeName(end.code)) error.code = std::string(*name);
      error.retry = std::string(flx1::RetryClassName(
          end.fatal ? flx1::RetryClass::kFatal : flx1::DefaultRetryClass(end.code)));
    }
    last = std::move(error);
    if (end.kind == QueueEnd::Kind::kError) metrics_.sub_read_errors.Increment();
  }
  if (auto frame = flx1::EncodeMessageFrame(last); frame && stream_->Write(*frame)) {
    stream_->Finish();
    finished_ = true;
  }
  Stop();
}

void EventStreamWriter::Stop() {
  if (stopped_) return;
  stopped_ = true;
  metrics_.subscribers.Add(-1);
  metrics_.sub_queue_len.Add(-reported_depth_);
  reported_depth_ = 0;
  uint64_t id = shard_subscription_id_;
  // A writer exists only for a subscription the open shard accepted.
  shard_.executor->Post([cell = shard_.cell, id] { cell->get()->shard->Unsubscribe(id); });
  if (stream_ && !finished_ && !stream_->closed()) stream_->Reset(0);
  queue_.reset();
  // Drop the handlers (they own this writer) outside whatever handler is running now.
  auto stream = stream_;
  endpoint_.Post([stream] { stream->SetHandlers({}); });
  if (on_stopped) {
    auto callback = std::move(on_stopped);
    on_stopped = nullptr;
    callback();
  }
}

void EventStreamWriter::ForceRelease() {
  Stop();
  if (stream_) stream_->SetHandlers({});
}

}  // namespace felix::broker
