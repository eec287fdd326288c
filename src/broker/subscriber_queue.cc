#include "broker/subscriber_queue.h"

#include <algorithm>

namespace felix::broker {

EventBatch::Frame EventBatch::GetOrEncode(
    size_t variant, const std::function<std::vector<uint8_t>()>& encode) const {
  std::lock_guard lock(frames_mu_);
  Frame& frame = frames_[variant % kVariants];
  if (!frame) frame = std::make_shared<const std::vector<uint8_t>>(encode());
  return frame;
}

SubscriberQueue::SubscriberQueue(size_t capacity, std::function<void()> on_ready,
                                 std::function<void()> on_room)
    : capacity_(capacity == 0 ? 1 : capacity),
      ring_(std::min(capacity_, kInitialSlots)),
      on_ready_(std::move(on_ready)),
      on_room_(std::move(on_room)) {}

void SubscriberQueue::GrowLocked() {
  std::vector<EventBatchRef> grown(std::min(capacity_, ring_.size() * 2));
  for (size_t i = 0; i < count_; ++i) grown[i] = std::move(ring_[(head_ + i) % ring_.size()]);
  ring_ = std::move(grown);
  head_ = 0;
}

bool SubscriberQueue::Push(EventBatchRef& batch, bool* was_empty) {
  if (end_) return false;
  if (count_ == ring_.size()) {
    if (ring_.size() == capacity_) return false;
    GrowLocked();
  }
  *was_empty = count_ == 0;
  ring_[(head_ + count_) % ring_.size()] = std::move(batch);
  ++count_;
  return true;
}

bool SubscriberQueue::OfferLive(EventBatchRef batch) {
  bool was_empty = false;
  {
    std::lock_guard lock(mu_);
    if (!Push(batch, &was_empty)) {
      ++dropped_batches_;
      dropped_records_ += batch->record_count;
      if (!first_dropped_offset_) first_dropped_offset_ = batch->base_offset;
      return false;
    }
  }
  if (was_empty && on_ready_) on_ready_();
  return true;
}

bool SubscriberQueue::OfferReplay(EventBatchRef batch) {
  bool was_empty = false;
  {
    std::lock_guard lock(mu_);
    if (!Push(batch, &was_empty)) {
      replay_waiting_ = true;
      return false;
    }
  }
  if (was_empty && on_ready_) on_ready_();
  return true;
}

std::optional<EventBatchRef> SubscriberQueue::Pop() {
  EventBatchRef out;
  bool notify_room = false;
  {
    std::lock_guard lock(mu_);
    if (count_ == 0) return std::nullopt;
    out = std::move(ring_[head_]);
    head_ = (head_ + 1) % ring_.size();
    --count_;
    if (replay_waiting_) {
      replay_waiting_ = false;
      notify_room = true;
    }
  }
  if (notify_room && on_room_) on_room_();
  return out;
}

void SubscriberQueue::End(QueueEnd end) {
  {
    std::lock_guard lock(mu_);
    if (end_) return;
    end_ = std::move(end);
  }
  // Always wake: the writer may be idle on an empty queue and must write the last frame.
  if (on_ready_) on_ready_();
}

bool SubscriberQueue::ended() const {
  std::lock_guard lock(mu_);
  return end_.has_value();
}

std::optional<QueueEnd> SubscriberQueue::TakeEnd() {
  std::lock_guard lock(mu_);
  if (!end_ || end_taken_ || count_ != 0) return std::nullopt;
  end_taken_ = true;
  return end_;
}

size_t SubscriberQueue::size() const {
  std::lock_guard lock(mu_);
  return count_;
}

uint64_t SubscriberQueue::dropped_batches() const {
  std::lock_guard lock(mu_);
  return dropped_batches_;
}

uint64_t SubscriberQueue::dropped_records() const {
  std::lock_guard lock(mu_);
  return dropped_records_;
}

std::optional<Offset> SubscriberQueue::first_dropped_offset() const {
  std::lock_guard lock(mu_);
  return first_dropped_offset_;
}

}  // namespace felix::broker
