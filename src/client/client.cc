// felix::Client on the QUIC transport: one endpoint (one loop thread) and one connection per
// client. Everything that touches a Connection or Stream runs on the loop thread; user
// threads hand work over with Endpoint::Post and wait on condition variables with deadlines.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "client/answer_wait.h"
#include "client/connection_port.h"
#include "client/connections.h"
#include "client/error_mapping.h"
#include "client/event_router.h"
#include "client/frame_reader.h"
#include "client/io_thread.h"
#include "client/own_stream_request.h"
#include "client/pending_requests.h"
#include "client/router.h"
#include "common/metrics.h"
#include "common/net_address.h"
#include "felix/client.h"
#include "transport/endpoint.h"
#include "transport/tls_context.h"
#include "wire/flx1/frame.h"
#include "wire/shard_hash.h"

namespace felix {

namespace flx1 = wire::flx1;
using client_impl::EventRouter;
using client_impl::FrameReader;
using client_impl::PendingRequests;
using Verdict = FrameReader::Verdict;

namespace {

// Frame flags this client parses (every layout except idempotent publishing, which it does
// not send).
constexpr uint16_t kClientFlags = flx1::kKnownFlags & ~flx1::kFlagBinaryPublishIdempotent;

template <typename T>
tl::unexpected<ClientError> Err(ClientErrorCode code, std::string message) {
  return tl::unexpected<ClientError>(MakeClientError(code, std::move(message)));
}

tl::unexpected<ClientError> Unexpected(ClientError e) {
  return tl::unexpected<ClientError>(std::move(e));
}

// One answer on the request stream.
struct RequestAnswer {
  std::optional<uint64_t> offset;                // publish acks
  ShardInfo shards;                              // stream_shards_view
  std::optional<client_impl::OwnerEntry> owner;  // the owner hint of a forwarded batch's ack
};
using Answer = ClientResult<RequestAnswer>;

// A broker-opened event stream waiting for its `subscribed`.
struct WaitingEvents {
  std::shared_ptr<transport::Stream> stream;
  std::shared_ptr<FrameReader> reader;
  bool fin = false;
  std::optional<uint64_t> reset;
};

ClientError Closed() {
  return MakeClientError(ClientErrorCode::kClosed, "the client was closed");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Subscription state, shared by the user's Subscription and the loop thread.

class Subscription::State : public std::enable_shared_from_this<Subscription::State> {
 public:
  enum class Phase { kOpening, kActive, kEnded };

  State(StreamRef stream, uint32_t shard, size_t capacity, uint32_t max_frame,
        std::weak_ptr<Client::Impl> client, std::chrono::microseconds spin_wait,
        SubscriptionHandler on_event)
      : stream(std::move(stream)),
        shard(shard),
        capacity(std::max<size_t>(1, capacity)),
        spin_wait(spin_wait),
        client(std::move(client)),
        on_event(std::move(on_event)),
        bidi_reader(max_frame),
        max_frame(max_frame) {}

  const StreamRef stream;
  const uint32_t shard;
  const size_t capacity;
  const std::chrono::microseconds spin_wait;  // ClientOptions::spin_wait, for Next
  // The connection serving it (the Client's Router owns it).
  const std::weak_ptr<Client::Impl> client;
  // Push delivery (SubscribeOptions::on_event): called under handler_mu only, by Deliver and
  // End; `delivering` names the thread inside it, so that a Close from the handler itself
  // does not wait for the handler to return.
  const SubscriptionHandler on_event;
  std::mutex handler_mu;
  std::atomic<std::thread::id> delivering{};

  // Guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::kOpening;
  std::optional<ClientError> error;  // why opening failed, or why it ended
  uint64_t id = 0;
  std::optional<uint64_t> start_offset, live_offset, last_offset;
  std::deque<Event> queue;
  bool paused = false;          // the event reader stopped because the queue was full
  bool closed_by_user = false;  // Close: no handler call from now on

  // Loop thread only.
  std::shared_ptr<transport::Stream> bidi;
  FrameReader bidi_reader;
  std::shared_ptr<transport::Stream> events;
  std::shared_ptr<FrameReader> event_reader;
  uint32_t max_frame;

  // Ends the subscription (first reason wins). Returns false if it had ended already. A push
  // subscription that was open hears why, unless the user closed it (`by_user`, now or before
  // the handler runs): through `run` (the connection's RunUserCallback) when given, so that
  // the handler runs after the events read before the end and never on a caller's thread.
  bool End(ClientError why, bool by_user = false, Client::Impl* run = nullptr) {
    bool tell = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (by_user) closed_by_user = true;
      if (phase == Phase::kEnded) return false;
      tell = on_event && !by_user && phase == Phase::kActive;
      phase = Phase::kEnded;
      error = why;
      cv.notify_all();
    }
    if (!tell) return true;
    RunHandler(run, [self = shared_from_this(), why = std::move(why)]() mutable {
      {
        std::lock_guard<std::mutex> lock(self->mu);
        if (self->closed_by_user) return;
        why.resume_from = self->ResumeFromLocked(why);
      }
      self->on_event(Unexpected(std::move(why)));
    });
    return true;
  }

  // Where an ended subscription resumes (mu held): the error's own position, else after the
  // last event returned, else where it started.
  std::optional<uint64_t> ResumeFromLocked(const ClientError& why) const {
    if (why.resume_from) return why.resume_from;
    if (last_offset) return *last_offset + 1;
    return start_offset;
  }

  // Push delivery of decoded events, in order, through `run` as End; stops once the user
  // closed the subscription (events read before another end are still delivered, then the
  // end). Loop thread, or a caller driving it.
  void Deliver(std::vector<Event> events, Client::Impl* run) {
    RunHandler(run, [self = shared_from_this(), events = std::move(events)]() mutable {
      for (auto& e : events) {
        {
          std::lock_guard<std::mutex> lock(self->mu);
          if (self->closed_by_user) return;
          if (e.offset) self->last_offset = e.offset;
        }
        self->on_event(std::move(e));
      }
    });
  }

  // After End(by_user) on a thread that is not inside the handler: returns once no handler
  // call is running (later ones see the end and do not call it).
  void WaitForHandler() {
    if (!on_event || delivering.load() == std::this_thread::get_id()) return;
    std::lock_guard<std::mutex> h(handler_mu);
  }

 private:
  // Runs `fn` under handler_mu, through the connection's RunUserCallback when `run` is given.
  void RunHandler(Client::Impl* run, std::function<void()> fn) {
    auto call = [self = shared_from_this(), fn = std::move(fn)] {
      std::lock_guard<std::mutex> h(self->handler_mu);
      self->delivering.store(std::this_thread::get_id());
      fn();
      self->delivering.store(std::thread::id());
    };
    if (run != nullptr) {
      client_impl::RunUserCallback(*run, std::move(call));
    } else {
      call();
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Client::Impl

class Client::Impl : public std::enable_shared_from_this<Client::Impl>,
                     public client_impl::ConnectionPort {
 public:
  explicit Impl(ClientOptions o)
      : options(std::move(o)), cache_(client_impl::MakeCacheChannel(*this)) {}
  ~Impl() override { Close(); }

  // ConnectionPort (the cache channel's view of this client).
  bool PostToLoop(std::function<void()> fn) override { return Post(std::move(fn)); }
  bool DriveLoop(const std::function<void()>& start, const std::function<bool()>& done,
                 std::chrono::steady_clock::time_point deadline) override {
    if (!drivable_ || !endpoint_ || !endpoint_->Drive(start, done, deadline)) return false;
    HandOverKeptUserCallbacks();
    return true;
  }
  // After a drive: user callbacks it read are the I/O thread's to run; hand them over now (a
  // drain that a later drive runs leaves them to that drive's end).
  void HandOverKeptUserCallbacks() {
    bool kept = false;
    {
      std::lock_guard<std::mutex> lock(user_callbacks_mu_);
      kept = !user_callbacks_.empty();
    }
    if (kept) Post([this] { RunKeptUserCallbacks(); });
  }
  void AwaitingLoop(int delta) override {
    if (drivable_ && endpoint_) endpoint_->AwaitingAnswers(delta);
  }
  ClientResult<std::shared_ptr<transport::Stream>> OpenAuthenticatedStream() override;
  const ClientOptions& client_options() const override { return options; }
  uint32_t server_features() const override { return server().server_features; }
  client_impl::CacheChannel& cache_channel() { return *cache_; }

  ClientResult<void> Start();
  void Close();
  // Finishes the request stream and waits (never on the loop thread) until the broker has
  // finished its side, the stream ended otherwise, or `deadline` passed (false). A broker
  // finishes only once it has handled every frame before the FIN; the QUIC acknowledgement of
  // the bytes says less (a broker waiting for room in its in-flight budget holds them unread,
  // and a close would discard them). Router::Close calls this after fire-and-forget publishes.
  bool FinishRequestStream(std::chrono::steady_clock::time_point deadline);

  ClientResult<void> PublishAsync(const StreamRef& stream, const std::vector<std::string>& payloads,
                                  const PublishOptions& po, client_impl::PublishDone done);
  // client_impl::QueueUnackedOn (connections.h): why not queued, or nothing.
  std::optional<ClientError> QueueUnacked(
      const StreamRef& stream, const std::vector<std::string>& payloads, const PublishOptions& po,
      size_t charged, const std::shared_ptr<const client_impl::UnackedWritten>& written,
      bool* flush_due);
  // The publisher's own loop turn once QueueUnacked said a batch is due (below); nothing when
  // the loop cannot be driven now.
  void DriveUnackedFlush();
  ClientResult<ShardInfo> StreamShards(const StreamRef& stream);
  std::optional<ShardInfo> CachedStreamShards(const StreamRef& stream) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = shard_cache_.find(stream.ToString());
    if (it == shard_cache_.end()) return std::nullopt;
    return it->second;
  }
  bool Usable() const {
    std::lock_guard<std::mutex> lock(mu_);
    return endpoint_ && !Unusable();
  }
  bool InLoopThread() const {
    std::lock_guard<std::mutex> lock(mu_);
    return endpoint_ && endpoint_->InLoopThread();
  }
  // client_impl::RunUserCallback (connections.h).
  void RunUserCallback(std::function<void()> fn);
  ClientResult<std::shared_ptr<Subscription::State>> Subscribe(const StreamRef& stream,
                                                               const SubscribeOptions& so);
  // From a Subscription (any thread).
  void ResumeEvents(std::shared_ptr<Subscription::State> state);
  void CloseSubscription(std::shared_ptr<Subscription::State> state);

  ServerInfo server() const {
    std::lock_guard<std::mutex> lock(mu_);
    return server_;
  }
  uint64_t NextRequestId() { return next_request_id_++; }
  // A request on a stream of its own (own_stream_request.h); `done` runs once, on the loop.
  using ExchangeDone = std::function<void(ClientResult<flx1::Message>)>;
  bool ExchangeOnOwnStream(std::vector<uint8_t> frame, ExchangeDone done);
  // Several at once, handed to the loop in one post (taken from `requests`); false when the
  // client is closed, `requests` then untouched.
  using OwnStreamFrame = std::pair<std::vector<uint8_t>, ExchangeDone>;
  bool ExchangesOnOwnStreams(std::vector<OwnStreamFrame>& requests);
  struct OwnStreamExchange;

  const ClientOptions options;

 private:
  // The `auth` frame every stream starts with, encoded once: a stream per group request made
  // its encoding (the token's characters) a visible share of a consumer's CPU.
  static std::vector<uint8_t> EncodeAuthFrame(const ClientOptions& options);
  const std::vector<uint8_t> auth_frame_ = EncodeAuthFrame(options);

  // Posts `fn` to the loop unless the client is closed; false when it was not posted.
  // `without_unpark`: Endpoint::PostWithoutUnpark (a fire-and-forget batch its publisher writes).
  bool PostLocked(std::function<void()> fn, bool without_unpark = false);  // mu_ held
  bool Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    return PostLocked(std::move(fn));
  }
  std::optional<ClientError> Unusable() const;  // mu_ held
  // Appends the publish frame (binary when the broker takes it) to `out`; `id` is used when
  // acknowledged. Any thread.
  Result<void> EncodePublish(const StreamRef& stream, const std::vector<std::string>& payloads,
                             const PublishOptions& po, uint64_t id, uint16_t server_flags,
                             std::vector<uint8_t>& out) const;
  // Loop thread: writes the oldest batch of QueueUnacked's frames.
  void FlushUnacked();

  // Loop thread.
  void OnConnected(std::shared_ptr<transport::Connection> conn);
  const std::vector<uint8_t>& AuthFrame() const { return auth_frame_; }
  bool EnsureRequestStream();
  void SendRequest(uint64_t id, const std::vector<uint8_t>& frame,
                   PendingRequests<Answer>::Callback callback);
  void OnRequestData(transport::Stream& stream, std::span<const uint8_t> data);
  Verdict OnRequestFrame(uint16_t flags, std::span<const uint8_t> payload);
  void OnRequestStreamEnded(const ClientError& why);
  // Tells the publisher (through unacked_on_stream_) that fire-and-forget publishes written on
  // the request stream that ended may be lost. Loop thread.
  void ReportUnackedOnStream(const ClientError& why);
  // Completes the backlogged fire-and-forget publishes (`why`: they failed with it).
  void ReleaseBacklogged(std::optional<ClientError> why);
  void OnAuthAnswer(ClientResult<void> result);
  void OnConnectionClosed(const transport::CloseInfo& info);
  void FailEverything(const ClientError& why);
  void Keepalive();

  void OpenSubscription(std::shared_ptr<Subscription::State> state, const SubscribeOptions& so);
  void OnSubscribeData(std::shared_ptr<Subscription::State> state, transport::Stream& stream,
                       std::span<const uint8_t> data);
  Verdict OnSubscribeFrame(std::shared_ptr<Subscription::State> state, uint16_t flags,
                           std::span<const uint8_t> payload);
  void FailOpening(std::shared_ptr<Subscription::State> state, ClientError why);
  void OnIncomingStream(const std::shared_ptr<transport::Stream>& stream);
  void OnHelloData(std::shared_ptr<WaitingEvents> waiting, transport::Stream& stream,
                   std::span<const uint8_t> data);
  void Attach(std::shared_ptr<Subscription::State> state, const WaitingEvents& waiting);
  void InstallEventHandlers(std::shared_ptr<Subscription::State> state);
  void OnEventData(std::shared_ptr<Subscription::State> state, std::span<const uint8_t> data);
  Verdict OnEventFrame(std::shared_ptr<Subscription::State> state, uint16_t flags,
                       std::span<const uint8_t> payload);
  void EndSubscription(std::shared_ptr<Subscription::State> state, ClientError why);
  void OpenExchange(std::shared_ptr<OwnStreamExchange> exchange);
  void FinishExchange(std::shared_ptr<OwnStreamExchange> exchange,
                      ClientResult<flx1::Message> result, bool in_handler = false);
  void DropFinishedExchangeStreams();

  ClientResult<RequestAnswer> WaitAnswer(client_impl::AnswerSlot<Answer>& answer,
                                         std::chrono::milliseconds timeout,
                                         RetryClass timeout_class);

  MetricsRegistry metrics_;
  std::unique_ptr<transport::Endpoint> endpoint_;
  std::atomic<uint64_t> next_request_id_{1};

  std::mutex close_mu_;
  // Guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable window_cv_;
  bool closed_ = false;
  std::optional<ClientError> broken_;  // the connection is gone
  // Set (under mu_) once closed_ or broken_ is: the loop thread's SendRequest reads it without
  // taking mu_, which the caller that posted the request may still hold — the woken loop
  // blocking on it cost a futex wait, two wakes and a context switch per request
  // (docs/performance.md, change 43).
  std::atomic<bool> unusable_{false};
  size_t in_flight_ = 0;
  size_t window_ = 1;
  ServerInfo server_;
  std::map<std::string, ShardInfo> shard_cache_;
  std::optional<StreamRef> last_stream_;  // keep-alive target

  // QueueUnacked's batches, oldest first; one FlushUnacked task was posted for each. Only the
  // last may still take frames: while it is `open` (below kUnackedBatchBytes) and no other task
  // was posted to the loop since its own (`posts` == posts_), so a batch is never written after
  // a task posted later than one of its publishes (a fire-and-forget publish does not overtake
  // a later acked one).
  static constexpr size_t kUnackedBatchBytes = size_t{64} << 10;
  static constexpr size_t kUnackedSpareBuffers = 4;
  struct UnackedBatch {
    std::vector<uint8_t> frames;
    // The last frame when later publishes to `joinable_stream` may join it (a plain binary
    // publish batch frame, checked once when it was written: flx1::OpenPublishBatchFrame).
    std::optional<flx1::OpenPublishBatch> joinable;
    StreamRef joinable_stream;
    size_t charged = 0;
    uint64_t posts = 0;
    uint16_t server_flags = 0;
    bool open = true;
    std::shared_ptr<const client_impl::UnackedWritten> written;
  };
  std::atomic<uint64_t> posts_{0};                   // tasks PostLocked posted; written under mu_
  std::mutex unacked_mu_;                            // taken before mu_ where both are held
  std::deque<UnackedBatch> unacked_batches_;         // guarded by unacked_mu_
  std::vector<std::vector<uint8_t>> unacked_spare_;  // guarded by unacked_mu_: written buffers
  // Loop thread: the last written batch's buffer, put in unacked_spare_ by the next FlushUnacked
  // (under the lock it takes anyway: one lock per batch on the loop, not two).
  std::vector<uint8_t> flushed_frames_;
  // A batch of at least this many bytes is handed to the request stream as it is, not copied
  // into its send buffer (Stream::WriteOwned): the copy was 6.8 % of a fire-and-forget
  // publisher's CPU (docs/performance.md, change 61). A smaller one is cheaper copied than tied
  // up until the broker acknowledges it.
  static constexpr size_t kUnackedHandOverBytes = 4096;
  // A publisher that outruns the loop writes its own batches (docs/performance.md, change 62):
  // once its open batch reaches kCallerFlushBytes before the loop thread took it, or another
  // batch waits before it, the publish ends with one loop turn on the publisher's thread
  // (Endpoint::DriveOneTurn: the batches written, ~56 KiB in one GSO send, the broker's
  // acknowledgements read) instead of a wake of the I/O thread per batch and the bytes handed
  // across cores. While it does (unacked_caller_flushes_), a new batch's task is posted without
  // unparking the loop thread, so the publisher writes that batch too when it fills; a last
  // partial batch is written by the loop thread at most EndpointOptions::drive_park (2 ms)
  // after the publisher's last turn. The loop thread taking a batch itself (the publisher fell
  // behind it, or stopped) or a backlogged request stream ends it. A publish alone as large as
  // kCallerFlushBytes is written by its publisher at once either way.
  static constexpr size_t kCallerFlushBytes = kUnackedBatchBytes / 8 * 7;
  std::atomic<bool> unacked_caller_flushes_{false};
  // The thread whose DriveUnackedFlush turn runs (read in it: another caller's drive, or one
  // that took the loop while this turn was refused, is not the publisher's own).
  std::atomic<std::thread::id> unacked_turn_thread_{};
  bool UnackedFlushDue() const;  // unacked_mu_ held
  // Loop thread: handed-over buffers the stream gave back once acknowledged (on_buffer_done),
  // put in unacked_spare_ by the next FlushUnacked as flushed_frames_ is.
  std::vector<std::vector<uint8_t>> returned_frames_;
  // The size the last batch reached (guarded by unacked_mu_). Full, the publisher outruns the
  // loop, so the next batch starts at the size it will reach instead of doubling up to it — each
  // doubling a copy, and a large block fresh from the kernel a page fault a page
  // (docs/performance.md, change 56).
  size_t unacked_last_size_ = 0;

  // Loop thread only.
  std::shared_ptr<transport::Connection> conn_;
  std::shared_ptr<transport::Stream> request_stream_;
  std::unique_ptr<FrameReader> request_reader_;
  std::optional<ClientError> request_stream_error_;
  // Loop thread: FinishRequestStream's waiter, told once the request stream has ended.
  std::shared_ptr<std::promise<void>> request_stream_finish_;
  void EndRequestStreamFinish();
  // The report of the last fire-and-forget batch written on the request stream now open (null:
  // none since it opened). If the broker ends that stream, what was written after the frame
  // it refused was never read: the next fire-and-forget Publish reports it.
  std::shared_ptr<const client_impl::UnackedWritten> unacked_on_stream_;
  // Fire-and-forget publishes written while the request stream's unacknowledged backlog was at
  // its high-water mark: completed once it drains (on_writable), so the caller's queue budget
  // (Router::PublishUnacked) holds until then — the backpressure — or failed with the stream.
  std::vector<std::function<void(std::optional<ClientError>)>> backlogged_;
  PendingRequests<Answer> pending_;
  std::function<void(ClientResult<void>)> auth_waiter_;
  EventRouter<WaitingEvents, std::shared_ptr<Subscription::State>> router_;
  std::set<std::shared_ptr<Subscription::State>> subscriptions_;
  // ClientOptions::caller_runs_io applies (set by Start). subscriptions_awaiting_ (loop thread):
  // the open subscriptions hold one KeepLoopAwake, so the loop thread does not park while
  // their events may come (SyncSubscriptionsAwaiting); callers still drive.
  bool drivable_ = false;
  bool subscriptions_awaiting_ = false;
  void SyncSubscriptionsAwaiting();
  // User callbacks a driving caller read (RunUserCallback), oldest first; run by the loop
  // thread (RunKeptUserCallbacks: not while a caller drives) or by Close once the loop stopped.
  std::mutex user_callbacks_mu_;
  std::deque<std::function<void()>> user_callbacks_;  // guarded by user_callbacks_mu_
  void RunKeptUserCallbacks();
  // Event streams not yet attached to a subscription (their handlers own them: cleared on
  // shutdown so nothing stays alive through that cycle).
  std::set<std::shared_ptr<WaitingEvents>> unattached_;
  // Requests on streams of their own, until answered (failed on shutdown). Unordered: each
  // knows its slot and leaves by a swap with the last (a tree node per acknowledgement of a
  // `GroupAckAll` window before; docs/performance.md change 75).
  std::vector<std::shared_ptr<OwnStreamExchange>> exchanges_;
  std::vector<std::shared_ptr<transport::Stream>> finished_exchange_streams_;
  bool loop_shut_down_ = false;
  std::shared_ptr<client_impl::CacheChannel> cache_;
};

ClientResult<std::shared_ptr<transport::Stream>> Client::Impl::OpenAuthenticatedStream() {
  if (!conn_ || !conn_->is_open())
    return Err<std::shared_ptr<transport::Stream>>(ClientErrorCode::kTransport, "connection lost");
  auto stream = conn_->OpenBidiStream();
  if (!stream)
    return Unexpected(
        client_impl::FromTransport(stream.error(), "open a stream", RetryClass::kRetry));
  if (auto wrote = (*stream)->Write(AuthFrame()); !wrote)
    return Unexpected(client_impl::FromTransport(wrote.error(), "send auth", RetryClass::kRetry));
  return *stream;
}

client_impl::CacheChannel& client_impl::CacheChannelOf(Client::Impl& impl) {
  return impl.cache_channel();
}

bool Client::Impl::PostLocked(std::function<void()> fn, bool without_unpark) {
  if (closed_ || !endpoint_) return false;
  // QueueUnacked's open batch closes: what it holds is written before this task runs.
  posts_.fetch_add(1, std::memory_order_release);
  if (without_unpark)
    endpoint_->PostWithoutUnpark(std::move(fn));
  else
    endpoint_->Post(std::move(fn));
  return true;
}

std::optional<ClientError> Client::Impl::Unusable() const {
  if (closed_) return Closed();
  if (broken_) return broken_;
  return std::nullopt;
}

ClientResult<void> Client::Impl::Start() {
  if (options.ca_file.empty())
    return Err<void>(ClientErrorCode::kInvalidArgument,
                     "ca_file is required: the client always verifies the broker certificate");
  if (options.client_cert_file.empty() != options.client_key_file.empty())
    return Err<void>(ClientErrorCode::kInvalidArgument,
                     "client_cert_file and client_key_file must be set together");
  auto remote = ParseHostPort(options.broker);
  if (!remote || remote->port == 0)
    return Err<void>(ClientErrorCode::kInvalidArgument,
                     "broker '" + options.broker + "': expected host:port");
  transport::TlsOptions tls;
  tls.role = transport::Role::kClient;
  tls.ca_file = options.ca_file;
  tls.ca_var = "ca_file";
  tls.cert_file = options.client_cert_file;
  tls.key_file = options.client_key_file;
  tls.cert_var = "client_cert_file";
  tls.key_var = "client_key_file";
  tls.no_certificate = options.client_cert_file.empty();
  tls.dial_alpn = {transport::kClientAlpn};
  auto ctx = transport::TlsContext::Create(tls);
  if (!ctx) return Err<void>(ClientErrorCode::kInvalidArgument, ctx.error().message);
  transport::EndpointOptions eo;
  eo.tls = *ctx;
  eo.name = "client";
  eo.idle_timeout = std::chrono::milliseconds(30000);  // the broker's (shorter) one applies
  eo.handshake_timeout = options.connect_timeout;
  // A busy loop (many connections on one IoThread) holds a lone ACK for the caller's next
  // request to carry (EndpointOptions::ack_hold; docs/performance.md, change 43).
  eo.ack_hold = std::chrono::microseconds(1000);
  // ... across the two packets of a call answered in parts (a group call's auth_ok, then its
  // answer after the cursor's flush), so that the next call carries that ACK too.
  eo.ack_hold_packets = 2;
  // ClientOptions::caller_runs_io: the caller's next request carries the ACK of its answer even
  // on this idle loop (the I/O thread is parked, not kept awake by sending it).
  drivable_ = options.caller_runs_io && !options.io_thread;
  eo.drivable = drivable_;
  if (drivable_) eo.ack_hold_min_datagrams = 0;
  // On a shared I/O thread the connection keeps its own socket and TLS; only the loop is
  // the IoThread's (options.io_thread is held as long as this connection lives).
  if (options.io_thread) eo.share_loop_of = options.io_thread->impl().host.get();
  HostPort bind{remote->host.find(':') != std::string::npos ? "::" : "0.0.0.0", 0};
  auto endpoint = transport::Endpoint::Create(bind, eo, metrics_, std::nullopt);
  if (!endpoint) {
    // The shared thread refuses one connection too many (or is stopping): the caller's
    // choice of thread, not a transport failure.
    if (options.io_thread && endpoint.error().code == ErrorCode::kUnavailable) {
      return Err<void>(ClientErrorCode::kInvalidArgument,
                       "io_thread: " + endpoint.error().message + " (at most " +
                           std::to_string(IoThread::kMaxConnections) + " connections)");
    }
    return Unexpected(
        client_impl::FromTransport(endpoint.error(), "client endpoint", RetryClass::kFatal));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    endpoint_ = std::move(*endpoint);
    window_ = std::max<size_t>(1, options.max_in_flight);
  }
  auto promise = std::make_shared<std::promise<ClientResult<void>>>();
  auto once = std::make_shared<std::atomic<bool>>(false);
  auto finish = [promise, once](ClientResult<void> r) {
    if (!once->exchange(true)) promise->set_value(std::move(r));
  };
  std::future<ClientResult<void>> connected = promise->get_future();
  endpoint_->Dial(*remote, transport::DialOptions{options.server_name},
                  [this, finish](Result<std::shared_ptr<transport::Connection>> conn) {
                    if (!conn) {
                      finish(Unexpected(client_impl::FromTransport(
                          conn.error(), "connect to " + options.broker, RetryClass::kRetry)));
                      return;
                    }
                    auth_waiter_ = finish;
                    OnConnected(*conn);
                  });
  if (connected.wait_for(options.connect_timeout + options.request_timeout) !=
      std::future_status::ready) {
    Close();
    return Err<void>(ClientErrorCode::kTimeout, "connect to " + options.broker + ": no answer");
  }
  ClientResult<void> result = connected.get();
  if (!result) Close();
  return result;
}

void Client::Impl::Close() {
  std::lock_guard<std::mutex> closing(close_mu_);  // one Close at a time
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!endpoint_) return;
    if (!closed_) {
      closed_ = true;
      unusable_.store(true, std::memory_order_release);
      endpoint_->Post([this] {
        FailEverything(Closed());
        if (conn_) conn_->Close(0, "client closed");
      });
    }
    window_cv_.notify_all();
  }
  endpoint_->Stop();  // joins the loop thread
  // The loop is gone: the callbacks a drive kept run now, then whatever the posted shutdown
  // did not reach is finished.
  RunKeptUserCallbacks();
  FailEverything(Closed());
  conn_.reset();
  request_stream_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  endpoint_.reset();
}

std::vector<uint8_t> Client::Impl::EncodeAuthFrame(const ClientOptions& options) {
  flx1::Auth auth;
  auth.tenant_id = options.tenant_id;
  auth.token = options.token;
  auth.client_flags = kClientFlags;
  // REDIRECT: a cluster broker answers a subscribe for a shard it does not lead with
  // `not_leader` naming the owner's address, which Subscribe follows.
  uint32_t features =
      flx1::kFeatureErrorCodes | flx1::kFeatureStreamShards | flx1::kFeatureUnsupported |
      flx1::kFeatureSubscriptionLagged | flx1::kFeatureShardMoved | flx1::kFeaturePublishPipeline |
      flx1::kFeatureRedirect | flx1::kFeatureTopology | flx1::kFeatureShardOwners |
      flx1::kFeatureGroupSkipped | flx1::kFeatureGroupPublisher | flx1::kFeatureRecordTimestamps;
  if (options.ack_on_commit) features |= flx1::kFeatureAckOnCommit;
  auth.client_features = features;
  auto frame = flx1::EncodeMessageFrame(flx1::Message(std::move(auth)));
  return frame ? std::move(*frame) : std::vector<uint8_t>();
}

void Client::Impl::OnConnected(std::shared_ptr<transport::Connection> conn) {
  conn_ = std::move(conn);
  conn_->SetHandlers(transport::ConnectionHandlers{
      .on_stream = [this](const std::shared_ptr<transport::Stream>& s) { OnIncomingStream(s); },
      .on_closed = [this](transport::Connection&,
                          const transport::CloseInfo& info) { OnConnectionClosed(info); },
  });
  if (!EnsureRequestStream()) {
    OnAuthAnswer(Err<void>(ClientErrorCode::kTransport, "cannot open the request stream"));
  }
  if (options.keepalive_interval.count() > 0)
    endpoint_->RunAfter(options.keepalive_interval, [this] { Keepalive(); });
}

bool Client::Impl::EnsureRequestStream() {
  if (request_stream_) return true;
  if (!conn_ || !conn_->is_open()) return false;
  auto stream = conn_->OpenBidiStream();
  if (!stream) return false;
  request_stream_ = *stream;
  request_reader_ = std::make_unique<FrameReader>(options.max_frame_bytes);
  request_stream_error_.reset();
  unacked_on_stream_.reset();
  auto* raw = request_stream_.get();
  request_stream_->SetHandlers(transport::StreamHandlers{
      .on_data = [this](transport::Stream& s,
                        std::span<const uint8_t> data) { OnRequestData(s, data); },
      .on_fin =
          [this, raw](transport::Stream&) {
            if (request_stream_.get() != raw) return;
            if (request_stream_finish_) {
              // The broker's answer to our FIN: everything before it was handled, so a batch
              // still counted as backlogged was delivered too.
              request_stream_.reset();
              request_reader_.reset();
              unacked_on_stream_.reset();
              ReleaseBacklogged(std::nullopt);
              EndRequestStreamFinish();
              return;
            }
            OnRequestStreamEnded(request_stream_error_.value_or(MakeClientError(
                ClientErrorCode::kTransport, "the broker ended the request stream")));
          },
      .on_reset =
          [this, raw](transport::Stream&, uint64_t code) {
            if (request_stream_.get() != raw) return;
            OnRequestStreamEnded(request_stream_error_.value_or(MakeClientError(
                ClientErrorCode::kTransport,
                "the request stream was reset (code " + std::to_string(code) + ")")));
          },
      .on_writable =
          [this, raw](transport::Stream&) {
            if (request_stream_.get() == raw) ReleaseBacklogged(std::nullopt);
          },
      .on_buffer_done =
          [this](std::vector<uint8_t> frames) {
            if (returned_frames_.size() >= kUnackedSpareBuffers ||
                frames.capacity() > 2 * kUnackedBatchBytes)
              return;
            frames.clear();
            returned_frames_.push_back(std::move(frames));
          },
  });
  auto wrote = request_stream_->Write(AuthFrame());
  return wrote.has_value();
}

void Client::Impl::SendRequest(uint64_t id, const std::vector<uint8_t>& frame,
                               PendingRequests<Answer>::Callback callback) {
  if (unusable_.load(std::memory_order_acquire)) {
    std::optional<ClientError> unusable;
    {
      std::lock_guard<std::mutex> lock(mu_);
      unusable = Unusable();
    }
    if (unusable) return callback(Unexpected(*unusable));
  }
  if (!EnsureRequestStream())
    return callback(Err<RequestAnswer>(ClientErrorCode::kTransport, "connection lost"));
  pending_.Add(id, std::move(callback));
  auto wrote = request_stream_->Write(frame);
  if (!wrote)
    pending_.Complete(id, Unexpected(client_impl::FromTransport(wrote.error(), "send",
                                                                RetryClass::kOutcomeUnknown)));
}

void Client::Impl::OnRequestData(transport::Stream& stream, std::span<const uint8_t> data) {
  if (!request_reader_ || request_stream_.get() != &stream) return;
  auto fed = request_reader_->Feed(data, [this](uint16_t flags, std::span<const uint8_t> p) {
    return OnRequestFrame(flags, p);
  });
  if (fed.consume) stream.Consume(fed.consume);
  if (fed.error) {
    stream.Reset(0);
    OnRequestStreamEnded(*fed.error);
  }
}

Verdict Client::Impl::OnRequestFrame(uint16_t flags, std::span<const uint8_t> payload) {
  auto frame = flx1::DecodePayload(flags, payload);
  if (!frame) {
    request_stream_error_ = client_impl::FromDecode(frame.error(), "request stream");
    return Verdict::kAccept;  // skip it; an undecodable answer fails only its request (by timeout)
  }
  if (auto* ack = std::get_if<flx1::BinaryPublishAck>(&*frame)) {
    if (ack->status == flx1::BinaryPublishAck::Status::kOk) {
      RequestAnswer answer{ack->offset, {}, std::nullopt};
      if (ack->owner)
        answer.owner = client_impl::OwnerEntry{std::string(ack->owner->node_id),
                                               std::string(ack->owner->addr.value_or("")),
                                               ack->owner->generation};
      pending_.Complete(ack->request_id, std::move(answer));
    } else
      pending_.Complete(ack->request_id, Unexpected(client_impl::FromBinaryAck(*ack)));
    return Verdict::kAccept;
  }
  auto* message = std::get_if<flx1::Message>(&*frame);
  if (!message) return Verdict::kAccept;  // event batches never come here
  std::visit(
      [this](auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, flx1::AuthOk>) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            server_.negotiated = true;
            server_.server_flags = m.server_flags;
            server_.server_features = m.server_features.value_or(0);
            server_.publish_window = m.publish_window;
            if (m.publish_window && *m.publish_window > 0)
              window_ = std::min<size_t>(window_, *m.publish_window);
          }
          OnAuthAnswer({});
        } else if constexpr (std::is_same_v<M, flx1::Ok>) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (!server_.negotiated) server_.server_flags = flx1::kOriginalV1Flags;
          }
          OnAuthAnswer({});
        } else if constexpr (std::is_same_v<M, flx1::Error>) {
          ClientError e = client_impl::FromErrorMessage(m, RetryClass::kFatal);
          if (auth_waiter_) return OnAuthAnswer(Unexpected(e));
          request_stream_error_ = e;  // reported to what is pending if the stream then ends
        } else if constexpr (std::is_same_v<M, flx1::PublishOk>) {
          pending_.Complete(m.request_id, RequestAnswer{m.offset, {}, std::nullopt});
        } else if constexpr (std::is_same_v<M, flx1::PublishError>) {
          pending_.Complete(m.request_id, Unexpected(client_impl::FromPublishError(m)));
        } else if constexpr (std::is_same_v<M, flx1::StreamShardsView>) {
          RequestAnswer a;
          a.shards.shards = m.shards;
          a.shards.jump_hash = m.routing == flx1::ShardRouting::kJumpHash;
          pending_.Complete(m.request_id, a);
        } else if constexpr (std::is_same_v<M, flx1::Unsupported>) {
          if (m.request_id)
            pending_.Complete(*m.request_id,
                              Err<RequestAnswer>(ClientErrorCode::kUnsupported,
                                                 "the broker does not serve " + m.request_type));
        }
      },
      *message);
  return Verdict::kAccept;
}

void Client::Impl::OnAuthAnswer(ClientResult<void> result) {
  if (!auth_waiter_) return;
  auto waiter = std::move(auth_waiter_);
  auth_waiter_ = nullptr;
  waiter(std::move(result));
}

void Client::Impl::ReleaseBacklogged(std::optional<ClientError> why) {
  auto waiting = std::move(backlogged_);
  backlogged_.clear();
  for (auto& done : waiting) done(why);
}

bool Client::Impl::FinishRequestStream(std::chrono::steady_clock::time_point deadline) {
  auto ended = std::make_shared<std::promise<void>>();
  auto future = ended->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!endpoint_ || endpoint_->InLoopThread()) return true;
    if (!PostLocked([this, ended] {
          if (!request_stream_ || request_stream_->closed() || request_stream_finish_) {
            ended->set_value();
            return;
          }
          request_stream_finish_ = ended;
          request_stream_->Finish();
        }))
      return true;  // the loop is gone: nothing more can be sent
  }
  return future.wait_until(deadline) == std::future_status::ready;
}

void Client::Impl::EndRequestStreamFinish() {
  if (auto ended = std::move(request_stream_finish_)) ended->set_value();
  request_stream_finish_.reset();
}

void Client::Impl::OnRequestStreamEnded(const ClientError& why) {
  request_stream_.reset();
  request_reader_.reset();
  EndRequestStreamFinish();
  ReportUnackedOnStream(why);
  ReleaseBacklogged(why);
  OnAuthAnswer(Unexpected(why));
  ClientError failure = why;
  if (failure.code == ClientErrorCode::kTransport) failure.retry = RetryClass::kOutcomeUnknown;
  pending_.FailAll([&] { return Answer(Unexpected(failure)); });
}

void Client::Impl::ReportUnackedOnStream(const ClientError& why) {
  auto written = std::move(unacked_on_stream_);
  unacked_on_stream_.reset();
  if (!written) return;
  ClientError lost = why;
  lost.message = "the request stream ended (" + why.message +
                 "): fire-and-forget publishes written to it may not have been read";
  lost.retry = RetryClass::kOutcomeUnknown;
  (*written)(0, lost);
}

void Client::Impl::OnConnectionClosed(const transport::CloseInfo& info) {
  ClientError why = MakeClientError(
      ClientErrorCode::kTransport,
      "connection closed: " + (info.reason.empty() ? std::string("no reason") : info.reason));
  bool closed_here = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_here = closed_;
    if (!broken_) broken_ = why;
    unusable_.store(true, std::memory_order_release);
    window_cv_.notify_all();
  }
  // Lost, not closed by this client (whose Close first waits for what it wrote), with bytes of
  // the request stream the broker never acknowledged: they may never have been read.
  if (!closed_here && request_stream_ && request_stream_->send_buffered() > 0)
    ReportUnackedOnStream(why);
  FailEverything(why);
}

void Client::Impl::RunUserCallback(std::function<void()> fn) {
  if (drivable_ && endpoint_) {
    if (endpoint_->InDrive()) {
      std::lock_guard<std::mutex> lock(user_callbacks_mu_);
      user_callbacks_.push_back(std::move(fn));
      return;
    }
    if (endpoint_->InLoopThread()) RunKeptUserCallbacks();
  }
  fn();
}

void Client::Impl::RunKeptUserCallbacks() {
  if (endpoint_ && endpoint_->InDrive()) return;
  for (;;) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(user_callbacks_mu_);
      if (user_callbacks_.empty()) return;
      fn = std::move(user_callbacks_.front());
      user_callbacks_.pop_front();
    }
    fn();
  }
}

void Client::Impl::FailEverything(const ClientError& why) {
  if (cache_) client_impl::ShutdownCacheChannel(*cache_, why);
  if (loop_shut_down_ && pending_.empty() && subscriptions_.empty() && unattached_.empty() &&
      exchanges_.empty() && finished_exchange_streams_.empty())
    return;
  OnAuthAnswer(Unexpected(why));
  pending_.FailAll([&] { return Answer(Unexpected(why)); });
  ReleaseBacklogged(why);
  request_stream_.reset();
  request_reader_.reset();
  EndRequestStreamFinish();
  auto subs = std::move(subscriptions_);
  subscriptions_.clear();
  SyncSubscriptionsAwaiting();
  for (const auto& s : subs) {
    {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->phase == Subscription::State::Phase::kEnded) continue;
    }
    s->End(why, false, this);
    s->events.reset();
    s->bidi.reset();
  }
  router_.Clear();
  auto exchanges = std::move(exchanges_);
  exchanges_.clear();
  for (const auto& x : exchanges) FinishExchange(x, Unexpected(why));
  DropFinishedExchangeStreams();
  for (const auto& w : unattached_) {
    if (w->stream) w->stream->SetHandlers({});
    w->stream.reset();
  }
  unattached_.clear();
  loop_shut_down_ = true;
}

void Client::Impl::Keepalive() {
  std::optional<StreamRef> target;
  uint32_t features = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || broken_) return;
    target = last_stream_;
    features = server_.server_features;
  }
  if (target && (features & flx1::kFeatureStreamShards) && pending_.empty()) {
    flx1::StreamShards req;
    req.tenant_id = options.tenant_id;
    req.namespace_ = target->namespace_name;
    req.stream = target->stream;
    const uint64_t request_id = next_request_id_++;
    req.request_id = request_id;
    if (auto frame = flx1::EncodeMessageFrame(flx1::Message(std::move(req))))
      SendRequest(request_id, *frame, [](Answer) {});
  }
  endpoint_->RunAfter(options.keepalive_interval, [this] { Keepalive(); });
}

// ---- Publishing ----

ClientResult<void> Client::Impl::PublishAsync(const StreamRef& stream,
                                              const std::vector<std::string>& payloads,
                                              const PublishOptions& po,
                                              client_impl::PublishDone done) {
  if (payloads.empty())
    return Err<void>(ClientErrorCode::kInvalidArgument, "a publish needs at least one payload");
  if (stream.stream.empty() || stream.namespace_name.empty())
    return Err<void>(ClientErrorCode::kInvalidArgument, "empty namespace or stream name");
  const bool acked = po.ack != AckMode::kNone;
  uint16_t server_flags = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto bad = Unusable()) return Unexpected(*bad);
    server_flags = server_.server_flags;
    if (acked) {
      if (in_flight_ >= window_ && endpoint_->InLoopThread()) {
        ClientError e = MakeClientError(ClientErrorCode::kOverloaded,
                                        "publish window full (called from a client callback)");
        e.retry = RetryClass::kRetryAfter;
        return Unexpected(e);
      }
      bool room = window_cv_.wait_for(lock, options.request_timeout,
                                      [&] { return in_flight_ < window_ || closed_ || broken_; });
      if (auto bad = Unusable()) return Unexpected(*bad);
      if (!room) {
        ClientError e =
            MakeClientError(ClientErrorCode::kTimeout, "publish window stayed full; not sent");
        e.retry = RetryClass::kRetryAfter;
        return Unexpected(e);
      }
      ++in_flight_;
    }
    last_stream_ = stream;
  }
  auto release = [this, acked] {
    if (!acked) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ > 0) --in_flight_;
    window_cv_.notify_one();
  };

  const uint64_t id = acked ? next_request_id_++ : 0;
  std::vector<uint8_t> frame;
  Result<void> encoded = EncodePublish(stream, payloads, po, id, server_flags, frame);
  if (!encoded) {
    release();
    return Err<void>(ClientErrorCode::kInvalidArgument, "publish: " + encoded.error().message);
  }
  const size_t count = payloads.size();
  auto work = [this, id, acked, count, release, frame = std::move(frame),
               done = std::move(done)]() mutable {
    if (acked) {
      SendRequest(id, frame, [release, count, done = std::move(done)](Answer a) {
        release();
        if (!a) return done(Unexpected(a.error()), std::nullopt);
        done(PublishReceipt{a->offset, count}, std::move(a->owner));
      });
      return;
    }
    ClientResult<PublishReceipt> outcome = PublishReceipt{std::nullopt, count};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto bad = Unusable()) outcome = Unexpected(*bad);
    }
    if (outcome && !EnsureRequestStream())
      outcome = Err<PublishReceipt>(ClientErrorCode::kTransport, "connection lost");
    if (outcome) {
      auto wrote = request_stream_->Write(frame);
      if (!wrote) {
        outcome = Unexpected(
            client_impl::FromTransport(wrote.error(), "send", RetryClass::kOutcomeUnknown));
      } else if (!*wrote) {
        // Queued, but the backlog is at its high-water mark: done once it drains.
        backlogged_.push_back([done = std::move(done), count](std::optional<ClientError> why) {
          if (why) return done(Unexpected(*why), std::nullopt);
          done(PublishReceipt{std::nullopt, count}, std::nullopt);
        });
        return;
      }
    }
    done(std::move(outcome), std::nullopt);
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (!PostLocked(std::move(work))) {
    // Closed between the checks: nothing was sent.
    if (acked && in_flight_ > 0) --in_flight_;
    return Unexpected(Closed());
  }
  return {};
}

Result<void> Client::Impl::EncodePublish(const StreamRef& stream,
                                         const std::vector<std::string>& payloads,
                                         const PublishOptions& po, uint64_t id,
                                         uint16_t server_flags, std::vector<uint8_t>& out) const {
  const bool acked = po.ack != AckMode::kNone;
  const flx1::AckMode mode = po.ack == AckMode::kPerMessage ? flx1::AckMode::kPerMessage
                             : po.ack == AckMode::kPerBatch ? flx1::AckMode::kPerBatch
                                                            : flx1::AckMode::kNone;
  const bool keyed = po.key.has_value();
  const bool binary = (server_flags & flx1::kFlagBinaryPublishBatch) &&
                      (!acked || (server_flags & flx1::kFlagBinaryPublishAcked)) &&
                      (!keyed || (server_flags & flx1::kFlagBinaryPublishKeyed));
  if (binary) {
    flx1::BinaryPublishBatch batch;
    if (acked) batch.acked = flx1::BinaryPublishBatch::Acked{id, mode};
    if (keyed) batch.key = flx1::ByteView(*po.key);
    batch.tenant_id = options.tenant_id;
    batch.namespace_ = stream.namespace_name;
    batch.stream = stream.stream;
    batch.payloads.reserve(payloads.size());
    for (const auto& p : payloads) batch.payloads.emplace_back(p);
    return flx1::AppendFrame(flx1::Flx1Frame(std::move(batch)), out);
  }
  flx1::PublishBatch batch;
  batch.tenant_id = options.tenant_id;
  batch.namespace_ = stream.namespace_name;
  batch.stream = stream.stream;
  for (const auto& p : payloads) batch.payloads.emplace_back(p.begin(), p.end());
  if (keyed) batch.key = flx1::Bytes(po.key->begin(), po.key->end());
  if (acked) batch.request_id = id;
  batch.ack = mode;
  return flx1::AppendFrame(flx1::Flx1Frame(flx1::Message(std::move(batch))), out);
}

std::optional<ClientError> Client::Impl::QueueUnacked(
    const StreamRef& stream, const std::vector<std::string>& payloads, const PublishOptions& po,
    size_t charged, const std::shared_ptr<const client_impl::UnackedWritten>& written,
    bool* flush_due) {
  if (payloads.empty())
    return MakeClientError(ClientErrorCode::kInvalidArgument,
                           "a publish needs at least one payload");
  if (stream.stream.empty() || stream.namespace_name.empty())
    return MakeClientError(ClientErrorCode::kInvalidArgument, "empty namespace or stream name");
  size_t added = 0;
  for (const auto& p : payloads) added += 4 + p.size();
  std::lock_guard<std::mutex> lock(unacked_mu_);
  bool open = !unacked_batches_.empty() && unacked_batches_.back().open &&
              unacked_batches_.back().posts == posts_.load(std::memory_order_acquire);
  // A publish that would take the open batch past kUnackedBatchBytes starts the next batch, so
  // only a batch's first frame can pass it. Appended instead, it outgrew the buffer: the full
  // 64 KiB copied into a new one of 128 KiB, once per full batch (docs/performance.md, change 59).
  if (open && !unacked_batches_.back().frames.empty() &&
      unacked_batches_.back().frames.size() + added > kUnackedBatchBytes) {
    unacked_batches_.back().open = false;
    open = false;
  }
  if (!open) {
    UnackedBatch batch;
    if (!unacked_spare_.empty()) {
      batch.frames = std::move(unacked_spare_.back());
      unacked_spare_.pop_back();
    }
    // Sized for what the last batch came to: one begun without a spare buffer (the loop had
    // not yet handed the last one back) would otherwise grow from nothing, a copy each time.
    batch.frames.reserve(std::min(kUnackedBatchBytes, unacked_last_size_ + unacked_last_size_ / 2));
    {
      std::lock_guard<std::mutex> state(mu_);
      if (auto bad = Unusable()) return bad;
      // Its publisher writes it (kCallerFlushBytes): this one alone makes it due, or it wrote
      // the last batch itself.
      const bool publisher_writes =
          added >= kCallerFlushBytes || unacked_caller_flushes_.load(std::memory_order_relaxed);
      if (!PostLocked([this] { FlushUnacked(); }, publisher_writes)) return Closed();
      batch.posts = posts_.load(std::memory_order_relaxed);
      batch.server_flags = server_.server_flags;
      last_stream_ = stream;
    }
    batch.written = written;
    unacked_batches_.push_back(std::move(batch));
  }
  UnackedBatch& batch = unacked_batches_.back();
  const size_t before = batch.frames.size();
  // A run of publishes to one stream joins the frame the first of them started: one frame
  // header, one set of names encoded and checked, and one frame for the broker to decode, for
  // the whole run (docs/performance.md, change 44). Only while the batch stays under its size.
  // The frame is not read again for each publish: a fifth of the publisher's time at
  // fire-and-forget × 1 went to parsing its header and comparing its names (change 57).
  if (batch.joinable && !po.key.has_value() && before + added <= kUnackedBatchBytes &&
      stream.stream == batch.joinable_stream.stream &&
      stream.namespace_name == batch.joinable_stream.namespace_name) {
    if (auto joined = flx1::AppendToOpenPublishBatch(batch.frames, *batch.joinable, payloads);
        !joined) {
      return MakeClientError(ClientErrorCode::kInvalidArgument,
                             "publish: " + joined.error().message);
    }
    batch.charged += charged;
    unacked_last_size_ = batch.frames.size();
    if (batch.frames.size() >= kUnackedBatchBytes) batch.open = false;
    *flush_due = UnackedFlushDue();
    return std::nullopt;
  }
  if (auto encoded = EncodePublish(stream, payloads, po, 0, batch.server_flags, batch.frames);
      !encoded) {
    batch.frames.resize(before);
    return MakeClientError(ClientErrorCode::kInvalidArgument,
                           "publish: " + encoded.error().message);
  }
  // Binary and unkeyed: a plain publish batch frame that later publishes may join.
  batch.joinable.reset();
  if ((batch.server_flags & flx1::kFlagBinaryPublishBatch) && !po.key.has_value()) {
    batch.joinable = flx1::OpenPublishBatchFrame(batch.frames, before, options.tenant_id,
                                                 stream.namespace_name, stream.stream);
    if (batch.joinable) batch.joinable_stream = stream;
  }
  batch.charged += charged;
  unacked_last_size_ = batch.frames.size();
  // A full batch takes no more: what follows goes into the next one, written by its own task, so
  // no buffer grows past what one write should carry.
  if (batch.frames.size() >= kUnackedBatchBytes) batch.open = false;
  *flush_due = UnackedFlushDue();
  return std::nullopt;
}

bool Client::Impl::UnackedFlushDue() const {
  return drivable_ && (unacked_batches_.size() > 1 ||
                       unacked_batches_.back().frames.size() >= kCallerFlushBytes);
}

void Client::Impl::DriveUnackedFlush() {
  if (!drivable_ || !endpoint_) return;
  unacked_turn_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  const bool turned = endpoint_->DriveOneTurn();
  unacked_turn_thread_.store(std::thread::id(), std::memory_order_relaxed);
  if (turned) HandOverKeptUserCallbacks();
}

void Client::Impl::FlushUnacked() {
  // Who writes this batch writes the next: its publisher, in its turn, or the loop thread (or a
  // blocking call's drive), which the next batch's task then wakes.
  unacked_caller_flushes_.store(
      endpoint_->InDrive() &&
          unacked_turn_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id(),
      std::memory_order_relaxed);
  UnackedBatch batch;
  {
    // The last batch's buffer goes back under the same lock: the publisher, publishing fast,
    // holds it most of the time, and each time the loop waited for it the publisher's unlock
    // was a wake-up system call (change 58).
    std::lock_guard<std::mutex> lock(unacked_mu_);
    if (flushed_frames_.capacity() > 0) {
      if (unacked_spare_.size() < kUnackedSpareBuffers)
        unacked_spare_.push_back(std::move(flushed_frames_));
      flushed_frames_ = {};
    }
    for (auto& frames : returned_frames_) {
      if (unacked_spare_.size() >= kUnackedSpareBuffers) break;
      unacked_spare_.push_back(std::move(frames));
    }
    returned_frames_.clear();
    if (unacked_batches_.empty()) return;
    batch = std::move(unacked_batches_.front());
    unacked_batches_.pop_front();
  }
  if (batch.frames.empty()) return;  // its only publish failed to encode
  std::optional<ClientError> error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = Unusable();
  }
  if (!error && !EnsureRequestStream())
    error = MakeClientError(ClientErrorCode::kTransport, "connection lost");
  if (!error) {
    auto wrote = batch.frames.size() >= kUnackedHandOverBytes
                     ? request_stream_->WriteOwned(std::move(batch.frames))
                     : request_stream_->Write(batch.frames);
    if (wrote) unacked_on_stream_ = batch.written;
    if (!wrote) {
      error = client_impl::FromTransport(wrote.error(), "send", RetryClass::kOutcomeUnknown);
    } else if (!*wrote) {
      // A publisher writing its own batches leaves the rest to the loop thread: the backlog
      // drains as the broker's acknowledgements come, which it reads as they come, and a post
      // made in a drive unparks it when the drive ends.
      if (endpoint_->InDrive()) {
        unacked_caller_flushes_.store(false, std::memory_order_relaxed);
        endpoint_->Post([] {});
      }
      // Queued, but the backlog is at its high-water mark: done once it drains.
      backlogged_.push_back([written = std::move(batch.written),
                             charged = batch.charged](std::optional<ClientError> why) {
        (*written)(charged, std::move(why));
      });
    }
  }
  if (batch.written) (*batch.written)(batch.charged, std::move(error));
  // Kept for a later batch unless one publish made it large: an idle connection holds little.
  if (batch.frames.capacity() > 2 * kUnackedBatchBytes) return;
  batch.frames.clear();
  flushed_frames_ = std::move(batch.frames);
}

ClientResult<RequestAnswer> Client::Impl::WaitAnswer(client_impl::AnswerSlot<Answer>& answer,
                                                     std::chrono::milliseconds timeout,
                                                     RetryClass timeout_class) {
  AwaitingLoop(+1);
  const bool ready = client_impl::AwaitReady(answer, options.spin_wait, timeout);
  AwaitingLoop(-1);
  if (!ready) {
    ClientError e = MakeClientError(ClientErrorCode::kTimeout,
                                    "no answer within " + std::to_string(timeout.count()) + " ms");
    e.retry = timeout_class;
    return Unexpected(e);
  }
  return answer.Take();
}

ClientResult<ShardInfo> Client::Impl::StreamShards(const StreamRef& stream) {
  const std::string key = stream.ToString();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto bad = Unusable()) return Unexpected(*bad);
    if (auto it = shard_cache_.find(key); it != shard_cache_.end()) return it->second;
    if (!(server_.server_features & flx1::kFeatureStreamShards))
      return Err<ShardInfo>(ClientErrorCode::kUnsupported,
                            "the broker does not answer stream_shards");
  }
  flx1::StreamShards req;
  req.tenant_id = options.tenant_id;
  req.namespace_ = stream.namespace_name;
  req.stream = stream.stream;
  req.request_id = next_request_id_++;
  auto frame = flx1::EncodeMessageFrame(flx1::Message(req));
  if (!frame)
    return Err<ShardInfo>(ClientErrorCode::kInvalidArgument,
                          "stream_shards: " + frame.error().message);
  auto answer = std::make_shared<client_impl::AnswerSlot<Answer>>();
  if (!Post([this, id = req.request_id, frame = std::move(*frame), answer] {
        SendRequest(id, frame, [answer](Answer a) { answer->Set(std::move(a)); });
      }))
    return Unexpected(Closed());
  auto a = WaitAnswer(*answer, options.request_timeout, RetryClass::kRetry);
  if (!a) return Unexpected(a.error());
  if (a->shards.shards > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    shard_cache_[key] = a->shards;
  }
  return a->shards;
}

// ---- Subscribing ----

ClientResult<std::shared_ptr<Subscription::State>> Client::Impl::Subscribe(
    const StreamRef& stream, const SubscribeOptions& so) {
  if (stream.stream.empty() || stream.namespace_name.empty())
    return Err<std::shared_ptr<Subscription::State>>(ClientErrorCode::kInvalidArgument,
                                                     "empty namespace or stream name");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto bad = Unusable()) return Unexpected(*bad);
    // An older broker would ignore `start` and silently begin at the tail.
    if (so.start.kind() != StartPosition::Kind::kLatest &&
        !(server_.server_flags & flx1::kFlagEventBatchOffsets))
      return Err<std::shared_ptr<Subscription::State>>(
          ClientErrorCode::kUnsupported, "the broker cannot start a subscription at an offset");
    last_stream_ = stream;
  }
  auto state = std::make_shared<Subscription::State>(
      stream, so.shard, options.subscription_queue_capacity, options.max_frame_bytes,
      weak_from_this(), options.spin_wait, so.on_event);
  if (!Post([this, state, so] { OpenSubscription(state, so); })) return Unexpected(Closed());
  std::unique_lock<std::mutex> lock(state->mu);
  bool answered = state->cv.wait_for(lock, options.request_timeout, [&] {
    return state->phase != Subscription::State::Phase::kOpening;
  });
  if (!answered) {
    lock.unlock();
    CloseSubscription(state);
    ClientError e = MakeClientError(
        ClientErrorCode::kTimeout,
        "no answer to subscribe within " + std::to_string(options.request_timeout.count()) + " ms");
    e.retry = RetryClass::kRetry;
    return Unexpected(e);
  }
  if (state->phase == Subscription::State::Phase::kEnded && state->queue.empty() &&
      state->id == 0 && state->error)
    return Unexpected(*state->error);
  return state;
}

void Client::Impl::SyncSubscriptionsAwaiting() {
  const bool awaiting = !subscriptions_.empty();
  if (awaiting == subscriptions_awaiting_) return;
  subscriptions_awaiting_ = awaiting;
  if (drivable_ && endpoint_) endpoint_->KeepLoopAwake(awaiting ? +1 : -1);
}

void Client::Impl::OpenSubscription(std::shared_ptr<Subscription::State> state,
                                    const SubscribeOptions& so) {
  if (!conn_ || !conn_->is_open())
    return FailOpening(state, MakeClientError(ClientErrorCode::kTransport, "connection lost"));
  auto stream = conn_->OpenBidiStream();
  if (!stream)
    return FailOpening(state, client_impl::FromTransport(stream.error(), "open subscribe stream",
                                                         RetryClass::kRetry));
  state->bidi = *stream;
  subscriptions_.insert(state);
  SyncSubscriptionsAwaiting();
  state->bidi->SetHandlers(transport::StreamHandlers{
      .on_data = [this, state](transport::Stream& s,
                               std::span<const uint8_t> data) { OnSubscribeData(state, s, data); },
      .on_fin =
          [this, state](transport::Stream&) {
            FailOpening(state, MakeClientError(ClientErrorCode::kTransport,
                                               "the broker ended the subscribe stream without "
                                               "answering"));
          },
      .on_reset =
          [this, state](transport::Stream&, uint64_t code) {
            FailOpening(state, MakeClientError(ClientErrorCode::kTransport,
                                               "the subscribe stream was reset (code " +
                                                   std::to_string(code) + ")"));
          },
      .on_writable = nullptr,
  });
  flx1::Subscribe sub;
  sub.tenant_id = options.tenant_id;
  sub.namespace_ = state->stream.namespace_name;
  sub.stream = state->stream.stream;
  switch (so.start.kind()) {
    case StartPosition::Kind::kLatest:
      break;  // absent = latest
    case StartPosition::Kind::kEarliest:
      sub.start = flx1::StartPosition{flx1::StartPosition::Kind::kEarliest, 0};
      break;
    case StartPosition::Kind::kOffset:
      sub.start = flx1::StartPosition{flx1::StartPosition::Kind::kOffset, so.start.offset()};
      break;
  }
  if (so.shard != 0) sub.shard = so.shard;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (so.broker_queue_capacity && (server_.server_features & flx1::kFeatureSubscribeQueue))
      sub.queue_capacity = so.broker_queue_capacity;
  }
  std::vector<uint8_t> bytes = AuthFrame();
  auto encoded = flx1::AppendFrame(flx1::Flx1Frame(flx1::Message(std::move(sub))), bytes);
  if (!encoded)
    return FailOpening(state, MakeClientError(ClientErrorCode::kInvalidArgument,
                                              "subscribe: " + encoded.error().message));
  auto wrote = state->bidi->Write(bytes);
  if (!wrote)
    return FailOpening(state,
                       client_impl::FromTransport(wrote.error(), "subscribe", RetryClass::kRetry));
  state->bidi->Finish();
}

void Client::Impl::FailOpening(std::shared_ptr<Subscription::State> state, ClientError why) {
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->phase != Subscription::State::Phase::kOpening) return;
  }
  state->End(std::move(why), false, this);
  if (state->bidi) state->bidi->Reset(0);
  state->bidi.reset();
  subscriptions_.erase(state);
  SyncSubscriptionsAwaiting();
}

void Client::Impl::OnSubscribeData(std::shared_ptr<Subscription::State> state,
                                   transport::Stream& stream, std::span<const uint8_t> data) {
  auto fed = state->bidi_reader.Feed(data, [&](uint16_t flags, std::span<const uint8_t> p) {
    return OnSubscribeFrame(state, flags, p);
  });
  if (fed.consume) stream.Consume(fed.consume);
  if (fed.error) FailOpening(state, *fed.error);
}

Verdict Client::Impl::OnSubscribeFrame(std::shared_ptr<Subscription::State> state, uint16_t flags,
                                       std::span<const uint8_t> payload) {
  auto frame = flx1::DecodePayload(flags, payload);
  if (!frame) {
    FailOpening(state, client_impl::FromDecode(frame.error(), "subscribe answer"));
    return Verdict::kStop;
  }
  auto* message = std::get_if<flx1::Message>(&*frame);
  if (!message) {
    FailOpening(
        state, MakeClientError(ClientErrorCode::kProtocol, "binary frame on the subscribe stream"));
    return Verdict::kStop;
  }
  if (std::holds_alternative<flx1::AuthOk>(*message) || std::holds_alternative<flx1::Ok>(*message))
    return Verdict::kAccept;
  if (auto* e = std::get_if<flx1::Error>(message)) {
    FailOpening(state, client_impl::FromErrorMessage(*e, RetryClass::kFatal));
    return Verdict::kStop;
  }
  if (auto* e = std::get_if<flx1::SubscribeCursorError>(message)) {
    FailOpening(state, client_impl::FromCursorError(*e));
    return Verdict::kStop;
  }
  if (auto* e = std::get_if<flx1::NotLeader>(message)) {
    FailOpening(state, client_impl::FromNotLeader(*e));
    return Verdict::kStop;
  }
  if (auto* ok = std::get_if<flx1::Subscribed>(message)) {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->phase != Subscription::State::Phase::kOpening) return Verdict::kStop;
      state->phase = Subscription::State::Phase::kActive;
      state->id = ok->subscription_id;
      state->start_offset = ok->start_offset;
      state->live_offset = ok->live_offset;
      state->cv.notify_all();
    }
    // The broker finishes the subscribe stream after answering; nothing more to read.
    state->bidi->SetHandlers({});
    state->bidi.reset();
    if (auto waiting = router_.OnSubscribed(ok->subscription_id, state)) {
      auto stream = waiting->stream;
      std::erase_if(unattached_, [&](const auto& w) { return w->stream == stream; });
      Attach(state, *waiting);
    }
    return Verdict::kStop;
  }
  return Verdict::kAccept;  // anything else: ignored
}

void Client::Impl::OnIncomingStream(const std::shared_ptr<transport::Stream>& stream) {
  if (!stream->is_unidirectional() || loop_shut_down_) {
    // The broker opens only event streams; and after shutdown nobody would release this one
    // (its handlers would keep it, and through it the connection, alive: a leak under ASan).
    stream->Reset(0);
    return;
  }
  auto waiting = std::make_shared<WaitingEvents>();
  waiting->stream = stream;
  waiting->reader = std::make_shared<FrameReader>(options.max_frame_bytes);
  unattached_.insert(waiting);
  stream->SetHandlers(transport::StreamHandlers{
      .on_data = [this, waiting](transport::Stream& s,
                                 std::span<const uint8_t> data) { OnHelloData(waiting, s, data); },
      .on_fin = [waiting](transport::Stream&) { waiting->fin = true; },
      .on_reset = [waiting](transport::Stream&, uint64_t code) { waiting->reset = code; },
      .on_writable = nullptr,
  });
}

void Client::Impl::OnHelloData(std::shared_ptr<WaitingEvents> waiting, transport::Stream& stream,
                               std::span<const uint8_t> data) {
  std::optional<uint64_t> id;
  bool bad = false;
  auto fed = waiting->reader->Feed(data, [&](uint16_t flags, std::span<const uint8_t> p) {
    if (id) return Verdict::kPause;  // the rest waits for the subscription
    auto frame = flx1::DecodePayload(flags, p);
    const flx1::Message* m = frame ? std::get_if<flx1::Message>(&*frame) : nullptr;
    const auto* hello = m ? std::get_if<flx1::EventStreamHello>(m) : nullptr;
    if (!hello) {
      bad = true;
      return Verdict::kStop;
    }
    id = hello->subscription_id;
    return Verdict::kAccept;
  });
  if (fed.consume) stream.Consume(fed.consume);
  if (fed.error || bad) {
    stream.Reset(0);
    stream.SetHandlers({});
    unattached_.erase(waiting);
    return;
  }
  if (!id) return;
  // Stop reading until the stream has its subscription.
  stream.SetHandlers(transport::StreamHandlers{
      .on_data = nullptr,
      .on_fin = [waiting](transport::Stream&) { waiting->fin = true; },
      .on_reset = [waiting](transport::Stream&, uint64_t code) { waiting->reset = code; },
      .on_writable = nullptr,
  });
  std::optional<WaitingEvents> evicted;
  if (auto state = router_.OnHello(*id, *waiting, &evicted)) {
    unattached_.erase(waiting);
    Attach(*state, *waiting);
  }
  if (evicted && evicted->stream) {
    auto gone = evicted->stream;
    gone->Reset(0);
    gone->SetHandlers({});
    std::erase_if(unattached_, [&](const auto& w) { return w->stream == gone; });
  }
}

void Client::Impl::Attach(std::shared_ptr<Subscription::State> state,
                          const WaitingEvents& waiting) {
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->phase == Subscription::State::Phase::kEnded) {
      // Its handlers hold `waiting`, which holds the stream (and through it the connection):
      // cleared, or the cycle outlives the client (LeakSanitizer).
      waiting.stream->Reset(0);
      waiting.stream->SetHandlers({});
      return;
    }
  }
  state->events = waiting.stream;
  state->event_reader = waiting.reader;
  if (waiting.reset) {
    return EndSubscription(state, MakeClientError(ClientErrorCode::kStreamEnded,
                                                  "the event stream was reset (code " +
                                                      std::to_string(*waiting.reset) + ")"));
  }
  InstallEventHandlers(state);
  if (waiting.fin && waiting.stream->received_buffered() == 0 && state->event_reader->held() == 0)
    EndSubscription(
        state, MakeClientError(ClientErrorCode::kStreamEnded, "the broker ended the event stream"));
}

void Client::Impl::InstallEventHandlers(std::shared_ptr<Subscription::State> state) {
  if (!state->events) return;
  // Re-installing handlers makes the transport deliver what it holds unconsumed again.
  state->events->SetHandlers(transport::StreamHandlers{
      .on_data = [this, state](transport::Stream&,
                               std::span<const uint8_t> data) { OnEventData(state, data); },
      .on_fin =
          [this, state](transport::Stream&) {
            EndSubscription(state, MakeClientError(ClientErrorCode::kStreamEnded,
                                                   "the broker ended the event stream"));
          },
      .on_reset =
          [this, state](transport::Stream&, uint64_t code) {
            ClientError e = MakeClientError(
                ClientErrorCode::kStreamEnded,
                code == 1 ? std::string("the broker stopped serving the shard")
                          : "the event stream was reset (code " + std::to_string(code) + ")");
            EndSubscription(state, e);
          },
      .on_writable = nullptr,
  });
}

void Client::Impl::OnEventData(std::shared_ptr<Subscription::State> state,
                               std::span<const uint8_t> data) {
  if (!state->events || !state->event_reader) return;
  auto stream = state->events;
  auto fed = state->event_reader->Feed(data, [&](uint16_t flags, std::span<const uint8_t> p) {
    return OnEventFrame(state, flags, p);
  });
  if (fed.consume) stream->Consume(fed.consume);
  if (fed.error) EndSubscription(state, *fed.error);
}

Verdict Client::Impl::OnEventFrame(std::shared_ptr<Subscription::State> state, uint16_t flags,
                                   std::span<const uint8_t> payload) {
  {
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->phase == Subscription::State::Phase::kEnded) return Verdict::kStop;
    if (state->queue.size() >= state->capacity) {
      state->paused = true;
      return Verdict::kPause;
    }
  }
  auto frame = flx1::DecodePayload(flags, payload);
  if (!frame) {
    EndSubscription(state, client_impl::FromDecode(frame.error(), "event stream"));
    return Verdict::kStop;
  }
  std::vector<Event> events;
  if (auto* batch = std::get_if<flx1::BinaryEventBatch>(&*frame)) {
    if (batch->subscription_id && *batch->subscription_id != state->id) {
      EndSubscription(state, MakeClientError(ClientErrorCode::kProtocol,
                                             "event batch for another subscription"));
      return Verdict::kStop;
    }
    events.reserve(batch->events.size());
    uint64_t i = 0;
    for (const auto& item : batch->events) {
      Event e;
      if (batch->base_offset) e.offset = *batch->base_offset + i;
      e.payload = std::string(item.payload);
      if (batch->has_timestamps) e.timestamp_micros = item.timestamp_micros;
      if (batch->publisher) e.publisher = std::string(*batch->publisher);
      if (i == 0 && batch->skipped_before) e.skipped_before = *batch->skipped_before;
      events.push_back(std::move(e));
      ++i;
    }
  } else if (auto* message = std::get_if<flx1::Message>(&*frame)) {
    if (auto* ev = std::get_if<flx1::Event>(message)) {
      Event e;
      e.offset = ev->offset;
      e.payload.assign(ev->payload.begin(), ev->payload.end());
      events.push_back(std::move(e));
    } else if (auto* eb = std::get_if<flx1::EventBatch>(message)) {
      uint64_t i = 0;
      for (const auto& p : eb->payloads) {
        Event e;
        if (eb->base_offset) e.offset = *eb->base_offset + i;
        e.payload.assign(p.begin(), p.end());
        events.push_back(std::move(e));
        ++i;
      }
    } else if (auto* lagged = std::get_if<flx1::SubscriptionLagged>(message)) {
      ClientError e = MakeClientError(ClientErrorCode::kLagged,
                                      "the broker dropped records for this slow subscription");
      e.resume_from = lagged->resume_from;
      EndSubscription(state, e);
      return Verdict::kStop;
    } else if (auto* error = std::get_if<flx1::Error>(message)) {
      // The broker could not serve the subscription any further (e.g. a corrupt record in its
      // log): the message names the offset and the file. Never read past it silently.
      EndSubscription(state, client_impl::FromErrorMessage(*error, RetryClass::kFatal));
      return Verdict::kStop;
    } else if (auto* moved = std::get_if<flx1::ShardMoved>(message)) {
      ClientError e = MakeClientError(
          ClientErrorCode::kShardMoved,
          "the shard moved" + (moved->addr ? " to " + *moved->addr : std::string()));
      e.resume_from = moved->resume_from;
      EndSubscription(state, e);
      return Verdict::kStop;
    }
  } else {
    EndSubscription(state, MakeClientError(ClientErrorCode::kProtocol,
                                           "unexpected binary frame on the event stream"));
    return Verdict::kStop;
  }
  if (events.empty()) return Verdict::kAccept;
  if (state->on_event) {
    state->Deliver(std::move(events), this);
    return Verdict::kAccept;
  }
  std::lock_guard<std::mutex> lock(state->mu);
  for (auto& e : events) state->queue.push_back(std::move(e));
  state->cv.notify_all();
  return Verdict::kAccept;
}

void Client::Impl::EndSubscription(std::shared_ptr<Subscription::State> state, ClientError why) {
  state->End(std::move(why), false, this);
  if (state->events) {
    state->events->SetHandlers({});
    if (!state->events->closed()) state->events->Reset(0);
  }
  state->events.reset();
  state->event_reader.reset();
  subscriptions_.erase(state);
  SyncSubscriptionsAwaiting();
}

void Client::Impl::ResumeEvents(std::shared_ptr<Subscription::State> state) {
  Post([this, state] {
    if (!state->events) return;
    OnEventData(state, {});  // a paused frame the reader holds
    InstallEventHandlers(state);
  });
}

void Client::Impl::CloseSubscription(std::shared_ptr<Subscription::State> state) {
  state->End(Closed(), true);
  Post([this, state] {
    if (state->bidi) state->bidi->Reset(0);
    state->bidi.reset();
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      id = state->id;
    }
    if (id) router_.Forget(id);
    EndSubscription(state, Closed());
  });
}

// ---- Requests on streams of their own (consumer groups) ----

// Shared by the exchange set and its stream's handlers (StreamHandlers::owner), which reach it
// by raw pointer: a handler capturing the shared_ptr itself is a heap allocation each.
struct Client::Impl::OwnStreamExchange : std::enable_shared_from_this<OwnStreamExchange> {
  OwnStreamExchange(std::vector<uint8_t> f, ExchangeDone d)
      : frame(std::move(f)), done(std::move(d)) {}
  std::vector<uint8_t> frame;
  ExchangeDone done;
  std::shared_ptr<transport::Stream> stream;
  std::optional<FrameReader> reader;
  bool authenticated = false;
  size_t slot = SIZE_MAX;  // index in Impl::exchanges_ while listed there
};

bool Client::Impl::ExchangeOnOwnStream(std::vector<uint8_t> frame, ExchangeDone done) {
  auto exchange = std::make_shared<OwnStreamExchange>(std::move(frame), std::move(done));
  return Post([this, exchange] { OpenExchange(exchange); });
}

bool Client::Impl::ExchangesOnOwnStreams(std::vector<OwnStreamFrame>& requests) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || !endpoint_) return false;  // PostLocked's own refusal, checked before the move
  std::vector<std::shared_ptr<OwnStreamExchange>> exchanges;
  exchanges.reserve(requests.size());
  for (auto& [frame, done] : requests) {
    exchanges.push_back(std::make_shared<OwnStreamExchange>(std::move(frame), std::move(done)));
  }
  return PostLocked([this, exchanges = std::move(exchanges)] {
    for (const auto& exchange : exchanges) OpenExchange(exchange);
  });
}

void Client::Impl::OpenExchange(std::shared_ptr<OwnStreamExchange> exchange) {
  if (!conn_ || !conn_->is_open())
    return FinishExchange(exchange,
                          Err<flx1::Message>(ClientErrorCode::kTransport, "connection lost"));
  auto stream = conn_->OpenBidiStream();
  if (!stream)
    return FinishExchange(
        exchange, Unexpected(client_impl::FromTransport(stream.error(), "open request stream",
                                                        RetryClass::kRetry)));
  exchange->stream = *stream;
  exchange->reader.emplace(options.max_frame_bytes);
  exchange->slot = exchanges_.size();
  exchanges_.push_back(exchange);
  // Alive while the handlers are (their owner). Each handler captures [this, x] only: two
  // pointers fit a std::function without a heap allocation.
  OwnStreamExchange* x = exchange.get();
  exchange->stream->SetHandlers(transport::StreamHandlers{
      .on_data =
          [this, x](transport::Stream& s, std::span<const uint8_t> data) {
            OwnStreamExchange* exchange = x;
            std::optional<ClientResult<flx1::Message>> result;
            auto fed =
                exchange->reader->Feed(data, [&](uint16_t flags, std::span<const uint8_t> p) {
                  auto frame = flx1::DecodePayload(flags, p);
                  flx1::Message* m = frame ? std::get_if<flx1::Message>(&*frame) : nullptr;
                  if (m == nullptr) {
                    result = Err<flx1::Message>(ClientErrorCode::kProtocol,
                                                "undecodable answer on a request stream");
                    return Verdict::kStop;
                  }
                  if (!exchange->authenticated) {
                    if (std::holds_alternative<flx1::AuthOk>(*m) ||
                        std::holds_alternative<flx1::Ok>(*m)) {
                      exchange->authenticated = true;
                      return Verdict::kAccept;
                    }
                  }
                  result = std::move(*m);  // the answer (or an `error`, mapped by the caller)
                  return Verdict::kStop;
                });
            if (fed.consume) s.Consume(fed.consume);
            if (fed.error) result = Unexpected(*fed.error);
            if (result) FinishExchange(exchange->shared_from_this(), std::move(*result), true);
          },
      .on_fin =
          [this, x](transport::Stream&) {
            // The usual end: the broker finishes the stream right after its answer, which
            // finished the exchange (no error is built for nobody).
            if (!x->done) return;
            FinishExchange(x->shared_from_this(),
                           Err<flx1::Message>(ClientErrorCode::kTransport,
                                              "the broker ended the request stream"),
                           true);
          },
      .on_reset =
          [this, x](transport::Stream&, uint64_t code) {
            if (!x->done) return;
            FinishExchange(x->shared_from_this(),
                           Err<flx1::Message>(
                               ClientErrorCode::kTransport,
                               "the request stream was reset (code " + std::to_string(code) + ")"),
                           true);
          },
      .on_writable = nullptr,
      .owner = exchange,
  });
  // Joined in one allocation of their size (which the send buffer's chunk then matches): a
  // copy grown from the `auth` frame's was a third allocation, and a large-bin one.
  std::vector<uint8_t> bytes;
  bytes.reserve(AuthFrame().size() + exchange->frame.size());
  bytes.insert(bytes.end(), AuthFrame().begin(), AuthFrame().end());
  bytes.insert(bytes.end(), exchange->frame.begin(), exchange->frame.end());
  auto wrote = exchange->stream->Write(bytes);
  if (!wrote)
    return FinishExchange(exchange, Unexpected(client_impl::FromTransport(
                                        wrote.error(), "send", RetryClass::kOutcomeUnknown)));
  exchange->stream->Finish();  // one request per stream
}

void Client::Impl::DropFinishedExchangeStreams() {
  auto streams = std::move(finished_exchange_streams_);
  finished_exchange_streams_.clear();
  for (const auto& stream : streams) {
    stream->SetHandlers({});
    if (!stream->closed()) stream->Reset(0);
  }
}

void Client::Impl::FinishExchange(std::shared_ptr<OwnStreamExchange> exchange,
                                  ClientResult<flx1::Message> result, bool in_handler) {
  if (!exchange->done) return;
  auto done = std::move(exchange->done);
  exchange->done = nullptr;
  if (auto stream = std::move(exchange->stream)) {
    // A handler must not destroy itself while it runs: drop it from the loop afterwards (or
    // from FailEverything, whichever comes first).
    finished_exchange_streams_.push_back(std::move(stream));
    if (in_handler && endpoint_) {
      // One drop for every stream finished before it runs (a window of acks answered in one
      // packet posted one per answer before).
      if (finished_exchange_streams_.size() == 1) {
        endpoint_->Post([this] { DropFinishedExchangeStreams(); });
      }
    } else {
      DropFinishedExchangeStreams();
    }
  }
  if (exchange->slot < exchanges_.size() && exchanges_[exchange->slot] == exchange) {
    // Not listed any more once shutdown took the list (FailEverything).
    const size_t at = exchange->slot;
    if (at + 1 != exchanges_.size()) {
      exchanges_[at] = std::move(exchanges_.back());
      exchanges_[at]->slot = at;
    }
    exchanges_.pop_back();
  }
  exchange->slot = SIZE_MAX;
  done(std::move(result));
}

namespace client_impl {

void StartExchangesOnOwnStreams(Client::Impl& impl, std::vector<OwnStreamRequest> requests) {
  std::vector<Client::Impl::OwnStreamFrame> encoded;
  encoded.reserve(requests.size());
  // Rendered into one buffer in turn, each frame then copied out at its size: an allocation per
  // request rather than one per doubling of a string and another for the copy (a window of
  // `GroupAckAll`'s acks; docs/performance.md change 73).
  std::string rendered;
  for (auto& [request, done] : requests) {
    rendered.clear();
    if (auto appended = flx1::AppendMessageFrame(request, rendered); !appended) {
      done(Err<flx1::Message>(ClientErrorCode::kInvalidArgument, appended.error().message));
      continue;
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(rendered.data());
    encoded.emplace_back(std::vector<uint8_t>(bytes, bytes + rendered.size()), std::move(done));
  }
  if (encoded.empty() || impl.ExchangesOnOwnStreams(encoded)) return;
  // A closed client took none: each is answered here as its blocking form would be.
  for (auto& [frame, done] : encoded) done(Unexpected(Closed()));
}

ClientResult<flx1::Message> ExchangeOnOwnStream(Client::Impl& impl, const flx1::Message& request,
                                                std::chrono::milliseconds timeout) {
  auto frame = flx1::EncodeMessageFrame(request);
  if (!frame) return Err<flx1::Message>(ClientErrorCode::kInvalidArgument, frame.error().message);
  auto answer = std::make_shared<client_impl::AnswerSlot<ClientResult<flx1::Message>>>();
  bool posted = false;
  auto send = [&] {
    posted = impl.ExchangeOnOwnStream(
        std::move(*frame), [answer](ClientResult<flx1::Message> r) { answer->Set(std::move(r)); });
  };
  // ClientOptions::caller_runs_io: this thread opens the stream and reads the answer itself.
  const bool ready = client_impl::SendAndAwait(
      &impl, send, [&] { return posted; }, *answer, impl.options.spin_wait, timeout);
  if (!posted) return Unexpected(Closed());
  if (!ready) {
    ClientError e = MakeClientError(ClientErrorCode::kTimeout,
                                    "no answer within " + std::to_string(timeout.count()) + " ms");
    e.retry = RetryClass::kOutcomeUnknown;
    return Unexpected(e);
  }
  return answer->Take();
}

const ClientOptions& OptionsOf(const Client::Impl& impl) {
  return impl.options;
}

uint32_t ServerFeaturesOf(const Client::Impl& impl) {
  return impl.server().server_features;
}

uint64_t NextRequestId(Client::Impl& impl) {
  return impl.NextRequestId();
}

}  // namespace client_impl

// ---------------------------------------------------------------------------------------------
// Public classes

namespace client_impl {

ClientResult<Connection> DialBroker(ClientOptions options) {
  auto impl = std::make_shared<Client::Impl>(std::move(options));
  if (auto started = impl->Start(); !started) return Unexpected(started.error());
  return impl;
}

void CloseConnection(Client::Impl& impl) {
  impl.Close();
}

bool FinishRequestStream(Client::Impl& impl, std::chrono::steady_clock::time_point deadline) {
  return impl.FinishRequestStream(deadline);
}

bool Usable(const Client::Impl& impl) {
  return impl.Usable();
}

void RunUserCallback(Client::Impl& impl, std::function<void()> fn) {
  impl.RunUserCallback(std::move(fn));
}

bool OnIoThread(const Client::Impl& impl) {
  return impl.InLoopThread();
}

const std::string& AddressOf(const Client::Impl& impl) {
  return impl.options.broker;
}

ServerInfo ServerInfoOf(const Client::Impl& impl) {
  return impl.server();
}

ClientResult<void> PublishOn(Client::Impl& impl, const StreamRef& stream,
                             const std::vector<std::string>& payloads, const PublishOptions& po,
                             PublishDone done) {
  return impl.PublishAsync(stream, payloads, po, std::move(done));
}

std::optional<ClientError> QueueUnackedOn(Client::Impl& impl, const StreamRef& stream,
                                          const std::vector<std::string>& payloads,
                                          const PublishOptions& po, size_t charged,
                                          const std::shared_ptr<const UnackedWritten>& written) {
  bool flush_due = false;
  auto r = impl.QueueUnacked(stream, payloads, po, charged, written, &flush_due);
  if (!r && flush_due) impl.DriveUnackedFlush();
  return r;
}

ClientResult<ShardInfo> StreamShardsOn(Client::Impl& impl, const StreamRef& stream) {
  return impl.StreamShards(stream);
}

std::optional<ShardInfo> CachedStreamShards(const Client::Impl& impl, const StreamRef& stream) {
  return impl.CachedStreamShards(stream);
}

ClientResult<std::shared_ptr<Subscription::State>> SubscribeOn(Client::Impl& impl,
                                                               const StreamRef& stream,
                                                               const SubscribeOptions& so) {
  return impl.Subscribe(stream, so);
}

}  // namespace client_impl

Client::Client(std::shared_ptr<Router> router) : router_(std::move(router)) {}

Client::~Client() {
  if (router_) router_->Close();
}

ClientResult<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  auto router = Router::Connect(std::move(options));
  if (!router) return Unexpected(router.error());
  return std::unique_ptr<Client>(new Client(std::move(*router)));
}

ClientResult<PublishReceipt> Client::Publish(const StreamRef& stream,
                                             const std::vector<std::string>& payloads,
                                             const PublishOptions& options) {
  if (options.ack == AckMode::kNone) return router_->PublishUnacked(stream, payloads, options);
  auto outcome = std::make_shared<client_impl::AnswerSlot<ClientResult<PublishReceipt>>>();
  auto sent_to = std::make_shared<Router::SentTo>();
  // In a cluster each attempt may wait request_timeout (retries included).
  const auto& o = router_->options();
  auto wait = o.request_timeout * (router_->cluster() ? std::max<uint32_t>(1, o.max_attempts) : 1);
  ClientResult<void> queued = Unexpected(Closed());
  auto send = [&] {
    queued = router_->PublishAsync(
        stream, payloads, options,
        [outcome](ClientResult<PublishReceipt> r) { outcome->Set(std::move(r)); },
        /*user_callback=*/false, sent_to);
  };
  // ClientOptions::caller_runs_io: this thread sends and reads the answer itself on the
  // connection the publish is routed to now; once it went to another one, or an attempt's
  // outcome came back without the answer (a failure retried elsewhere or later, on the retry
  // thread), the rest is awaited as usual.
  client_impl::Connection conn;
  if (o.caller_runs_io && router_->cluster()) {
    const Router::Target target{
        {client_impl::NameKind::kStream, stream.namespace_name, stream.stream},
        std::nullopt,
        options.key,
        true};
    conn = router_->Resolve(target).conn;
  } else if (o.caller_runs_io) {
    conn = router_->Home();
  }
  const bool ready = client_impl::SendAndAwait(
      conn.get(), send, [&] { return bool(queued); }, *outcome, o.spin_wait, wait,
      [&] { return sent_to->answered.load() || sent_to->conn.load() != conn.get(); });
  if (!queued) return Unexpected(queued.error());
  if (!ready) {
    std::string addr;
    {
      std::lock_guard<std::mutex> lock(sent_to->mu);
      addr = sent_to->addr;
    }
    router_->Unanswered(addr);  // perhaps a dead owner: the next publish goes elsewhere
    ClientError e =
        MakeClientError(ClientErrorCode::kTimeout,
                        "no acknowledgement within " + std::to_string(wait.count()) + " ms");
    e.retry = RetryClass::kOutcomeUnknown;
    return Unexpected(options.ack == AckMode::kNone ? e : AsWriteOutcome(e));
  }
  return outcome->Take();
}

ClientResult<void> Client::PublishAsync(const StreamRef& stream,
                                        const std::vector<std::string>& payloads,
                                        const PublishOptions& options, PublishCallback done) {
  if (!done) done = [](ClientResult<PublishReceipt>) {};
  return router_->PublishAsync(stream, payloads, options, std::move(done), /*user_callback=*/true);
}

ClientResult<ShardInfo> Client::StreamShards(const StreamRef& stream) {
  return router_->Home()->StreamShards(stream);
}

ClientResult<uint32_t> Client::ShardForKey(const StreamRef& stream, std::string_view key) {
  auto info = StreamShards(stream);
  if (!info) return Unexpected(info.error());
  if (info->shards == 0)
    return Err<uint32_t>(ClientErrorCode::kNotFound,
                         "the broker knows no stream " + stream.ToString());
  return info->jump_hash ? wire::ShardJump(info->shards, key)
                         : wire::ShardModulo(info->shards, key);
}

ClientResult<std::unique_ptr<Subscription>> Client::Subscribe(const StreamRef& stream,
                                                              const SubscribeOptions& options) {
  // To the shard's owner when known, else any broker; a `not_leader` is followed (at most
  // kMaxRedirects hops, never back to a broker already tried) and remembered.
  Router::Target target{{client_impl::NameKind::kStream, stream.namespace_name, stream.stream},
                        options.shard,
                        std::nullopt,
                        false};
  auto state = router_->Call<std::shared_ptr<Subscription::State>>(
      target, true, false,
      [&](Impl& conn) { return client_impl::SubscribeOn(conn, stream, options); });
  if (!state) return Unexpected(state.error());
  return std::make_unique<Subscription>(std::move(*state));
}

std::optional<std::string> Client::CachedOwner(const StreamRef& stream, uint32_t shard) const {
  auto owner = router_->owners().Owner(
      {client_impl::NameKind::kStream, stream.namespace_name, stream.stream}, shard);
  if (!owner) return std::nullopt;
  return owner->addr;
}

ServerInfo Client::server_info() const {
  return router_->Home()->server();
}

void Client::Close() {
  router_->Close();
}

Subscription::Subscription(std::shared_ptr<State> state) : state_(std::move(state)) {}

Subscription::~Subscription() {
  Close();
}

ClientResult<std::optional<Event>> Subscription::Next(std::chrono::milliseconds timeout) {
  std::shared_ptr<Client::Impl> client;
  std::optional<Event> event;
  {
    auto ready = [&] { return !state_->queue.empty() || state_->phase == State::Phase::kEnded; };
    // ClientOptions::spin_wait: look for an event without sleeping first (try_lock: never
    // queue behind the I/O thread that is delivering one).
    client_impl::SpinUntil(state_->spin_wait, timeout, [&] {
      std::unique_lock<std::mutex> peek(state_->mu, std::try_to_lock);
      return peek.owns_lock() && ready();
    });
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->cv.wait_for(lock, timeout, ready);
    if (state_->queue.empty()) {
      if (state_->phase == State::Phase::kEnded && state_->error) {
        ClientError e = *state_->error;
        e.resume_from = state_->ResumeFromLocked(e);
        return Unexpected(e);
      }
      return std::optional<Event>();
    }
    event = std::move(state_->queue.front());
    state_->queue.pop_front();
    if (event->offset) state_->last_offset = event->offset;
    if (state_->paused && state_->queue.size() <= state_->capacity / 2 &&
        state_->phase != State::Phase::kEnded) {
      state_->paused = false;
      client = state_->client.lock();
    }
  }
  if (client) client->ResumeEvents(state_);
  return event;
}

uint64_t Subscription::id() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->id;
}

uint32_t Subscription::shard() const {
  return state_->shard;
}

std::optional<uint64_t> Subscription::start_offset() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->start_offset;
}

std::optional<uint64_t> Subscription::live_offset() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->live_offset;
}

std::optional<uint64_t> Subscription::next_offset() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->last_offset) return *state_->last_offset + 1;
  return state_->start_offset;
}

void Subscription::Close() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->queue.clear();
  }
  if (auto client = state_->client.lock()) {
    client->CloseSubscription(state_);
  } else {
    state_->End(Closed(), true);
  }
  state_->WaitForHandler();
}

}  // namespace felix
