// ClientSession: coalescing of fire-and-forget binary publishes (docs/performance.md, change 24).
//
// A client that publishes single records without acknowledgement sends many small frames that
// arrive together in one read. Handled one by one, each paid the whole publish path — resolve
// the shard, admit, hand to the shard's executor, append, come back to release its budget —
// for one record. Consecutive unacked publishes to the same stream with the same key (or none)
// are instead gathered while OnData walks the read buffer and go to the shard as one batch:
// the records keep their order and become consecutive offsets, exactly as they would one frame
// at a time, and nobody waits for an answer that could tell the difference.
//
// What is never joined, so that its outcome stays what it was alone: acked or idempotent
// frames, frames with any other flag, frames that do not decode, frames that already carry
// many records or bytes, and records a run could not carry whole (over the largest record a
// consumer group can deliver). Such a frame flushes the run first, then is handled as before,
// so every frame is handled in stream order.
//
// Per-request metrics count the frames a run carries (PublishRequest::frames).
#include <algorithm>
#include <cstring>

#include "broker/client_session.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;

namespace {

// Records and bytes one run may carry before it is flushed: enough to amortise the per-batch
// path many times over, small enough to stay a modest share of the per-stream in-flight budget.
constexpr size_t kRunMaxRecords = 1024;
constexpr size_t kRunMaxPayloadBytes = size_t{64} * 1024;
// A frame joins only while it is small: one that already carries many records or bytes has
// its per-batch cost amortised, and is handled alone as it always was.
constexpr size_t kJoinFrameMaxRecords = 16;
constexpr size_t kJoinFrameMaxBytes = size_t{8} * 1024;

bool SameKey(const std::optional<std::string_view>& a, const std::optional<std::string_view>& b) {
  return a.has_value() == b.has_value() && (!a || *a == *b);
}

}  // namespace

bool ClientSession::TryJoinUnackedRun(uint16_t flags, std::span<const uint8_t> payload) {
  constexpr uint16_t kJoinable = flx1::kFlagBinaryPublishBatch | flx1::kFlagBinaryPublishKeyed;
  if (!auth_ || (flags & flx1::kFlagBinaryPublishBatch) == 0 || (flags & ~kJoinable) != 0) {
    FlushUnackedRun();
    return false;
  }
  auto batch = flx1::DecodePublishBatch(flags, payload);
  if (!batch) {
    FlushUnackedRun();
    return false;  // HandleFrame decodes it again and refuses it as before
  }
  const ClientServiceOptions& options = service_.options();
  const size_t max_record = MaxGroupRecordBytes(options.max_frame_bytes);
  const size_t budget = std::min(kRunMaxPayloadBytes, options.max_inflight_bytes_per_stream / 4);
  size_t bytes = 0;
  bool joinable = batch->payloads.size() <= kJoinFrameMaxRecords;
  for (std::string_view p : batch->payloads) {
    joinable = joinable && p.size() <= max_record;
    bytes += p.size();
  }
  const size_t cost = bytes + batch->payloads.size() * options.inflight_record_overhead;
  if (!joinable || cost > std::min(budget, kJoinFrameMaxBytes)) {
    // Handled alone, as it always was (a frame this large gains little from company).
    FlushUnackedRun();
    if (!ended_) PublishDecodedBatch(false, payload, *batch);
    return true;
  }
  UnackedRun& run = unacked_run_;
  if (run.frames > 0) {
    const size_t run_cost =
        run.payload_bytes + run.payloads.size() * options.inflight_record_overhead;
    bool joins = run.stream == batch->stream && run.ns == batch->namespace_ &&
                 run.tenant == batch->tenant_id && SameKey(run.key, batch->key) &&
                 run_cost + cost <= budget &&
                 run.payloads.size() + batch->payloads.size() <= kRunMaxRecords;
    if (!joins) {
      FlushUnackedRun();
      if (ended_) return true;  // the flushed run ended the stream: nothing more is read
    }
  }
  if (run.frames == 0) {
    run.tenant = batch->tenant_id;
    run.ns = batch->namespace_;
    run.stream = batch->stream;
    run.key = batch->key;
  }
  for (std::string_view p : batch->payloads) {
    run.payloads.emplace_back(reinterpret_cast<const uint8_t*>(p.data()), p.size());
  }
  run.payload_bytes += bytes;
  ++run.frames;
  return true;
}

void ClientSession::FlushUnackedRun() {
  UnackedRun& run = unacked_run_;
  if (run.frames == 0) return;
  // One copy of the run's records (they view the read buffer, consumed after this): the
  // batch's owner, which lives as long as the log and subscriber queues hold the records.
  auto owner = std::make_shared<std::vector<uint8_t>>(run.payload_bytes);
  PublishRequest request{run.tenant, run.ns, run.stream, run.key};
  request.binary = true;
  request.frames = run.frames;
  request.payloads.reserve(run.payloads.size());
  size_t at = 0;
  for (std::span<const uint8_t> p : run.payloads) {
    if (!p.empty()) std::memcpy(owner->data() + at, p.data(), p.size());
    request.payloads.emplace_back(owner->data() + at, p.size());
    at += p.size();
  }
  request.owner = std::move(owner);
  run.payloads.clear();  // keeps its capacity for the next run
  run.payload_bytes = 0;
  run.frames = 0;
  run.key.reset();
  Publish(std::move(request));
}

}  // namespace felix::broker
