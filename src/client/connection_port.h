// ConnectionPort: what request channels implemented outside client.cc (the cache channel)
// need from a Client's connection, without seeing Client::Impl.
//
// Threading: PostToLoop, client_options and server_features from any thread;
// OpenAuthenticatedStream on the client's loop thread only. The port (the Client::Impl)
// outlives every channel it hands out.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "client/answer_wait.h"
#include "felix/client.h"
#include "transport/endpoint.h"

namespace felix::client_impl {

class ConnectionPort {
 public:
  virtual ~ConnectionPort() = default;
  // Runs `fn` on the loop thread; false (not run) once the client is closed.
  virtual bool PostToLoop(std::function<void()> fn) = 0;
  // ClientOptions::caller_runs_io: runs the connection's loop on the calling thread
  // (transport::Endpoint::Drive): `start`, then until `done()` or `deadline`. false: not driven
  // (nothing run) — post and wait instead. Any thread.
  virtual bool DriveLoop(const std::function<void()>& start, const std::function<bool()>& done,
                         std::chrono::steady_clock::time_point deadline) = 0;
  // ClientOptions::caller_runs_io only (a no-op otherwise): a caller blocked waiting for an
  // answer without driving (+1, −1 when it has it); the loop thread then serves it instead of
  // parking (transport::Endpoint::AwaitingAnswers). Any thread.
  virtual void AwaitingLoop(int delta) = 0;
  // Opens a bidirectional stream on the connection and writes the client's `auth` on it.
  virtual ClientResult<std::shared_ptr<transport::Stream>> OpenAuthenticatedStream() = 0;
  virtual const ClientOptions& client_options() const = 0;
  virtual uint32_t server_features() const = 0;
};

// Sends a request with `send` and waits up to `timeout` for `answer`: the calling thread drives
// `port`'s loop for it when ClientOptions::caller_runs_io applies, else `send` posts it and the
// caller waits, counted by AwaitingLoop (`port` null: no port to drive). `sent()`: whether
// `send` queued the request (a closed client does not; then nothing is awaited). `elsewhere`
// (optional): true once the answer is no longer to be read on `port` (a publish routed to, or
// retried on, another connection): the drive ends and the rest is awaited the usual way. True
// once the answer is ready; false when the time ran out or nothing was sent.
template <class Slot>
bool SendAndAwait(ConnectionPort* port, const std::function<void()>& send,
                  const std::function<bool()>& sent, Slot& answer, std::chrono::microseconds spin,
                  std::chrono::milliseconds timeout,
                  const std::function<bool()>& elsewhere = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const bool driven =
      port != nullptr &&
      port->DriveLoop(
          send, [&] { return !sent() || answer.Ready() || (elsewhere && elsewhere()); }, deadline);
  if (!driven) {
    if (port != nullptr) port->AwaitingLoop(+1);
    send();
  }
  // A drive that ended before the answer (the client closing) leaves the rest of the time.
  const bool ready =
      sent() && AwaitReady(answer, spin, driven ? RemainingUntil(deadline) : timeout);
  if (port != nullptr && !driven) port->AwaitingLoop(-1);
  return ready;
}

// The cache channel (cache.cc): pooled cache streams, one request in flight on each.
class CacheChannel;
std::shared_ptr<CacheChannel> MakeCacheChannel(ConnectionPort& port);
// Fails what is in flight with `why` and drops the streams (loop thread, or after the loop
// stopped). Idempotent.
void ShutdownCacheChannel(CacheChannel& channel, const ClientError& why);
// The Client's channel (client.cc).
CacheChannel& CacheChannelOf(Client::Impl& impl);

}  // namespace felix::client_impl
