// ClientSession: what every request path shares once the ShardResolver has answered — running
// work on the shard's executor and coming back to the loop thread, and the answer to a shard
// that another broker serves (client-protocol.md §6.2 `not_leader`).
#include "broker/client_session.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

ClientSession::LoopReply ClientSession::PendingReply() {
  ++pending_ops_;
  LoopReply reply;
  reply.session_ = weak_from_this();
  reply.endpoint_ = &endpoint_;
  reply.service_ = &service_;
  return reply;
}

void ClientSession::LoopReply::operator()(SessionReply reply) const {
  endpoint_->Post([session = session_, service = service_, null_after_reset = null_after_reset_,
                   reply = std::move(reply)] {
    auto self = session.lock();
    if (!self) {
      reply(nullptr);
      // A publish of a session gone released its broker-wide cost: others may wait for it.
      service->NotePublishRoom();
      return;
    }
    --self->pending_ops_;
    reply(null_after_reset && self->reset_ ? nullptr : self.get());
    if (self->peer_finished_ && self->pending_ops_ == 0) self->FinishStream();
    self->MaybeRelease();
  });
}

bool ClientSession::RunOnShard(Executor& executor, ShardWork work) {
  auto back_to_loop = PendingReply();
  // Inline on the loop thread when the executor is idle (no wakeup there and back); the reply
  // is then a post to this same thread, run before the loop sleeps, so the answer leaves in
  // the packets of this loop iteration.
  // Moved, not copied: each copy of the reply is an allocation (change 34).
  if (executor.RunOrPost(
          [work = std::move(work), back_to_loop = std::move(back_to_loop)]() mutable {
            work(std::move(back_to_loop));
          })) {
    return true;
  }
  --pending_ops_;  // the executor is stopping: nothing was done
  return false;
}

std::string ClientSession::OwnerProse(const RemoteShard& remote) {
  std::string text = "shard " + std::to_string(remote.shard) + " is served by broker '" +
                     remote.owner_node_id + "'";
  if (!remote.owner_client_addr.empty()) text += " at " + remote.owner_client_addr;
  return text + " (generation " + std::to_string(remote.generation.value()) + ")";
}

void ClientSession::SendNotLeader(const RemoteShard& remote) {
  service_.metrics().redirects.Increment();
  if ((peer_features_ & flx1::kFeatureRedirect) != 0) {
    flx1::NotLeader answer;
    answer.node_id = remote.owner_node_id;
    if (!remote.owner_client_addr.empty()) answer.addr = remote.owner_client_addr;
    answer.generation = remote.generation.value();
    Send(std::move(answer));
    return;
  }
  SendError(Code(ProtocolErrorCode::kNotLeader), OwnerProse(remote));
}

}  // namespace felix::broker
