// ClientSession: when and in which order publishes are answered (client-protocol.md §9.3,
// semantics.md §2.3–2.4).
//
// Ack policy: an acked publish is answered once it is queued to its shard (ok, no offset),
// unless commit acks were negotiated — by the broker setting FELIX_ACK_ON_COMMIT or by the
// client offering FEATURE_ACK_ON_COMMIT — in which case it is answered after the write, with
// the batch's first offset when the stream has a log.
//
// Pipelining: a client that offered FEATURE_PUBLISH_PIPELINE, on a broker whose window is
// non-zero, is granted `publish_window` in auth_ok. Its publish answers then leave each stream
// in the order the stream carried the publishes (a completed answer waits behind earlier
// unanswered ones), and once `window` publishes are unanswered the session stops reading the
// stream until answers make room. Other answers are never held.
#include "broker/client_metrics.h"
#include "broker/client_session.h"
#include "broker/protocol_codes.h"
#include "wire/shard_hash.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;

std::variant<ClientSession::PublishRoute, RemoteShard, ClientSession::Refusal>
ClientSession::RoutePublish(std::string_view tenant, std::string_view ns, std::string_view stream,
                            std::optional<std::string_view> key, bool forwardable) {
  auto resolved = service_.resolver().ResolvePublish(tenant, ns, stream, key);
  if (auto* error = std::get_if<Error>(&resolved)) {
    return Refusal(ProtocolCodeFor(*error), error->message);
  }
  if (auto* remote = std::get_if<RemoteShard>(&resolved)) {
    // A publish is never redirected (client-protocol.md §6.2): it is forwarded to the owner,
    // and where it cannot be the client learns the owner from the refusal (class redirect).
    if (forwardable && service_.forwarder() != nullptr) return std::move(*remote);
    service_.metrics().redirects.Increment();
    return Refusal(Code(flx1::ProtocolErrorCode::kNotLeader), OwnerProse(*remote));
  }
  auto& local = std::get<LocalStreamShard>(resolved);
  return PublishRoute{std::move(local.stream), std::move(local.handle)};
}

std::optional<std::pair<uint16_t, std::string>> ClientSession::AdmitPublish(
    const catalog::Stream& stream, const std::vector<std::span<const uint8_t>>& payloads,
    size_t* bytes) {
  using Refusal = std::pair<uint16_t, std::string>;
  const ClientServiceOptions& options = service_.options();
  if (stream.durable) {
    // A record no group answer can carry would be stuck forever (issue 12 item 4).
    size_t max = MaxGroupRecordBytes(options.max_frame_bytes);
    for (auto p : payloads) {
      if (p.size() > max) {
        return Refusal(Code(flx1::ProtocolErrorCode::kInvalidRequest),
                       "record of " + std::to_string(p.size()) + " bytes exceeds " +
                           std::to_string(max) +
                           ", the largest a consumer group can deliver within max_frame_bytes");
      }
    }
  }
  size_t payload_bytes = 0;
  for (auto p : payloads) payload_bytes += p.size();
  // In-flight cost: payload plus a per-record overhead, against the stream's and the broker's
  // budgets. A batch that alone exceeds the stream budget can never be admitted: refused.
  size_t cost = payload_bytes + payloads.size() * options.inflight_record_overhead;
  if (cost > options.max_inflight_bytes_per_stream) {
    return Refusal(Code(flx1::ProtocolErrorCode::kLimitExceeded),
                   "batch of " + std::to_string(payloads.size()) + " records costs " +
                       std::to_string(cost) + " bytes in flight, over the per-stream budget of " +
                       std::to_string(options.max_inflight_bytes_per_stream) + ": split it");
  }
  std::atomic<size_t>& total = service_.inflight_total();
  size_t total_now = total.load();
  if ((inflight_bytes_ > 0 && inflight_bytes_ + cost > options.max_inflight_bytes_per_stream) ||
      (total_now > 0 && total_now + cost > options.max_inflight_bytes_total)) {
    return Refusal(Code(flx1::ProtocolErrorCode::kOverloaded), "publish queue full");
  }
  inflight_bytes_ += cost;
  service_.memory_trimmer().NotePeak((total += cost));
  *bytes = cost;
  service_.metrics().publish_messages.Increment(payloads.size());
  service_.metrics().publish_bytes.Increment(payload_bytes);
  return std::nullopt;
}

void ClientSession::ReleasePublish(size_t bytes) {
  inflight_bytes_ -= bytes;
  service_.NotePublishRoom();
}

size_t ClientSession::UnackedRunCost() const {
  return unacked_run_.payload_bytes +
         unacked_run_.payloads.size() * service_.options().inflight_record_overhead;
}

bool ClientSession::FitsInFlight(size_t cost) const {
  const ClientServiceOptions& options = service_.options();
  const size_t run = UnackedRunCost();
  const size_t stream = inflight_bytes_ + run;
  const size_t total = service_.inflight_total().load() + run;
  return (stream == 0 || stream + cost <= options.max_inflight_bytes_per_stream) &&
         (total == 0 || total + cost <= options.max_inflight_bytes_total);
}

bool ClientSession::RoomForFrame(uint16_t flags, std::span<const uint8_t> payload) {
  const ClientServiceOptions& options = service_.options();
  if (!auth_ || (flags & flx1::kFlagBinaryPublishBatch) == 0) return true;
  // An acked publish waits at most publish_room_wait; a fire-and-forget one as long as it takes
  // with publish_ingress_wait (broker-config.md §2.4).
  const bool unbounded =
      options.publish_ingress_wait && (flags & flx1::kFlagBinaryPublishAcked) == 0;
  if (options.publish_room_wait.count() == 0 && !unbounded) return true;
  if (room_wait_over_) {
    room_wait_over_ = false;
    return true;  // waited publish_room_wait: admission refuses or sheds it
  }
  // A bound first (a record takes at least its 4-byte length): far from the budgets, the frame
  // is not decoded twice.
  const size_t overhead = options.inflight_record_overhead;
  size_t cost = payload.size() + (payload.size() / 4 + 1) * overhead;
  if (!FitsInFlight(cost)) {
    auto batch = flx1::DecodePublishBatch(flags, payload);
    if (!batch) return true;  // HandleFrame refuses it
    cost = batch->payloads.size() * overhead;
    for (std::string_view p : batch->payloads) cost += p.size();
    // Larger than a budget: no wait makes room for it (admission refuses it).
    if (cost > std::min(options.max_inflight_bytes_per_stream, options.max_inflight_bytes_total))
      return true;
  }
  if (FitsInFlight(cost)) {
    if (room_waiting_) EndRoomWait();
    return true;
  }
  room_needed_ = cost;
  if (room_waiting_) return false;
  room_waiting_ = true;
  service_.metrics().publish_room_waits.Increment();
  if (!room_listed_) {
    room_listed_ = true;
    service_.AwaitPublishRoom(weak_from_this());
  }
  if (!unbounded) {
    std::weak_ptr<ClientSession> weak = weak_from_this();
    room_deadline_ = endpoint_.RunAfter(options.publish_room_wait, [weak] {
      auto self = weak.lock();
      if (!self || !self->room_waiting_) return;
      self->room_deadline_ = 0;
      self->EndRoomWait();
      self->room_wait_over_ = true;
      self->ResumeReading();
    });
  }
  return false;
}

void ClientSession::EndRoomWait() {
  room_waiting_ = false;
  if (room_deadline_ != 0) endpoint_.Cancel(room_deadline_);
  room_deadline_ = 0;
}

bool ClientSession::TryEndRoomWait() {
  if (room_waiting_ && !ended_ && !released_) {
    if (!FitsInFlight(room_needed_)) return false;
    EndRoomWait();
    ResumeReading();
  }
  room_listed_ = false;
  return true;
}

std::optional<uint32_t> ClientSession::NegotiatePublishing(uint32_t client_features) {
  const ClientServiceOptions& options = service_.options();
  commit_acks_ = options.ack_on_commit || (client_features & flx1::kFeatureAckOnCommit) != 0;
  pipelined_ = options.publish_window > 0 &&
               (client_features & flx1::kFeaturePublishPipeline) != 0 &&
               !stream_->is_unidirectional();  // a publish-only stream is never answered
  if (!pipelined_) return std::nullopt;
  window_ = options.publish_window;
  return window_;
}

void ClientSession::AnswerPublishQueued(bool binary, uint64_t request_id) {
  service_.metrics().acks.Increment();
  if (binary) {
    flx1::BinaryPublishAck ack;
    ack.status = flx1::BinaryPublishAck::Status::kOk;
    ack.request_id = request_id;
    std::vector<uint8_t> frame;
    if (flx1::AppendFrame(flx1::Flx1Frame{ack}, frame)) WritePublishAnswer(std::move(frame));
    return;
  }
  flx1::PublishOk ok;
  ok.request_id = request_id;
  if (auto frame = flx1::EncodeMessageFrame(ok)) WritePublishAnswer(std::move(*frame));
}

std::optional<uint64_t> ClientSession::TakeAnswerTicket(bool acked) {
  if (!pipelined_ || !acked) return std::nullopt;
  uint64_t ticket = next_ticket_++;
  if (!answer_slots_) answer_slots_.emplace();
  answer_slots_->push_back(AnswerSlot{ticket, std::nullopt});
  return ticket;
}

void ClientSession::WritePublishAnswer(std::vector<uint8_t> frame) {
  if (stream_->is_unidirectional()) return;  // publish-only streams are never answered
  if (!current_ticket_) {
    (void)stream_->Write(frame);
    return;
  }
  uint64_t ticket = *current_ticket_;
  current_ticket_.reset();  // one answer per publish
  // A ticket was taken, so the slots exist; made here only to keep the reference valid.
  if (!answer_slots_) answer_slots_.emplace();
  std::deque<AnswerSlot>& slots = *answer_slots_;
  for (AnswerSlot& slot : slots) {
    if (slot.ticket == ticket) {
      slot.frame = std::move(frame);
      break;
    }
  }
  bool was_full = PublishWindowFull();
  while (!slots.empty() && slots.front().frame) {
    if (!finished_) (void)stream_->Write(*slots.front().frame);
    slots.pop_front();
  }
  if (was_full && read_paused_ && !PublishWindowFull()) ResumeReading();
}

bool ClientSession::PublishWindowFull() const {
  return pipelined_ && answer_slots_ && answer_slots_->size() >= window_;
}

void ClientSession::ResumeReading() {
  read_paused_ = false;
  if (ended_ || released_) return;
  // Installing the handlers again shows the unread bytes once more (not inline), so reading
  // continues where it stopped.
  // A frame assembled whole before its wait for room has no unread bytes behind it to show.
  auto self = shared_from_this();
  endpoint_.Post([self] {
    if (self->ended_ || self->released_) return;
    if (self->assembly_total_ > 0 && self->assembly_.size() == self->assembly_total_)
      self->OnData({});
    if (!self->ended_ && !self->released_) self->InstallHandlers();
  });
}

}  // namespace felix::broker
