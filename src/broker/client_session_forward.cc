// ClientSession: a publish to a shard another broker owns, forwarded to that owner through the
// service's PublishForwarder (internal-protocol.md "Forwarded publish").
//
// The client is answered from the owner's outcome and nothing else, whatever ack_on_commit
// says ("Acknowledging a forwarded publish"): the ingress has written nothing, so an ack at
// enqueue would claim what nobody knows. The ack carries the owner's first offset when the
// client offered 0x1000 and the owner's stream has a log, and the owner hint (0x0080: who
// answered, at which generation) when the client offered that. A fire-and-forget publish is handed
// over without waiting: nobody is told its outcome.
#include "broker/client_metrics.h"
#include "broker/client_session.h"

namespace felix::broker {

void ClientSession::ForwardPublish(PublishRequest request, const RemoteShard& remote,
                                   std::optional<uint64_t> answer_id, bool durable, size_t bytes) {
  ForwardPublishRequest forward;
  forward.target = remote;
  forward.tenant = std::string(request.tenant);
  forward.ns = std::string(request.ns);
  forward.stream = std::string(request.stream);
  forward.owner = std::move(request.owner);
  forward.payloads = std::move(request.payloads);
  forward.credential = auth_->raw_token;
  forward.wait = answer_id.has_value();
  std::atomic<size_t>* inflight_total = &service_.inflight_total();  // outlives completions
  if (!answer_id) {
    service_.forwarder()->Forward(std::move(forward), nullptr);
    ReleasePublish(bytes);
    inflight_total->fetch_sub(bytes);
    return;
  }
  bool binary = request.binary;
  uint64_t request_id = *answer_id;
  std::optional<uint64_t> ticket = current_ticket_;
  auto reply = PendingReply();
  service_.forwarder()->Forward(
      std::move(forward), [reply, inflight_total, bytes, binary, request_id, ticket, durable,
                           remote](ForwardPublishOutcome outcome) {
        inflight_total->fetch_sub(bytes);
        reply([outcome = std::move(outcome), bytes, binary, request_id, ticket, durable,
               remote](ClientSession* self) {
          if (self == nullptr) return;
          self->ReleasePublish(bytes);
          self->WithTicket(ticket, [&] {
            if (!outcome.ok) {
              self->service_.metrics().publish_error.Increment();
              self->SendPublishError(binary, request_id, outcome.code, outcome.message);
              return;
            }
            self->service_.metrics().publish_ok.Increment();
            // An offset only from the owner's log (an in-memory stream has none).
            bool logged = durable && outcome.offsets.has_value();
            const Offset first(outcome.offsets ? outcome.offsets->first : 0);
            // The owner hint names who answered; its client address is known only for the
            // owner this broker resolved (a redirect names the internal one).
            RemoteShard owner{remote.shard, Generation(outcome.owner_generation),
                              outcome.owner_node_id, ""};
            if (owner.owner_node_id == remote.owner_node_id) {
              owner.owner_client_addr = remote.owner_client_addr;
            }
            self->AnswerPublish(binary, request_id, Result<Offset>(first), logged, &owner);
          });
        });
      });
}

}  // namespace felix::broker
