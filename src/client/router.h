// Client::Router: the cluster-aware layer of a Client (client-protocol.md §6.2, §8.1;
// docs/cluster.md "Routing and forwarding", client side).
//
// It bootstraps from the first broker of ClientOptions::broker (a comma list) that answers. A
// broker that advertises TOPOLOGY is a cluster broker: then the router learns the brokers
// (`topology`) and, per stream or cache, who owns each shard (`shard_owners`), keeps one
// connection per broker it talks to (opened on first use, reopened when lost), and sends each
// publish and cache operation straight to its shard's owner (the key's shard by the frozen
// hash, wire/shard_hash.h; no key = shard 0). A shard whose owner it does not know goes to the
// bootstrap broker, which forwards it. Subscriptions and group requests go to the owner when
// known, else to the bootstrap broker, and follow `not_leader` (at most kMaxRedirects hops,
// never back to a broker already tried). Owners are refreshed from redirects and from the
// owner hint of forwarded acks; a failed request is retried by its retry class (RetryPolicy)
// within ClientOptions::max_attempts. Against a standalone broker (no TOPOLOGY) everything goes
// to it, once, exactly as a single-connection client.
//
// Threading: every method may be called from any thread. Blocking work (dialling, asking
// owners, backoff waits) never runs on a client I/O thread: called from one (a callback), the
// router uses only what it already knows and connections already open. Retries of asynchronous
// publishes run on the router's own retry thread. Close (or the destructor) must not run on a
// client I/O thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "client/connections.h"
#include "client/owner_cache.h"
#include "client/retry_policy.h"
#include "felix/client.h"

namespace felix {

class Client::Router : public std::enable_shared_from_this<Client::Router> {
 public:
  // Connects to the first seed that answers (each but the last with at most
  // options.seed_connect_timeout); fails naming every seed's error.
  static ClientResult<std::shared_ptr<Router>> Connect(ClientOptions options);
  explicit Router(ClientOptions options) : options_(std::move(options)) {}
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  const ClientOptions& options() const { return options_; }
  // The bootstrap connection; in a cluster, another seed or topology broker once it is lost.
  client_impl::Connection Home();
  bool cluster() const { return cluster_; }
  client_impl::OwnerCache& owners() { return owners_; }

  // What a request is about: a shard given outright (subscribe, groups), or the shard a key
  // routes to (cache: modulo over the cache's shards; stream: the stream's routing, no key =
  // shard 0). `learn`: ask `shard_owners` first when the name was never asked.
  struct Target {
    client_impl::NameKey name;
    std::optional<uint32_t> shard;
    std::optional<std::string> key;
    bool learn = false;
  };
  struct Route {
    client_impl::Connection conn;
    std::optional<uint32_t> shard;
  };
  Route Resolve(const Target& target);

  // Runs `attempt` on the connection the target routes to, then by the retry class of each
  // failure (see the header comment). A write whose outcome is unknown comes back as
  // kIndeterminate and is never resent unless `idempotent`.
  template <typename T, typename Attempt>
  ClientResult<T> Call(const Target& target, bool idempotent, bool write, Attempt attempt) {
    Progress progress;
    Route route = Resolve(target);
    for (;;) {
      progress.tried.push_back(client_impl::AddressOf(*route.conn));
      ++progress.attempts;
      ClientResult<T> result = attempt(*route.conn);
      if (result) return result;
      auto next = Next(target, route, result.error(), idempotent, progress);
      if (!next) return tl::unexpected(write ? AsWriteOutcome(next.error()) : next.error());
      route = std::move(*next);
    }
  }

  // Client::PublishAsync, routed; retries run on the retry thread. `sent_to` (optional) is
  // set to the address of each attempt's broker as it is sent. `user_callback`: `done` is the
  // user's, run on a connection's I/O thread, never on a caller driving its loop
  // (client_impl::RunUserCallback); else (Client::Publish's own) it runs where the outcome is
  // read.
  struct SentTo {
    std::mutex mu;
    std::string addr;  // guarded by mu
    // The connection of the latest attempt, and whether an attempt's outcome came back (a
    // failure then retried elsewhere or later, on the retry thread, included): what tells a
    // caller driving the first attempt's connection to stop (Client::Publish).
    std::atomic<const Client::Impl*> conn{nullptr};
    std::atomic<bool> answered{false};
  };
  ClientResult<void> PublishAsync(const StreamRef& stream, const std::vector<std::string>& payloads,
                                  const PublishOptions& options, PublishCallback done,
                                  bool user_callback, std::shared_ptr<SentTo> sent_to = nullptr);

  // Client::Publish with AckMode::kNone: returns once the batch is queued to its connection's
  // loop, not once the loop wrote it, so a burst of single-record publishes leaves in full
  // datagrams and the caller never waits for the loop thread (docs/performance.md). At most
  // kUnackedQueueBytes are queued unwritten at once (beyond, the caller waits up to
  // request_timeout for room: kTimeout, retry-after; on an I/O thread kOverloaded at once).
  // A batch the loop could not write (connection lost) is reported by the next call, which
  // then sends nothing: its error says an earlier batch was not sent.
  static constexpr size_t kUnackedQueueBytes = 8u << 20;
  ClientResult<PublishReceipt> PublishUnacked(const StreamRef& stream,
                                              const std::vector<std::string>& payloads,
                                              const PublishOptions& options);

  // A request sent to `addr` went unanswered for the caller's whole wait: the broker may be
  // dead (its QUIC connection notices only at the idle timeout). Its shards are forgotten and
  // its connection closed — what was pending there fails with an unknown outcome — so the
  // next request goes to another broker (or redials). Not on an I/O thread.
  void Unanswered(const std::string& addr);

  // Stops retrying (queued retries fail with kClosed) and closes every connection. Idempotent.
  void Close();

 private:
  struct Progress {
    uint32_t attempts = 0;
    uint32_t hops = 0;
    std::vector<std::string> tried;  // brokers of this redirect chain
  };
  struct PublishJob;

  // After a failed attempt: where the next one goes, or the error for the caller.
  ClientResult<Route> Next(const Target& target, const Route& failed, const ClientError& e,
                           bool idempotent, Progress& progress);
  // A connection to `addr`: the open one, else dialled now (never on an I/O thread).
  ClientResult<client_impl::Connection> To(const std::string& addr);
  std::optional<client_impl::Connection> Open(const std::string& addr);
  // The open connection to `addr` answered `draining` (the broker is leaving).
  bool DrainingAddr(const std::string& addr);
  // Open, and not known to be draining. Under mu_.
  bool UsableLocked(const client_impl::Connection& conn) const;
  bool OnIoThread();
  void LearnOwners(const client_impl::NameKey& name, const client_impl::Connection& via);
  void LearnTopology(const client_impl::Connection& via);
  void Forget(const Target& target, const std::string& addr, const ClientError& e);

  ClientResult<void> StartPublish(const std::shared_ptr<PublishJob>& job);
  // `via`: the connection that read the failure (Finish's).
  void OnPublishFailed(const std::shared_ptr<PublishJob>& job, Client::Impl* via,
                       std::optional<uint32_t> shard, const std::string& addr,
                       const ClientError& e);
  // The job's outcome to its `done`: through `via` (client_impl::RunUserCallback) when the
  // callback is the user's and a connection read the outcome, else at once.
  static void Finish(const std::shared_ptr<PublishJob>& job, Client::Impl* via,
                     ClientResult<PublishReceipt> result);
  // Runs `run` on the retry thread after `delay`; `cancel` instead when the router closes.
  void Schedule(std::chrono::milliseconds delay, std::function<void()> run,
                std::function<void()> cancel);
  void RetryLoop();

  const ClientOptions options_;
  bool cluster_ = false;  // set once by Connect
  client_impl::OwnerCache owners_;

  std::mutex mu_;  // guards what follows
  client_impl::Connection home_;
  std::map<std::string, client_impl::Connection> conns_;  // by address, home included
  std::vector<std::string> seeds_;                        // ClientOptions::broker, in order
  std::vector<std::string> brokers_;                      // from `topology`
  std::vector<client_impl::Connection> replaced_;         // lost ones, closed by Close
  // Connections whose broker answered `draining`: not used for anything new.
  std::vector<std::weak_ptr<Client::Impl>> draining_;
  bool closed_ = false;

  // PublishUnacked's queue: bytes queued to a loop and not yet written, reserved by a publish and
  // released by the loop without a lock — a lock per publish, which the loop also took per
  // written batch, was a visible share of a fire-and-forget publish (docs/performance.md, change
  // 58). unacked_mu_ is taken only to wait for room, to record or take a failure, and to wake
  // waiters; a waiter counts itself in unacked_waiters_ under it before it checks for room, and a
  // release reads unacked_waiters_ after it freed bytes (both sequentially consistent), so either
  // the waiter sees the room or the release sees the waiter and wakes it under the lock.
  std::atomic<size_t> unacked_bytes_{0};
  std::atomic<uint32_t> unacked_waiters_{0};
  std::atomic<bool> unacked_failed_{false};  // unacked_error_ is set (read without the lock)
  std::mutex unacked_mu_;
  std::condition_variable unacked_cv_;
  std::optional<ClientError> unacked_error_;  // guarded by unacked_mu_
  // Reserves `bytes` when the queue has room for them (an empty queue takes any size).
  bool TryReserveUnacked(size_t bytes);
  // Returns `bytes` (written, or never queued) and records `error` (why they were not written).
  void ReleaseUnacked(size_t bytes, std::optional<ClientError> error);
  // The unreported failure of an earlier publish, taken (reported once).
  std::optional<ClientError> TakeUnackedError();
  // Told by a connection what of unacked_bytes_ it wrote (client_impl::QueueUnackedOn); made
  // by the first PublishUnacked.
  std::once_flag unacked_written_once_;
  std::shared_ptr<const client_impl::UnackedWritten> unacked_written_;
  // Set by the first PublishUnacked: only then does Close wait for the request streams'
  // backlog (an acked request's caller has its answer or error already; a close after a
  // broker went unreachable must not wait for it).
  std::atomic<bool> unacked_used_{false};

  struct Retry {
    std::function<void()> run;
    std::function<void()> cancel;
  };
  std::mutex retry_mu_;
  std::condition_variable retry_cv_;
  std::multimap<std::chrono::steady_clock::time_point, Retry> retries_;
  std::thread retry_thread_;
  bool retry_stopping_ = false;
};

}  // namespace felix
