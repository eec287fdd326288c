// The Felix C++ client: publish to and subscribe to streams of a Felix broker, or of a Felix
// cluster, over QUIC (protocol FLX1). No transport or wire types appear here.
//
//   felix::ClientOptions options;
//   options.broker = "127.0.0.1:5000";
//   options.ca_file = "felix-data/tls/broker-cert.pem";   // the broker certificate is verified
//   options.tenant_id = "default";
//   options.token = "<felix token>";
//   auto client = felix::Client::Connect(options);
//   if (!client) { std::cerr << client.error().ToString(); return 1; }
//   felix::StreamRef orders{"default", "orders"};
//   auto receipt = (*client)->Publish(orders, {"hello", "world"});
//   auto sub = (*client)->Subscribe(orders, {.start = felix::StartPosition::Earliest()});
//   while (auto event = (*sub)->Next(std::chrono::seconds(5))) { ... }
//
// Connection model: one QUIC connection per broker the Client talks to, each with one
// long-lived request stream that carries publishes (binary FLX1 batches, pipelined, matched to
// their acknowledgements by request id) and discovery requests, plus one bidirectional stream
// and one broker-opened event stream per subscription. Every stream authenticates with the
// options' tenant and token.
//
// Clusters: `broker` may list several brokers ("a:5000,b:5000"); Connect uses the first that
// answers. A standalone broker gets everything, on one connection, as always. A cluster broker
// (it advertises TOPOLOGY) tells the client the cluster's brokers and who owns each shard: the
// client then opens a connection to each owner it needs (lazily) and sends each publish and
// cache operation straight to its shard's owner (the key's shard; no key = shard 0), falling
// back to any broker (which forwards it, one internal hop slower) when it does not know the
// owner. Subscriptions and group requests go to the owner and follow `not_leader` redirects.
// Owners are cached per shard and refreshed from redirects and from the owner hint of forwarded
// acks. Failures are retried by their retry class (retry, retry_after, redirect) up to
// max_attempts; a write whose outcome is unknown is never resent and comes back as
// kIndeterminate (errors.h) — it may have been applied.
//
// Threading
//  - Every connection of a Client owns one I/O thread (or shares an IoThread given in
//    ClientOptions::io_thread with other connections); in a cluster a retry thread resends
//    asynchronous publishes that failed retryably. All methods of Client and Subscription are
//    thread-safe and may be called from any thread, including concurrently.
//  - Blocking calls (Connect, Publish, StreamShards, Subscribe, Subscription::Next, and
//    PublishAsync while the in-flight window is full) must not be made from a PublishCallback:
//    callbacks run on a client I/O thread (or the retry thread). From an I/O thread,
//    PublishAsync never blocks; it fails with kOverloaded when the window is full, and in a
//    cluster it routes with what the client already knows (no dialling, no owner lookups).
//  - Destroying the Client (or Close) fails every outstanding publish with kClosed and ends
//    every subscription with kClosed; Subscription objects may outlive their Client. Do not
//    destroy the Client from one of its own callbacks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "felix/errors.h"

namespace felix {

// One client I/O thread that the connections of several Clients share (ClientOptions::
// io_thread). By default every connection owns its I/O thread, and a synchronous call crosses
// to it and back; a process that keeps many connections busy from many threads (say 32
// callers, each with its own Client) then pays a thread wakeup on both sides of every call. On
// a shared thread the connections are served in turn by one loop that stays awake while any
// of them has work. Everything that runs on a client I/O thread (PublishCallback, the
// connection's own work) then shares that thread: a slow callback delays every client on it.
//
// Create() starts the thread; it runs until the last Client made with it (and this handle)
// is gone — Clients hold it. At most kMaxConnections connections at once; Connect (or a
// cluster Client dialling one more owner) fails with kInvalidArgument beyond that.
class IoThread {
 public:
  static constexpr size_t kMaxConnections = 64;
  static ClientResult<std::shared_ptr<IoThread>> Create();
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  struct Impl;  // src/client/io_thread.cc
  Impl& impl() const { return *impl_; }

 private:
  explicit IoThread(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ClientOptions {
  // Client QUIC listener of the broker, "host:port" ("[::1]:5000" for IPv6 literals), or a
  // comma list of brokers of one cluster, tried in order to connect (the seeds).
  std::string broker = "127.0.0.1:5000";
  // Connect timeout for each seed but the last (a dead broker answers nothing at all).
  std::chrono::milliseconds seed_connect_timeout{3000};
  // In a cluster: send publishes and cache operations straight to their shard's owner. false:
  // everything goes through the broker Connect reached, which forwards (to measure that path).
  bool route_to_owners = true;
  // In a cluster: sends per call, retries included (retry / retry_after classes, and
  // outcome_unknown for idempotent requests only); redirects are not counted. A standalone
  // broker gets one attempt per call.
  uint32_t max_attempts = 5;
  // TLS server name (SNI) the broker certificate must be valid for.
  std::string server_name = "localhost";
  // PEM file of the certificate(s) that verify the broker. Required: the client always
  // verifies the broker (a dev broker's self-signed certificate is <data_dir>/tls/broker-cert.pem).
  std::string ca_file;
  // Optional client certificate for brokers that ask for mTLS (both or neither).
  std::string client_cert_file;
  std::string client_key_file;
  std::string tenant_id = "default";
  std::string token;  // Felix token (JWT) for tenant_id
  std::chrono::milliseconds connect_timeout{5000};
  // How long a blocking call waits for its answer (publish ack, subscribe answer, ...).
  std::chrono::milliseconds request_timeout{10000};
  // Acknowledged publishes that may be unanswered at once (lowered to the broker's
  // publish_window when it grants a smaller one). PublishAsync blocks while it is full.
  size_t max_in_flight = 256;
  // Events a subscription buffers before the client stops reading its event stream; the
  // broker then queues (and, past its own queue, drops and ends the subscription: kLagged).
  size_t subscription_queue_capacity = 4096;
  // Ask that acknowledgements be sent after the write, with the batch's first offset
  // (FEATURE_ACK_ON_COMMIT). Off: acks may come when the batch is only queued, without offset.
  bool ack_on_commit = true;
  // Application keep-alive while the connection is otherwise idle (0 = off); brokers close
  // idle connections after 6 s by default.
  std::chrono::milliseconds keepalive_interval{2000};
  uint32_t max_frame_bytes = 16u << 20;
  // Serve this Client's connections on a shared I/O thread (IoThread above) instead of a
  // thread per connection. Null: a thread per connection.
  std::shared_ptr<IoThread> io_thread;
  // A blocking call (an acked Publish, a cache or group call, Subscription::Next, ...) first
  // spins up to this long for its answer or event, keeping its CPU busy, and only then sleeps. 0
  // (the default): it sleeps at once. Where waking a sleeping thread is slow — on a VM without
  // guest halt polling an idle vCPU takes ~40 µs to run again (docs/performance.md, change 22) — a
  // spin of a few hundred µs cuts a single request's round trip by about that much, at the cost of
  // a busy core while a call waits: for latency-bound callers on cores of their own, not for
  // many threads sharing few cores.
  std::chrono::microseconds spin_wait{0};
  // An acked Publish, a cache call (get, put, delete, a counter, ...) or a consumer-group call
  // (poll, ack, ...) does its connection's
  // I/O itself: the calling thread writes the request and reads the answer, instead of handing
  // both to the connection's I/O thread and being woken by it (the I/O thread stays asleep
  // while calls run, and for 2 ms after one). On a 2-vCPU VM an acked publish of one record
  // went from 10.7–13.1 k to 15.1–15.5 k per second, and the client's CPU per call from 62–78
  // to 37–40 µs (docs/performance.md, change 48). One caller drives at a time; a concurrent
  // call waits as usual, served by it; and no call drives while another waits for the I/O
  // thread, which then serves them all (many threads on one Client, change 55). Applies with a
  // thread per connection (no io_thread); in a cluster a publish drives the connection it is routed
  // to until its answer, or until it is retried (then it waits as usual). Callbacks are unchanged:
  // a PublishAsync callback or a subscription's on_event read by a driving caller is handed to the
  // I/O thread, in order, when the call ends (change 50). A fire-and-forget publisher that
  // outruns the I/O thread writes its own batches the same way (Publish, change 62). On by
  // default; off, every request and answer goes through the I/O thread.
  bool caller_runs_io = true;
};

// A stream of the client's tenant.
struct StreamRef {
  std::string namespace_name = "default";
  std::string stream;

  // "stream" (namespace "default") or "namespace/stream".
  static ClientResult<StreamRef> Parse(std::string_view text);
  std::string ToString() const;  // "namespace/stream"
};

enum class AckMode : uint8_t {
  kNone,        // fire and forget: nothing comes back, Publish returns once it is queued
  kPerMessage,  // acknowledged (one acknowledgement per batch either way on the wire)
  kPerBatch,
};
// "none", "per_message" (or "per-message"), "per_batch" (or "per-batch").
ClientResult<AckMode> ParseAckMode(std::string_view text);

struct PublishOptions {
  // Routing key: the broker sends the batch to the key's shard. No key: shard 0. An empty
  // key is a key.
  std::optional<std::string> key;
  AckMode ack = AckMode::kPerBatch;
};

struct PublishReceipt {
  // Offset of the batch's first record (record i is at offset + i), when the broker reports
  // it (durable streams with ack_on_commit); absent otherwise and for AckMode::kNone.
  std::optional<uint64_t> offset;
  size_t count = 0;  // records in the batch
};

using PublishCallback = std::function<void(ClientResult<PublishReceipt>)>;

class StartPosition {
 public:
  enum class Kind : uint8_t { kLatest, kEarliest, kOffset };
  static StartPosition Latest() { return StartPosition(Kind::kLatest, 0); }
  static StartPosition Earliest() { return StartPosition(Kind::kEarliest, 0); }
  // Exactly `offset`: to resume after the last handled event, pass its offset + 1.
  static StartPosition Offset(uint64_t offset) { return StartPosition(Kind::kOffset, offset); }
  // "latest", "earliest" or a decimal offset.
  static ClientResult<StartPosition> Parse(std::string_view text);

  Kind kind() const { return kind_; }
  uint64_t offset() const { return offset_; }
  bool operator==(const StartPosition&) const = default;

 private:
  StartPosition(Kind kind, uint64_t offset) : kind_(kind), offset_(offset) {}
  Kind kind_;
  uint64_t offset_;
};

struct Event {
  std::optional<uint64_t> offset;  // durable streams only
  std::string payload;
  std::optional<uint64_t> timestamp_micros;  // append time, when the broker sends it
  std::optional<std::string> publisher;      // publishing principal, when the broker sends it
  // Offsets directly below this one that hold no event and were passed over: a `Quorum`
  // leader's generation-start record (one per leadership change), or records retention
  // removed while the subscription read history. 0 = none: the previous event's offset is
  // this one's minus 1.
  uint64_t skipped_before = 0;
};

// A push subscription's handler (SubscribeOptions::on_event). It receives every event in
// order, on the client's I/O thread that read it — no hand-off to a reader thread, whose wake
// is most of a delivery's latency on an idle machine (docs/performance.md, change 42) — and,
// when the subscription ends for any reason but Subscription::Close, once more with the error
// Next would return (kLagged / kShardMoved / kStreamEnded … with resume_from; kClosed when the
// Client closes, possibly on the thread closing it). It may run before Subscribe returns. It must
// not block (the I/O thread serves the connection meanwhile; the rules for PublishCallback apply),
// and may call Subscription::Close. Once Close returns on another thread, the handler is not
// running and is not called again. Next on a push subscription returns no events: it waits for the
// end.
using SubscriptionHandler = std::function<void(ClientResult<Event>)>;

struct SubscribeOptions {
  uint32_t shard = 0;
  StartPosition start = StartPosition::Latest();
  // Broker-side queue capacity in published batches (1..4096), sent only to a broker that
  // honours it.
  std::optional<uint32_t> broker_queue_capacity;
  // Push delivery (optional; SubscriptionHandler above): events go to this handler on the
  // client's I/O thread as they are read, instead of to the queue Next returns from.
  SubscriptionHandler on_event;
};

// One subscription to one shard of a stream. Thread-safe; see the header comment.
class Subscription {
 public:
  class State;  // implementation
  explicit Subscription(std::shared_ptr<State> state);
  ~Subscription();  // closes
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  // The next event, waiting up to `timeout`: nullopt when none arrived in time. An error
  // once the subscription ended (its code says why; kLagged/kShardMoved carry resume_from)
  // and every buffered event was returned.
  ClientResult<std::optional<Event>> Next(std::chrono::milliseconds timeout);

  uint64_t id() const;     // broker-assigned subscription id
  uint32_t shard() const;  // the shard read
  // First offset this subscription delivers, and the stream tail when it was registered
  // (history below it, live from it). Durable streams, negotiating brokers only.
  std::optional<uint64_t> start_offset() const;
  std::optional<uint64_t> live_offset() const;
  // Where to resume so that nothing is missed or repeated: last returned offset + 1, or
  // start_offset() when nothing was returned yet. Absent for in-memory streams.
  std::optional<uint64_t> next_offset() const;
  // Stops reading; later Next calls return kClosed. Idempotent.
  void Close();

 private:
  std::shared_ptr<State> state_;
};

struct ShardInfo {
  uint32_t shards = 0;     // 0: the broker knows no such stream
  bool jump_hash = false;  // routing: jump hash (true) or modulo (false)
};

// What the broker negotiated on the client's first stream.
struct ServerInfo {
  bool negotiated = false;  // false: a legacy broker answered plain `ok`
  uint16_t server_flags = 0;
  uint32_t server_features = 0;
  std::optional<uint32_t> publish_window;
};

// ---- Cache and counters (implemented in src/client/cache.cc) ----
// A cache of the client's tenant.
struct CacheRef {
  std::string namespace_name = "default";
  std::string cache;

  // "cache" (namespace "default") or "namespace/cache".
  static ClientResult<CacheRef> Parse(std::string_view text);
  std::string ToString() const;  // "namespace/cache"
};
// ---- end of cache and counters ----
// ---- Consumer groups (queues) ----
// A group reads one shard of a durable stream as work: each record is claimed by one consumer
// at a time, redelivered when its claim lapses (visibility timeout) or is handed back, and
// finished by an acknowledgement; after the broker's attempt bound it is dead-lettered.
// Delivery is at least once: handlers must be idempotent.

// One group on one shard of a stream of the client's tenant.
struct GroupRef {
  StreamRef stream;
  uint32_t shard = 0;
  std::string group;  // 1-128 characters of [A-Za-z0-9._-], first alphanumeric
};

struct GroupPollOptions {
  uint32_t max_records = 100;  // the broker caps a poll at 1000 records / ~4 MiB
  // How long the broker may hold the poll when nothing is available (capped by the broker,
  // 30 s by default). 0 = answer at once.
  std::chrono::milliseconds wait{0};
  // Claim duration for these records (0 = the broker's visibility timeout). Sent only to a
  // broker that advertises claim control.
  std::chrono::milliseconds visibility{0};
};

struct GroupRecord {
  uint64_t offset = 0;
  std::string payload;
  uint32_t attempts = 0;  // 1 = first delivery; 0 = the broker did not say
  // Offsets directly below this one that were settled without delivery (retention removed
  // them before the group reached them); such a hole never fills. 0 = none.
  uint64_t skipped_before = 0;
  // The record's append time (µs since the Unix epoch), when the broker reports it.
  std::optional<uint64_t> timestamp_micros;
  // The principal that published the record, only when the broker stored it.
  std::optional<std::string> publisher;
};

struct GroupNackOptions {
  std::chrono::milliseconds delay{0};  // owed again after this delay (0 = now)
  uint32_t attempts = 0;               // the delivery being handed back (0 = whichever stands)
};

struct GroupInfo {
  std::optional<uint64_t> committed;  // absent: the group has no cursor yet
  uint64_t tail = 0;                  // the shard's committed tail (tail - committed = lag)
  uint64_t in_flight = 0;
  uint64_t owed = 0;
  uint64_t dead_letters = 0;
};

struct GroupPosition {
  uint64_t offset = 0;
  bool moved = false;  // false when `if_new` found the group existing
};
// ---- end of consumer groups ----

class Client {
 public:
  class Impl;    // one broker connection (src/client/client.cc)
  class Router;  // the cluster-aware routing over them (src/client/router.h)
  static constexpr int kMaxRedirects = 3;
  // Dials the broker (the first of the list that answers), verifies its certificate and
  // authenticates the request stream. In a cluster, also asks for the cluster's brokers.
  static ClientResult<std::unique_ptr<Client>> Connect(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Publishes one batch (every record goes to one shard, in order) and waits for its
  // acknowledgement. An acknowledged publish whose outcome is unknown fails with
  // kIndeterminate (it may have been written). With AckMode::kNone it returns once the batch
  // is queued to the connection (at most 8 MiB queued unwritten: beyond, it waits for room up
  // to request_timeout); a batch that could then not be written (the connection was lost) is
  // reported by the next kNone call, which sends nothing and says an earlier batch was not
  // sent. Batches of one thread to one shard leave in order. A kNone publisher that outruns
  // the connection's I/O thread (its queued publishes reach 56 KiB before the thread takes
  // them) writes them itself, on its own thread, as a blocking call does with caller_runs_io;
  // what it queues after its last such write then leaves at most 2 ms later
  // (docs/performance.md, change 62). Destroying the Client first waits (request_timeout at
  // most) until the broker has handled every kNone batch queued; a broker without room for
  // one in its in-flight budget sheds it after FELIX_PUBLISH_QUEUE_WAIT_MS unless it runs
  // with FELIX_PUB_INGRESS_WAIT (docs/client.md).
  ClientResult<PublishReceipt> Publish(const StreamRef& stream,
                                       const std::vector<std::string>& payloads,
                                       const PublishOptions& options = {});
  // Pipelined publish: returns once the batch is queued; `done` runs on a client thread with
  // the outcome (exactly once, also on failure, unless this call itself returns an error). A
  // batch retried in a cluster may be written after batches published later.
  // Blocks while max_in_flight batches are unanswered (kTimeout after request_timeout).
  ClientResult<void> PublishAsync(const StreamRef& stream, const std::vector<std::string>& payloads,
                                  const PublishOptions& options, PublishCallback done);

  // Shard count and routing of a stream (asked once, then cached while non-zero).
  ClientResult<ShardInfo> StreamShards(const StreamRef& stream);
  // The shard a routing key belongs to (the frozen shard hash over StreamShards).
  ClientResult<uint32_t> ShardForKey(const StreamRef& stream, std::string_view key);

  // Opens a subscription to one shard; returns once the broker answered `subscribed`.
  // Cursor refusals come back as kCursorTooOld / kCursorInFuture with `available`.
  // In a cluster it goes to the shard's owner when the client knows it; a broker that does not
  // lead the shard answers `not_leader` with the owner's address: Subscribe follows it (at most
  // kMaxRedirects hops, never back to a broker already tried) on the client's connection to
  // that broker, and remembers the owner.
  ClientResult<std::unique_ptr<Subscription>> Subscribe(const StreamRef& stream,
                                                        const SubscribeOptions& options = {});

  // ---- Cache and counters (src/client/cache.cc) ----
  // Each call waits for its answer (request_timeout). Requests ride pooled cache streams,
  // one request in flight per stream, so concurrent callers proceed in parallel. Errors:
  // kNotFound (no such cache), kForbidden (cache.read / cache.write missing), kStorage,
  // kUnsupported (the broker did not advertise the request), kTimeout, kTransport, kClosed.
  //
  // Stores `value` under `key`. ttl: relative; nullopt = the cache's default TTL (if any),
  // else no expiry. A put's answer means the value is committed on the owning broker.
  ClientResult<void> CachePut(const CacheRef& cache, std::string_view key, std::string_view value,
                              std::optional<std::chrono::milliseconds> ttl = std::nullopt);
  // The value, or nullopt when the key is missing or expired; an empty string is a stored
  // empty value, not a miss.
  ClientResult<std::optional<std::string>> CacheGet(const CacheRef& cache, std::string_view key);
  // Removes the key; returns the value it held (nullopt if there was none).
  ClientResult<std::optional<std::string>> CacheDelete(const CacheRef& cache, std::string_view key);
  // Adds `delta` (may be negative) to a durable counter; returns the sum including it. Not
  // deduplicated: resending after a lost answer counts twice.
  ClientResult<int64_t> CounterAdd(const CacheRef& cache, std::string_view key, int64_t delta);
  // The counter's sum; nullopt when it was never written (distinct from 0).
  ClientResult<std::optional<int64_t>> CounterGet(const CacheRef& cache, std::string_view key);
  // ---- end of cache and counters ----
  // ---- Consumer groups (src/client/groups.cc) ----
  // Every call is one request on a stream of its own. Calls fail with kUnsupported when the
  // broker did not advertise the feature; refusals carry the broker's code (kStaleClaim,
  // kInvalidRequest, kForbidden, kNotFound, ...) and retry class.
  // Claims up to max_records records (owed redeliveries first, then new ones in offset order).
  // An empty vector means nothing was available within `wait`.
  ClientResult<std::vector<GroupRecord>> GroupPoll(const GroupRef& group,
                                                   const GroupPollOptions& options = {});
  // Finishes a record. Acking a record already finished is not an error.
  ClientResult<void> GroupAck(const GroupRef& group, uint64_t offset);
  // Finishes every record of `offsets`: one `group_ack` each, on streams of their own, up to
  // kGroupAckWindow of them unanswered at once, so the broker can make many durable with one
  // flush. Returns once every ack is answered; the first error otherwise (some offsets may
  // then be finished already — acking again is harmless, so the whole call may be retried).
  static constexpr size_t kGroupAckWindow = 128;
  ClientResult<void> GroupAckAll(const GroupRef& group, const std::vector<uint64_t>& offsets);
  // Hands a record back for redelivery.
  ClientResult<void> GroupNack(const GroupRef& group, uint64_t offset,
                               const GroupNackOptions& options = {});
  // Keeps the claim of delivery `attempts` of `offset` for `extend` from now; returns the
  // granted duration.
  ClientResult<std::chrono::milliseconds> GroupExtend(const GroupRef& group, uint64_t offset,
                                                      uint32_t attempts,
                                                      std::chrono::milliseconds extend);
  // Gives up on a record now: it is dead-lettered.
  ClientResult<void> GroupDeadLetter(const GroupRef& group, uint64_t offset);
  // Dead-lettered offsets, lowest first (the records stay readable in the stream).
  ClientResult<std::vector<uint64_t>> GroupDeadLetters(const GroupRef& group);
  // Makes a dead-lettered offset owed again with its attempt count reset (group.manage).
  ClientResult<void> GroupRedrive(const GroupRef& group, uint64_t offset);
  // Stops tracking a dead-lettered offset (group.manage).
  ClientResult<void> GroupDiscard(const GroupRef& group, uint64_t offset);
  ClientResult<GroupInfo> GroupDescribe(const GroupRef& group);
  // Moves the cursor (group.manage); with if_new only a group that does not exist yet.
  ClientResult<GroupPosition> GroupSeek(const GroupRef& group, const StartPosition& start,
                                        bool if_new = false);
  // Removes the group's cursor, dead letters and in-flight state; true if it existed.
  ClientResult<bool> GroupDelete(const GroupRef& group);
  // The lowest retained offset of `shard` of a durable stream whose append time is at or after
  // `at_micros` (µs since the Unix epoch); nullopt when no record is that recent. Needs
  // stream.subscribe; kUnsupported when the broker does not advertise record timestamps.
  ClientResult<std::optional<uint64_t>> OffsetForTime(const StreamRef& stream, uint32_t shard,
                                                      uint64_t at_micros);
  // ---- end of consumer groups ----

  // The client-facing address of the broker this client believes owns `shard` of `stream`
  // (learned from shard_owners, a redirect or an owner hint); nullopt when it does not know.
  std::optional<std::string> CachedOwner(const StreamRef& stream, uint32_t shard) const;

  // What the broker Connect reached negotiated.
  ServerInfo server_info() const;
  // Fails outstanding work with kClosed and closes every connection. Idempotent.
  void Close();

 private:
  explicit Client(std::shared_ptr<Router> router);
  std::shared_ptr<Router> router_;
};

}  // namespace felix
