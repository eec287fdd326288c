// ClientSession: idempotent producers (client-protocol.md §6.3, semantics.md §7).
//
// `producer_init` hands out a random 64-bit producer id. An idempotent batch — JSON
// `publish_idempotent` or a binary 0x0100 frame — is always acknowledged after the write (never
// at enqueue, §2.3), in JSON: `publish_ok` (the batch's first offset, or for a resend the
// original one, to a client that offered 0x1000 on a durable stream), `publish_refused` for a
// sequence the shard's ProducerTable refuses, or `publish_error`. A reused sequence is refused
// `sequence_reused` only to a client that offered FEATURE_SEQUENCE_REUSED; any other client
// gets `publish_ok` and the batch is not written (§7). Answers take part in pipelining order
// like every publish answer.
#include <random>

#include "broker/client_metrics.h"
#include "broker/client_session.h"
#include "broker/protocol_codes.h"

namespace felix::broker {

namespace flx1 = felix::wire::flx1;
using flx1::ProtocolErrorCode;

namespace {

uint64_t RandomProducerId() {
  std::random_device device;  // the OS's randomness: ids must not repeat across restarts
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(device()) << 32) | device();
  return id;
}

const char* RefusalText(ProducerTable::Verdict::Kind kind) {
  using Kind = ProducerTable::Verdict::Kind;
  switch (kind) {
    case Kind::kGap:
      return "sequence gap";
    case Kind::kExpired:
      return "sequence expired";
    case Kind::kReused:
      return "sequence reused";
    case Kind::kUnknownProducer:
      return "unknown producer";
    default:
      return "refused";
  }
}

}  // namespace

bool ClientSession::HandleProducerInit(const flx1::ProducerInit& request) {
  flx1::ProducerInitOk ok;
  ok.request_id = request.request_id;
  ok.producer_id = RandomProducerId();
  Send(ok);
  return true;
}

bool ClientSession::HandlePublishIdempotent(std::shared_ptr<flx1::Message> message) {
  service_.metrics().json_publishes.Increment();
  auto& p = std::get<flx1::PublishIdempotent>(*message);
  IdempotentRequest request;
  request.tenant = p.tenant_id;
  request.ns = p.namespace_;
  request.stream = p.stream;
  if (p.key) {
    request.key = std::string_view(reinterpret_cast<const char*>(p.key->data()), p.key->size());
  }
  for (const auto& payload : p.payloads)
    request.payloads.emplace_back(payload.data(), payload.size());
  request.request_id = p.request_id;
  request.producer_id = p.producer_id;
  request.sequence = p.sequence;
  request.owner = std::move(message);
  bool keep_reading = true;
  WithTicket(TakeAnswerTicket(true), [&] { keep_reading = PublishIdempotent(std::move(request)); });
  return keep_reading;
}

bool ClientSession::PublishIdempotent(IdempotentRequest request) {
  // Refusals of idempotent batches are JSON answers, like their acks (§5.1).
  if (!Authorized(auth::Action::kStreamPublish, request.tenant, request.ns, request.stream,
                  request.request_id, /*binary=*/false)) {
    return false;
  }
  auto refuse = [&](uint16_t code, std::string text) {
    service_.metrics().publish_error.Increment();
    SendPublishError(false, request.request_id, code, std::move(text));
    return true;
  };
  auto route = RoutePublish(request.tenant, request.ns, request.stream, request.key, false);
  if (auto* refusal = std::get_if<std::pair<uint16_t, std::string>>(&route)) {
    return refuse(refusal->first, std::move(refusal->second));
  }
  const PublishRoute& target = std::get<PublishRoute>(route);
  size_t bytes = 0;
  if (auto refusal = AdmitPublish(*target.stream, request.payloads, &bytes)) {
    return refuse(refusal->first, std::move(refusal->second));
  }

  PayloadBatch batch{std::move(request.owner), std::move(request.payloads),
                     NowMicrosRoundedToMillis()};
  bool durable = target.stream->durable;
  if (durable) batch.publisher = StoredPublisher();
  uint64_t request_id = request.request_id;
  std::optional<uint64_t> ticket = current_ticket_;
  std::atomic<size_t>* inflight_total = &service_.inflight_total();  // outlives completions
  bool queued =
      RunOnShard(*target.handle.executor, [cell = target.handle.cell, batch = std::move(batch),
                                           producer = request.producer_id,
                                           sequence = request.sequence, request_id, durable, bytes,
                                           ticket, inflight_total](auto reply) mutable {
        cell->WhenOpen([batch = std::move(batch), producer, sequence, reply, request_id, durable,
                        bytes, ticket, inflight_total](Result<OpenedStream*> opened) mutable {
          auto answer = [reply, request_id, durable, bytes, ticket,
                         inflight_total](IdempotentOutcome outcome) {
            inflight_total->fetch_sub(bytes);
            reply([request_id, durable, bytes, ticket, outcome](ClientSession* self) {
              if (self == nullptr) return;
              self->ReleasePublish(bytes);
              self->WithTicket(ticket,
                               [&] { self->AnswerIdempotent(request_id, outcome, durable); });
            });
          };
          if (!opened) {
            IdempotentOutcome failed;
            failed.kind = IdempotentOutcome::Kind::kFailed;
            failed.error = opened.error();
            return answer(failed);
          }
          (*opened)->producers->Publish(std::move(batch), producer, sequence, answer);
        });
      });
  if (!queued) {
    ReleasePublish(bytes);
    inflight_total->fetch_sub(bytes);
    return refuse(Code(ProtocolErrorCode::kShardUnavailable), "shard is closing");
  }
  return true;
}

void ClientSession::AnswerIdempotent(uint64_t request_id, const IdempotentOutcome& outcome,
                                     bool durable) {
  using Kind = IdempotentOutcome::Kind;
  using Verdict = ProducerTable::Verdict::Kind;
  bool with_offset = durable && (peer_flags_ & flx1::kFlagBinaryPublishAckOffset) != 0;
  bool reused_as_ok = outcome.kind == Kind::kRefused && outcome.refusal == Verdict::kReused &&
                      (peer_features_ & flx1::kFeatureSequenceReused) == 0;
  if (outcome.kind == Kind::kWritten || outcome.kind == Kind::kDuplicate || reused_as_ok) {
    service_.metrics().publish_ok.Increment();
    service_.metrics().acks.Increment();
    flx1::PublishOk ok;
    ok.request_id = request_id;
    if (with_offset && !reused_as_ok) ok.offset = outcome.first_offset;
    if (auto frame = flx1::EncodeMessageFrame(ok)) WritePublishAnswer(std::move(*frame));
    return;
  }
  service_.metrics().publish_error.Increment();
  if (outcome.kind == Kind::kFailed) {
    SendPublishError(false, request_id, ProtocolCodeFor(outcome.error), outcome.error.message);
    return;
  }
  flx1::PublishRefused refused;
  refused.request_id = request_id;
  refused.message = RefusalText(outcome.refusal);
  switch (outcome.refusal) {
    case Verdict::kGap:
      refused.reason.kind = flx1::PublishRefusalReason::Kind::kSequenceGap;
      refused.reason.expected = outcome.expected;
      refused.message += ": expected " + std::to_string(outcome.expected);
      break;
    case Verdict::kExpired:
      refused.reason.kind = flx1::PublishRefusalReason::Kind::kSequenceExpired;
      break;
    case Verdict::kReused:
      refused.reason.kind = flx1::PublishRefusalReason::Kind::kSequenceReused;
      break;
    default:
      refused.reason.kind = flx1::PublishRefusalReason::Kind::kUnknownProducer;
      break;
  }
  if (auto frame = flx1::EncodeMessageFrame(refused)) WritePublishAnswer(std::move(*frame));
}

}  // namespace felix::broker
