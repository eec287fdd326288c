// felix::Client consumer-group calls (client-protocol.md §6.7): each one request on a stream
// of its own, answered by the shard's leader. Answers are matched by type; an `error` answer
// becomes a ClientError with the broker's code and retry class.
#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "client/error_mapping.h"
#include "client/own_stream_request.h"
#include "client/router.h"
#include "felix/client.h"
#include "wire/flx1/constants.h"

namespace felix {

namespace flx1 = wire::flx1;

namespace {

tl::unexpected<ClientError> Fail(ClientErrorCode code, std::string message) {
  return tl::unexpected<ClientError>(MakeClientError(code, std::move(message)));
}

// Fills the scope fields every group request starts with.
template <typename M>
M Scoped(Client::Impl& impl, const GroupRef& group) {
  M m;
  m.tenant_id = client_impl::OptionsOf(impl).tenant_id;
  m.namespace_ = group.stream.namespace_name;
  m.stream = group.stream.stream;
  m.shard = group.shard;
  m.group = group.group;
  m.request_id = client_impl::NextRequestId(impl);
  return m;
}

ClientResult<void> Check(Client::Impl& impl, const GroupRef& group, uint32_t feature,
                         const char* what) {
  if (group.stream.stream.empty() || group.stream.namespace_name.empty() || group.group.empty())
    return Fail(ClientErrorCode::kInvalidArgument, "empty namespace, stream or group name");
  if ((client_impl::ServerFeaturesOf(impl) & feature) == 0)
    return Fail(ClientErrorCode::kUnsupported,
                std::string("the broker does not serve ") + what + " (no durable storage?)");
  return {};
}

// Sends `request` to the leader of the group's shard (router.h: the owner when known, else any
// broker, following `not_leader`), expects an answer of type A. `idempotent`: may be resent
// when its outcome is unknown.
template <typename A>
ClientResult<A> Exchange(Client::Router& router, const GroupRef& group, bool idempotent,
                         const flx1::Message& request, std::chrono::milliseconds extra_wait = {}) {
  auto timeout = router.options().request_timeout + extra_wait;
  Client::Router::Target target{
      {client_impl::NameKind::kStream, group.stream.namespace_name, group.stream.stream},
      group.shard,
      std::nullopt,
      false};
  return router.Call<A>(target, idempotent, false, [&](Client::Impl& conn) -> ClientResult<A> {
    auto answer = client_impl::ExchangeOnOwnStream(conn, request, timeout);
    if (!answer) return tl::unexpected(answer.error());
    if (auto* a = std::get_if<A>(&*answer)) return std::move(*a);
    if (auto* e = std::get_if<flx1::Error>(&*answer))
      return tl::unexpected(client_impl::FromErrorMessage(*e, RetryClass::kFatal));
    if (auto* n = std::get_if<flx1::NotLeader>(&*answer))
      return tl::unexpected(client_impl::FromNotLeader(*n));
    if (auto* u = std::get_if<flx1::Unsupported>(&*answer))
      return Fail(ClientErrorCode::kUnsupported, "the broker does not serve " + u->request_type);
    return Fail(ClientErrorCode::kProtocol, "unexpected answer to a group request");
  });
}

ClientResult<void> ExpectOk(Client::Router& router, const GroupRef& group, bool idempotent,
                            const flx1::Message& request) {
  auto ok = Exchange<flx1::CacheOk>(router, group, idempotent, request);
  if (!ok) return tl::unexpected(ok.error());
  return {};
}

}  // namespace

ClientResult<std::vector<GroupRecord>> Client::GroupPoll(const GroupRef& group,
                                                         const GroupPollOptions& options) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureConsumerGroup, "consumer groups"); !ok)
    return tl::unexpected(ok.error());
  auto m = Scoped<flx1::GroupPoll>(*router_->Home(), group);
  m.max_records = options.max_records;
  m.wait_ms = static_cast<uint64_t>(std::max<int64_t>(0, options.wait.count()));
  if (options.visibility.count() > 0 &&
      (client_impl::ServerFeaturesOf(*router_->Home()) & flx1::kFeatureGroupClaimControl) != 0) {
    m.visibility_ms = static_cast<uint64_t>(options.visibility.count());
  }
  auto answer = Exchange<flx1::GroupRecords>(*router_, group, false, m, options.wait);
  if (!answer) return tl::unexpected(answer.error());
  std::vector<GroupRecord> records;
  records.reserve(answer->records.size());
  for (auto& r : answer->records) {
    records.push_back(GroupRecord{r.offset, std::string(r.payload.begin(), r.payload.end()),
                                  r.attempts, r.skipped_before.value_or(0), r.timestamp_micros,
                                  std::move(r.publisher)});
  }
  return records;
}

ClientResult<std::optional<uint64_t>> Client::OffsetForTime(const StreamRef& stream, uint32_t shard,
                                                            uint64_t at_micros) {
  // Routed and answered like a group request (the shard's leader, a stream of its own).
  GroupRef target{stream, shard, "-"};
  if (auto ok = Check(*router_->Home(), target, flx1::kFeatureRecordTimestamps, "offset_for_time");
      !ok)
    return tl::unexpected(ok.error());
  flx1::OffsetForTime m;
  m.tenant_id = client_impl::OptionsOf(*router_->Home()).tenant_id;
  m.namespace_ = stream.namespace_name;
  m.stream = stream.stream;
  m.shard = shard;
  m.at_micros = at_micros;
  m.request_id = client_impl::NextRequestId(*router_->Home());
  auto answer = Exchange<flx1::OffsetValue>(*router_, target, true, m);
  if (!answer) return tl::unexpected(answer.error());
  return answer->offset;
}

ClientResult<void> Client::GroupAck(const GroupRef& group, uint64_t offset) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureConsumerGroup, "consumer groups"); !ok)
    return ok;
  auto m = Scoped<flx1::GroupAck>(*router_->Home(), group);
  m.offset = offset;
  return ExpectOk(*router_, group, true, m);  // acking twice is not an error
}

ClientResult<void> Client::GroupAckAll(const GroupRef& group,
                                       const std::vector<uint64_t>& offsets) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureConsumerGroup, "consumer groups"); !ok)
    return ok;
  if (offsets.empty()) return {};
  Router::Route route = router_->Resolve(Router::Target{
      {client_impl::NameKind::kStream, group.stream.namespace_name, group.stream.stream},
      group.shard,
      std::nullopt,
      false});
  // Answers arrive on the I/O thread; the caller keeps up to kGroupAckWindow acks unanswered
  // and is woken to send more only when half of them are answered (or all are): a wake per
  // answer cost a context switch per acknowledgement.
  struct Answers {
    std::mutex mu;
    std::condition_variable cv;
    size_t count = 0;               // guarded by mu
    size_t sent = 0;                // guarded by mu
    size_t total = 0;               // guarded by mu
    std::vector<uint64_t> refused;  // guarded by mu: not answered `cache_ok`
    bool CallerDue() const {
      return count == total || (sent < total && sent - count <= kGroupAckWindow / 2);
    }
  };
  auto answers = std::make_shared<Answers>();
  answers->total = offsets.size();
  const auto timeout = router_->options().request_timeout;
  size_t& sent = answers->sent;
  std::unique_lock<std::mutex> lock(answers->mu);
  while (answers->count < offsets.size()) {
    // The window's free slots go to the I/O thread together: one post, not one per ack.
    std::vector<client_impl::OwnStreamRequest> batch;
    while (sent < offsets.size() && sent - answers->count < kGroupAckWindow) {
      const uint64_t offset = offsets[sent++];
      auto m = Scoped<flx1::GroupAck>(*route.conn, group);
      m.offset = offset;
      batch.push_back(
          {flx1::Message(std::move(m)), [answers, offset](ClientResult<flx1::Message> answer) {
             bool ok = answer && std::holds_alternative<flx1::CacheOk>(*answer);
             std::lock_guard<std::mutex> guard(answers->mu);
             if (!ok) answers->refused.push_back(offset);
             ++answers->count;
             if (answers->CallerDue()) answers->cv.notify_one();
           }});
    }
    if (!batch.empty()) {
      lock.unlock();  // a `done` may run on this thread (a closed client) and takes the lock
      client_impl::StartExchangesOnOwnStreams(*route.conn, std::move(batch));
      lock.lock();
    }
    if (!answers->cv.wait_for(lock, timeout, [&] { return answers->CallerDue(); })) {
      ClientError e = MakeClientError(ClientErrorCode::kTimeout,
                                      "no answer to " + std::to_string(sent - answers->count) +
                                          " group acks within " + std::to_string(timeout.count()) +
                                          " ms (acking again is harmless)");
      e.retry = RetryClass::kOutcomeUnknown;
      return tl::unexpected(e);
    }
  }
  std::vector<uint64_t> refused = std::move(answers->refused);
  lock.unlock();
  // What was not simply acknowledged — another leader, a lost connection, a refusal — is sent
  // again alone, routed and retried like any ack, and its error (if still one) is the answer.
  std::sort(refused.begin(), refused.end());
  for (uint64_t offset : refused) {
    if (auto ok = GroupAck(group, offset); !ok) return ok;
  }
  return {};
}

ClientResult<void> Client::GroupNack(const GroupRef& group, uint64_t offset,
                                     const GroupNackOptions& options) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureConsumerGroup, "consumer groups"); !ok)
    return ok;
  auto m = Scoped<flx1::GroupNack>(*router_->Home(), group);
  m.offset = offset;
  bool extras = options.delay.count() > 0 || options.attempts != 0;
  if (extras) {
    if (auto ok =
            Check(*router_->Home(), group, flx1::kFeatureGroupClaimControl, "nack delay/attempts");
        !ok)
      return ok;
    if (options.delay.count() > 0) m.delay_ms = static_cast<uint64_t>(options.delay.count());
    if (options.attempts != 0) m.attempts = options.attempts;
  }
  return ExpectOk(*router_, group, false, m);
}

ClientResult<std::chrono::milliseconds> Client::GroupExtend(const GroupRef& group, uint64_t offset,
                                                            uint32_t attempts,
                                                            std::chrono::milliseconds extend) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureGroupClaimControl, "group_extend");
      !ok)
    return tl::unexpected(ok.error());
  if (extend.count() <= 0)
    return Fail(ClientErrorCode::kInvalidArgument, "extend must be positive");
  auto m = Scoped<flx1::GroupExtend>(*router_->Home(), group);
  m.offset = offset;
  m.attempts = attempts;
  m.extend_ms = static_cast<uint64_t>(extend.count());
  auto answer = Exchange<flx1::GroupExtended>(*router_, group, false, m);
  if (!answer) return tl::unexpected(answer.error());
  return std::chrono::milliseconds(answer->visible_ms);
}

ClientResult<void> Client::GroupDeadLetter(const GroupRef& group, uint64_t offset) {
  if (auto ok =
          Check(*router_->Home(), group, flx1::kFeatureGroupClaimControl, "group_dead_letter");
      !ok)
    return ok;
  auto m = Scoped<flx1::GroupDeadLetter>(*router_->Home(), group);
  m.offset = offset;
  return ExpectOk(*router_, group, false, m);
}

ClientResult<std::vector<uint64_t>> Client::GroupDeadLetters(const GroupRef& group) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureGroupDeadLetters, "dead letters"); !ok)
    return tl::unexpected(ok.error());
  auto answer = Exchange<flx1::GroupDeadLetterList>(
      *router_, group, true, Scoped<flx1::GroupDeadLetters>(*router_->Home(), group));
  if (!answer) return tl::unexpected(answer.error());
  return std::move(answer->offsets);
}

ClientResult<void> Client::GroupRedrive(const GroupRef& group, uint64_t offset) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureGroupDeadLetters, "dead letters"); !ok)
    return ok;
  auto m = Scoped<flx1::GroupRedrive>(*router_->Home(), group);
  m.offset = offset;
  return ExpectOk(*router_, group, false, m);
}

ClientResult<void> Client::GroupDiscard(const GroupRef& group, uint64_t offset) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureGroupDeadLetters, "dead letters"); !ok)
    return ok;
  auto m = Scoped<flx1::GroupDiscard>(*router_->Home(), group);
  m.offset = offset;
  return ExpectOk(*router_, group, false, m);
}

ClientResult<GroupInfo> Client::GroupDescribe(const GroupRef& group) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureGroupAdmin, "group administration");
      !ok)
    return tl::unexpected(ok.error());
  auto answer = Exchange<flx1::GroupInfo>(*router_, group, true,
                                          Scoped<flx1::GroupDescribe>(*router_->Home(), group));
  if (!answer) return tl::unexpected(answer.error());
  return GroupInfo{answer->committed, answer->tail, answer->in_flight, answer->owed,
                   answer->dead_letters};
}

ClientResult<GroupPosition> Client::GroupSeek(const GroupRef& group, const StartPosition& start,
                                              bool if_new) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureGroupAdmin, "group administration");
      !ok)
    return tl::unexpected(ok.error());
  auto m = Scoped<flx1::GroupSeek>(*router_->Home(), group);
  switch (start.kind()) {
    case StartPosition::Kind::kLatest:
      m.start.kind = flx1::StartPosition::Kind::kLatest;
      break;
    case StartPosition::Kind::kEarliest:
      m.start.kind = flx1::StartPosition::Kind::kEarliest;
      break;
    case StartPosition::Kind::kOffset:
      m.start.kind = flx1::StartPosition::Kind::kOffset;
      m.start.offset = start.offset();
      break;
  }
  m.if_new = if_new;
  auto answer = Exchange<flx1::GroupPosition>(*router_, group, false, m);
  if (!answer) return tl::unexpected(answer.error());
  return GroupPosition{answer->offset, answer->moved};
}

ClientResult<bool> Client::GroupDelete(const GroupRef& group) {
  if (auto ok = Check(*router_->Home(), group, flx1::kFeatureGroupAdmin, "group administration");
      !ok)
    return tl::unexpected(ok.error());
  auto answer = Exchange<flx1::GroupDeleted>(*router_, group, false,
                                             Scoped<flx1::GroupDelete>(*router_->Home(), group));
  if (!answer) return tl::unexpected(answer.error());
  return answer->existed;
}

}  // namespace felix
