// What the Router (router.h) needs from one broker connection (a Client::Impl, client.cc)
// without seeing its definition: dialling, state, and the per-connection calls it routes.
//
// Threading: every function may be called from any thread except where noted; the blocking
// ones (DialBroker, StreamShardsOn, SubscribeOn) must not be called from a client I/O thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/owner_cache.h"
#include "felix/client.h"

namespace felix::client_impl {

using Connection = std::shared_ptr<Client::Impl>;

// Dials options.broker (one host:port) and authenticates the request stream.
ClientResult<Connection> DialBroker(ClientOptions options);
// Fails outstanding work with kClosed and closes (joins the connection's I/O thread: never
// from that thread). Idempotent.
void CloseConnection(Client::Impl& impl);
// Finishes the connection's request stream and waits until the broker finished its side (it
// has then handled every frame written before), or the stream is gone; false when `deadline`
// passed first. Not on an I/O thread. The request stream is not used again.
bool FinishRequestStream(Client::Impl& impl, std::chrono::steady_clock::time_point deadline);
// False once the connection was closed or lost.
bool Usable(const Client::Impl& impl);
// True on the connection's own I/O thread.
bool OnIoThread(const Client::Impl& impl);
const std::string& AddressOf(const Client::Impl& impl);
// Runs a user callback (a PublishAsync callback, a push subscription's handler) on the
// connection's I/O thread, never on a caller driving its loop (ClientOptions::caller_runs_io):
// called by a driving caller, `fn` is kept, in order, until the I/O thread takes over after the
// drive (or the connection closes); called on the I/O thread, what was kept runs first.
// Called elsewhere (the Router's retry thread, Close after the loop stopped), `fn` runs at once.
void RunUserCallback(Client::Impl& impl, std::function<void()> fn);
ServerInfo ServerInfoOf(const Client::Impl& impl);

// A publish's outcome and, for a batch the broker forwarded, the owner it names (flag 0x0080).
using PublishDone = std::function<void(ClientResult<PublishReceipt>, std::optional<OwnerEntry>)>;
// Client::PublishAsync on this one connection (same contract; `done` runs on its I/O thread).
ClientResult<void> PublishOn(Client::Impl& impl, const StreamRef& stream,
                             const std::vector<std::string>& payloads, const PublishOptions& po,
                             PublishDone done);
// Fire-and-forget publishes (AckMode::kNone) on this connection are encoded at once into the
// connection's open batch of frames, and the I/O thread writes each batch with one stream write
// (a burst of single-record publishes leaves as one write, in as few packets as its bytes need;
// the publisher's thread hands nothing per publish to the I/O thread). `written(charged, error)`
// runs on the I/O thread once per batch, with the sum of the `charged` of the publishes it held
// and, if they were not written, why: after the stream accepted them, or once its backlog
// drained below the high-water mark. The same `written` must be passed for every call on one
// connection. Returns why this publish was not queued, or nothing when it was: not a
// ClientResult<void>, whose success value zeroes the whole ClientError it could have held (280
// bytes, ~12 ns; docs/performance.md, change 58) — a visible share of a fire-and-forget publish.
using UnackedWritten = std::function<void(size_t charged, std::optional<ClientError> error)>;
std::optional<ClientError> QueueUnackedOn(Client::Impl& impl, const StreamRef& stream,
                                          const std::vector<std::string>& payloads,
                                          const PublishOptions& po, size_t charged,
                                          const std::shared_ptr<const UnackedWritten>& written);
// Client::StreamShards on this connection; CachedStreamShards never sends (nullopt: unknown).
ClientResult<ShardInfo> StreamShardsOn(Client::Impl& impl, const StreamRef& stream);
std::optional<ShardInfo> CachedStreamShards(const Client::Impl& impl, const StreamRef& stream);
ClientResult<std::shared_ptr<Subscription::State>> SubscribeOn(Client::Impl& impl,
                                                               const StreamRef& stream,
                                                               const SubscribeOptions& so);

}  // namespace felix::client_impl
