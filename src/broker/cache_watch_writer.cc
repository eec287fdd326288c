#include "broker/cache_watch_writer.h"

#include <spdlog/spdlog.h>

#include "wire/flx1/frame.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;

CacheWatchWriter::CacheWatchWriter(transport::Endpoint& endpoint,
                                   std::shared_ptr<transport::Stream> stream,
                                   CacheShardHandle shard, uint64_t shard_watch_id,
                                   uint64_t client_id, bool error_codes)
    : endpoint_(endpoint),
      stream_(std::move(stream)),
      shard_(std::move(shard)),
      shard_watch_id_(shard_watch_id),
      client_id_(client_id),
      error_codes_(error_codes) {}

void CacheWatchWriter::Start(std::shared_ptr<CacheWatchQueue> queue) {
  queue_ = std::move(queue);
  // The stream's handlers own the writer until Stop() drops them.
  auto self = shared_from_this();
  transport::StreamHandlers handlers;
  handlers.on_writable = [self](transport::Stream&) {
    self->blocked_ = false;
    self->Drain();
  };
  handlers.on_reset = [self](transport::Stream&, uint64_t) { self->Stop(); };
  handlers.on_data = [](transport::Stream& s, std::span<const uint8_t> data) {
    s.Consume(data.size());  // the client never sends on this stream
  };
  stream_->SetHandlers(std::move(handlers));
  flx1::EventStreamHello hello;
  hello.subscription_id = client_id_;
  auto frame = flx1::EncodeMessageFrame(flx1::Message{hello});
  if (!frame || !stream_->Write(*frame)) {
    Stop();
    return;
  }
  Drain();
}

void CacheWatchWriter::Wake() {
  std::weak_ptr<CacheWatchWriter> weak = weak_from_this();
  endpoint_.Post([weak] {
    if (auto self = weak.lock()) self->Drain();
  });
}

void CacheWatchWriter::Drain() {
  if (stopped_ || blocked_ || !queue_) return;
  while (auto next = queue_->Pop()) {
    const CacheChange& change = **next;
    flx1::CacheEvent event;
    event.key = change.key;
    if (change.value) event.value = flx1::Bytes(change.value->begin(), change.value->end());
    event.offset = change.offset.value();
    event.expires_at_millis = change.expires_at_millis;
    auto frame = flx1::EncodeMessageFrame(flx1::Message{std::move(event)});
    if (!frame) {
      spdlog::error("cache_event encode failed: {}", frame.error().ToString());
      continue;
    }
    auto written = stream_->Write(*frame);
    if (!written) {  // write side gone
      Stop();
      return;
    }
    if (!*written) {
      blocked_ = true;  // resumes on on_writable
      return;
    }
  }
  if (auto end = queue_->TakeEnd()) WriteEnd(*end);
}

void CacheWatchWriter::WriteEnd(const WatchEnd& end) {
  flx1::Message last;
  if (end.kind == WatchEnd::Kind::kLagged) {
    last = flx1::CacheWatchLagged{end.resume_from.value()};
  } else {
    flx1::Error error;
    error.message = end.message;
    if (error_codes_) {
      if (auto name = flx1::ErrorCodeName(end.code)) error.code = std::string(*name);
      error.retry = std::string(flx1::RetryClassName(flx1::DefaultRetryClass(end.code)));
    }
    last = std::move(error);
  }
  if (auto frame = flx1::EncodeMessageFrame(last); frame && stream_->Write(*frame)) {
    stream_->Finish();
    finished_ = true;
  }
  Stop();
}

void CacheWatchWriter::Stop() {
  if (stopped_) return;
  stopped_ = true;
  uint64_t id = shard_watch_id_;
  // A writer exists only for a watch the open shard accepted.
  shard_.executor->Post([cell = shard_.cell, id] { cell->get()->shard->Unwatch(id); });
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

void CacheWatchWriter::ForceRelease() {
  Stop();
  if (stream_) stream_->SetHandlers({});
}

}  // namespace felix::broker
