#include "broker/stream_shard.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include <spdlog/spdlog.h>

#include "broker/commit_record.h"
#include "broker/protocol_codes.h"
#include "storage/record_format.h"

namespace felix::broker {

namespace {
// How far back the constructor looks for generation-start records at the log's end.
constexpr uint64_t kMaxTrailingStartRecords = 64;
}  // namespace

#if FELIX_FAULT_INJECTION
namespace {

// Test seam FELIX_TEST_DUPLICATE_EVERY=<N> (a deliberately broken broker for the fault harness's
// checker, docs/reliability.md): every Nth publish batch of a shard is written twice in one
// append, the acknowledgement naming the first copy. Read once from the environment here, not
// carried in StreamShardOptions, so that a seam of test builds adds nothing to a header most
// of the broker includes; immutable after that first read. 0 = off.
uint32_t DuplicateEvery() {
  static const uint32_t every = [] {
    const char* text = std::getenv("FELIX_TEST_DUPLICATE_EVERY");
    return text == nullptr ? 0u : static_cast<uint32_t>(std::strtoul(text, nullptr, 10));
  }();
  return every;
}

}  // namespace
#endif

StreamShard::StreamShard(ShardId id, Executor& executor, std::unique_ptr<RecordLog> log,
                         StreamShardOptions options)
    : id_(std::move(id)),
      executor_(executor),
      log_(std::move(log)),
      options_(options),
      committed_next_(log_->next_offset()) {
  // A read from below the tail that returns nothing but passed-over offsets found only
  // generation-start records up to the tail; one per leadership change, so a few reads.
  const Offset tail = committed_next_;
  while (trailing_start_records_ < tail.value() &&
         trailing_start_records_ < kMaxTrailingStartRecords) {
    RecordLog::ReadOutcome read = log_->Read(tail - trailing_start_records_ - 1, 1, 1);
    const auto* records = std::get_if<RecordRead>(&read);
    if (records == nullptr || !records->records.empty() || records->passed_over == 0) break;
    ++trailing_start_records_;
  }
}

void StreamShard::Publish(PayloadBatch batch, PublishDone done, PublishDone late) {
#if FELIX_FAULT_INJECTION
  if (options_.drop_acked_every != 0 && ++seam_publishes_ % options_.drop_acked_every == 0) {
    executor_.Post([next = log_->next_offset(), done = std::move(done)] { done(next); });
    return;
  }
  // seam_publishes_ counts for whichever seam is on (both on: they share the count).
  if (uint32_t every = DuplicateEvery();
      every != 0 &&
      (options_.drop_acked_every != 0 ? seam_publishes_ : ++seam_publishes_) % every == 0) {
    size_t records = batch.payloads.size();
    for (size_t i = 0; i < records; ++i) batch.payloads.push_back(batch.payloads[i]);
  }
#endif
  // The log keeps borrowing the payloads until completion: the copy of `batch` in the
  // callback holds their owner.
  auto shared = std::make_shared<PayloadBatch>(std::move(batch));
  log_->Append(*shared, [this, shared, done = std::move(done),
                         late = std::move(late)](Result<Offset> result) mutable {
    // A durable log completes on its flusher thread: with the executor idle the completion
    // runs there (one thread wakeup fewer per acknowledged publish; docs/performance.md).
    executor_.RunAloneOrPost([this, shared, result = std::move(result), done = std::move(done),
                              late = std::move(late)]() mutable {
      if (gate_ && result && !shared->payloads.empty()) {  // Quorum: wait for a majority
        return gate_->Hold(std::move(shared), *result, std::move(done), std::move(late));
      }
      OnAppended(*shared, std::move(result), done);
    });
  });
}

void StreamShard::Commit(std::shared_ptr<const std::vector<uint8_t>> body,
                         uint64_t timestamp_micros, PublishDone done) {
  PayloadBatch batch;
  batch.payloads.emplace_back(body->data(), body->size());
  batch.owner = std::move(body);
  batch.timestamp_micros = timestamp_micros;
  batch.record_flags = storage::kRecordFlagCommit;
  Publish(std::move(batch), std::move(done));
}

Result<StateLookup> StreamShard::StateGet(const std::string& key) {
  if (!state_) {
    ShardState loaded;
    Offset from = log_->start_offset();
    while (from < committed_next_) {
      auto read = log_->Read(from, 1024, 4u << 20);
      if (auto* trimmed = std::get_if<Trimmed>(&read)) {
        from = std::max(from + 1, trimmed->oldest_offset);  // retention moved on meanwhile
        continue;
      }
      if (auto* error = std::get_if<Error>(&read)) return tl::unexpected(*error);
      const auto& records = std::get<RecordRead>(read).records;
      if (records.empty()) break;
      for (const RecordView& r : records) {
        if (r.offset >= committed_next_) break;
        if (r.commit_body.empty()) continue;
        auto commit = DecodeCommitRecord(r.commit_body);
        if (!commit) {
          return Fail(ErrorCode::kCorruption, "commit record at offset " + to_string(r.offset) +
                                                  ": " + CommitRecordErrorName(commit.error()));
        }
        loaded.Apply(r.offset, commit->ops);
      }
      from = records.back().offset + 1;
    }
    state_ = std::move(loaded);
  }
  return state_->Get(key);
}

Result<std::optional<Offset>> StreamShard::OffsetForTime(uint64_t at_micros) {
  Offset lo = log_->start_offset();
  Offset hi = committed_next_;
  while (lo < hi) {
    Offset mid = lo + (hi - lo) / 2;
    RecordLog::ReadOutcome read = log_->Read(mid, 1, 1);
    if (auto* trimmed = std::get_if<Trimmed>(&read)) {
      // Retention removed `mid` (and everything below it): search above.
      lo = std::max(mid + 1, std::min(trimmed->oldest_offset, hi));
      continue;
    }
    if (auto* error = std::get_if<Error>(&read)) return tl::unexpected(*error);
    const auto& records = std::get<RecordRead>(read).records;
    if (records.empty() || records.front().offset >= hi) {
      hi = mid;  // nothing readable at or above `mid` (generation-start records only)
      continue;
    }
    if (records.front().timestamp_micros < at_micros) {
      lo = records.front().offset + 1;
    } else {
      hi = mid;
    }
  }
  if (lo >= committed_next_) return std::optional<Offset>{};
  return std::optional<Offset>{lo};
}

void StreamShard::OnAppended(const PayloadBatch& batch, Result<Offset> result,
                             const PublishDone& done) {
  if (!result) {
    done(std::move(result));
    return;
  }
  const Offset first = *result;
  committed_next_ = std::max(committed_next_, first + batch.payloads.size());
  trailing_start_records_ = 0;
  PayloadBatch commit_event;  // a commit fans out its event bytes, not its body
  const PayloadBatch* fanout = &batch;
  if ((batch.record_flags & storage::kRecordFlagCommit) != 0 && batch.payloads.size() == 1) {
    auto commit = DecodeCommitRecord(batch.payloads[0]);  // encoded by the broker itself
    if (commit) {
      if (state_) state_->Apply(first, commit->ops);
      commit_event = batch;
      commit_event.payloads[0] = *CommitEventBytes(batch.payloads[0]);
      fanout = &commit_event;
    }
  }
  if (!fanout->payloads.empty()) {
    const PayloadBatch& out = *fanout;
    auto event = std::make_shared<EventBatch>();
    event->owner = out.owner;
    event->publisher = out.publisher;
    event->base_offset = first;
    event->record_count = static_cast<uint32_t>(out.payloads.size());
    event->records.reserve(out.payloads.size());
    std::span<const uint8_t> publisher;
    if (out.publisher) {
      publisher = {reinterpret_cast<const uint8_t*>(out.publisher->data()), out.publisher->size()};
    }
    for (size_t i = 0; i < out.payloads.size(); ++i) {
      event->records.push_back(
          RecordView{first + i, out.timestamp_micros, out.payloads[i], {}, publisher});
    }
    EventBatchRef shared_event = std::move(event);
    std::vector<uint64_t> ended;
    for (auto& [id, sub] : subscribers_) {
      // Replaying subscribers read this batch from the log when they get to it.
      if (!sub.live || sub.queue->OfferLive(shared_event)) continue;
      if (!log_->durable()) {
        ++live_drops_;  // in-memory: nothing to replay from
      } else if (sub.end_on_lag) {
        sub.queue->End(QueueEnd{QueueEnd::Kind::kLagged, first, 0, {}});
        ended.push_back(id);
      } else {
        // Everything below `first` is queued; the rest comes from the log as room appears.
        ++replay_fallbacks_;
        sub.live = false;
        sub.replay_next = first;
        uint64_t sub_id = id;
        executor_.Post([this, sub_id] { ReplayStep(sub_id); });
      }
    }
    for (uint64_t id : ended) subscribers_.erase(id);
    if (commit_listener_) commit_listener_();
  }
  done(first);
}

void StreamShard::InstallCommitGate(CommitGateOptions options) {
  gate_ = std::make_unique<CommitGate>(executor_, options, [this](HeldBatch& held) {
    static const PublishDone kAnswered = [](Result<Offset>) {};  // timed out, no `late`
    OnAppended(*held.batch, held.first, held.done ? held.done : kAnswered);
  });
}

uint64_t StreamShard::HoldInheritedAbove(Offset floor) {
  floor = std::max(floor, log_->start_offset());
  if (!gate_ || floor >= committed_next_) return 0;
  inherited_end_ = committed_next_;
  committed_next_ = floor;
  trailing_start_records_ = 0;  // the held records end with them
  return inherited_end_ - floor;
}

void StreamShard::AdvanceCommit(Offset offset) {
  if (!gate_) return;
  if (offset > committed_next_ && committed_next_ < inherited_end_) {
    // Inherited records now on a majority: never fanned out, so a live subscriber (which has
    // everything below the old commit point) reads them from the log, then goes live again.
    // This runs before the gate releases newer batches, which lie above the inherited ones.
    const Offset uncovered_from = committed_next_;
    committed_next_ = std::min(offset, inherited_end_);
    for (auto& [id, sub] : subscribers_) {
      if (!sub.live) continue;
      sub.live = false;
      sub.replay_next = uncovered_from;
      uint64_t sub_id = id;
      executor_.Post([this, sub_id] { ReplayStep(sub_id); });
    }
    if (commit_listener_) commit_listener_();
  }
  gate_->Advance(offset);
}

RecordLog::ReadOutcome StreamShard::Read(Offset from, size_t max_records, size_t max_bytes) {
  RecordLog::ReadOutcome read = log_->Read(from, max_records, max_bytes);
  if (auto* records = std::get_if<RecordRead>(&read); records != nullptr && gate_) {
    // Held records are not committed yet for any reader.
    while (!records->records.empty() && records->records.back().offset >= committed_next_) {
      records->records.pop_back();
    }
  }
  return read;
}

void StreamShard::CloseLog() {
  log_->Close();
  // After the executor stopped (BrokerCore::Stop) the held answers go with it, as the
  // completions of pending appends do: those clients see their connection end (unknown).
  if (gate_ && executor_.InExecutorThread()) {
    gate_->Close("shard " + id_.ToString() + " closed");
  }
}

std::variant<Subscription, CursorError> StreamShard::Subscribe(StartPosition start,
                                                               uint32_t requested_capacity,
                                                               std::function<void()> on_ready,
                                                               bool end_on_lag) {
  const Offset oldest = log_->start_offset();
  const Offset tail = committed_next_;
  Offset from = tail;
  switch (start.kind) {
    case StartPosition::Kind::kLatest:
      break;
    case StartPosition::Kind::kEarliest:
      from = std::min(oldest, tail);
      break;
    case StartPosition::Kind::kOffset:
      if (start.offset < oldest) {
        return CursorError{CursorError::Reason::kTooOld, start.offset, oldest};
      }
      if (start.offset > tail) {
        return CursorError{CursorError::Reason::kInFuture, start.offset, tail};
      }
      from = start.offset;
      break;
  }
  size_t capacity = requested_capacity == 0
                        ? options_.default_queue_capacity
                        : std::clamp<size_t>(requested_capacity, 1, options_.max_queue_capacity);
  uint64_t id = next_subscription_id_++;
  auto on_room = [this, id] { executor_.Post([this, id] { ReplayStep(id); }); };
  Subscriber sub;
  sub.queue = std::make_shared<SubscriberQueue>(capacity, std::move(on_ready), on_room);
  sub.replay_next = from;
  sub.live = from == tail;
  sub.end_on_lag = end_on_lag;
  const Offset live = std::max(from, tail - std::min(trailing_start_records_, tail.value()));
  Subscription out{id, from, live, static_cast<uint32_t>(capacity), sub.queue};
  subscribers_.emplace(id, std::move(sub));
  if (from != tail) executor_.Post([this, id] { ReplayStep(id); });
  return out;
}

void StreamShard::Unsubscribe(uint64_t subscription_id) {
  subscribers_.erase(subscription_id);
}

void StreamShard::EndAll(const QueueEnd& end) {
  for (auto& [id, sub] : subscribers_) sub.queue->End(end);
  subscribers_.clear();
}

void StreamShard::ReplayStep(uint64_t subscription_id) {
  auto it = subscribers_.find(subscription_id);
  if (it == subscribers_.end() || it->second.live) return;
  Subscriber& sub = it->second;
  for (size_t step = 0; step < options_.replay_batches_per_step; ++step) {
    if (sub.pending) {
      if (!sub.queue->OfferReplay(sub.pending)) return;  // resumed by on_room
      sub.pending.reset();
    }
    if (sub.replay_next >= committed_next_) {
      // Caught up inside this executor task: nothing can commit in between, so live delivery
      // starts exactly where replay ends.
      sub.live = true;
      return;
    }
    RecordLog::ReadOutcome read = log_->Read(sub.replay_next, options_.event_batch_max_records,
                                             options_.event_batch_max_bytes);
    if (auto* trimmed = std::get_if<Trimmed>(&read)) {
      // Retention removed records while we replayed: skip them, and say so on the next batch
      // (skipped_before) so the gap is not mistaken for a loss.
      const Offset resume = std::max(sub.replay_next + 1, trimmed->oldest_offset);
      sub.skipped += resume - sub.replay_next;
      sub.replay_next = resume;
      continue;
    }
    if (auto* error = std::get_if<Error>(&read)) {
      // Never jump over unreadable records: end the subscription (after what is queued) with
      // an error naming the offset and, for corruption, the file and byte position.
      spdlog::error("replay read failed shard={} offset={} error={}", id_.ToString(),
                    sub.replay_next, error->ToString());
      QueueEnd end;
      end.kind = QueueEnd::Kind::kError;
      end.code = ProtocolCodeFor(*error);
      end.message = "cannot read record at offset " + to_string(sub.replay_next) + " of shard " +
                    id_.ToString() + ": " + error->message;
      end.fatal = error->code == ErrorCode::kCorruption;  // reading again fails the same way
      sub.queue->End(std::move(end));
      subscribers_.erase(it);
      return;
    }
    auto& records = std::get<RecordRead>(read);
    // Never deliver past the commit point, even if the log holds more.
    while (!records.records.empty() && records.records.back().offset >= committed_next_) {
      records.records.pop_back();
    }
    if (records.records.empty()) {
      sub.replay_next = committed_next_;
      continue;
    }
    auto event = std::make_shared<EventBatch>();
    event->owner = std::move(records.owner);
    event->base_offset = records.records.front().offset;
    event->record_count = static_cast<uint32_t>(records.records.size());
    // Generation-start records passed over hold no event either (replication.md §17).
    event->skipped_before =
        std::exchange(sub.skipped, 0) + (records.records.front().offset - sub.replay_next);
    sub.replay_next = records.records.back().offset + 1;
    event->records = std::move(records.records);
    sub.pending = std::move(event);
  }
  // Yield the executor to other work, then continue.
  executor_.Post([this, subscription_id] { ReplayStep(subscription_id); });
}

}  // namespace felix::broker
