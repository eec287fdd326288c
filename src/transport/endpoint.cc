// The ngtcp2 side of the endpoint. Everything here runs on the endpoint's loop thread except
// Post/Dial/Stop (which only queue work) and construction.
//
// Re-entrancy rule: ngtcp2 callbacks never call application code; they update buffers and
// queue "deferred" notifications, which the loop runs after ngtcp2 returns. Application code
// may therefore call any Connection/Stream method, including ones that call into ngtcp2.
#include "transport/endpoint.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "transport/chunk_pool.h"
#include "transport/gnutls_init.h"
#include "transport/send_buffer.h"
#include "transport/tls_session.h"
#include "transport/transport_metrics.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace felix::transport {
namespace {

constexpr size_t kScidLen = 18;                 // fixed: short-header packets carry no DCID length
constexpr size_t kTxBatch = 32;                 // packets per GSO send
constexpr size_t kGsoMaxBytes = 65000;          // below the kernel's bound on one GSO send
constexpr size_t kMaxLoopbackDatagram = 65000;  // fits IPv4 (65507) and IPv6 (65527) UDP
constexpr size_t kQueuedSendBytes = size_t{256} << 10;  // Settle's send queue (EndpointImpl)
constexpr size_t kQueuedSends = 64;
constexpr size_t kRxBatch = 16;
constexpr size_t kRxBufSize = 65536;
constexpr uint64_t kStreamRefusedCode = 0x10;  // peer-opened stream with no on_stream handler

uint64_t NowNs();

bool IsLoopback(const sockaddr_storage& sa) {
  if (sa.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(sa);
    return (ntohl(in.sin_addr.s_addr) >> 24) == 127;
  }
  if (sa.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(sa);
    if (IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr) && in6.sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

// FELIX_QUIC_TRACE (set, any value): ngtcp2's own log of every packet and frame sent and
// received, one line each on stderr, prefixed with CLOCK_MONOTONIC in µs — the packet trace of
// docs/operations.md ("Tracing QUIC packets"). Diagnosis only: it costs a formatted line per
// frame.
void QuicTrace(void* /*user_data*/, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char line[1024];
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "%llu %s\n", static_cast<unsigned long long>(NowNs() / 1000), line);
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * NGTCP2_SECONDS + uint64_t(ts.tv_nsec);
}

void RandomBytes(uint8_t* p, size_t n) {
  // gnutls_rnd only fails when the library is unusable; a zero fill would still be unique
  // enough for CIDs but not for tokens, so treat failure as fatal for this connection later.
  if (gnutls_rnd(GNUTLS_RND_RANDOM, p, n) != 0) std::memset(p, 0, n);
}

std::string CidKey(const uint8_t* data, size_t len) {
  return std::string(reinterpret_cast<const char*>(data), len);
}

HostPort FromSockaddr(const sockaddr_storage& sa) {
  char host[INET6_ADDRSTRLEN] = {};
  HostPort hp;
  if (sa.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    hp.port = ntohs(in->sin_port);
  } else if (sa.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    hp.port = ntohs(in6->sin6_port);
  }
  hp.host = host;
  return hp;
}

Result<std::pair<sockaddr_storage, socklen_t>> Resolve(const HostPort& hp, int family) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV | (family == AF_UNSPEC ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp.port);
  int rv = getaddrinfo(hp.host.empty() ? nullptr : hp.host.c_str(), port.c_str(), &hints, &res);
  if (rv != 0 || res == nullptr)
    return Fail(ErrorCode::kInvalidArgument,
                "cannot resolve " + hp.ToString() + ": " + gai_strerror(rv));
  std::pair<sockaddr_storage, socklen_t> out{};
  std::memcpy(&out.first, res->ai_addr, res->ai_addrlen);
  out.second = res->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

std::string DescribeClose(const ngtcp2_connection_close_error& e) {
  std::string s;
  if (e.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION) {
    s = "application error " + std::to_string(e.error_code);
  } else if ((e.error_code & ~uint64_t(0xff)) == NGTCP2_CRYPTO_ERROR) {
    auto alert = static_cast<gnutls_alert_description_t>(e.error_code & 0xff);
    const char* name = gnutls_alert_get_strname(alert);
    s = "TLS alert " + std::to_string(unsigned(alert)) + " " + (name ? name : "?");
  } else {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "transport error 0x%llx",
                  static_cast<unsigned long long>(e.error_code));
    s = buf;
  }
  if (e.reasonlen > 0)
    s += " (" + std::string(reinterpret_cast<const char*>(e.reason), e.reasonlen) + ")";
  return s;
}

class EndpointImpl;
class ConnImpl;

class StreamImpl final : public Stream, public std::enable_shared_from_this<StreamImpl> {
 public:
  StreamImpl(std::weak_ptr<ConnImpl> conn, ConnImpl* raw, int64_t id, bool local)
      : conn_(std::move(conn)), raw_conn_(raw), id_(id), local_(local) {}

  int64_t id() const override { return id_; }
  bool is_unidirectional() const override { return (id_ & 0x2) != 0; }
  bool is_local() const override { return local_; }
  void SetHandlers(StreamHandlers handlers) override;
  bool ReleaseHandlers() override;
  Result<bool> Write(std::span<const uint8_t> bytes) override;
  Result<bool> WriteOwned(std::vector<uint8_t> bytes) override;
  void Finish() override;
  void Reset(uint64_t app_error_code) override;
  void Consume(size_t n) override;
  size_t received_buffered() const override { return rx_.size() - rx_pos_; }
  size_t send_buffered() const override { return size_t(tx_.unacked()); }
  uint64_t total_received() const override { return total_rx_; }
  bool closed() const override { return closed_ || aborted_; }
  Connection* connection() override;

  bool can_send() const { return !is_unidirectional() || local_; }
  bool can_recv() const { return !is_unidirectional() || !local_; }
  bool HasPendingTx() const {
    return !blocked_ && !tx_dead_ && (tx_.unsent() > 0 || (fin_requested_ && !fin_sent_));
  }

  // Loop-internal state, touched by ConnImpl.
  std::weak_ptr<ConnImpl> conn_;
  ConnImpl* raw_conn_;
  int64_t id_;
  bool local_;
  StreamHandlers handlers_;
  std::vector<uint8_t> rx_;
  size_t rx_pos_ = 0;
  uint64_t total_rx_ = 0;
  uint64_t shown_ = 0;  // total_rx_ at the last on_data
  bool rx_fin_ = false;
  bool fin_delivered_ = false;
  bool deliver_scheduled_ = false;
  SendBuffer tx_;
  bool fin_requested_ = false;
  bool fin_sent_ = false;
  bool blocked_ = false;
  bool tx_dead_ = false;
  bool want_writable_ = false;
  bool aborted_ = false;  // reset either way; on_reset delivered (or local)
  bool closed_ = false;   // ngtcp2 closed it

  void ScheduleDeliver();
  void Deliver();
  void Abort(uint64_t code, bool notify);
  // The stream's connection while the stream may be written; why not otherwise.
  Result<std::shared_ptr<ConnImpl>> Writable();
  // Bytes were queued: the connection has data to write; false at the high-water mark.
  bool Queued(ConnImpl& c);
};

struct PendingDial {
  DialCallback done;
};

class ConnImpl final : public Connection, public std::enable_shared_from_this<ConnImpl> {
 public:
  enum class State { kHandshaking, kOpen, kClosing, kDraining, kDead };

  ConnImpl(EndpointImpl* ep, uint64_t id, bool server) : ep_(ep), id_(id), server_(server) {
    ref_.conn_ref.get_conn = [](ngtcp2_crypto_conn_ref* r) {
      return static_cast<TlsSessionRef*>(r->user_data)->conn;
    };
    ref_.conn_ref.user_data = &ref_;
  }
  ~ConnImpl() override { Release(); }

  // Connection API.
  void SetHandlers(ConnectionHandlers handlers) override { handlers_ = std::move(handlers); }
  Result<std::shared_ptr<Stream>> OpenBidiStream() override { return Open(false); }
  Result<std::shared_ptr<Stream>> OpenUniStream() override { return Open(true); }
  void Close(uint64_t app_error_code, std::string_view reason) override;
  bool is_open() const override { return state_ == State::kOpen; }
  bool is_server() const override { return server_; }
  HostPort remote_address() const override { return FromSockaddr(remote_sa_); }
  std::string alpn() const override { return alpn_; }
  std::vector<std::string> peer_dns_names() const override { return ref_.peer_dns_names; }
  Endpoint& endpoint() override;

  Result<void> InitServer(const ngtcp2_pkt_hd& hd, const sockaddr* from, socklen_t fromlen);
  Result<void> InitClient(const sockaddr* to, socklen_t tolen, const DialOptions& options);
  void SetDialCallback(DialCallback done) { dial_done_ = std::move(done); }
  void Read(const uint8_t* data, size_t len, const sockaddr* from, socklen_t fromlen);
  void OnTimer(uint64_t now);
  uint64_t Expiry() const;
  // Whether Settle may leave this dirty connection unwritten at `now`: all it owes is the
  // acknowledgement EndpointOptions::ack_hold lets wait (starts the hold on first call).
  bool HoldsAck(uint64_t now);
  // Has stream data, a FIN or a reset to write, or is closing or not yet open: written before
  // the connections that owe only acknowledgements or flow credit (EndpointImpl::Settle).
  bool Urgent() const { return data_pending_ || pending_close_ || state_ != State::kOpen; }
  void Write();
  void Release();
  void MarkDirty();
  void SetDead();
  // A stream the peer opened reaches the application (on_stream), or is refused without one.
  void AnnounceStream(const std::shared_ptr<StreamImpl>& s);
  State state() const { return state_; }
  uint64_t id() const { return id_; }

  ngtcp2_conn* conn_ = nullptr;
  uint64_t timer_at_ = UINT64_MAX;
  bool dirty_ = false;

 private:
  friend class StreamImpl;
  static ngtcp2_callbacks Callbacks(bool server);
  void FillSettings(ngtcp2_settings& s, ngtcp2_transport_params& p);
  // The room one packet may take in the send buffer (the largest datagram this path allows).
  size_t PacketBufferSize();
  Result<void> InitTls(const std::string& server_name);
  void SetKeepAlive();
  Result<std::shared_ptr<Stream>> Open(bool uni);
  std::shared_ptr<StreamImpl> StreamFor(int64_t id, bool create);
  void HandleError(int rv);
  void StartClosing(const ngtcp2_connection_close_error& err);
  void NotifyClosed(CloseInfo info);
  void OnEstablished();
  void RegisterCid(const uint8_t* data, size_t len);
  // The peer's stream limit of one kind (EndpointOptions::max_streams_bidi / _uni). ngtcp2 0.12
  // sends a MAX_STREAMS frame each time the limit is raised, so returning each closed stream's
  // credit at once cost a packet each way per request to a peer that opens a stream per request
  // (consumer-group calls: docs/performance.md, change 53). Closed streams' credit is returned
  // in batches of max_streams / 16 (1 to 64) while the peer has more than half its limit left,
  // and at every open and close once it has not — so a peer that reaches its limit has
  // max_streams of its own open, as before.
  struct PeerStreamCredit {
    uint64_t initial = 0;     // the limit in the transport parameters
    uint64_t limit = 0;       // initial plus what has been returned
    uint64_t opened = 0;      // streams the peer has opened (the highest one's index + 1)
    uint64_t unreturned = 0;  // closed, their credit not yet returned
  };
  void OnPeerStream(int64_t id, bool closed);

  EndpointImpl* ep_;
  uint64_t id_;
  bool server_;
  State state_ = State::kHandshaking;
  bool established_ = false;
  bool closed_notified_ = false;
  gnutls_session_t tls_ = nullptr;
  std::shared_ptr<TlsCredentials> creds_;
  TlsSessionRef ref_;
  sockaddr_storage remote_sa_{};
  bool large_datagrams_ = false;  // a loopback peer: EndpointOptions::loopback_datagram_size
  socklen_t remote_len_ = 0;
  std::string alpn_;
  ConnectionHandlers handlers_;
  DialCallback dial_done_;
  std::unordered_map<int64_t, std::shared_ptr<StreamImpl>> streams_;
  std::unordered_set<std::string> cids_;
  std::optional<ngtcp2_connection_close_error> pending_close_;
  // Stream bytes, a FIN or a reset wait to be written (not just an ACK or flow credit): such a
  // connection is written before those that owe only acknowledgements (Settle).
  bool data_pending_ = false;
  // Owns the reason bytes pending_close_ points at: Close may be given a temporary.
  std::string pending_close_reason_;
  std::vector<uint8_t> close_pkt_;
  size_t close_resends_ = 0;
  uint64_t close_deadline_ = 0;
  size_t rr_ = 0;
  std::vector<std::shared_ptr<StreamImpl>> ready_spare_;  // Write's, between calls
  // EndpointOptions::ack_hold: packets with stream frames read since the last Write that sent
  // something — a packet of acknowledgements alone asks for none, and a durable answer comes
  // after the lone ACK of its request (docs/performance.md, change 49); until when the current
  // hold lasts (0: none). stream_frames_read_: set by the stream callbacks during one
  // ngtcp2_conn_read_pkt.
  uint32_t packets_since_tx_ = 0;
  bool stream_frames_read_ = false;
  uint64_t ack_hold_until_ = 0;
  PeerStreamCredit peer_bidi_, peer_uni_;
};

class EndpointImpl final : public Endpoint {
 public:
  EndpointImpl(EndpointOptions options, MetricsRegistry& metrics,
               std::optional<ListenHandlers> listen)
      : options_(std::move(options)),
        metrics_(TransportMetrics::Register(metrics, options_.name)),
        listen_(std::move(listen)) {
    RandomBytes(reset_secret_, sizeof(reset_secret_));
  }
  ~EndpointImpl() override { Stop(); }

  Result<void> Bind(const HostPort& bind);
  // Starts the loop thread, or joins `host`'s loop (which must be a root: not itself a guest).
  Result<void> Start(EndpointImpl* host);
  // The endpoint whose thread runs this one's loop.
  EndpointImpl* loop_owner() { return host_ != nullptr ? host_ : this; }

  HostPort local_address() const override { return local_hp_; }
  void Post(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(post_mu_);
    if (loop_done_) {
      // The loop has exited: nothing else touches its state, run inline.
      lock.unlock();
      fn();
      return;
    }
    posted_.push_back(std::move(fn));
    posted_unparks_ = true;
    // The loop thread drains every queue on its loop before it sleeps (Settle, HasPosted), and
    // one eventfd write not yet read wakes it for every later post to any endpoint on it: write
    // the loop owner's eventfd only when none is outstanding. With many client connections on
    // one loop (felix::IoThread) a flag and an eventfd per endpoint cost a write and a read per
    // request (docs/performance.md, change 38).
    if (InLoopThread()) return;
    EndpointImpl* owner = loop_owner();
    if (owner == this) {
      lock.unlock();
      WakeOwnLoop();
      return;
    }
    if (owner->wake_pending_.exchange(true)) return;
    // A guest writes under its own lock: its host closes that eventfd only after shutting the
    // guest down, which takes the lock.
    uint64_t one = 1;
    ssize_t w = ::write(owner->event_fd_, &one, sizeof(one));
    (void)w;
  }
  void PostWithoutUnpark(std::function<void()> fn) override {
    // Parked or parking, or a caller drives: no wake, and the park is not cut short for it
    // (posted_unparks_ stays as it was), so a caller that keeps driving keeps the loop; the loop
    // thread runs it once drive_park has passed since the last drive. Otherwise the loop thread
    // may be asleep in ppoll with no deadline near: a plain post.
    if (options_.drivable && host_ == nullptr && (drive_claimed_.load() || park_waiting_.load())) {
      std::unique_lock<std::mutex> lock(post_mu_);
      if (!loop_done_) {
        posted_.push_back(std::move(fn));
        // Read again after the push (both sequentially consistent, the push under post_mu_,
        // which the loop thread takes to look for posts before it sleeps): a loop thread that
        // left its park before this read may already have looked, and sleep in ppoll with no
        // deadline near. Still parked or driven, it looks again before it sleeps.
        if (drive_claimed_.load() || park_waiting_.load() || InLoopThread()) return;
        posted_unparks_ = true;  // now a plain post
        lock.unlock();
        WakeOwnLoop();
        return;
      }
    }
    Post(std::move(fn));
  }
  bool InLoopThread() const override {
    return std::this_thread::get_id() == loop_thread_id_.load(std::memory_order_relaxed);
  }
  bool Drive(const std::function<void()>& start, const std::function<bool()>& done,
             std::chrono::steady_clock::time_point deadline) override;
  bool DriveOneTurn() override;
  bool InDrive() const override {
    // A driver holds drive_mu_, under which the loop thread set own_thread_id_; only a
    // drivable endpoint (never a guest) is driven.
    return options_.drivable && InLoopThread() && std::this_thread::get_id() != own_thread_id_;
  }
  void AwaitingAnswers(int delta) override {
    awaiting_callers_.fetch_add(delta);
    KeepLoopAwake(delta);
  }
  void KeepLoopAwake(int delta) override {
    // Sequentially consistent: a drive ending reads it after its own last_drive_end_ns_ (Drive).
    awaiting_.fetch_add(delta);
    if (delta > 0) Unpark();
  }
  void Dial(const HostPort& remote, DialOptions options, DialCallback done) override;
  TimerId RunAfter(std::chrono::nanoseconds delay, std::function<void()> fn) override {
    TimerId id = ++next_timer_id_;
    uint64_t at = NowNs() + uint64_t(std::max<int64_t>(0, delay.count()));
    timers_.emplace(std::make_pair(at, id), std::move(fn));
    timer_at_by_id_[id] = at;
    return id;
  }
  void Cancel(TimerId id) override {
    auto it = timer_at_by_id_.find(id);
    if (it == timer_at_by_id_.end()) return;
    timers_.erase({it->second, id});
    timer_at_by_id_.erase(it);
  }
  void Stop() override {
    if (host_ != nullptr) {
      StopGuest();
      return;
    }
    if (thread_.joinable()) {
      Post([this] { stopping_ = true; });
      {
        std::lock_guard<std::mutex> pl(park_mu_);
        park_cv_.notify_all();
      }
      thread_.join();
    }
    CloseFds();
  }
  const TlsContext& tls() const override { return *options_.tls; }

  // Used by ConnImpl.
  const EndpointOptions& options() const { return options_; }
  // Loop thread only (ChunkPool's contract).
  ChunkPool& chunk_pool() { return chunk_pool_; }
  TransportMetrics& metrics() { return metrics_; }
  const sockaddr* local_sa() const { return reinterpret_cast<const sockaddr*>(&local_sa_); }
  socklen_t local_len() const { return local_len_; }
  const uint8_t* reset_secret() const { return reset_secret_; }
  void Defer(std::function<void()> fn) {
    deferred_.push_back({DeferredTask::Kind::kTask, std::move(fn), nullptr});
  }
  // A stream's delivery, or the announcement of a stream the peer opened, deferred without
  // wrapping it in a std::function: one with a shared_ptr capture is not stored inline, so
  // each was an allocation, several per request (docs/performance.md, change 35).
  void DeferDelivery(std::shared_ptr<StreamImpl> stream) {
    deferred_.push_back({DeferredTask::Kind::kDeliver, nullptr, std::move(stream)});
  }
  void DeferOpened(std::shared_ptr<StreamImpl> stream) {
    deferred_.push_back({DeferredTask::Kind::kOpened, nullptr, std::move(stream)});
  }
  void DeferRelease(std::shared_ptr<StreamImpl> stream) {
    deferred_.push_back({DeferredTask::Kind::kRelease, nullptr, std::move(stream)});
  }
  void MarkDirty(ConnImpl* c) {
    if (!c->dirty_) {
      c->dirty_ = true;
      dirty_.push_back(c->shared_from_this());
    }
  }
  void Route(const std::string& cid, ConnImpl* c) { routes_[cid] = c; }
  void Unroute(const std::string& cid, ConnImpl* c) {
    auto it = routes_.find(cid);
    if (it != routes_.end() && it->second == c) routes_.erase(it);
  }
  void SendPackets(const sockaddr* to, socklen_t tolen, const uint8_t* data, size_t len,
                   size_t seg);
  // Settle's writes queue their datagrams (copied) and leave together in one sendmmsg per
  // round: a publish answered to its publisher and delivered to ten subscribers is one system
  // call, not eleven (docs/performance.md, change 54).
  void FlushSendQueue();
  void SendPacketsNow(const sockaddr* to, socklen_t tolen, const uint8_t* data, size_t len,
                      size_t seg);
  void OnConnection(const std::shared_ptr<ConnImpl>& c) {
    if (listen_ && listen_->on_connection) listen_->on_connection(c);
  }
  uint8_t* tx_buf() { return tx_buf_.data(); }
  size_t tx_buf_size() const { return tx_buf_.size(); }

 private:
  void Loop();
  // Guest side of Stop: the host's loop shuts this endpoint down (unless the host already
  // did, on its own way out) and lets go of it; then the socket closes.
  void StopGuest();
  // On the host's loop: `guest` leaves it. `left` is fulfilled once the loop no longer touches
  // the guest (at the top of its next iteration, or at once when the loop is not running).
  void DetachGuest(EndpointImpl* guest, std::promise<void>* left);
  void CloseFds() {
    if (fd_ >= 0) ::close(fd_);
    if (event_fd_ >= 0) ::close(event_fd_);
    fd_ = event_fd_ = -1;
  }
  void ReadPackets();
  void Dispatch(const uint8_t* data, size_t len, const sockaddr* from, socklen_t fromlen);
  void Accept(const uint8_t* data, size_t len, const sockaddr* from, socklen_t fromlen);
  void SendStatelessReset(const ngtcp2_version_cid& vc, size_t len, const sockaddr* from,
                          socklen_t fromlen);
  // Runs what was posted so far. `woken`: the eventfd was just read, so the next post from
  // another thread must write it again.
  void RunPosted(bool woken);
  bool HasPosted();
  // A post that is to end a park (any but PostWithoutUnpark's) waits to run.
  bool HasPostUnparking();
  void RunTimers();
  // Runs the loop's posted and deferred work and writes the dirty connections, those with data
  // to send first. `urgent_only`: leaves the connections that owe only acknowledgements dirty
  // (SettleAll writes them after every endpoint on the loop wrote its data).
  void Settle(bool urgent_only = false);
  // Settle for every endpoint on this loop, until none has anything left to run: work handed
  // from one to the other (a forward's answer, say) leaves in this iteration's packets.
  static void SettleAll(EndpointImpl* const* endpoints, size_t n);
  bool HasWork() { return HasPosted() || !deferred_.empty() || !dirty_.empty(); }
  void Reschedule(ConnImpl* c);
  uint64_t NextDeadline();
  void Shutdown();

  EndpointOptions options_;
  TransportMetrics metrics_;
  std::optional<ListenHandlers> listen_;
  int fd_ = -1;
  int event_fd_ = -1;
  sockaddr_storage local_sa_{};
  socklen_t local_len_ = 0;
  HostPort local_hp_;
  bool gso_ = true;
  uint8_t reset_secret_[32];
  std::thread thread_;
  // Whoever runs the loop's iterations now: the loop thread, or a caller in Drive.
  std::atomic<std::thread::id> loop_thread_id_{};
  std::thread::id own_thread_id_;  // the loop thread's (set before it runs)
  // EndpointOptions::drivable. drive_mu_ is held by whoever runs iterations; a caller claims
  // the drive (drive_claimed_, one at a time) before taking it, and the loop thread does not
  // take it while a drive is claimed or for drive_park after one ended (last_drive_end_ns_, 0
  // once an Unpark cancelled that) unless something awaits the loop (awaiting_, a post): it
  // parks on park_cv_ instead.
  std::mutex drive_mu_;
  std::atomic<bool> drive_claimed_{false};
  std::atomic<uint64_t> last_drive_end_ns_{0};
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  bool parked_ = false;                      // guarded by park_mu_
  std::atomic<bool> park_waiting_{false};    // the loop thread is parking or parked
  std::atomic<bool> park_cancelled_{false};  // an Unpark during the current drive
  // Wakes a parked loop thread (no-op unless drivable and parked).
  void Unpark();
  // Drive's and DriveOneTurn's start and end: claims the drive and takes drive_mu_ into `lk`
  // (false, nothing claimed, where a drive is refused), then hands the loop back.
  bool BeginDrive(std::unique_lock<std::mutex>& lk);
  void EndDrive(std::unique_lock<std::mutex>& lk);
  // Whether the loop thread should park now rather than run an iteration.
  bool ShouldPark(uint64_t now);
  // After a post to this endpoint's own loop (not a guest's), not on the loop thread, post_mu_
  // not held: a loop thread parked after a drive (EndpointOptions::drivable) runs it now (the
  // parked thread checks for posts under park_mu_); a loop thread in ppoll, or a caller
  // driving, reads the eventfd.
  void WakeOwnLoop();
  // One loop iteration over this endpoint and its guests: poll (sleeping at most until
  // `cap_ns`), read, timers, settle. `on_loop` and `fds` are scratch of kMaxLoopGuests + 1
  // and twice that.
  void Iterate(uint64_t cap_ns, EndpointImpl** on_loop, pollfd* fds);
  std::atomic<int> awaiting_{0};          // requests awaiting answers, and KeepLoopAwake's count
  std::atomic<int> awaiting_callers_{0};  // requests awaiting answers (AwaitingAnswers)
  uint32_t loop_datagrams_ = 0;           // loop owner, loop thread: datagrams read this iteration
  uint64_t last_event_ns_ = 0;  // loop owner, loop thread: when ppoll last returned an event
  bool poll_skipped_ = false;   // loop owner, loop thread: the last iteration did not poll
  // Loop sharing: a guest runs on host_'s loop thread (host_ null: this endpoint has its own).
  EndpointImpl* host_ = nullptr;
  bool attached_ = false;                  // guest: joined the host's loop (Create/Stop thread)
  bool detached_ = false;                  // guest, loop thread: shut down, skipped by the loop
  std::vector<EndpointImpl*> guests_;      // host, loop thread
  std::vector<std::promise<void>*> left_;  // host, loop thread: guests waiting in StopGuest
  std::atomic<bool> stopping_{false};
  bool reap_needed_ = false;
  bool loop_done_ = false;  // guarded by post_mu_
  // Loop owner: an eventfd write is outstanding (not yet read by the loop). Set by whoever
  // writes it; cleared by the loop thread after reading the eventfd and before it drains the
  // queues of the endpoints on the loop, so a post that finds it set is drained.
  std::atomic<bool> wake_pending_{false};
  std::mutex post_mu_;
  std::vector<std::function<void()>> posted_;
  bool posted_unparks_ = false;  // guarded by post_mu_: posted_ holds a task of Post's
  struct DeferredTask {
    enum class Kind : uint8_t { kTask, kDeliver, kOpened, kRelease };
    Kind kind = Kind::kTask;
    std::function<void()> fn;  // kTask
    // kDeliver: StreamImpl::Deliver; kOpened: on_stream; kRelease: the handlers dropped
    std::shared_ptr<StreamImpl> stream;
    void operator()();
  };
  std::deque<DeferredTask> deferred_;
  std::vector<std::shared_ptr<ConnImpl>> dirty_;
  std::vector<std::shared_ptr<ConnImpl>> dirty_spare_;  // loop thread: see Settle
  std::vector<std::function<void()>> posted_spare_;     // loop thread: see RunPosted
  std::unordered_map<uint64_t, std::shared_ptr<ConnImpl>> conns_;
  std::unordered_map<std::string, ConnImpl*> routes_;
  using HeapEntry = std::pair<uint64_t, uint64_t>;  // (deadline, conn id)
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, std::greater<>> conn_timers_;
  std::map<std::pair<uint64_t, TimerId>, std::function<void()>> timers_;
  // Largest send-buffer chunks freed by this endpoint's streams, for their next writes.
  ChunkPool chunk_pool_{NowNs};
  std::unordered_map<TimerId, uint64_t> timer_at_by_id_;
  TimerId next_timer_id_ = 0;
  uint64_t next_conn_id_ = 0;
  std::vector<uint8_t> rx_bufs_ = std::vector<uint8_t>(kRxBatch * kRxBufSize);
  std::vector<uint8_t> tx_buf_ = std::vector<uint8_t>(
      std::max((kTxBatch + 2) * NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE, 2 * kMaxLoopbackDatagram));
  struct QueuedSend {
    sockaddr_storage to;
    socklen_t tolen;
    size_t off, len, seg;
  };
  bool queue_sends_ = false;
  std::vector<uint8_t> send_queue_buf_;
  size_t send_queue_used_ = 0;
  std::vector<QueuedSend> send_queue_;
  std::vector<mmsghdr> send_msgs_;
  std::vector<iovec> send_iovs_;
  std::vector<std::array<char, CMSG_SPACE(sizeof(uint16_t))>> send_ctrl_;
  struct QueuedMessage {
    size_t queued;     // its send_queue_ entry
    size_t datagrams;  // segments of a GSO batch, or 1
    bool gso;
  };
  std::vector<QueuedMessage> send_msg_info_;  // send_msgs_[k]'s
  friend class ConnImpl;
};

// ---------------------------------------------------------------------------------------------
// StreamImpl

Connection* StreamImpl::connection() {
  auto c = conn_.lock();
  return c && c->conn_ ? c.get() : nullptr;
}

void StreamImpl::SetHandlers(StreamHandlers handlers) {
  handlers_ = std::move(handlers);
  shown_ = 0;
  if (received_buffered() > 0 || rx_fin_) ScheduleDeliver();
}

void StreamImpl::ScheduleDeliver() {
  auto c = conn_.lock();
  if (deliver_scheduled_ || !c || !c->conn_) return;
  deliver_scheduled_ = true;
  c->ep_->DeferDelivery(shared_from_this());
}

void EndpointImpl::DeferredTask::operator()() {
  switch (kind) {
    case Kind::kTask:
      fn();
      return;
    case Kind::kDeliver:
      stream->Deliver();
      return;
    case Kind::kOpened:
      if (auto c = stream->conn_.lock()) c->AnnounceStream(stream);
      return;
    case Kind::kRelease:
      stream->SetHandlers({});
      return;
  }
}

bool StreamImpl::ReleaseHandlers() {
  auto c = conn_.lock();
  if (!c || c->ep_ == nullptr) return false;
  c->ep_->DeferRelease(shared_from_this());
  return true;
}

void StreamImpl::Deliver() {
  deliver_scheduled_ = false;
  if (aborted_) return;
  if (handlers_.on_data && received_buffered() > 0 && total_rx_ > shown_) {
    shown_ = total_rx_;
    handlers_.on_data(*this, std::span<const uint8_t>(rx_.data() + rx_pos_, received_buffered()));
  }
  if (rx_fin_ && received_buffered() == 0 && !fin_delivered_ && !aborted_ && handlers_.on_fin) {
    fin_delivered_ = true;
    handlers_.on_fin(*this);
  }
}

Result<std::shared_ptr<ConnImpl>> StreamImpl::Writable() {
  auto c = conn_.lock();
  if (!c || !c->conn_ || !c->is_open()) return Fail(ErrorCode::kUnavailable, "connection closed");
  if (!can_send()) return Fail(ErrorCode::kInvalidArgument, "stream is receive-only");
  if (tx_dead_ || aborted_ || fin_requested_ || closed_)
    return Fail(ErrorCode::kUnavailable, "stream write side closed");
  return c;
}

Result<bool> StreamImpl::Write(std::span<const uint8_t> bytes) {
  auto c = Writable();
  if (!c) return tl::unexpected(c.error());
  tx_.Append(bytes.data(), bytes.size(), &(*c)->ep_->chunk_pool());
  return Queued(**c);
}

Result<bool> StreamImpl::WriteOwned(std::vector<uint8_t> bytes) {
  auto c = Writable();
  if (!c) return tl::unexpected(c.error());
  tx_.Adopt(std::move(bytes));
  return Queued(**c);
}

bool StreamImpl::Queued(ConnImpl& c) {
  c.data_pending_ = true;
  c.MarkDirty();
  if (tx_.unacked() >= c.ep_->options().send_high_water) {
    want_writable_ = true;
    return false;
  }
  return true;
}

void StreamImpl::Finish() {
  auto c = conn_.lock();
  if (!c || !c->conn_ || !can_send() || fin_requested_) return;
  fin_requested_ = true;
  c->data_pending_ = true;
  c->MarkDirty();
}

void StreamImpl::Reset(uint64_t app_error_code) {
  auto c = conn_.lock();
  if (aborted_) return;
  aborted_ = true;
  tx_dead_ = true;
  if (c && c->conn_ && !closed_) {
    ngtcp2_conn_shutdown_stream(c->conn_, id_, app_error_code);
    c->data_pending_ = true;
    c->MarkDirty();
  }
}

void StreamImpl::Consume(size_t n) {
  n = std::min(n, received_buffered());
  if (n == 0) return;
  rx_pos_ += n;
  if (rx_pos_ == rx_.size()) {
    rx_.clear();
    rx_pos_ = 0;
  } else if (rx_pos_ > (64u << 10) && rx_pos_ > rx_.size() / 2) {
    rx_.erase(rx_.begin(), rx_.begin() + long(rx_pos_));
    rx_pos_ = 0;
  }
  auto c = conn_.lock();
  if (c && c->conn_ && c->state_ != ConnImpl::State::kDead) {
    // Credit goes back only now: this is the backpressure path.
    if (!closed_) ngtcp2_conn_extend_max_stream_offset(c->conn_, id_, n);
    ngtcp2_conn_extend_max_offset(c->conn_, n);
    c->MarkDirty();
  }
  if (rx_fin_ && received_buffered() == 0) ScheduleDeliver();
}

void StreamImpl::Abort(uint64_t code, bool notify) {
  if (aborted_) return;
  aborted_ = true;
  tx_dead_ = true;
  // A stream whose both directions already ended for the application (fin delivered, own side
  // finished or receive-only) has nothing left to abort.
  if (fin_delivered_ && (fin_requested_ || !can_send())) notify = false;
  if (notify && handlers_.on_reset) {
    auto c = conn_.lock();
    if (c)
      c->ep_->Defer([self = shared_from_this(), code] {
        if (self->handlers_.on_reset) self->handlers_.on_reset(*self, code);
      });
  }
}

// ---------------------------------------------------------------------------------------------
// ConnImpl

Endpoint& ConnImpl::endpoint() {
  return *ep_;
}

void ConnImpl::MarkDirty() {
  if (conn_ && state_ != State::kDead) ep_->MarkDirty(this);
}

void ConnImpl::SetDead() {
  state_ = State::kDead;
  ep_->reap_needed_ = true;
}

void ConnImpl::RegisterCid(const uint8_t* data, size_t len) {
  std::string key = CidKey(data, len);
  cids_.insert(key);
  ep_->Route(key, this);
}

ngtcp2_callbacks ConnImpl::Callbacks(bool server) {
  ngtcp2_callbacks cb{};
  if (server) {
    cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  } else {
    cb.client_initial = ngtcp2_crypto_client_initial_cb;
    cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
  }
  cb.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb.encrypt = ngtcp2_crypto_encrypt_cb;
  cb.decrypt = ngtcp2_crypto_decrypt_cb;
  cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb.update_key = ngtcp2_crypto_update_key_cb;
  cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb.rand = [](uint8_t* dest, size_t len, const ngtcp2_rand_ctx*) { RandomBytes(dest, len); };
  cb.get_new_connection_id = [](ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t cidlen,
                                void* ud) {
    auto* c = static_cast<ConnImpl*>(ud);
    RandomBytes(cid->data, cidlen);
    cid->datalen = cidlen;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c->ep_->reset_secret(), 32, cid) != 0)
      return NGTCP2_ERR_CALLBACK_FAILURE;
    c->RegisterCid(cid->data, cid->datalen);
    return 0;
  };
  cb.remove_connection_id = [](ngtcp2_conn*, const ngtcp2_cid* cid, void* ud) {
    auto* c = static_cast<ConnImpl*>(ud);
    std::string key = CidKey(cid->data, cid->datalen);
    c->cids_.erase(key);
    c->ep_->Unroute(key, c);
    return 0;
  };
  cb.handshake_completed = [](ngtcp2_conn*, void* ud) {
    auto* c = static_cast<ConnImpl*>(ud);
    c->alpn_ = SelectedAlpn(c->tls_);
    // Server: the client's Finished (and certificate) is verified. Clients wait for
    // HANDSHAKE_DONE (handshake_confirmed): the server may still refuse our certificate.
    if (c->server_) c->ep_->Defer([self = c->shared_from_this()] { self->OnEstablished(); });
    return 0;
  };
  cb.handshake_confirmed = [](ngtcp2_conn*, void* ud) {
    auto* c = static_cast<ConnImpl*>(ud);
    if (!c->server_) c->ep_->Defer([self = c->shared_from_this()] { self->OnEstablished(); });
    return 0;
  };
  cb.stream_open = [](ngtcp2_conn*, int64_t id, void* ud) {
    auto* c = static_cast<ConnImpl*>(ud);
    c->OnPeerStream(id, false);
    c->ep_->DeferOpened(c->StreamFor(id, true));
    return 0;
  };
  cb.recv_stream_data = [](ngtcp2_conn*, uint32_t flags, int64_t id, uint64_t, const uint8_t* data,
                           size_t len, void* ud, void*) {
    auto* c = static_cast<ConnImpl*>(ud);
    c->stream_frames_read_ = true;
    auto s = c->StreamFor(id, true);
    if (s->aborted_) {
      // Nobody will consume: return the credit at once so the connection window is not lost.
      ngtcp2_conn_extend_max_offset(c->conn_, len);
      return 0;
    }
    s->rx_.insert(s->rx_.end(), data, data + len);
    s->total_rx_ += len;
    if (flags & NGTCP2_STREAM_DATA_FLAG_FIN) s->rx_fin_ = true;
    s->ScheduleDeliver();
    return 0;
  };
  cb.acked_stream_data_offset = [](ngtcp2_conn*, int64_t id, uint64_t offset, uint64_t len,
                                   void* ud, void*) {
    auto* c = static_cast<ConnImpl*>(ud);
    auto s = c->StreamFor(id, false);
    if (!s) return 0;
    s->tx_.Acked(offset + len, &c->ep_->chunk_pool(), &s->handlers_.on_buffer_done);
    if (s->want_writable_ && s->tx_.unacked() < c->ep_->options().send_high_water / 2) {
      s->want_writable_ = false;
      c->ep_->Defer([s] {
        if (!s->aborted_ && s->handlers_.on_writable) s->handlers_.on_writable(*s);
      });
    }
    return 0;
  };
  cb.extend_max_stream_data = [](ngtcp2_conn*, int64_t id, uint64_t, void* ud, void*) {
    auto* c = static_cast<ConnImpl*>(ud);
    if (auto s = c->StreamFor(id, false)) s->blocked_ = false;
    return 0;
  };
  cb.stream_reset = [](ngtcp2_conn*, int64_t id, uint64_t, uint64_t code, void* ud, void*) {
    auto* c = static_cast<ConnImpl*>(ud);
    c->stream_frames_read_ = true;
    if (auto s = c->StreamFor(id, false)) s->Abort(code, true);
    return 0;
  };
  cb.stream_stop_sending = [](ngtcp2_conn*, int64_t id, uint64_t code, void* ud, void*) {
    auto* c = static_cast<ConnImpl*>(ud);
    c->stream_frames_read_ = true;
    if (auto s = c->StreamFor(id, false)) s->Abort(code, true);
    return 0;
  };
  cb.stream_close = [](ngtcp2_conn* conn, uint32_t flags, int64_t id, uint64_t code, void* ud,
                       void*) {
    auto* c = static_cast<ConnImpl*>(ud);
    // ngtcp2 0.12 does not raise the peer's stream limit by itself.
    if (!ngtcp2_conn_is_local_stream(conn, id)) c->OnPeerStream(id, true);
    auto it = c->streams_.find(id);
    if (it == c->streams_.end()) return 0;
    auto s = it->second;
    c->streams_.erase(it);
    s->closed_ = true;
    s->tx_dead_ = true;
    if (s->can_recv() && !s->rx_fin_ && (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
      s->Abort(code, true);
    return 0;
  };
  return cb;
}

void ConnImpl::FillSettings(ngtcp2_settings& s, ngtcp2_transport_params& p) {
  const EndpointOptions& o = ep_->options();
  ngtcp2_settings_default(&s);
  s.initial_ts = NowNs();
  // ngtcp2 0.12 paces from cwnd/smoothed_rtt; before the first sample that is initial_rtt
  // (default 333 ms), which holds the second handshake flight ~20 ms on a LAN.
  s.initial_rtt = uint64_t(o.initial_rtt.count()) * NGTCP2_MICROSECONDS;
  s.max_window = o.max_connection_window;
  s.max_stream_window = o.max_stream_window;
  s.handshake_timeout = uint64_t(o.handshake_timeout.count()) * NGTCP2_MILLISECONDS;
  // Every ack-eliciting packet makes its ACK due at once. ngtcp2 otherwise leaves an ACK out
  // of any packet written sooner than min(max_ack_delay, smoothed RTT / 8) after the packet it
  // acknowledges and sends it alone a moment later: an answer written at once took two
  // datagrams (docs/performance.md, change 46). A burst read in one turn still gets one ACK.
  s.ack_thresh = 1;
  if (std::getenv("FELIX_QUIC_TRACE") != nullptr) s.log_printf = &QuicTrace;
  // Over loopback nothing between the two sockets fragments or drops a big datagram (the
  // interface's MTU is 64 KiB, as TCP's segments there are): a 16 KiB batch leaves as one
  // packet — one encryption, one ACK, one trip through the kernel — instead of a dozen.
  large_datagrams_ = o.loopback_datagram_size > 0 && IsLoopback(remote_sa_);
  if (large_datagrams_) {
    s.max_tx_udp_payload_size = std::min(o.loopback_datagram_size, kMaxLoopbackDatagram);
    s.no_tx_udp_payload_size_shaping = 1;
    // Path MTU discovery could only confirm ~1.4 KB, which the sizes above already exceed:
    // its probes (a padded PING each way, twice, at some point after the handshake) would be
    // two datagrams per connection sent for nothing.
    s.no_pmtud = 1;
  }
  ngtcp2_transport_params_default(&p);
  p.initial_max_stream_data_bidi_local = o.initial_stream_window;
  p.initial_max_stream_data_bidi_remote = o.initial_stream_window;
  p.initial_max_stream_data_uni = o.initial_stream_window;
  p.initial_max_data = o.initial_connection_window;
  p.initial_max_streams_bidi = o.max_streams_bidi;
  p.initial_max_streams_uni = o.max_streams_uni;
  p.max_idle_timeout = uint64_t(o.idle_timeout.count()) * NGTCP2_MILLISECONDS;
  p.max_ack_delay = uint64_t(o.max_ack_delay.count()) * NGTCP2_MILLISECONDS;
  p.active_connection_id_limit = 4;
}

void ConnImpl::SetKeepAlive() {
  const EndpointOptions& o = ep_->options();
  auto ka = o.keep_alive;
  if (ka.count() <= 0) return;
  if (ka >= o.idle_timeout / 2) ka = o.idle_timeout / 2;
  if (ka.count() <= 0) return;
  ngtcp2_conn_set_keep_alive_timeout(conn_, uint64_t(ka.count()) * NGTCP2_MILLISECONDS);
}

Result<void> ConnImpl::InitTls(const std::string& server_name) {
  TlsContext& ctx = *ep_->options().tls;
  ctx.MaybeReload();
  creds_ = ctx.Current();
  auto session = NewTlsSession(ctx, *creds_, server_, server_name, &ref_);
  if (!session) return tl::unexpected(session.error());
  tls_ = *session;
  ngtcp2_conn_set_tls_native_handle(conn_, tls_);
  return Ok();
}

Result<void> ConnImpl::InitServer(const ngtcp2_pkt_hd& hd, const sockaddr* from,
                                  socklen_t fromlen) {
  std::memcpy(&remote_sa_, from, fromlen);
  remote_len_ = fromlen;
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  FillSettings(settings, params);
  settings.token = hd.token;
  ngtcp2_cid scid;
  scid.datalen = kScidLen;
  RandomBytes(scid.data, kScidLen);
  params.original_dcid = hd.dcid;
  params.stateless_reset_token_present = 1;
  ngtcp2_crypto_generate_stateless_reset_token(params.stateless_reset_token, ep_->reset_secret(),
                                               32, &scid);
  ngtcp2_path path{{const_cast<sockaddr*>(ep_->local_sa()), ep_->local_len()},
                   {reinterpret_cast<sockaddr*>(&remote_sa_), remote_len_},
                   nullptr};
  ngtcp2_callbacks cb = Callbacks(true);
  int rv = ngtcp2_conn_server_new(&conn_, &hd.scid, &scid, &path, hd.version, &cb, &settings,
                                  &params, nullptr, this);
  if (rv != 0)
    return Fail(ErrorCode::kInternal,
                std::string("ngtcp2_conn_server_new: ") + ngtcp2_strerror(rv));
  ref_.conn = conn_;
  SetKeepAlive();
  if (auto r = InitTls(""); !r) return r;
  RegisterCid(hd.dcid.data, hd.dcid.datalen);
  RegisterCid(scid.data, scid.datalen);
  return Ok();
}

Result<void> ConnImpl::InitClient(const sockaddr* to, socklen_t tolen, const DialOptions& options) {
  std::memcpy(&remote_sa_, to, tolen);
  remote_len_ = tolen;
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  FillSettings(settings, params);
  ngtcp2_cid scid, dcid;
  scid.datalen = kScidLen;
  RandomBytes(scid.data, kScidLen);
  dcid.datalen = 18;
  RandomBytes(dcid.data, dcid.datalen);
  ngtcp2_path path{{const_cast<sockaddr*>(ep_->local_sa()), ep_->local_len()},
                   {reinterpret_cast<sockaddr*>(&remote_sa_), remote_len_},
                   nullptr};
  ngtcp2_callbacks cb = Callbacks(false);
  int rv = ngtcp2_conn_client_new(&conn_, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings,
                                  &params, nullptr, this);
  if (rv != 0)
    return Fail(ErrorCode::kInternal,
                std::string("ngtcp2_conn_client_new: ") + ngtcp2_strerror(rv));
  ref_.conn = conn_;
  SetKeepAlive();
  if (auto r = InitTls(options.server_name); !r) return r;
  RegisterCid(scid.data, scid.datalen);
  MarkDirty();
  return Ok();
}

void ConnImpl::OnEstablished() {
  if (state_ != State::kHandshaking) return;
  state_ = State::kOpen;
  established_ = true;
  ep_->metrics().connections->Add(1);
  if (server_) {
    ep_->metrics().accepted->Increment();
    ep_->OnConnection(shared_from_this());
  } else {
    ep_->metrics().dialled->Increment();
    if (dial_done_) {
      auto done = std::move(dial_done_);
      dial_done_ = nullptr;
      done(std::static_pointer_cast<Connection>(shared_from_this()));
    }
  }
}

void ConnImpl::OnPeerStream(int64_t id, bool closed) {
  const bool bidi = ngtcp2_is_bidi_stream(id);
  PeerStreamCredit& credit = bidi ? peer_bidi_ : peer_uni_;
  if (credit.initial == 0) {
    credit.initial = bidi ? ep_->options().max_streams_bidi : ep_->options().max_streams_uni;
    credit.limit = credit.initial;
  }
  // At most this many closed streams' credit is held back while the peer has plenty left.
  const uint64_t batch = std::clamp<uint64_t>(credit.initial / 16, 1, 64);
  if (closed) {
    ++credit.unreturned;
  } else {
    // Opening a stream opens every lower one of its kind (RFC 9000 §3.2).
    credit.opened = std::max(credit.opened, uint64_t(id) / 4 + 1);
  }
  const bool near_limit = credit.limit - credit.opened <= credit.initial / 2;
  if (credit.unreturned == 0 || (credit.unreturned < batch && !near_limit)) return;
  if (bidi) {
    ngtcp2_conn_extend_max_streams_bidi(conn_, credit.unreturned);
  } else {
    ngtcp2_conn_extend_max_streams_uni(conn_, credit.unreturned);
  }
  credit.limit += credit.unreturned;
  credit.unreturned = 0;
}

std::shared_ptr<StreamImpl> ConnImpl::StreamFor(int64_t id, bool create) {
  auto it = streams_.find(id);
  if (it != streams_.end()) return it->second;
  if (!create) return nullptr;
  auto s = std::make_shared<StreamImpl>(weak_from_this(), this, id,
                                        ngtcp2_conn_is_local_stream(conn_, id) != 0);
  streams_.emplace(id, s);
  return s;
}

Result<std::shared_ptr<Stream>> ConnImpl::Open(bool uni) {
  if (!conn_ || state_ != State::kOpen) return Fail(ErrorCode::kUnavailable, "connection closed");
  int64_t id = -1;
  int rv = uni ? ngtcp2_conn_open_uni_stream(conn_, &id, nullptr)
               : ngtcp2_conn_open_bidi_stream(conn_, &id, nullptr);
  if (rv != 0)
    return Fail(ErrorCode::kUnavailable,
                std::string("cannot open stream: ") + ngtcp2_strerror(rv));  // peer's limit
  return std::static_pointer_cast<Stream>(StreamFor(id, true));
}

void ConnImpl::Close(uint64_t app_error_code, std::string_view reason) {
  if (!conn_ || state_ == State::kClosing || state_ == State::kDraining || state_ == State::kDead ||
      pending_close_)
    return;
  ngtcp2_connection_close_error err;
  ngtcp2_connection_close_error_default(&err);
  pending_close_reason_.assign(reason.data(), reason.size());
  ngtcp2_connection_close_error_set_application_error(
      &err, app_error_code, reinterpret_cast<const uint8_t*>(pending_close_reason_.data()),
      pending_close_reason_.size());
  pending_close_ = err;
  MarkDirty();
}

void ConnImpl::Read(const uint8_t* data, size_t len, const sockaddr* from, socklen_t fromlen) {
  if (!conn_) return;
  if (state_ == State::kClosing) {
    if (close_resends_++ < 8 && !close_pkt_.empty())
      ep_->SendPackets(reinterpret_cast<sockaddr*>(&remote_sa_), remote_len_, close_pkt_.data(),
                       close_pkt_.size(), close_pkt_.size());
    return;
  }
  if (state_ == State::kDraining || state_ == State::kDead) return;
  ngtcp2_path path{{const_cast<sockaddr*>(ep_->local_sa()), ep_->local_len()},
                   {const_cast<sockaddr*>(from), fromlen},
                   nullptr};
  ngtcp2_pkt_info pi{};
  stream_frames_read_ = false;
  int rv = ngtcp2_conn_read_pkt(conn_, &path, &pi, data, len, NowNs());
  if (rv != 0) {
    HandleError(rv);
    return;
  }
  if (stream_frames_read_) ++packets_since_tx_;
  MarkDirty();
}

uint64_t ConnImpl::Expiry() const {
  if (!conn_ || state_ == State::kDead) return UINT64_MAX;
  if (state_ == State::kClosing || state_ == State::kDraining) return close_deadline_;
  // A held acknowledgement's delay expired; it goes when the hold ends (or with a write).
  return std::max(ngtcp2_conn_get_expiry(conn_), ack_hold_until_);
}

bool ConnImpl::HoldsAck(uint64_t now) {
  const uint64_t hold = uint64_t(ep_->options().ack_hold.count()) * 1000;
  bool holds = hold > 0 && state_ == State::kOpen && !pending_close_ && packets_since_tx_ >= 1 &&
               packets_since_tx_ <= std::max(ep_->options().ack_hold_packets, 1u) &&
               ep_->loop_owner()->loop_datagrams_ >= ep_->options().ack_hold_min_datagrams &&
               (ack_hold_until_ == 0 || now < ack_hold_until_);
  if (holds) {
    ngtcp2_conn_stat stat;
    ngtcp2_conn_get_conn_stat(conn_, &stat);
    holds = stat.bytes_in_flight == 0;
    for (auto it = streams_.begin(); holds && it != streams_.end(); ++it)
      holds = !(it->second->can_send() && it->second->HasPendingTx());
  }
  if (!holds) {
    ack_hold_until_ = 0;
    return false;
  }
  if (ack_hold_until_ == 0) ack_hold_until_ = now + hold;
  return true;
}

void ConnImpl::AnnounceStream(const std::shared_ptr<StreamImpl>& s) {
  if (state_ != State::kOpen || s->aborted_) return;
  if (handlers_.on_stream) {
    handlers_.on_stream(s);
  } else {
    s->Reset(kStreamRefusedCode);
  }
}

void ConnImpl::OnTimer(uint64_t now) {
  if (!conn_ || state_ == State::kDead) return;
  if (state_ == State::kClosing || state_ == State::kDraining) {
    if (now >= close_deadline_) SetDead();
    return;
  }
  if (ngtcp2_conn_get_expiry(conn_) > now) return;
  if (ack_hold_until_ != 0 && now < ack_hold_until_) return;  // the held ACK's delay: not yet
  int rv = ngtcp2_conn_handle_expiry(conn_, now);
  if (rv != 0) {
    HandleError(rv);
    return;
  }
  MarkDirty();
}

void ConnImpl::HandleError(int rv) {
  CloseInfo info;
  info.kind = established_ ? CloseInfo::Kind::kLocal : CloseInfo::Kind::kHandshake;
  ngtcp2_connection_close_error err;
  ngtcp2_connection_close_error_default(&err);
  switch (rv) {
    case NGTCP2_ERR_DRAINING: {
      ngtcp2_connection_close_error peer;
      ngtcp2_conn_get_connection_close_error(conn_, &peer);
      if (established_) info.kind = CloseInfo::Kind::kPeer;
      info.application = peer.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION;
      info.code = peer.error_code;
      info.reason = "closed by peer: " + DescribeClose(peer);
      state_ = State::kDraining;
      close_deadline_ = NowNs() + 3 * ngtcp2_conn_get_pto(conn_);
      NotifyClosed(std::move(info));
      return;
    }
    case NGTCP2_ERR_IDLE_CLOSE:
      if (established_) info.kind = CloseInfo::Kind::kIdle;
      info.reason = "idle timeout";
      SetDead();
      NotifyClosed(std::move(info));
      return;
    case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
      info.reason = "handshake timeout";
      SetDead();
      NotifyClosed(std::move(info));
      return;
    case NGTCP2_ERR_DROP_CONN:
    case NGTCP2_ERR_RETRY:
      info.reason = "dropped";
      SetDead();
      NotifyClosed(std::move(info));
      return;
    case NGTCP2_ERR_CRYPTO:
      ngtcp2_connection_close_error_set_transport_error_tls_alert(
          &err, ngtcp2_conn_get_tls_alert(conn_), nullptr, 0);
      break;
    default:
      ngtcp2_connection_close_error_set_transport_error_liberr(&err, rv, nullptr, 0);
  }
  info.code = err.error_code;
  info.reason = std::string("closed locally (") + ngtcp2_strerror(rv) + "): " + DescribeClose(err);
  if (ref_.alpn_refused) info.reason += ": no common ALPN protocol";
  if (!ref_.failure.empty()) info.reason += ": " + ref_.failure;
  StartClosing(err);
  NotifyClosed(std::move(info));
}

void ConnImpl::StartClosing(const ngtcp2_connection_close_error& err) {
  if (state_ == State::kClosing || state_ == State::kDraining || state_ == State::kDead) return;
  if (ngtcp2_conn_is_in_closing_period(conn_) || ngtcp2_conn_is_in_draining_period(conn_)) {
    SetDead();
    return;
  }
  close_pkt_.resize(NGTCP2_MAX_UDP_PAYLOAD_SIZE);
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi;
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(conn_, &ps.path, &pi, close_pkt_.data(),
                                                      close_pkt_.size(), &err, NowNs());
  if (n <= 0) {
    close_pkt_.clear();
    SetDead();
    return;
  }
  close_pkt_.resize(size_t(n));
  ep_->SendPackets(reinterpret_cast<sockaddr*>(&remote_sa_), remote_len_, close_pkt_.data(),
                   close_pkt_.size(), close_pkt_.size());
  state_ = State::kClosing;
  close_deadline_ = NowNs() + 3 * ngtcp2_conn_get_pto(conn_);
}

void ConnImpl::NotifyClosed(CloseInfo info) {
  if (closed_notified_) return;
  closed_notified_ = true;
  TransportMetrics& m = ep_->metrics();
  if (established_) {
    m.connections->Add(-1);
  } else {
    // Classify the refusal: our ALPN check or the peer's alert 120; certificate problems on
    // either side; timeouts; anything else.
    uint64_t alert = ((info.code & ~uint64_t(0xff)) == NGTCP2_CRYPTO_ERROR && !info.application)
                         ? (info.code & 0xff)
                         : 0;
    if (ref_.alpn_refused || alert == GNUTLS_A_NO_APPLICATION_PROTOCOL) {
      m.refused_alpn->Increment();
    } else if (!ref_.failure.empty() || alert == GNUTLS_A_BAD_CERTIFICATE ||
               alert == GNUTLS_A_CERTIFICATE_REQUIRED || alert == GNUTLS_A_UNKNOWN_CA ||
               alert == GNUTLS_A_CERTIFICATE_EXPIRED || alert == GNUTLS_A_CERTIFICATE_UNKNOWN ||
               alert == GNUTLS_A_UNSUPPORTED_CERTIFICATE || alert == GNUTLS_A_ACCESS_DENIED) {
      m.refused_certificate->Increment();
    } else if (info.reason == "handshake timeout") {
      m.refused_timeout->Increment();
    } else {
      m.refused_other->Increment();
    }
    spdlog::debug("quic handshake failed endpoint={} server={} remote={} reason=\"{}\"",
                  ep_->options().name, server_, remote_address().ToString(), info.reason);
  }
  auto streams = std::move(streams_);
  streams_.clear();
  for (auto& entry : streams) {
    std::shared_ptr<StreamImpl> s = entry.second;
    s->closed_ = true;
    // Deferred: bytes that arrived with the CONNECTION_CLOSE are delivered first.
    ep_->Defer([s, code = info.code] { s->Abort(code, true); });
  }
  auto self = shared_from_this();
  ep_->Defer([self, info = std::move(info)] {
    if (self->dial_done_) {
      auto done = std::move(self->dial_done_);
      self->dial_done_ = nullptr;
      done(Fail(info.kind == CloseInfo::Kind::kHandshake ? ErrorCode::kPermissionDenied
                                                         : ErrorCode::kUnavailable,
                "dial " + self->remote_address().ToString() + ": " + info.reason));
    }
    if (self->established_ && self->handlers_.on_closed) self->handlers_.on_closed(*self, info);
    self->handlers_ = ConnectionHandlers{};  // break cycles through captured handles
  });
}

size_t ConnImpl::PacketBufferSize() {
  size_t size = ngtcp2_conn_get_max_tx_udp_payload_size(conn_);
  if (!large_datagrams_) return size;  // PMTUD probes need the room above the path's size
  // A client's Initial is padded to the buffer it is written into, and the peer's limit is
  // known only once the handshake is done.
  if (!ngtcp2_conn_get_handshake_completed(conn_))
    return std::min<size_t>(size, NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE);
  if (const ngtcp2_transport_params* remote = ngtcp2_conn_get_remote_transport_params(conn_))
    size = std::min<size_t>(size, remote->max_udp_payload_size);
  return size;
}

void ConnImpl::Write() {
  if (!conn_ || state_ == State::kClosing || state_ == State::kDraining || state_ == State::kDead)
    return;
  const uint64_t ts = NowNs();
  const size_t mtu = PacketBufferSize();
  // Bytes this call writes: ngtcp2's pacing burst, at least one full packet and at most one
  // GSO batch of path-MTU packets (the other connections' turn comes first). A connection
  // about to close writes all it has: what is not sent before its CONNECTION_CLOSE never is.
  const size_t quantum =
      pending_close_ ? SIZE_MAX
                     : std::clamp(ngtcp2_conn_get_send_quantum(conn_), mtu,
                                  std::max(mtu, kTxBatch * NGTCP2_MAX_PMTUD_UDP_PAYLOAD_SIZE));
  const size_t batch = std::clamp<size_t>(kGsoMaxBytes / mtu, 1, kTxBatch);
  uint8_t* buf = ep_->tx_buf();
  size_t nout = 0, npkts = 0, seg = 0, total = 0;
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};

  // The streams with bytes to send, in a vector kept between calls (its capacity with it).
  std::vector<std::shared_ptr<StreamImpl>> ready = std::move(ready_spare_);
  ready.clear();
  struct KeepSpare {
    std::vector<std::shared_ptr<StreamImpl>>& ready;
    std::vector<std::shared_ptr<StreamImpl>>& spare;
    ~KeepSpare() {
      ready.clear();
      spare = std::move(ready);
    }
  } keep_spare{ready, ready_spare_};
  if (state_ == State::kOpen) {
    for (auto& [id, s] : streams_)
      if (s->can_send() && s->HasPendingTx()) ready.push_back(s);
    if (ready.size() > 1)
      std::rotate(ready.begin(), ready.begin() + long(rr_++ % ready.size()), ready.end());
  }
  size_t ri = 0;
  auto flush = [&] {
    if (nout > 0)
      ep_->SendPackets(reinterpret_cast<sockaddr*>(ps.path.remote.addr), ps.path.remote.addrlen,
                       buf, nout, seg);
    nout = npkts = 0;
  };
  for (;;) {
    StreamImpl* s = nullptr;
    while (ri < ready.size() && !ready[ri]->HasPendingTx()) ++ri;
    if (ri < ready.size()) s = ready[ri].get();
    ngtcp2_vec vec[16];
    size_t nvec = 0;
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
    int64_t sid = -1;
    if (s) {
      sid = s->id_;
      std::array<std::span<const uint8_t>, 16> unsent;
      nvec = s->tx_.Peek(unsent);
      uint64_t bytes = 0;
      for (size_t i = 0; i < nvec; ++i) {
        vec[i] = ngtcp2_vec{const_cast<uint8_t*>(unsent[i].data()), unsent[i].size()};
        bytes += unsent[i].size();
      }
      if (s->fin_requested_ && bytes == s->tx_.unsent()) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    }
    ngtcp2_ssize ndatalen = -1;
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(conn_, &ps.path, &pi, buf + nout, mtu, &ndatalen,
                                               flags, sid, vec, nvec, ts);
    if (s && ndatalen >= 0) {
      s->tx_.Sent(size_t(ndatalen));
      if ((flags & NGTCP2_WRITE_STREAM_FLAG_FIN) && s->tx_.unsent() == 0) s->fin_sent_ = true;
    }
    if (n < 0) {
      if (n == NGTCP2_ERR_WRITE_MORE) {
        ++ri;
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
        s->blocked_ = true;
        ++ri;
        continue;
      }
      if (n == NGTCP2_ERR_STREAM_SHUT_WR || n == NGTCP2_ERR_STREAM_NOT_FOUND) {
        s->tx_dead_ = true;
        ++ri;
        continue;
      }
      flush();
      ngtcp2_connection_close_error err;
      ngtcp2_connection_close_error_default(&err);
      ngtcp2_connection_close_error_set_transport_error_liberr(&err, int(n), nullptr, 0);
      CloseInfo info;
      info.kind = established_ ? CloseInfo::Kind::kLocal : CloseInfo::Kind::kHandshake;
      info.code = err.error_code;
      info.reason = std::string("write failed: ") + ngtcp2_strerror(int(n));
      StartClosing(err);
      NotifyClosed(std::move(info));
      return;
    }
    if (n == 0) break;
    // GSO: equal-size packets, only the last may be shorter. A bigger packet (PMTUD probe)
    // starts a new batch.
    if (npkts > 0 && size_t(n) > seg) {
      ep_->SendPackets(reinterpret_cast<sockaddr*>(ps.path.remote.addr), ps.path.remote.addrlen,
                       buf, nout, seg);
      std::memmove(buf, buf + nout, size_t(n));
      nout = size_t(n);
      npkts = 1;
      seg = size_t(n);
    } else {
      if (npkts == 0) seg = size_t(n);
      nout += size_t(n);
      ++npkts;
    }
    if (size_t(n) < seg || npkts >= batch) flush();
    total += size_t(n);
    if (total >= quantum) break;
  }
  flush();
  if (total > 0) {
    packets_since_tx_ = 0;
    ack_hold_until_ = 0;
  }
  data_pending_ = false;
  for (const auto& r : ready) data_pending_ = data_pending_ || r->HasPendingTx();
  ngtcp2_conn_update_pkt_tx_time(conn_, ts);
  if (pending_close_) {
    auto err = *pending_close_;
    pending_close_.reset();
    CloseInfo info;
    info.kind = CloseInfo::Kind::kLocal;
    info.application = true;
    info.code = err.error_code;
    info.reason = "closed locally: " + DescribeClose(err);
    StartClosing(err);
    NotifyClosed(std::move(info));
  }
}

void ConnImpl::Release() {
  if (!conn_) return;
  for (const auto& key : cids_) ep_->Unroute(key, this);
  cids_.clear();
  for (auto& [id, s] : streams_) s->closed_ = true;
  streams_.clear();
  ngtcp2_conn_del(conn_);  // before the TLS session it points to
  conn_ = nullptr;
  ref_.conn = nullptr;
  if (tls_) gnutls_deinit(tls_);
  tls_ = nullptr;
  state_ = State::kDead;
}

// ---------------------------------------------------------------------------------------------
// EndpointImpl

Result<void> EndpointImpl::Bind(const HostPort& bind) {
  auto addr = Resolve(bind, AF_UNSPEC);
  if (!addr) return tl::unexpected(addr.error());
  fd_ = ::socket(addr->first.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Fail(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  int size = 8 << 20;
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0)
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  if (setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0)
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  int one = 1;
  setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof(one));  // optional: split below if present
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr->first), addr->second) != 0)
    return Fail(ErrorCode::kIo, "bind " + bind.ToString() + ": " + std::strerror(errno));
  local_len_ = sizeof(local_sa_);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&local_sa_), &local_len_);
  local_hp_ = FromSockaddr(local_sa_);
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) return Fail(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
  gso_ = options_.gso;
  return Ok();
}

void EndpointImpl::SendPackets(const sockaddr* to, socklen_t tolen, const uint8_t* data, size_t len,
                               size_t seg) {
  if (len == 0 || fd_ < 0) return;
  if (queue_sends_ && len <= kQueuedSendBytes && size_t(tolen) <= sizeof(sockaddr_storage)) {
    if (send_queue_buf_.empty()) send_queue_buf_.resize(kQueuedSendBytes);
    if (send_queue_used_ + len > send_queue_buf_.size() || send_queue_.size() >= kQueuedSends)
      FlushSendQueue();
    QueuedSend q;
    std::memcpy(&q.to, to, tolen);
    q.tolen = tolen;
    q.off = send_queue_used_;
    q.len = len;
    q.seg = seg;
    std::memcpy(send_queue_buf_.data() + send_queue_used_, data, len);
    send_queue_used_ += len;
    send_queue_.push_back(q);
    return;
  }
  SendPacketsNow(to, tolen, data, len, seg);
}

void EndpointImpl::SendPacketsNow(const sockaddr* to, socklen_t tolen, const uint8_t* data,
                                  size_t len, size_t seg) {
  auto send_one = [&](const uint8_t* p, size_t n, bool gso) -> ssize_t {
    iovec iov{const_cast<uint8_t*>(p), n};
    msghdr m{};
    m.msg_name = const_cast<sockaddr*>(to);
    m.msg_namelen = tolen;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(uint16_t))] = {};
    if (gso) {
      m.msg_control = ctrl;
      m.msg_controllen = sizeof(ctrl);
      cmsghdr* cm = CMSG_FIRSTHDR(&m);
      cm->cmsg_level = SOL_UDP;
      cm->cmsg_type = UDP_SEGMENT;
      cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      uint16_t s = uint16_t(seg);
      std::memcpy(CMSG_DATA(cm), &s, sizeof(s));
    }
    for (;;) {
      ssize_t r = sendmsg(fd_, &m, 0);
      if (r >= 0 || errno != EINTR) {
        metrics_.send_calls->Increment();
        return r;
      }
    }
  };
  if (gso_ && len > seg) {
    if (send_one(data, len, true) >= 0) {
      metrics_.datagrams_sent->Increment((len + seg - 1) / seg);
      return;
    }
    if (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP) {
      gso_ = false;  // the kernel or device refuses GSO: per-packet from now on
    } else {
      metrics_.send_errors->Increment();  // EAGAIN: QUIC loss recovery resends
      return;
    }
  }
  for (size_t off = 0; off < len; off += seg) {
    if (send_one(data + off, std::min(seg, len - off), false) < 0) {
      metrics_.send_errors->Increment();
      return;
    }
    metrics_.datagrams_sent->Increment();
  }
}

void EndpointImpl::FlushSendQueue() {
  if (send_queue_.empty()) return;
  // In the order queued: one message per GSO batch (with its segment size), or per datagram
  // (a batch, when GSO is off, one message per segment).
  send_iovs_.clear();
  send_msg_info_.clear();
  for (size_t i = 0; i < send_queue_.size(); ++i) {
    const QueuedSend& q = send_queue_[i];
    uint8_t* data = send_queue_buf_.data() + q.off;
    const bool gso = gso_ && q.len > q.seg;
    const size_t step = gso ? q.len : q.seg;
    for (size_t off = 0; off < q.len; off += step) {
      send_iovs_.push_back(iovec{data + off, std::min(step, q.len - off)});
      send_msg_info_.push_back(QueuedMessage{i, gso ? (q.len + q.seg - 1) / q.seg : 1, gso});
    }
  }
  send_msgs_.assign(send_msg_info_.size(), mmsghdr{});
  send_ctrl_.resize(send_msg_info_.size());
  for (size_t k = 0; k < send_msgs_.size(); ++k) {
    QueuedSend& q = send_queue_[send_msg_info_[k].queued];
    msghdr& m = send_msgs_[k].msg_hdr;
    m.msg_name = &q.to;
    m.msg_namelen = q.tolen;
    m.msg_iov = &send_iovs_[k];
    m.msg_iovlen = 1;
    if (!send_msg_info_[k].gso) continue;
    m.msg_control = send_ctrl_[k].data();
    m.msg_controllen = send_ctrl_[k].size();
    cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    const auto seg = uint16_t(q.seg);
    std::memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
  }
  size_t at = 0;
  while (at < send_msgs_.size()) {
    int n = sendmmsg(fd_, send_msgs_.data() + at, unsigned(send_msgs_.size() - at), 0);
    if (n < 0 && errno == EINTR) continue;
    metrics_.send_calls->Increment();
    if (n <= 0) {
      // The first unsent message failed: a GSO batch the kernel refuses is sent again without
      // GSO, as from now on; anything else is left to QUIC's loss recovery.
      const QueuedMessage& info = send_msg_info_[at];
      if (info.gso && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP)) {
        gso_ = false;
        const QueuedSend& q = send_queue_[info.queued];
        SendPacketsNow(reinterpret_cast<const sockaddr*>(&q.to), q.tolen,
                       send_queue_buf_.data() + q.off, q.len, q.seg);
      } else {
        metrics_.send_errors->Increment();
      }
      ++at;
      continue;
    }
    for (size_t k = at; k < at + size_t(n); ++k)
      metrics_.datagrams_sent->Increment(send_msg_info_[k].datagrams);
    at += size_t(n);
  }
  send_queue_.clear();
  send_queue_used_ = 0;
}

void EndpointImpl::Dial(const HostPort& remote, DialOptions options, DialCallback done) {
  if (!InLoopThread()) {
    Post([this, remote, options = std::move(options), done = std::move(done)]() mutable {
      Dial(remote, std::move(options), std::move(done));
    });
    return;
  }
  if (stopping_) {
    done(Fail(ErrorCode::kUnavailable, "endpoint stopped"));
    return;
  }
  auto addr = Resolve(remote, local_sa_.ss_family);
  if (!addr) {
    done(tl::unexpected(addr.error()));
    return;
  }
  auto conn = std::make_shared<ConnImpl>(this, ++next_conn_id_, false);
  auto r = conn->InitClient(reinterpret_cast<const sockaddr*>(&addr->first), addr->second, options);
  if (!r) {
    conn->Release();
    Defer([done = std::move(done), err = r.error()] { done(tl::unexpected(err)); });
    return;
  }
  conn->SetDialCallback(std::move(done));
  conns_.emplace(conn->id(), conn);
}

void EndpointImpl::Accept(const uint8_t* data, size_t len, const sockaddr* from,
                          socklen_t fromlen) {
  ngtcp2_pkt_hd hd;
  if (ngtcp2_accept(&hd, data, len) != 0) return;  // not a valid client Initial: drop
  auto conn = std::make_shared<ConnImpl>(this, ++next_conn_id_, true);
  if (auto r = conn->InitServer(hd, from, fromlen); !r) {
    spdlog::warn("quic accept failed error=\"{}\"", r.error().message);
    conn->Release();
    return;
  }
  conns_.emplace(conn->id(), conn);
  conn->Read(data, len, from, fromlen);
}

void EndpointImpl::SendStatelessReset(const ngtcp2_version_cid& vc, size_t len,
                                      const sockaddr* from, socklen_t fromlen) {
  // Smaller than what we received (no reset loops), at least the RFC minimum.
  if (len < 1 + NGTCP2_MIN_STATELESS_RESET_RANDLEN + NGTCP2_STATELESS_RESET_TOKENLEN + 1) return;
  if (vc.dcidlen != kScidLen) return;
  ngtcp2_cid cid;
  ngtcp2_cid_init(&cid, vc.dcid, vc.dcidlen);
  uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
  if (ngtcp2_crypto_generate_stateless_reset_token(token, reset_secret_, sizeof(reset_secret_),
                                                   &cid) != 0)
    return;
  size_t total = std::min<size_t>(len - 1, 43);
  size_t randlen = total - 1 - NGTCP2_STATELESS_RESET_TOKENLEN;
  uint8_t rand[64];
  RandomBytes(rand, randlen);
  uint8_t out[64];
  ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(out, sizeof(out), token, rand, randlen);
  if (n <= 0) return;
  metrics_.stateless_resets->Increment();
  SendPackets(from, fromlen, out, size_t(n), size_t(n));
}

void EndpointImpl::Dispatch(const uint8_t* data, size_t len, const sockaddr* from,
                            socklen_t fromlen) {
  ngtcp2_version_cid vc;
  int rv = ngtcp2_pkt_decode_version_cid(&vc, data, len, kScidLen);
  if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
    if (!listen_) return;
    uint8_t out[256];
    uint8_t unused = 0;
    RandomBytes(&unused, 1);
    const uint32_t versions[] = {NGTCP2_PROTO_VER_V1};
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
        out, sizeof(out), unused, vc.scid, vc.scidlen, vc.dcid, vc.dcidlen, versions, 1);
    if (n > 0) {
      metrics_.version_negotiations->Increment();
      SendPackets(from, fromlen, out, size_t(n), size_t(n));
    }
    return;
  }
  if (rv != 0) return;
  auto it = routes_.find(CidKey(vc.dcid, vc.dcidlen));
  if (it != routes_.end()) {
    ConnImpl* c = it->second;
    c->Read(data, len, from, fromlen);
    Reschedule(c);
    return;
  }
  if (data[0] & 0x80) {
    if (listen_ && !stopping_) Accept(data, len, from, fromlen);
    return;
  }
  SendStatelessReset(vc, len, from, fromlen);
}

void EndpointImpl::ReadPackets() {
  mmsghdr mm[kRxBatch];
  iovec iov[kRxBatch];
  sockaddr_storage from[kRxBatch];
  alignas(cmsghdr) char ctrl[kRxBatch][CMSG_SPACE(sizeof(int))];
  for (int round = 0; round < 64; ++round) {
    for (size_t i = 0; i < kRxBatch; ++i) {
      iov[i] = {rx_bufs_.data() + i * kRxBufSize, kRxBufSize};
      mm[i].msg_hdr = msghdr{};
      mm[i].msg_hdr.msg_name = &from[i];
      mm[i].msg_hdr.msg_namelen = sizeof(from[i]);
      mm[i].msg_hdr.msg_iov = &iov[i];
      mm[i].msg_hdr.msg_iovlen = 1;
      mm[i].msg_hdr.msg_control = ctrl[i];
      mm[i].msg_hdr.msg_controllen = sizeof(ctrl[i]);
      mm[i].msg_len = 0;
    }
    int n = recvmmsg(fd_, mm, kRxBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    loop_owner()->loop_datagrams_ += uint32_t(n);
    for (int i = 0; i < n; ++i) {
      size_t len = mm[i].msg_len, seg = len;
      for (cmsghdr* cm = CMSG_FIRSTHDR(&mm[i].msg_hdr); cm != nullptr;
           cm = CMSG_NXTHDR(&mm[i].msg_hdr, cm)) {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
          int g = 0;
          std::memcpy(&g, CMSG_DATA(cm), sizeof(g));
          if (g > 0) seg = size_t(g);
        }
      }
      const uint8_t* p = rx_bufs_.data() + size_t(i) * kRxBufSize;
      if (len > 0) metrics_.datagrams_received->Increment((len + seg - 1) / seg);
      for (size_t off = 0; off < len; off += seg)
        Dispatch(p + off, std::min(seg, len - off), reinterpret_cast<const sockaddr*>(&from[i]),
                 mm[i].msg_hdr.msg_namelen);
    }
    if (size_t(n) < kRxBatch) return;
  }
}

void EndpointImpl::RunPosted(bool woken) {
  // The two vectors take turns, so neither loses its capacity: a vector swapped for a fresh
  // one allocated again with the next post (docs/performance.md, change 35).
  std::vector<std::function<void()>> batch = std::move(posted_spare_);
  if (woken) wake_pending_.store(false);
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    batch.swap(posted_);
    posted_unparks_ = false;
  }
  for (auto& fn : batch) fn();
  batch.clear();
  posted_spare_ = std::move(batch);
}

bool EndpointImpl::HasPosted() {
  std::lock_guard<std::mutex> lock(post_mu_);
  return !posted_.empty();
}

bool EndpointImpl::HasPostUnparking() {
  std::lock_guard<std::mutex> lock(post_mu_);
  return posted_unparks_;
}

void EndpointImpl::Reschedule(ConnImpl* c) {
  uint64_t at = c->Expiry();
  if (at != c->timer_at_) {
    c->timer_at_ = at;
    if (at != UINT64_MAX) conn_timers_.emplace(at, c->id());
  }
}

uint64_t EndpointImpl::NextDeadline() {
  uint64_t next = UINT64_MAX;
  while (!conn_timers_.empty()) {
    auto [at, id] = conn_timers_.top();
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->timer_at_ != at) {
      conn_timers_.pop();  // stale entry
      continue;
    }
    next = at;
    break;
  }
  if (!timers_.empty()) next = std::min(next, timers_.begin()->first.first);
  return std::min(next, chunk_pool_.ReleaseAt());
}

void EndpointImpl::RunTimers() {
  uint64_t now = NowNs();
  chunk_pool_.Expire(now);
  while (!conn_timers_.empty() && conn_timers_.top().first <= now) {
    auto [at, id] = conn_timers_.top();
    conn_timers_.pop();
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->timer_at_ != at) continue;
    ConnImpl* c = it->second.get();
    c->timer_at_ = UINT64_MAX;
    c->OnTimer(now);
    Reschedule(c);
  }
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    timer_at_by_id_.erase(node.key().second);
    node.mapped()();
  }
}

void EndpointImpl::Settle(bool urgent_only) {
  for (int guard = 0; guard < 1000; ++guard) {
    // What the loop posted to itself in this iteration (a shard answer computed inline, say)
    // runs now, so its bytes leave in this iteration's packets. A request delivered from the
    // deferred queue posts its answer: that answer runs once more before any connection is
    // written, or the request's ACK would leave alone, one packet ahead of the answer that can
    // carry it (docs/performance.md, change 16). Only once: looping until nothing is posted
    // would let other threads' answers hold every write back under load.
    if (HasPosted()) RunPosted(false);
    if (!deferred_.empty()) {
      while (!deferred_.empty()) {
        auto fn = std::move(deferred_.front());
        deferred_.pop_front();
        fn();
      }
      if (HasPosted()) RunPosted(false);
    }
    const bool nothing_to_write =
        dirty_.empty() || (urgent_only && std::none_of(dirty_.begin(), dirty_.end(),
                                                       [](const auto& c) { return c->Urgent(); }));
    if (nothing_to_write) {
      if (HasPosted()) continue;
      break;
    }
    // Taking turns with a spare vector, as RunPosted's: no allocation per round.
    std::vector<std::shared_ptr<ConnImpl>> dirty = std::move(dirty_spare_);
    dirty.swap(dirty_);
    const uint64_t now = options_.ack_hold.count() > 0 ? NowNs() : 0;
    auto write = [&](const std::shared_ptr<ConnImpl>& c) {
      c->dirty_ = false;
      if (now == 0 || !c->HoldsAck(now)) c->Write();
      Reschedule(c.get());
    };
    // Several connections to write: their datagrams leave in one sendmmsg at the end of this
    // round (one connection's go at once, uncopied).
    queue_sends_ = dirty.size() > 1;
    // Connections with data first: an answer or a forwarded request is on someone's path, a
    // lone ACK is not (its sendmsg would go ahead of them).
    size_t later = 0;  // the connections owing only acknowledgements, moved to the front
    for (auto& c : dirty) {
      if (c->Urgent()) {
        write(c);
      } else {
        dirty[later++] = c;
      }
    }
    dirty.resize(later);
    for (auto& c : dirty) {
      // Its dirty_ flag is still set, so nothing queued it again meanwhile.
      if (urgent_only) {
        dirty_.push_back(c);  // SettleAll's second pass writes it
      } else {
        write(c);
      }
    }
    queue_sends_ = false;
    FlushSendQueue();
    dirty.clear();
    dirty_spare_ = std::move(dirty);
  }
  if (!reap_needed_ || !deferred_.empty()) return;
  reap_needed_ = false;
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (it->second->state() == ConnImpl::State::kDead) {
      it->second->Release();
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<void> EndpointImpl::Start(EndpointImpl* host) {
  if (host == nullptr) {
    thread_ = std::thread([this] { Loop(); });
    return Ok();
  }
  host_ = host;
  std::promise<bool> joined;
  auto answer = joined.get_future();
  host->Post([this, host, &joined] {
    if (host->stopping_ || host->guests_.size() >= kMaxLoopGuests || host->options_.drivable) {
      joined.set_value(false);
      return;
    }
    loop_thread_id_ = std::this_thread::get_id();
    host->guests_.push_back(this);
    joined.set_value(true);
  });
  if (!answer.get()) {
    return Fail(ErrorCode::kUnavailable,
                "share_loop_of: that endpoint is stopped, drivable, or already serves " +
                    std::to_string(kMaxLoopGuests) + " others");
  }
  attached_ = true;
  return Ok();
}

void EndpointImpl::StopGuest() {
  if (attached_) {
    attached_ = false;
    std::promise<void> left;
    auto done = left.get_future();
    EndpointImpl* host = host_;
    host->Post([this, host, &left] { host->DetachGuest(this, &left); });
    done.wait();
  }
  CloseFds();
}

void EndpointImpl::DetachGuest(EndpointImpl* guest, std::promise<void>* left) {
  auto it = std::find(guests_.begin(), guests_.end(), guest);
  if (it != guests_.end()) {
    guests_.erase(it);
    guest->Shutdown();
    guest->detached_ = true;
  }
  // The loop may be in the middle of an iteration that still lists the guest: release it at
  // the top of the next one. Off the loop thread (the loop has exited) nothing touches it.
  if (InLoopThread()) {
    left_.push_back(left);
  } else {
    left->set_value();
  }
}

void EndpointImpl::SettleAll(EndpointImpl* const* endpoints, size_t n) {
  if (n == 1) {
    endpoints[0]->Settle();
    return;
  }
  for (int round = 0; round < 1000; ++round) {
    // Data first on every endpoint, then the acknowledgements: a request read on one endpoint
    // and forwarded through another leaves before the first one's lone ACK of it.
    for (size_t i = 0; i < n; ++i) {
      if (!endpoints[i]->detached_) endpoints[i]->Settle(/*urgent_only=*/true);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!endpoints[i]->detached_) endpoints[i]->Settle();
    }
    bool busy = false;
    for (size_t i = 0; i < n && !busy; ++i) {
      busy = !endpoints[i]->detached_ && endpoints[i]->HasWork();
    }
    if (!busy) return;
  }
}

void EndpointImpl::Loop() {
  {
    std::lock_guard<std::mutex> lk(drive_mu_);  // a Drive reads own_thread_id_ under it
    own_thread_id_ = std::this_thread::get_id();
    loop_thread_id_ = own_thread_id_;
  }
  EndpointImpl* on_loop[1 + kMaxLoopGuests];
  pollfd fds[2 * (1 + kMaxLoopGuests)];
  while (!stopping_) {
    if (!options_.drivable) {
      Iterate(UINT64_MAX, on_loop, fds);
      continue;
    }
    std::unique_lock<std::mutex> lk(drive_mu_, std::try_to_lock);
    if (!lk.owns_lock() || ShouldPark(NowNs())) {
      if (lk.owns_lock()) lk.unlock();
      std::unique_lock<std::mutex> pl(park_mu_);
      // park_waiting_ is announced before the state is read again, and Unpark changes the state
      // before it reads park_waiting_ (both sequentially consistent): either this sees what
      // Unpark announced, or Unpark sees park_waiting_ and notifies under park_mu_.
      park_waiting_ = true;
      const uint64_t now = NowNs();
      if (stopping_ || !ShouldPark(now)) {
        park_waiting_ = false;
        continue;
      }
      // While a caller drives, a whole drive_park at a time; after, until drive_park is over.
      uint64_t park_ns = uint64_t(options_.drive_park.count()) * 1000;
      const uint64_t ended = last_drive_end_ns_;
      if (!drive_claimed_ && ended + park_ns > now) park_ns = ended + park_ns - now;
      parked_ = true;
      park_cv_.wait_for(pl, std::chrono::nanoseconds(park_ns));
      parked_ = false;
      park_waiting_ = false;
      continue;
    }
    loop_thread_id_ = own_thread_id_;
    Iterate(UINT64_MAX, on_loop, fds);
  }
  std::lock_guard<std::mutex> lk(drive_mu_);
  loop_thread_id_ = own_thread_id_;
  Shutdown();
}

bool EndpointImpl::ShouldPark(uint64_t now) {
  if (drive_claimed_.load()) return true;
  if (awaiting_.load() > 0 || HasPostUnparking()) return false;
  const uint64_t ended = last_drive_end_ns_;
  return ended != 0 && now < ended + uint64_t(options_.drive_park.count()) * 1000;
}

void EndpointImpl::WakeOwnLoop() {
  Unpark();
  if (wake_pending_.exchange(true)) return;
  uint64_t one = 1;
  ssize_t w = ::write(event_fd_, &one, sizeof(one));
  (void)w;
}

void EndpointImpl::Unpark() {
  if (!options_.drivable) return;
  // Whatever came (a post, a waiter, Stop) is the loop thread's to serve until the next drive:
  // no park after the drive that ended, nor after the one running now.
  park_cancelled_ = true;
  last_drive_end_ns_ = 0;
  if (!park_waiting_) return;
  std::lock_guard<std::mutex> pl(park_mu_);
  if (parked_) park_cv_.notify_one();
}

bool EndpointImpl::BeginDrive(std::unique_lock<std::mutex>& lk) {
  // host_ is set before the endpoint is handed out; a guest has no loop of its own to drive.
  if (!options_.drivable || host_ != nullptr || InLoopThread() || stopping_) return false;
  // Callers sharing the connection wait for the loop thread: it serves this one too.
  if (awaiting_callers_.load() > 0) return false;
  if (drive_claimed_.exchange(true)) return false;  // another caller drives
  lk = std::unique_lock<std::mutex>(drive_mu_, std::try_to_lock);
  if (!lk.owns_lock()) {
    // The loop thread runs an iteration, perhaps asleep in ppoll: wake it, wait for the end.
    if (!wake_pending_.exchange(true)) {
      uint64_t one = 1;
      ssize_t w = ::write(event_fd_, &one, sizeof(one));
      (void)w;
    }
    lk.lock();
  }
  if (stopping_) {
    lk.unlock();
    drive_claimed_ = false;
    return false;
  }
  park_cancelled_ = false;
  loop_thread_id_ = std::this_thread::get_id();
  return true;
}

void EndpointImpl::EndDrive(std::unique_lock<std::mutex>& lk) {
  last_drive_end_ns_ = park_cancelled_ ? 0 : NowNs();
  loop_thread_id_ = own_thread_id_;
  lk.unlock();
  drive_claimed_ = false;
  // Another caller's request awaits an answer this drive did not read, or a post came: the
  // loop thread takes over now rather than after drive_park.
  if (awaiting_.load() > 0 || HasPostUnparking() || stopping_) Unpark();
}

bool EndpointImpl::Drive(const std::function<void()>& start, const std::function<bool()>& done,
                         std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lk;
  if (!BeginDrive(lk)) return false;
  start();
  // What start() wrote or posted leaves now, before the first poll (which may sleep).
  Settle();
  const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
      deadline - std::chrono::steady_clock::now());
  const uint64_t cap = NowNs() + uint64_t(std::max<int64_t>(0, left.count()));
  EndpointImpl* on_loop[1 + kMaxLoopGuests];
  pollfd fds[2 * (1 + kMaxLoopGuests)];
  while (!done() && !stopping_ && NowNs() < cap) Iterate(cap, on_loop, fds);
  EndDrive(lk);
  return true;
}

bool EndpointImpl::DriveOneTurn() {
  if (awaiting_.load() > 0) return false;
  std::unique_lock<std::mutex> lk;
  if (!BeginDrive(lk)) return false;
  // What was posted runs and leaves first; the iteration then reads what came (every other turn
  // when nothing else is pending: a due deadline alone skips the poll once, Iterate).
  Settle();
  EndpointImpl* on_loop[1 + kMaxLoopGuests];
  pollfd fds[2 * (1 + kMaxLoopGuests)];
  Iterate(NowNs(), on_loop, fds);
  EndDrive(lk);
  return true;
}

void EndpointImpl::Iterate(uint64_t cap_ns, EndpointImpl** on_loop, pollfd* fds) {
  for (auto* left : left_) left->set_value();
  left_.clear();
  size_t n = 0;
  on_loop[n++] = this;
  for (auto* guest : guests_) on_loop[n++] = guest;
  uint64_t next = UINT64_MAX;
  bool posted = false;
  for (size_t i = 0; i < n; ++i) {
    next = std::min(next, on_loop[i]->NextDeadline());
    // Posts the loop made to itself do not write the eventfd: never sleep on them.
    posted = posted || on_loop[i]->HasPosted();
  }
  uint64_t now = NowNs();
  timespec ts{};
  timespec* tsp = nullptr;
  next = std::min(next, cap_ns);
  if (next != UINT64_MAX) {
    uint64_t wait = next > now ? next - now : 0;
    ts.tv_sec = time_t(wait / NGTCP2_SECONDS);
    ts.tv_nsec = long(wait % NGTCP2_SECONDS);
    tsp = &ts;
  }
  // Polling instead of sleeping while answers are awaited (poll_while_awaiting), up to that
  // long after the last event.
  bool polling = false;
  for (size_t i = 0; i < n && !polling; ++i) {
    const uint64_t budget = uint64_t(on_loop[i]->options_.poll_while_awaiting.count()) * 1000;
    polling = budget > 0 && on_loop[i]->awaiting_.load(std::memory_order_relaxed) > 0 &&
              now < last_event_ns_ + budget;
  }
  if (posted || polling) {
    ts = timespec{};
    tsp = &ts;
  }
  for (size_t i = 0; i < n; ++i) {
    fds[2 * i] = {on_loop[i]->fd_, POLLIN, 0};
    // Only the loop owner's eventfd is written (Post); a negative fd is not polled.
    fds[2 * i + 1] = {i == 0 ? on_loop[i]->event_fd_ : -1, POLLIN, 0};
  }
  // A deadline already due (typically ngtcp2's pacing mark, set to the moment of the packet
  // just written: every answer makes one) runs without a poll that would only say "nothing
  // yet" — but never twice in a row, so the sockets are read at least every other iteration.
  const bool due = tsp != nullptr && ts.tv_sec == 0 && ts.tv_nsec == 0 && !posted && !polling;
  int rv = 0;
  const bool skip_poll = due && !poll_skipped_;
  poll_skipped_ = skip_poll;
  if (skip_poll) {
    for (size_t i = 0; i < 2 * n; ++i) fds[i].revents = 0;
  } else {
    rv = ppoll(fds, nfds_t(2 * n), tsp, nullptr);
  }
  if (rv < 0 && errno != EINTR) {
    spdlog::error("quic endpoint ppoll: {}", std::strerror(errno));
    stopping_ = true;
    return;
  }
  if (rv > 0 || !polling) last_event_ns_ = NowNs();
  loop_datagrams_ = 0;
  // Nothing yet, or no poll at all: not counted as a wakeup.
  const bool empty_poll = (rv == 0 && polling) || skip_poll;
  for (size_t i = 0; i < n; ++i) {
    EndpointImpl* e = on_loop[i];
    if (e->detached_) continue;  // left during this iteration
    if (!empty_poll) e->metrics_.loop_wakeups->Increment();
    bool woken = false;
    if (fds[2 * i + 1].revents & POLLIN) {
      uint64_t v;
      ssize_t r = ::read(e->event_fd_, &v, sizeof(v));
      (void)r;
      woken = true;
    }
    e->RunPosted(woken);
    if (e->detached_) continue;
    if (fds[2 * i].revents & POLLIN) e->ReadPackets();
    e->RunTimers();
  }
  SettleAll(on_loop, n);
}

void EndpointImpl::Shutdown() {
  stopping_ = true;
  // The endpoints sharing this loop go first: their connections live on this thread.
  for (auto* guest : guests_) {
    guest->Shutdown();
    guest->detached_ = true;
  }
  guests_.clear();
  for (auto& [id, c] : conns_) {
    if (c->state() == ConnImpl::State::kOpen || c->state() == ConnImpl::State::kHandshaking) {
      c->Close(0, "endpoint stopping");
      c->Write();
    }
  }
  RunPosted(false);
  for (int guard = 0; guard < 100 && !deferred_.empty(); ++guard) {
    auto fn = std::move(deferred_.front());
    deferred_.pop_front();
    fn();
  }
  deferred_.clear();
  for (auto& [id, c] : conns_) c->Release();
  conns_.clear();
  dirty_.clear();
  timers_.clear();
  timer_at_by_id_.clear();
  std::vector<std::function<void()>> late;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    loop_done_ = true;
    late.swap(posted_);
  }
  for (auto& fn : late) fn();
  for (auto* left : left_) left->set_value();
  left_.clear();
}

}  // namespace

Result<std::unique_ptr<Endpoint>> Endpoint::Create(const HostPort& bind, EndpointOptions options,
                                                   MetricsRegistry& metrics,
                                                   std::optional<ListenHandlers> listen) {
  EnsureGnutlsInitialized();
  if (!options.tls) return Fail(ErrorCode::kInvalidArgument, "EndpointOptions.tls is required");
  if (options.name.empty()) options.name = RoleName(options.tls->role());
  if (options.max_ack_delay.count() < 0 || options.max_ack_delay.count() >= (1 << 14))
    return Fail(ErrorCode::kInvalidArgument, "EndpointOptions.max_ack_delay: 0 to 16383 ms");
  EndpointImpl* host = nullptr;
  if (options.share_loop_of != nullptr) {
    host = dynamic_cast<EndpointImpl*>(options.share_loop_of);
    if (host == nullptr) {
      return Fail(ErrorCode::kInvalidArgument,
                  "EndpointOptions.share_loop_of: not an endpoint made by Endpoint::Create");
    }
    host = host->loop_owner();
  }
  auto ep = std::make_unique<EndpointImpl>(std::move(options), metrics, std::move(listen));
  if (auto r = ep->Bind(bind); !r) return tl::unexpected(r.error());
  if (auto r = ep->Start(host); !r) return tl::unexpected(r.error());
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace felix::transport
