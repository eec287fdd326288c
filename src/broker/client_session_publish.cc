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

std::variant<ClientSession::PublishRoute, std::pair<uint16_t, std::string>>
ClientSession::RoutePublish(std::string_view tenant, std::string_view ns, std::string_view stream,
                            std::optional<std::string_view> key) {
  auto found = service_.core().FindStream(tenant, ns, stream);
  if (!found) {
    return std::pair<uint16_t, std::string>(Code(flx1::ProtocolErrorCode::kNotFound),
                                            "stream not found");
  }
  uint32_t shard = found->routing == catalog::Routing::kJumpHash
                       ? wire::ShardJump(found->shards, key)
                       : wire::ShardModulo(found->shards, key);
  auto handle = service_.core().OpenStreamShard(*found, shard);
  if (!handle) {
    return std::pair<uint16_t, std::string>(ProtocolCodeFor(handle.error()),
                                            handle.error().message);
  }
  return PublishRoute{std::move(*found), std::move(*handle)};
}

bool ClientSession::AdmitPublish(const std::vector<std::span<const uint8_t>>& payloads,
                                 size_t* bytes) {
  *bytes = 0;
  for (auto payload : payloads) *bytes += payload.size();
  if (inflight_bytes_ > 0 &&
      inflight_bytes_ + *bytes > service_.options().max_inflight_bytes_per_stream) {
    return false;
  }
  inflight_bytes_ += *bytes;
  ++pending_ops_;
  service_.metrics().publish_messages.Increment(payloads.size());
  service_.metrics().publish_bytes.Increment(*bytes);
  return true;
}

void ClientSession::ReleasePublish(size_t bytes) {
  inflight_bytes_ -= bytes;
  --pending_ops_;
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
  answer_slots_.push_back(AnswerSlot{ticket, std::nullopt});
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
  for (AnswerSlot& slot : answer_slots_) {
    if (slot.ticket == ticket) {
      slot.frame = std::move(frame);
      break;
    }
  }
  bool was_full = PublishWindowFull();
  while (!answer_slots_.empty() && answer_slots_.front().frame) {
    if (!finished_) (void)stream_->Write(*answer_slots_.front().frame);
    answer_slots_.pop_front();
  }
  if (was_full && read_paused_ && !PublishWindowFull()) ResumeReading();
}

bool ClientSession::PublishWindowFull() const {
  return pipelined_ && answer_slots_.size() >= window_;
}

void ClientSession::ResumeReading() {
  read_paused_ = false;
  if (ended_ || released_) return;
  // Installing the handlers again shows the unread bytes once more (not inline), so reading
  // continues where it stopped.
  auto self = shared_from_this();
  endpoint_.Post([self] {
    if (!self->ended_ && !self->released_) self->InstallHandlers();
  });
}

}  // namespace felix::broker
