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
  // (nothing run) — post and wait instead.
  // ClientOptions::caller_runs_io applies only. A caller blocked waiting for an answer (+1, −1
  // when it has it) while it does not drive: the loop thread then serves it instead of parking
  // (transport::Endpoint::AwaitingAnswers). Any thread.
  virtual bool DriveLoop(const std::function<void()>& start, const std::function<bool()>& done,
                         std::chrono::steady_clock::time_point deadline) = 0;
  virtual void AwaitingLoop(int delta) = 0;
  // Opens a bidirectional stream on the connection and writes the client's `auth` on it.
  virtual ClientResult<std::shared_ptr<transport::Stream>> OpenAuthenticatedStream() = 0;
  virtual const ClientOptions& client_options() const = 0;
  virtual uint32_t server_features() const = 0;
};

// The cache channel (cache.cc): pooled cache streams, one request in flight on each.
class CacheChannel;
std::shared_ptr<CacheChannel> MakeCacheChannel(ConnectionPort& port);
// Fails what is in flight with `why` and drops the streams (loop thread, or after the loop
// stopped). Idempotent.
void ShutdownCacheChannel(CacheChannel& channel, const ClientError& why);
// The Client's channel (client.cc).
CacheChannel& CacheChannelOf(Client::Impl& impl);

}  // namespace felix::client_impl
