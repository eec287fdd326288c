// The QUIC endpoint: one UDP socket, one event-loop thread, many connections (listened for
// and/or dialled). This is the only interface the rest of Felix uses; ngtcp2 and GnuTLS stay
// behind it.
//
// Threading contract
//  - Every Endpoint runs on exactly one loop thread: its own, or the one of the endpoint named
//    in EndpointOptions::share_loop_of (one thread then serves both sockets, so work handed
//    from one endpoint to the other is a post to the same thread: no wakeup, no context
//    switch). All callbacks (ListenHandlers, ConnectionHandlers, StreamHandlers, Dial
//    completions, timers, Post'ed functions) run on it, never inside ngtcp2 or GnuTLS code, so
//    they may call any Connection/Stream method.
//  - Connection and Stream methods must be called on the loop thread (from a callback, or from
//    a function given to Endpoint::Post). Handles (shared_ptr) may be released on any thread;
//    after the connection or endpoint is gone their methods fail harmlessly.
//  - Endpoint::Post, Endpoint::Dial, Endpoint::Stop, Endpoint::local_address and
//    Endpoint::InLoopThread may be called from any thread. Stop (and the destructor) must not be
//    called on the loop thread; they close every connection (application code 0) and join.
//    After the loop has exited, Post runs the function inline on the caller's thread.
//  - Stream handlers should not capture their own Stream's shared_ptr (a cycle) unless they
//    drop it on on_fin/on_reset.
//  - Lifetimes: the Endpoint shares ownership of its TlsContext; the MetricsRegistry must
//    outlive it; anything that calls into it (cluster::PeerPool, the broker) must be stopped before
//    it.
//
// Flow control is backpressure: received bytes stay in the stream's receive buffer, and QUIC
// credit (MAX_STREAM_DATA / MAX_DATA) is returned only when the application calls
// Stream::Consume. A reader that does not consume stops its sender after one stream window.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/metrics.h"
#include "common/net_address.h"
#include "common/result.h"
#include "transport/tls_context.h"

namespace felix::transport {

class Connection;
class Stream;
class Endpoint;
struct TransportMetrics;

struct StreamHandlers {
  // New bytes arrived. `data` is every received byte not yet consumed (it starts with bytes
  // shown before and not consumed). Call Stream::Consume(n) to drop n bytes from the front and
  // return their flow-control credit to the sender.
  std::function<void(Stream&, std::span<const uint8_t> data)> on_data;
  // The peer finished its side and every received byte has been consumed.
  std::function<void(Stream&)> on_fin;
  // The stream was aborted: the peer reset it or asked us to stop sending (code = its
  // application error code), or the connection closed under it (code = the close code). Not
  // delivered once on_fin was delivered and our own side was finished (nothing left to abort).
  std::function<void(Stream&, uint64_t code)> on_reset;
  // The unacknowledged send backlog fell below half the high-water mark after a Write that
  // returned false.
  std::function<void(Stream&)> on_writable;
  // A buffer given to Stream::WriteOwned, every byte of it acknowledged by the peer: back to
  // the writer for its next writes (bytes as written; clear it). Runs on the loop thread inside
  // the transport's processing of an acknowledgement: it must not call into the stream or its
  // connection. Unset: the buffer is freed. Not called for buffers a closing stream drops.
  std::function<void(std::vector<uint8_t>)> on_buffer_done;
  // Held as long as these handlers are installed. Handlers that capture a raw pointer to it
  // instead of a shared_ptr each are stored inside their std::function: one that captures a
  // shared_ptr (not trivially copyable) is a heap allocation per handler, per stream.
  std::shared_ptr<void> owner;
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual int64_t id() const = 0;
  virtual bool is_unidirectional() const = 0;
  virtual bool is_local() const = 0;  // opened by this side
  // Installs the handlers; data or a fin that arrived before is delivered next (not inline).
  virtual void SetHandlers(StreamHandlers handlers) = 0;
  // Drops the handlers once the callback now running has returned (later in this loop turn),
  // for handlers that end their own stream. false when the stream's connection is gone: the
  // caller then drops them another way (a Post). Loop thread.
  virtual bool ReleaseHandlers() = 0;
  // Queues bytes (copied). Returns false when the unacknowledged backlog is at or above the
  // high-water mark (the bytes are still queued); wait for on_writable before writing more.
  // Fails when the write side is closed.
  virtual Result<bool> Write(std::span<const uint8_t> bytes) = 0;
  // As Write, without copying: the stream keeps `bytes` until the peer acknowledged all of
  // them, then hands the buffer to StreamHandlers::on_buffer_done. For large writes, whose copy
  // would cost more than the buffer it ties up (a small one is better copied).
  virtual Result<bool> WriteOwned(std::vector<uint8_t> bytes) = 0;
  // Sends FIN after the queued bytes.
  virtual void Finish() = 0;
  // Aborts both directions with an application error code (RESET_STREAM + STOP_SENDING).
  virtual void Reset(uint64_t app_error_code) = 0;
  // Drops `n` received bytes from the front and returns their credit.
  virtual void Consume(size_t n) = 0;
  virtual size_t received_buffered() const = 0;  // received, not yet consumed
  virtual size_t send_buffered() const = 0;      // queued and not yet acknowledged
  virtual uint64_t total_received() const = 0;   // bytes ever received on this stream
  virtual bool closed() const = 0;               // fully closed or aborted
  virtual Connection* connection() = 0;          // null once the connection is gone
};

struct CloseInfo {
  enum class Kind {
    kLocal,      // we closed it (Close, Stop, or a protocol error we detected)
    kPeer,       // CONNECTION_CLOSE from the peer
    kIdle,       // idle timeout
    kHandshake,  // the handshake failed or timed out
  };
  Kind kind = Kind::kLocal;
  bool application = false;  // code is an application error code (else a transport code)
  uint64_t code = 0;
  std::string reason;  // human readable; includes TLS alert and verification failure text
};

struct ConnectionHandlers {
  // The peer opened a stream. Install handlers on it (or Reset it).
  std::function<void(const std::shared_ptr<Stream>&)> on_stream;
  // Called once when the connection stops being usable; every open stream got on_reset first.
  std::function<void(Connection&, const CloseInfo&)> on_closed;
};

class Connection {
 public:
  virtual ~Connection() = default;
  virtual void SetHandlers(ConnectionHandlers handlers) = 0;
  virtual Result<std::shared_ptr<Stream>> OpenBidiStream() = 0;
  virtual Result<std::shared_ptr<Stream>> OpenUniStream() = 0;
  // Sends CONNECTION_CLOSE with an application error code after writing what is queued.
  virtual void Close(uint64_t app_error_code, std::string_view reason) = 0;
  virtual bool is_open() const = 0;
  virtual bool is_server() const = 0;
  virtual HostPort remote_address() const = 0;
  virtual std::string alpn() const = 0;  // negotiated ALPN ("" when none)
  // DNS names of the peer's verified certificate (empty when it presented none).
  virtual std::vector<std::string> peer_dns_names() const = 0;
  virtual Endpoint& endpoint() = 0;
};

// Endpoints that may run on one host endpoint's loop (EndpointOptions::share_loop_of): the
// broker's two ports, or the connections of many clients on one client I/O thread.
inline constexpr size_t kMaxLoopGuests = 64;

struct EndpointOptions {
  std::shared_ptr<TlsContext> tls;  // required; its role is the endpoint's role
  std::string name;                 // metrics label and logs, e.g. "client", "internal"
  std::chrono::milliseconds idle_timeout{6000};
  std::chrono::milliseconds handshake_timeout{5000};
  // PING after this much silence so a live but quiet peer is not idled out (0: off). Values
  // not below half the idle timeout are replaced by half of it.
  std::chrono::milliseconds keep_alive{2000};
  uint64_t max_streams_bidi = 1024;  // concurrent peer-opened streams allowed, each kind
  uint64_t max_streams_uni = 1024;
  uint64_t initial_stream_window = 1u << 20;
  uint64_t initial_connection_window = 16u << 20;
  uint64_t max_stream_window = 16u << 20;  // auto-tuning caps (== initial: no tuning)
  uint64_t max_connection_window = 24u << 20;
  size_t send_high_water = 4u << 20;  // per-stream unacked bytes before Write returns false
  std::chrono::microseconds initial_rtt{10000};
  bool gso = true;  // UDP GSO on send (falls back when the kernel refuses)
  // QUIC packets to a peer on a loopback address (127/8, ::1) may be this big (bytes, at most
  // 65000; 0: the path-MTU size, 1200–1452, everywhere). Never above the peer's
  // max_udp_payload_size; handshake packets keep the path-MTU size.
  size_t loopback_datagram_size = 65000;
  // While requests sent from this endpoint await their answers (Endpoint::AwaitingAnswers),
  // the loop polls its sockets instead of sleeping, for up to this long after its last event
  // (0: it sleeps at once). Where a sleeping thread is slow to wake — on a VM without guest
  // halt polling, ~40 µs for an idle vCPU (docs/performance.md, change 23) — the answer is
  // then read as it arrives; the price is a busy core while answers are awaited.
  std::chrono::microseconds poll_while_awaiting{0};
  // Endpoint::Drive may run this endpoint's loop on a caller's thread (an endpoint with a loop
  // thread of its own, neither sharing another's loop nor shared). The loop thread parks while
  // a caller drives and for drive_park after the drive, so that a caller making one call after
  // another finds the loop free: its request and answer cross no thread (docs/performance.md,
  // change 48). It parks only while nothing else awaits the loop: a post from another thread
  // or an AwaitingAnswers(+1) wakes it at once; packets that arrive while it is parked and
  // nobody drives (a subscription's events) are read when it resumes, at most drive_park later.
  bool drivable = false;
  std::chrono::microseconds drive_park{2000};
  // After a lone packet that carried stream data (packets of acknowledgements alone do not
  // count: a durable answer follows the lone ACK of its request), a connection with nothing of
  // its own in flight and nothing to send holds the acknowledgement it owes for up to this
  // long, so that the application's next write carries it (0: off; the ACK then leaves when
  // ngtcp2's delay, min(max_ack_delay, smoothed RTT / 8), expires — a few µs on loopback,
  // before a synchronous caller's next request: a datagram each way per request). Not held
  // after more than ack_hold_packets such packets or while anything is in flight, so bursts,
  // subscriptions and loss recovery are acknowledged as before; stay well below the peer's probe
  // timeout (over max_ack_delay, below). Held only in a loop iteration that read at least
  // ack_hold_min_datagrams datagrams (all endpoints on the loop): on an idle loop sending the
  // ACK costs less than the sleep it saves the thread before the caller's next request —
  // measured in docs/performance.md, change 43.
  std::chrono::microseconds ack_hold{0};
  uint32_t ack_hold_min_datagrams = 2;
  // The max_ack_delay transport parameter sent to the peer (RFC 9000 §18.2; QUIC's default
  // 25 ms, at most 16,383 ms): how long this end may put off an ACK, which the peer adds to its
  // probe timeout before it resends what it has not seen acknowledged. ack_hold stays below it.
  std::chrono::milliseconds max_ack_delay{25};
  // How many packets with stream data since the connection last sent a hold may cover (at
  // least 1). 2 is QUIC's usual delayed acknowledgement (RFC 9000 §13.2.2: one ACK per two
  // ack-eliciting packets) and covers an answer that follows an early part of itself (a
  // consumer-group call's auth_ok before its flushed answer: docs/performance.md, change 53).
  uint32_t ack_hold_packets = 1;
  // Run on that endpoint's loop thread instead of starting one (nullptr: a thread of its own).
  // It must have been created by Endpoint::Create and must outlive this endpoint; it may be
  // stopped first: stopping it stops this endpoint's connections too (this one's Stop then only
  // closes its socket). At most kMaxLoopGuests endpoints share one host's loop.
  Endpoint* share_loop_of = nullptr;
};

struct ListenHandlers {
  // A peer completed the handshake (its certificate, when required, is verified).
  std::function<void(const std::shared_ptr<Connection>&)> on_connection;
};

struct DialOptions {
  // SNI, and the DNS name the listener's certificate must carry when the TlsContext verifies
  // peers (for the internal role: the node id being dialled).
  std::string server_name;
};

using DialCallback = std::function<void(Result<std::shared_ptr<Connection>>)>;
using TimerId = uint64_t;

class Endpoint {
 public:
  // Binds `bind` (port 0: any free port) and starts the loop thread. With `listen` handlers the
  // endpoint accepts connections; without, it only dials. `metrics` series are registered now.
  static Result<std::unique_ptr<Endpoint>> Create(const HostPort& bind, EndpointOptions options,
                                                  MetricsRegistry& metrics,
                                                  std::optional<ListenHandlers> listen);
  virtual ~Endpoint() = default;

  virtual HostPort local_address() const = 0;
  virtual void Post(std::function<void()> fn) = 0;
  // As Post, except that a loop thread parked after a drive (EndpointOptions::drivable) is left
  // parked: `fn` then runs in the next drive, or when the park ends — at most drive_park later.
  // For work its caller will soon drive itself (a fire-and-forget publisher writing its own
  // batches, docs/performance.md change 62), where a wake per post costs more than the work.
  // Otherwise exactly Post. Any thread.
  virtual void PostWithoutUnpark(std::function<void()> fn) = 0;
  virtual bool InLoopThread() const = 0;
  // A request sent on this endpoint now awaits its answer (+1), or got its outcome (−1): what
  // EndpointOptions::poll_while_awaiting counts, and what keeps a drivable endpoint's loop
  // thread from parking (+1 wakes it). While one is counted no caller drives (Drive). Any
  // thread.
  virtual void AwaitingAnswers(int delta) = 0;
  // Keeps a drivable endpoint's loop thread from parking (+1 wakes it) as AwaitingAnswers does,
  // for what is not a caller's request — events that may come at any time — so callers still
  // drive. Any thread.
  virtual void KeepLoopAwake(int delta) = 0;
  // Dials `remote`; `done` runs on the loop thread with the connection once the handshake is
  // confirmed, or with an error (TLS refusal with its reason, timeout, ...).
  virtual void Dial(const HostPort& remote, DialOptions options, DialCallback done) = 0;
  // Loop-thread timers. Cancelling an expired or unknown id is a no-op.
  virtual TimerId RunAfter(std::chrono::nanoseconds delay, std::function<void()> fn) = 0;
  virtual void Cancel(TimerId id) = 0;
  virtual void Stop() = 0;
  virtual const TlsContext& tls() const = 0;
  // EndpointOptions::drivable: runs this endpoint's loop on the calling thread, which is the
  // loop thread meanwhile (InLoopThread, posts run inline or in its iterations): `start()`
  // first, then loop iterations until `done()` (checked after each), `deadline` or Stop. true
  // once it ran; false, with nothing run, when it cannot: not drivable, on the loop thread,
  // stopped, another caller drives now (one at a time: wait the usual way, counted by
  // AwaitingAnswers, and the driver's iterations serve that request too), or another caller
  // waits for the loop thread (AwaitingAnswers: the loop thread serves this request too, rather
  // than the loop changing hands at every answer of callers sharing a connection). Any other
  // thread.
  virtual bool Drive(const std::function<void()>& start, const std::function<bool()>& done,
                     std::chrono::steady_clock::time_point deadline) = 0;
  // EndpointOptions::drivable: one loop iteration on the calling thread that sleeps nowhere —
  // posted functions run, datagrams waiting are read, due timers run, what is ready is written —
  // after which the loop thread stays parked for drive_park, as after Drive. true once it ran;
  // false, with nothing run, wherever Drive refuses and while the loop thread is kept awake
  // (KeepLoopAwake, AwaitingAnswers): it serves others then, and taking the loop from it at
  // every turn would cost a wake each time. Any other thread.
  virtual bool DriveOneTurn() = 0;
  // True on the thread of a caller inside Drive (where InLoopThread is true too); false on the
  // loop thread itself and on every other thread. A user of the endpoint that must run
  // something on its own loop thread, never on a caller's (a user callback), defers it while
  // this is true. Any thread.
  virtual bool InDrive() const = 0;
};

}  // namespace felix::transport
