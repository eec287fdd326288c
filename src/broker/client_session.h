// ClientSession: one client-opened QUIC stream speaking FLX1 (client-protocol.md §1.2).
//
// Reads frames as they arrive (a frame complete in the transport buffer is handled in place;
// a large one is assembled as its bytes come, never allocated from its header alone), keeps
// the stream's auth state (authentication is per stream) and the client's negotiated flags
// and features, and answers each request on the same stream.
//
// Threading: loop thread of the client endpoint only. Completions from shard executors come
// back through Endpoint::Post and find the session through a weak pointer, so a session that
// is gone simply drops them.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "auth/token.h"
#include "broker/cache_path.h"
#include "broker/cache_watch_writer.h"
#include "broker/client_service.h"
#include "broker/event_stream_writer.h"
#include "broker/publish_path.h"
#include "broker/shard_producers.h"
#include "broker/shard_resolver.h"
#include "transport/endpoint.h"
#include "wire/flx1/frame.h"

namespace felix::broker {

// The features this broker advertises in auth_ok.
uint32_t ServerFeatures(const ClientServiceOptions& options);
// The cache part of them: CACHE_DELETE, CACHE_SHARDS, CACHE_CONDITIONAL, and with durable
// storage COUNTERS, CACHE_WATCH and CACHE_WATCH_RETAINED.
uint32_t CacheFeatures(const ClientServiceOptions& options);

// State shared by the sessions of one client connection.
class ClientSession;
struct ClientConnectionState {
  // Grows with each accepted connection (ClientService): a consumer-group member's newer
  // connection reclaims the claims of its older ones (consumer-groups.md §2 step 1).
  uint64_t id = 0;
  bool any_stream_authenticated = false;
  size_t subscriptions = 0;
  // The last `auth` frame payload a stream of this connection sent, and what it decodes to.
  // A client opens a stream per consumer-group call, each starting with the same `auth` bytes
  // (a token of hundreds of bytes): a byte-identical payload is not parsed again. Decoding is a
  // pure function of the bytes, so this is a parse cache only — the token is verified on every
  // stream as before. Payloads above kMaxRememberedAuth bytes are not kept.
  static constexpr size_t kMaxRememberedAuth = 4096;
  std::vector<uint8_t> last_auth_payload;
  std::optional<wire::flx1::Auth> last_auth;
  // What `last_auth` verified to, and the catalog snapshot current when it did: while that
  // snapshot is still the catalog's (the tenant's keys unchanged) and the token unexpired, the
  // same `auth` is answered with it — what VerifiedCredentials would answer from its cache,
  // without building its key and taking its lock on every stream (docs/performance.md change
  // 67). Weak: an idle connection does not keep an old catalog alive.
  std::shared_ptr<const auth::AuthContext> last_auth_context;
  std::weak_ptr<const catalog::CatalogSnapshot> last_auth_snapshot;
  // The `auth_ok` frames answered on this connection, encoded once: [0] without a
  // publish window, [1] with the service's (the only two answers a broker gives).
  std::vector<uint8_t> auth_ok_frames[2];
  // Where ClientSession::Send renders an answer's frame before the stream copies it: kept
  // between answers so that an answer allocates nothing; one above kMaxKeptAnswerBuffer bytes
  // (a large read) is released after use.
  static constexpr size_t kMaxKeptAnswerBuffer = size_t{64} * 1024;
  std::string answer_buffer;
  // Every session and writer of the connection, so shutdown can break their handler cycles
  // even if the transport never reports their streams' end.
  std::vector<std::weak_ptr<ClientSession>> sessions;
  // `sessions` is swept of ended ones when it reaches this size, which then becomes twice what
  // is left (at least 64): a stream per request with hundreds open at once swept the whole
  // list on every stream before (docs/performance.md change 74).
  size_t sessions_sweep_at = 64;
  std::vector<std::weak_ptr<EventStreamWriter>> writers;
  std::vector<std::weak_ptr<CacheWatchWriter>> watch_writers;  // cache watches
  // Stops every writer and drops every session's handlers (after the endpoint stopped).
  void ReleaseAll();
};

class ClientSession : public std::enable_shared_from_this<ClientSession> {
 public:
  ClientSession(ClientService& service, std::shared_ptr<ClientConnectionState> connection,
                std::shared_ptr<transport::Stream> stream);

  void Start();
  // Loop thread (ClientService::NotePublishRoom): ends this session's wait for room in the
  // in-flight budgets once the publish it holds back fits, reading on (posted); true when it
  // no longer waits, false while it still does.
  bool TryEndRoomWait();
  // Drops the stream handlers that keep this session alive (shutdown).
  void ForceRelease();
  // Shutdown drain: nothing admitted is waiting for its answer, and every answer written was
  // acknowledged by the client (or the stream is gone).
  bool Drained() const {
    return pending_ops_ == 0 && (released_ || stream_->closed() || stream_->send_buffered() == 0);
  }

 private:
  // Installs the stream handlers (again, to be shown unread bytes after a pause).
  void InstallHandlers();
  void OnData(std::span<const uint8_t> data);
  // Handles one whole frame; false when the stream must stop being read.
  bool HandleFrame(uint16_t flags, std::span<const uint8_t> payload);
  bool HandleMessage(wire::flx1::Message message);
  bool HandleAuth(const wire::flx1::Auth& auth);
  bool HandleBinaryPublish(uint16_t flags, std::span<const uint8_t> payload);
  // The rest of HandleBinaryPublish once `batch` was decoded from `payload` (views into it).
  bool PublishDecodedBatch(bool acked, std::span<const uint8_t> payload,
                           const wire::flx1::BinaryPublishBatch& batch);
  bool HandleJsonPublish(std::shared_ptr<wire::flx1::Message> message);
  bool HandleSubscribe(const wire::flx1::Subscribe& subscribe);
  bool HandleStreamShards(const wire::flx1::StreamShards& request);
  bool HandleShardOwners(const wire::flx1::ShardOwners& request);  // client_session_discovery.cc
  bool HandleTopology();                                           // client_session_discovery.cc

  // A publish that passed decoding: authorize, route, append, answer via `answer`.
  struct PublishRequest {
    std::string_view tenant, ns, stream;
    std::optional<std::string_view> key;
    std::shared_ptr<const void> owner;
    std::vector<std::span<const uint8_t>> payloads;
    bool acked = false;
    std::optional<uint64_t> request_id;
    bool binary = false;
    uint32_t frames = 1;  // publish requests it carries (> 1: a coalesced unacked run)
  };
  bool Publish(PublishRequest request);
  // Coalescing of fire-and-forget publishes (client_session_unacked_run.cc): consecutive
  // unacked binary publishes to one stream and key, read in one OnData pass, go to the shard
  // as one batch. TryJoinUnackedRun takes a whole frame into the run (true) or leaves it to
  // HandleFrame (false, after flushing the run so frames keep their order); FlushUnackedRun
  // publishes the run. The run views the read buffer: flushed before OnData consumes it.
  bool TryJoinUnackedRun(uint16_t flags, std::span<const uint8_t> payload);
  void FlushUnackedRun();
  // The principal a durable publish stores with its records (the token's `sub` when ≤ 255
  // bytes and FELIX_RECORD_PUBLISHERS is on), else null.
  std::shared_ptr<const std::string> StoredPublisher();
  // The shard a publish to (tenant, ns, stream) with `key` goes to, or the refusal
  // (code, message) to answer it with (client_session_publish.cc).
  struct PublishRoute {
    std::shared_ptr<const catalog::Stream> stream;  // never null (LocalStreamShard::stream)
    StreamShardHandle handle;
  };
  // Admits a publish batch to `stream`: the largest record a group can deliver (durable
  // streams), the per-stream and broker-wide in-flight budgets (payload plus a per-record
  // overhead). Admitted: nullopt, the cost counted in `*bytes` (metrics too) — release it with
  // ReleasePublish on the loop thread and by subtracting it from service_.inflight_total() where
  // it completes. Otherwise the refusal (code, text); kOverloaded means shed for lack of room.
  std::optional<std::pair<uint16_t, std::string>> AdmitPublish(
      const catalog::Stream& stream, const std::vector<std::span<const uint8_t>>& payloads,
      size_t* bytes);
  void ReleasePublish(size_t bytes);  // loop thread, on its completion
  // Whether the complete frame (flags, payload) is handled now. A binary publish whose cost
  // does not fit the per-stream or the broker-wide budget — counting the unacked run read
  // before it and not yet published — waits for room (ClientServiceOptions): the stream is not
  // read further until TryEndRoomWait finds it fits, or the wait's deadline passes and the
  // frame goes on to admission (refused `overloaded` or shed). Other frames never wait.
  bool RoomForFrame(uint16_t flags, std::span<const uint8_t> payload);
  bool FitsInFlight(size_t cost) const;  // as AdmitPublish decides, with the unacked run
  size_t UnackedRunCost() const;
  void EndRoomWait();
  // Through the ShardResolver. A Remote shard is the RemoteShard when `forwardable` and the
  // service has a PublishForwarder, else refused `not_leader` naming its owner.
  using Refusal = std::pair<uint16_t, std::string>;
  std::variant<PublishRoute, RemoteShard, Refusal> RoutePublish(std::string_view tenant,
                                                                std::string_view ns,
                                                                std::string_view stream,
                                                                std::optional<std::string_view> key,
                                                                bool forwardable);
  // Hands an admitted publish for `remote` to the service's PublishForwarder and answers it
  // from the owner's outcome only (client_session_forward.cc). `bytes` is its admitted cost.
  void ForwardPublish(PublishRequest request, const RemoteShard& remote,
                      std::optional<uint64_t> answer_id, bool durable, size_t bytes);
  // Answers a publish once written: `durable` says whether its offset may be told (never for
  // an in-memory stream, semantics.md §2.4). `owner`: the batch was forwarded to it; a binary
  // ack names it (flag 0x0080) to a client that offered the flag (client-protocol.md §5.2).
  void AnswerPublish(bool binary, uint64_t request_id, const Result<Offset>& result, bool durable,
                     const RemoteShard* owner = nullptr);
  void OnSubscribed(const StreamShardHandle& handle, std::variant<Subscription, CursorError> result,
                    const std::shared_ptr<void>& writer_slot, uint64_t client_id, bool durable,
                    std::optional<uint32_t> requested_capacity);

  // Answers and stream endings.
  void Send(const wire::flx1::Message& message);
  // A group_records answer from views into the records' read buffers (no copy per record).
  void Send(const wire::flx1::GroupRecordsView& answer);
  // Encodes an answer with `encode(frame)` into the connection's answer buffer and writes it.
  template <typename Encode>
  void SendEncoded(const Encode& encode);
  void SendError(uint16_t code, std::string message);
  void SendPublishError(bool binary, uint64_t request_id, uint16_t code, std::string message);

  // ---- Publish answers: ack policy, pipelining and window (client_session_publish.cc) -----
  // Settles what auth negotiated: commit acks (FELIX_ACK_ON_COMMIT or the client's
  // ACK_ON_COMMIT offer) and pipelining (PUBLISH_PIPELINE offered, window > 0). Returns the
  // window to grant in auth_ok, if any.
  std::optional<uint32_t> NegotiatePublishing(uint32_t client_features);
  // The acknowledgement of a publish that is only queued: ok, no offset (§2.3, §2.4).
  void AnswerPublishQueued(bool binary, uint64_t request_id);
  // Pipelined streams answer publishes in the order the stream carried them (§9.3): every
  // acked publish takes a ticket when it is read, and its answer waits for the earlier ones.
  // While a publish is being handled its ticket is `current_ticket_`, and every publish
  // answer (ok or error) written meanwhile is its answer.
  std::optional<uint64_t> TakeAnswerTicket(bool acked);
  void WritePublishAnswer(std::vector<uint8_t> frame);
  // True when the stream holds `publish_window` unanswered publishes: stop reading it (QUIC
  // flow control then slows the client; nothing is refused).
  bool PublishWindowFull() const;
  // Shows the stream's unread bytes again once the window has room.
  void ResumeReading();
  // Runs `fn` with `ticket` as the current one (completions arriving later).
  template <class Fn>
  void WithTicket(std::optional<uint64_t> ticket, Fn&& fn) {
    auto saved = current_ticket_;
    current_ticket_ = ticket;
    fn();
    current_ticket_ = saved;
  }
  // ---- end of publish answers ----
  // ---- Idempotent producers (client_session_idempotent.cc) ----
  bool HandleProducerInit(const wire::flx1::ProducerInit& request);
  bool HandlePublishIdempotent(std::shared_ptr<wire::flx1::Message> message);
  struct IdempotentRequest {
    std::string_view tenant, ns, stream;  // valid while the frame is handled
    std::optional<std::string_view> key;
    std::shared_ptr<const void> owner;  // keeps `payloads` alive
    std::vector<std::span<const uint8_t>> payloads;
    uint64_t request_id = 0;
    uint64_t producer_id = 0;
    uint64_t sequence = 0;
  };
  // Authorize, route, hand to the shard's ShardProducers, answer in JSON (§5.1).
  bool PublishIdempotent(IdempotentRequest request);
  void AnswerIdempotent(uint64_t request_id, const IdempotentOutcome& outcome, bool durable);
  // ---- end of idempotent producers ----
  void FinishStream();  // our side done: write FIN, ignore what else arrives
  void DropStream();    // abort without answering (undecodable frame, bad magic)
  // Drops the stream's handlers (which own this session) once nothing is pending and both
  // directions are done.
  void MaybeRelease();

  // ---- Shared by every request path (client_session_routing.cc) ----
  // Runs `work` on a shard's executor — on this loop thread, holding the executor, when it is
  // idle (Executor::RunOrPost); the reply never runs inside this call. `work` hands back, exactly
  // once and from any thread, a reply that runs on the loop thread with this session — or with
  // nullptr when the session is gone (so the reply can release what it holds). The request counts
  // as pending until then. Returns false, with nothing pending, when the executor is stopping; the
  // caller answers.
  using SessionReply = std::function<void(ClientSession*)>;
  // Hands a SessionReply to the loop thread: called exactly once, from any thread. A value of
  // its own rather than a std::function around the same captures, so that handing it on (into
  // a shard's work, a group operation, a completion) is a move, not an allocation
  // (docs/performance.md, change 65).
  class LoopReply {
   public:
    void operator()(SessionReply reply) const;

   private:
    friend class ClientSession;
    std::weak_ptr<ClientSession> session_;
    transport::Endpoint* endpoint_ = nullptr;
    ClientService* service_ = nullptr;  // outlives the endpoint whose loop runs the reply
    // A consumer-group reply: run with nullptr once the stream was reset (no answer is read).
    bool null_after_reset_ = false;
  };
  using ShardWork = std::function<void(LoopReply)>;
  bool RunOnShard(Executor& executor, ShardWork work);
  // The request counts as pending from now; the LoopReply returned hands back, exactly once and
  // from any thread, the reply RunOnShard's work gets (what RunOnShard and forwards share).
  LoopReply PendingReply();
  // The answer to a request for a shard another broker serves: `not_leader` to a client that
  // offered FEATURE_REDIRECT, otherwise `error` code not_leader naming the owner in prose.
  void SendNotLeader(const RemoteShard& remote);
  static std::string OwnerProse(const RemoteShard& remote);
  // ---- end of shared ----

  bool Authorized(auth::Action action, std::string_view tenant, std::string_view ns,
                  std::string_view stream, std::optional<uint64_t> publish_request_id, bool binary);

  // ---- Cache and counters (client_session_cache.cc) ---------------------------------------
  // cache_put/get/delete, counter_add/get and cache_shards. Answers carry the request's id
  // and may leave in any order; a request without request_id gets its one answer, then the
  // stream is finished. Returns nullopt for messages that are not cache requests.
  std::optional<bool> HandleCacheRequest(const wire::flx1::Message& message);
  bool HandleCacheShards(const wire::flx1::CacheShards& request);
  // One cache or counter request: authorized by the cache-key rule, routed by its key, run on
  // the shard's executor when this broker owns it, forwarded to the owner through the
  // service's CacheForwarder when another broker does (`not_leader` without a forwarder).
  // `answer` writes the success answer; refusals and failures are answered here (a refused
  // request ends the stream, auth.md §6.4; a single-shot request's stream is finished after
  // its one answer). Returns whether the stream is read on.
  using CacheResultAnswer = std::function<void(ClientSession&, const CacheCommandResult&)>;
  bool ServeCacheCommand(std::string_view tenant, std::string_view ns, std::string_view cache,
                         CacheCommand command, bool single_shot, CacheResultAnswer answer);
  // The request counts as pending until the owner's outcome is answered on the loop thread.
  void ForwardCacheCommand(const RemoteShard& remote, std::string_view tenant, std::string_view ns,
                           std::string_view cache, CacheCommand command, bool single_shot,
                           CacheResultAnswer answer);
  // On the loop thread: the answer (or the error) unless the stream ended; `self` null when
  // the session is gone.
  static void AnswerCacheCommand(ClientSession* self, const Result<CacheCommandResult>& result,
                                 bool single_shot, const CacheResultAnswer& answer);
  void SendCacheError(const Error& error);
  // cache_put_if / cache_delete_if (FEATURE_CACHE_CONDITIONAL): answered
  // cache_condition_result with applied and the version.
  std::optional<bool> HandleConditionalCacheRequest(const wire::flx1::Message& message);
  // cache_watch (client_session_watch.cc): validated, authorized (cache.read on the key or
  // prefix), registered on the shard's executor; answered cache_watch_started after the
  // event stream opened with its hello (§9.4), and the stream is read on.
  bool HandleCacheWatch(const wire::flx1::CacheWatch& request);
  void OnCacheWatched(const CacheShardHandle& handle,
                      std::variant<CacheWatchRegistration, CursorError, Error> result,
                      const std::shared_ptr<void>& writer_slot, uint64_t client_id);
  // ---- end of cache and counters ---------------------------------------------------------
  // ---- Atomic commits and shard state (client_session_commit.cc) ----
  // commit and state_get; nullopt for other messages, else whether the stream is read on.
  std::optional<bool> HandleCommitRequest(const wire::flx1::Message& message);
  // The owning, durable shard `key` routes to; answers and returns nullopt otherwise.
  std::optional<LocalStreamShard> ResolveCommitShard(std::string_view tenant, std::string_view ns,
                                                     std::string_view stream,
                                                     const std::vector<uint8_t>& key,
                                                     const char* what);
  // ---- end of atomic commits ----
  // offset_for_time (client_session_time.cc, FEATURE_RECORD_TIMESTAMPS): stream.subscribe,
  // the shard's leader only, durable streams only; answered offset_value. Returns whether
  // the stream is read on.
  bool HandleOffsetForTime(const wire::flx1::OffsetForTime& request);
  // ---- Consumer groups (client_session_groups.cc) ----
  // True if `message` is a group_* request; it is then served (answer from the shard's
  // executor) and `*keep_reading` says whether the stream goes on.
  bool HandleGroupRequest(const wire::flx1::Message& message, bool* keep_reading);
  struct GroupScope {
    std::string_view tenant, ns, stream, group;
    uint32_t shard = 0;
  };
  // Permission, names, stream and shard checks; answers and returns nullopt on refusal.
  std::optional<StreamShardHandle> OpenGroupShard(const GroupScope& scope, auth::Action action,
                                                  bool* keep_reading);
  // Runs `op` on the shard's executor; the reply it hands back runs on the loop thread with
  // this session, or with nullptr when the session (or its stream) is gone.
  using GroupReply = SessionReply;
  using GroupOp = std::function<void(StreamGroups&, LoopReply)>;
  void RunGroupOp(const StreamShardHandle& handle, GroupOp op);
  void SendGroupError(const GroupError& error);
  // ---- end of consumer groups ----

  ClientService& service_;
  std::shared_ptr<ClientConnectionState> connection_;
  std::shared_ptr<transport::Stream> stream_;
  transport::Endpoint& endpoint_;

  // Frame assembly for frames larger than what is handled in place.
  std::vector<uint8_t> assembly_;
  size_t assembly_total_ = 0;
  uint16_t assembly_flags_ = 0;

  bool ended_ = false;          // no more frames are read
  bool finished_ = false;       // our FIN (or reset) was sent
  bool peer_finished_ = false;  // the client's FIN arrived
  bool reset_ = false;          // the stream was aborted
  bool released_ = false;
  size_t pending_ops_ = 0;  // publishes and subscribes waiting for their shard
  std::shared_ptr<const auth::AuthContext> auth_;  // shared with VerifiedCredentials' table
  // What durable publishes store as their publisher (FELIX_RECORD_PUBLISHERS): made once.
  std::shared_ptr<const std::string> stored_publisher_;
  uint16_t peer_flags_ = wire::flx1::kOriginalV1Flags;
  uint32_t peer_features_ = 0;
  bool error_codes_ = false;  // FEATURE_ERROR_CODES offered (recorded even before auth)
  size_t inflight_bytes_ = 0;
  // Publish answers (client_session_publish.cc).
  bool commit_acks_ = false;  // answer acked publishes after the write, with their offset
  bool pipelined_ = false;    // answers in stream order; at most window_ unanswered
  uint32_t window_ = 0;
  struct AnswerSlot {
    uint64_t ticket = 0;
    std::optional<std::vector<uint8_t>> frame;  // the answer, once known
  };
  // Unanswered tickets, oldest first; made by the first pipelined publish (an empty std::deque
  // allocates, and most sessions — a group request, a cache call — never pipeline).
  std::optional<std::deque<AnswerSlot>> answer_slots_;
  uint64_t next_ticket_ = 0;
  std::optional<uint64_t> current_ticket_;
  bool read_paused_ = false;  // stopped reading at a full window, or to wait for room
  // The wait for in-flight room (RoomForFrame).
  bool room_waiting_ = false;
  bool room_wait_over_ = false;  // its deadline passed: the held frame goes on to admission
  bool room_listed_ = false;     // in ClientService's waiters
  size_t room_needed_ = 0;       // the held frame's cost
  transport::TimerId room_deadline_ = 0;
  struct UnackedRun {
    std::string_view tenant, ns, stream;  // views into the read buffer
    std::optional<std::string_view> key;
    std::vector<std::span<const uint8_t>> payloads;  // views into the read buffer
    size_t payload_bytes = 0;
    uint32_t frames = 0;
  };
  UnackedRun unacked_run_;
};

}  // namespace felix::broker
