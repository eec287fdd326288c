#include "client/router.h"

#include <algorithm>

#include "client/own_stream_request.h"
#include "wire/flx1/constants.h"
#include "wire/shard_hash.h"

namespace felix {

namespace flx1 = wire::flx1;
using client_impl::Connection;
using client_impl::NameKind;
using client_impl::OwnerEntry;

namespace {

tl::unexpected<ClientError> Unexpected(ClientError e) {
  return tl::unexpected<ClientError>(std::move(e));
}

ClientError Closed() {
  return MakeClientError(ClientErrorCode::kClosed, "the client was closed");
}

// "a, b,c" → {"a", "b", "c"} (blanks around entries and empty entries dropped).
std::vector<std::string> SplitBrokers(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string entry = list.substr(start, comma - start);
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    if (!entry.empty()) out.push_back(entry);
    start = comma + 1;
  }
  return out;
}

}  // namespace

// ---- Connecting ----

ClientResult<std::shared_ptr<Client::Router>> Client::Router::Connect(ClientOptions options) {
  std::vector<std::string> seeds = SplitBrokers(options.broker);
  if (seeds.empty())
    return Unexpected(MakeClientError(ClientErrorCode::kInvalidArgument, "no broker address"));
  auto router = std::make_shared<Router>(options);
  router->seeds_ = seeds;
  std::string failures;
  ClientError last;
  for (size_t i = 0; i < seeds.size(); ++i) {
    ClientOptions one = options;
    one.broker = seeds[i];
    // Nothing answers UDP for a dead broker: with more seeds to try, do not wait the whole
    // connect timeout on each.
    if (i + 1 < seeds.size())
      one.connect_timeout = std::min(one.connect_timeout, options.seed_connect_timeout);
    auto conn = client_impl::DialBroker(std::move(one));
    if (!conn) {
      last = conn.error();
      failures += (failures.empty() ? "" : "; ") + seeds[i] + ": " + conn.error().ToString();
      continue;
    }
    router->home_ = *conn;
    router->conns_[seeds[i]] = *conn;
    router->cluster_ =
        (client_impl::ServerInfoOf(**conn).server_features & flx1::kFeatureTopology) != 0;
    if (router->cluster_) router->LearnTopology(*conn);
    return router;
  }
  if (seeds.size() == 1) return Unexpected(last);
  last.message = "no broker answered: " + failures;
  return Unexpected(last);
}

Client::Router::~Router() {
  Close();
}

void Client::Router::Close() {
  // Fire-and-forget batches queued to a loop are written, and the brokers have handled what the
  // request streams carried (each finishes its side after our FIN), before the connections
  // close (closing would discard what a broker holds unread), for at most request_timeout.
  if (unacked_used_.load(std::memory_order_relaxed) && !OnIoThread()) {
    const auto deadline = std::chrono::steady_clock::now() + options_.request_timeout;
    {
      std::unique_lock<std::mutex> lock(unacked_mu_);
      unacked_waiters_.fetch_add(1);
      unacked_cv_.wait_until(lock, deadline, [&] { return unacked_bytes_.load() == 0; });
      unacked_waiters_.fetch_sub(1);
    }
    std::vector<Connection> open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [addr, conn] : conns_) open.push_back(conn);
      if (home_) open.push_back(home_);
    }
    for (auto& conn : open) (void)client_impl::FinishRequestStream(*conn, deadline);
  }
  {
    std::lock_guard<std::mutex> lock(retry_mu_);
    retry_stopping_ = true;
  }
  retry_cv_.notify_all();
  // Connections first: a retry blocked on a full publish window wakes with kClosed.
  std::vector<Connection> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    for (auto& [addr, conn] : conns_) conns.push_back(conn);
    for (auto& conn : replaced_) conns.push_back(conn);
    if (home_) conns.push_back(home_);
  }
  for (auto& conn : conns) client_impl::CloseConnection(*conn);
  if (retry_thread_.joinable() && retry_thread_.get_id() != std::this_thread::get_id())
    retry_thread_.join();
  std::multimap<std::chrono::steady_clock::time_point, Retry> left;
  {
    std::lock_guard<std::mutex> lock(retry_mu_);
    left.swap(retries_);
  }
  for (auto& [due, retry] : left) retry.cancel();
}

bool Client::Router::OnIoThread() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [addr, conn] : conns_) {
    if (client_impl::OnIoThread(*conn)) return true;
  }
  return home_ && client_impl::OnIoThread(*home_);
}

std::optional<Connection> Client::Router::Open(const std::string& addr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conns_.find(addr);
  if (it != conns_.end() && UsableLocked(it->second)) return it->second;
  return std::nullopt;
}

bool Client::Router::DrainingAddr(const std::string& addr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conns_.find(addr);
  return it != conns_.end() && it->second && client_impl::Usable(*it->second) &&
         std::any_of(draining_.begin(), draining_.end(),
                     [&](const auto& d) { return d.lock() == it->second; });
}

bool Client::Router::UsableLocked(const Connection& conn) const {
  if (!conn || !client_impl::Usable(*conn)) return false;
  for (const auto& d : draining_) {
    if (d.lock() == conn) return false;
  }
  return true;
}

ClientResult<Connection> Client::Router::To(const std::string& addr) {
  if (auto open = Open(addr)) return *open;
  if (OnIoThread())
    return Unexpected(
        MakeClientError(ClientErrorCode::kTransport, "no open connection to " + addr +
                                                         " (called on a client "
                                                         "I/O thread, which never dials)"));
  ClientOptions one = options_;
  one.broker = addr;
  auto dialled = client_impl::DialBroker(std::move(one));
  if (!dialled) return Unexpected(dialled.error());
  Connection extra;
  Connection result = *dialled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      extra = *dialled;
      result = nullptr;
    } else {
      Connection& slot = conns_[addr];
      if (UsableLocked(slot)) {
        extra = *dialled;  // another thread dialled it meanwhile
        result = slot;
      } else {
        if (slot) replaced_.push_back(slot);
        slot = *dialled;
      }
    }
  }
  if (extra) client_impl::CloseConnection(*extra);
  if (!result) return Unexpected(Closed());
  return result;
}

Connection Client::Router::Home() {
  std::vector<std::string> candidates;
  Connection home;
  {
    std::lock_guard<std::mutex> lock(mu_);
    home = home_;
    if (!cluster_ || closed_ || UsableLocked(home_)) return home_;
    candidates = seeds_;
    for (const auto& b : brokers_) {
      if (std::find(candidates.begin(), candidates.end(), b) == candidates.end())
        candidates.push_back(b);
    }
  }
  if (OnIoThread()) return home;
  // The bootstrap broker is gone (or draining): the next seed (or topology broker) that
  // answers takes over — one not known to be draining first.
  std::vector<std::string> ordered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& addr : candidates) {
        auto it = conns_.find(addr);
        const bool draining = it != conns_.end() && it->second &&
                              std::any_of(draining_.begin(), draining_.end(),
                                          [&](const auto& d) { return d.lock() == it->second; });
        if (draining == (pass == 1)) ordered.push_back(addr);
      }
    }
  }
  for (const auto& addr : ordered) {
    auto conn = To(addr);
    if (!conn) continue;
    std::lock_guard<std::mutex> lock(mu_);
    home_ = *conn;
    return home_;
  }
  return home;
}

void Client::Router::LearnTopology(const Connection& via) {
  auto answer = client_impl::ExchangeOnOwnStream(*via, flx1::Message(flx1::Topology{}),
                                                 options_.request_timeout);
  if (!answer) return;
  auto* view = std::get_if<flx1::TopologyView>(&*answer);
  if (!view) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& b : view->brokers) {
    if (!b.addr.empty() && std::find(brokers_.begin(), brokers_.end(), b.addr) == brokers_.end())
      brokers_.push_back(b.addr);  // additive: seeds are never dropped
  }
}

void Client::Router::LearnOwners(const client_impl::NameKey& name, const Connection& via) {
  flx1::ShardOwners ask;
  ask.tenant_id = options_.tenant_id;
  ask.namespace_ = name.namespace_name;
  ask.name = name.name;
  ask.kind = name.kind == NameKind::kStream ? flx1::ShardKind::kStream : flx1::ShardKind::kCache;
  ask.request_id = client_impl::NextRequestId(*via);
  auto answer =
      client_impl::ExchangeOnOwnStream(*via, flx1::Message(ask), options_.request_timeout);
  if (!answer) return;  // routed through `via` (forwarded) until a hint or redirect says more
  if (auto* view = std::get_if<flx1::ShardOwnersView>(&*answer))
    owners_.Learn(name, view->owners, client_impl::AddressOf(*via));
}

// ---- Routing ----

Client::Router::Route Client::Router::Resolve(const Target& target) {
  Route route{Home(), target.shard};
  if (!cluster_) return route;
  const bool may_block = !OnIoThread();
  const uint32_t features = client_impl::ServerInfoOf(*route.conn).server_features;
  if (options_.route_to_owners && target.learn && may_block &&
      (features & flx1::kFeatureShardOwners) && !owners_.Learned(target.name))
    LearnOwners(target.name, route.conn);
  // The shard is worked out even when everything goes through one broker: the owner hint of
  // a forwarded ack is remembered for it.
  if (!route.shard) {
    if (target.name.kind == NameKind::kCache) {
      auto shards = owners_.Shards(target.name);
      if (shards && target.key) route.shard = wire::ShardModulo(*shards, *target.key);
    } else if (!target.key) {
      route.shard = 0;  // no key: shard 0 (client-protocol.md §6.3)
    } else {
      StreamRef stream{target.name.namespace_name, target.name.name};
      std::optional<ShardInfo> info;
      if (may_block) {
        if (auto asked = client_impl::StreamShardsOn(*route.conn, stream)) info = *asked;
      } else {
        info = client_impl::CachedStreamShards(*route.conn, stream);
      }
      if (info && info->shards > 0)
        route.shard = info->jump_hash ? wire::ShardJump(info->shards, *target.key)
                                      : wire::ShardModulo(info->shards, *target.key);
    }
  }
  if (!route.shard || !options_.route_to_owners) return route;
  auto owner = owners_.Owner(target.name, *route.shard);
  if (!owner || DrainingAddr(owner->addr)) return route;  // the home broker forwards
  if (may_block) {
    if (auto conn = To(owner->addr)) {
      route.conn = *conn;
    } else {
      owners_.ForgetBroker(owner->addr);  // unreachable: the bootstrap broker forwards
    }
  } else if (auto open = Open(owner->addr)) {
    route.conn = *open;
  }
  return route;
}

void Client::Router::Forget(const Target& target, const std::string& addr, const ClientError& e) {
  switch (e.code) {
    case ClientErrorCode::kTransport:
    case ClientErrorCode::kTimeout:
      owners_.ForgetBroker(addr);
      break;
    case ClientErrorCode::kDraining: {
      // The broker is shutting down: it answers what it admitted on this connection, so the
      // connection stays open, but nothing new goes there (another seed becomes home; a
      // restarted broker is dialled afresh).
      owners_.ForgetBroker(addr);
      owners_.Forget(target.name);  // learnt again from a broker that is not leaving
      std::lock_guard<std::mutex> lock(mu_);
      auto it = conns_.find(addr);
      if (it != conns_.end() && it->second) {
        std::erase_if(draining_, [](const auto& d) { return d.expired(); });
        draining_.push_back(it->second);
      }
      break;
    }
    case ClientErrorCode::kNotFound:          // the name may be new (or recreated)
    case ClientErrorCode::kShardUnavailable:  // moving, not ready, stale
    case ClientErrorCode::kNotLeader:         // a redirect without an address
      owners_.Forget(target.name);
      break;
    default:
      break;
  }
}

ClientResult<Client::Router::Route> Client::Router::Next(const Target& target, const Route& failed,
                                                         const ClientError& e, bool idempotent,
                                                         Progress& progress) {
  if (!cluster_) return Unexpected(e);  // a standalone broker: one attempt, as always
  if (e.code == ClientErrorCode::kNotLeader && e.leader_addr && failed.shard) {
    owners_.Update(
        target.name, *failed.shard,
        OwnerEntry{e.leader_node.value_or(""), *e.leader_addr, e.leader_generation.value_or(0)});
  }
  auto decision = client_impl::DecideRetry(e, idempotent, progress.attempts, options_.max_attempts);
  switch (decision.step) {
    case client_impl::RetryStep::kStop:
      // The caller gets the error, but the next request must not go to a broker that did not
      // answer (it may be dead: a failover is under way) nor to an owner that refused it.
      Forget(target, client_impl::AddressOf(*failed.conn), e);
      return Unexpected(e);
    case client_impl::RetryStep::kRedirect: {
      const std::string& owner = *e.leader_addr;
      if (++progress.hops > static_cast<uint32_t>(kMaxRedirects)) {
        ClientError too_many = e;
        too_many.message += " (more than " + std::to_string(kMaxRedirects) + " redirects)";
        return Unexpected(too_many);
      }
      if (std::find(progress.tried.begin(), progress.tried.end(), owner) != progress.tried.end()) {
        ClientError loop = e;
        loop.message += " (a redirect loop: already tried " + owner + ")";
        return Unexpected(loop);
      }
      --progress.attempts;  // a redirect is not a failed attempt
      auto conn = To(owner);
      if (!conn) return Unexpected(conn.error());
      return Route{*conn, failed.shard};
    }
    case client_impl::RetryStep::kRetry:
      break;
  }
  Forget(target, client_impl::AddressOf(*failed.conn), e);
  if (OnIoThread()) return Unexpected(e);       // never wait on an I/O thread
  std::this_thread::sleep_for(decision.delay);  // backoff before the next attempt
  progress.tried.clear();
  progress.hops = 0;
  return Resolve(target);
}

// ---- Publishing ----

struct Client::Router::PublishJob {
  StreamRef stream;
  std::vector<std::string> payloads;
  PublishOptions options;
  PublishCallback done;
  bool user_callback = false;  // PublishAsync's `user_callback`
  uint32_t attempts = 0;
  uint32_t hops = 0;
  std::optional<std::string> redirect_to;
  std::shared_ptr<SentTo> sent_to;  // optional: told each attempt's broker
  client_impl::NameKey name() const {
    return {NameKind::kStream, stream.namespace_name, stream.stream};
  }
};

bool Client::Router::TryReserveUnacked(size_t bytes) {
  size_t queued = unacked_bytes_.load(std::memory_order_relaxed);
  while (queued == 0 || queued + bytes <= kUnackedQueueBytes) {
    if (unacked_bytes_.compare_exchange_weak(queued, queued + bytes)) return true;
  }
  return false;
}

void Client::Router::ReleaseUnacked(size_t bytes, std::optional<ClientError> error) {
  if (error) {
    std::lock_guard<std::mutex> lock(unacked_mu_);
    if (!unacked_error_) {
      unacked_error_ = AsWriteOutcome(*error);
      unacked_failed_.store(true, std::memory_order_release);
    }
  }
  unacked_bytes_.fetch_sub(bytes);
  if (unacked_waiters_.load() == 0) return;
  std::lock_guard<std::mutex> lock(unacked_mu_);
  unacked_cv_.notify_all();
}

std::optional<ClientError> Client::Router::TakeUnackedError() {
  if (!unacked_failed_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> lock(unacked_mu_);
  if (!unacked_error_) return std::nullopt;
  ClientError e = std::move(*unacked_error_);
  unacked_error_.reset();
  unacked_failed_.store(false, std::memory_order_relaxed);
  e.message = "an earlier fire-and-forget publish was not sent (" + e.message +
              "); this one was not sent either";
  return e;
}

ClientResult<PublishReceipt> Client::Router::PublishUnacked(
    const StreamRef& stream, const std::vector<std::string>& payloads,
    const PublishOptions& options) {
  size_t bytes = 64;  // the frame's header and names, roughly: only a bound matters
  for (const auto& p : payloads) bytes += p.size() + 8;
  if (auto e = TakeUnackedError()) return Unexpected(std::move(*e));
  if (!TryReserveUnacked(bytes)) {
    if (OnIoThread()) {
      ClientError e = MakeClientError(
          ClientErrorCode::kOverloaded,
          "fire-and-forget send queue full (called from a client callback); not sent");
      e.retry = RetryClass::kRetryAfter;
      return Unexpected(e);
    }
    bool reserved = false;
    {
      std::unique_lock<std::mutex> lock(unacked_mu_);
      unacked_waiters_.fetch_add(1);
      reserved = unacked_cv_.wait_for(lock, options_.request_timeout,
                                      [&] { return TryReserveUnacked(bytes); });
      unacked_waiters_.fetch_sub(1);
    }
    if (!reserved) {
      ClientError e = MakeClientError(ClientErrorCode::kTimeout,
                                      "fire-and-forget send queue stayed full; not sent");
      e.retry = RetryClass::kRetryAfter;
      return Unexpected(e);
    }
    if (auto e = TakeUnackedError()) {  // failed while this one waited
      ReleaseUnacked(bytes, std::nullopt);
      return Unexpected(std::move(*e));
    }
  }
  if (!unacked_used_.load(std::memory_order_acquire)) {
    std::call_once(unacked_written_once_, [this] {
      unacked_written_ = std::make_shared<const client_impl::UnackedWritten>(
          [weak = weak_from_this()](size_t charged, std::optional<ClientError> error) {
            if (auto self = weak.lock()) self->ReleaseUnacked(charged, std::move(error));
          });
    });
    unacked_used_.store(true, std::memory_order_release);
  }
  // Never retried (the outcome of a lost fire-and-forget publish is unknown by definition): no
  // job, straight to the shard's connection, whose I/O thread writes the publishes queued there
  // together.
  // Single node: home_ is set by Connect and never replaced (Home()), so it is used without mu_
  // or a reference count, each a visible share of a fire-and-forget publish (change 58).
  Route route;
  if (cluster_) {
    route = Resolve(Target{{NameKind::kStream, stream.namespace_name, stream.stream},
                           std::nullopt,
                           options.key,
                           true});
  }
  Client::Impl& conn = cluster_ ? *route.conn : *home_;
  if (auto refused =
          client_impl::QueueUnackedOn(conn, stream, payloads, options, bytes, unacked_written_)) {
    // Refused before anything was queued: this call reports it, and no later one.
    ReleaseUnacked(bytes, std::nullopt);
    return Unexpected(std::move(*refused));
  }
  return PublishReceipt{std::nullopt, payloads.size()};
}

ClientResult<void> Client::Router::PublishAsync(const StreamRef& stream,
                                                const std::vector<std::string>& payloads,
                                                const PublishOptions& options, PublishCallback done,
                                                bool user_callback,
                                                std::shared_ptr<SentTo> sent_to) {
  auto job = std::make_shared<PublishJob>();
  job->user_callback = user_callback;
  job->sent_to = std::move(sent_to);
  job->stream = stream;
  job->payloads = payloads;
  job->options = options;
  job->done = std::move(done);
  return StartPublish(job);
}

ClientResult<void> Client::Router::StartPublish(const std::shared_ptr<PublishJob>& job) {
  Route route = Resolve(Target{job->name(), std::nullopt, job->options.key, true});
  if (job->redirect_to) {
    auto conn = To(*job->redirect_to);
    if (!conn) return Unexpected(conn.error());
    route.conn = *conn;
    job->redirect_to.reset();
  }
  ++job->attempts;
  if (job->sent_to) {
    std::lock_guard<std::mutex> lock(job->sent_to->mu);
    job->sent_to->addr = client_impl::AddressOf(*route.conn);
    job->sent_to->conn = route.conn.get();
  }
  std::weak_ptr<Router> weak = weak_from_this();
  const bool acked = job->options.ack != AckMode::kNone;
  // The callback names the connection by address, and by a plain pointer for Finish: it is
  // stored in that connection, which runs it.
  return client_impl::PublishOn(
      *route.conn, job->stream, job->payloads, job->options,
      [weak, job, shard = route.shard, addr = client_impl::AddressOf(*route.conn),
       via = route.conn.get(),
       acked](ClientResult<PublishReceipt> result, std::optional<OwnerEntry> hint) {
        if (job->sent_to) job->sent_to->answered = true;
        auto router = weak.lock();
        if (result) {
          // A forwarded batch names its owner: the next one goes there directly.
          if (router && hint && shard) router->owners_.Update(job->name(), *shard, *hint);
          return Finish(job, via, std::move(result));
        }
        if (!router || !acked) return Finish(job, via, Unexpected(AsWriteOutcome(result.error())));
        router->OnPublishFailed(job, via, shard, addr, result.error());
      });
}

void Client::Router::Finish(const std::shared_ptr<PublishJob>& job, Client::Impl* via,
                            ClientResult<PublishReceipt> result) {
  if (job->user_callback && via != nullptr) {
    client_impl::RunUserCallback(
        *via, [job, result = std::move(result)]() mutable { job->done(std::move(result)); });
  } else {
    job->done(std::move(result));
  }
}

void Client::Router::OnPublishFailed(const std::shared_ptr<PublishJob>& job, Client::Impl* via,
                                     std::optional<uint32_t> shard, const std::string& addr,
                                     const ClientError& e) {
  Target target{job->name(), shard, job->options.key, true};
  if (!cluster_) return Finish(job, via, Unexpected(AsWriteOutcome(e)));
  if (e.code == ClientErrorCode::kNotLeader && e.leader_addr && shard) {
    owners_.Update(
        target.name, *shard,
        OwnerEntry{e.leader_node.value_or(""), *e.leader_addr, e.leader_generation.value_or(0)});
  }
  auto decision = client_impl::DecideRetry(e, false, job->attempts, options_.max_attempts);
  if (decision.step == client_impl::RetryStep::kStop)
    return Finish(job, via, Unexpected(AsWriteOutcome(e)));
  if (decision.step == client_impl::RetryStep::kRedirect) {
    if (++job->hops > static_cast<uint32_t>(kMaxRedirects) || *e.leader_addr == addr)
      return Finish(job, via, Unexpected(e));
    --job->attempts;
    job->redirect_to = *e.leader_addr;
  } else {
    Forget(target, addr, e);
  }
  std::weak_ptr<Router> weak = weak_from_this();
  Schedule(
      decision.delay,
      [weak, job] {
        auto router = weak.lock();
        auto started =
            router ? router->StartPublish(job) : ClientResult<void>(Unexpected(Closed()));
        if (!started) job->done(Unexpected(AsWriteOutcome(started.error())));
      },
      [job] { job->done(Unexpected(Closed())); });
}

void Client::Router::Unanswered(const std::string& addr) {
  if (!cluster_ || addr.empty()) return;
  owners_.ForgetBroker(addr);
  Connection conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conns_.find(addr);
    if (it == conns_.end() || !it->second) return;
    conn = it->second;
  }
  // Closed, it is no longer Usable: Home() and To() pick or dial another one next time.
  client_impl::CloseConnection(*conn);
}

void Client::Router::Schedule(std::chrono::milliseconds delay, std::function<void()> run,
                              std::function<void()> cancel) {
  {
    std::lock_guard<std::mutex> lock(retry_mu_);
    if (!retry_stopping_) {
      retries_.emplace(std::chrono::steady_clock::now() + delay,
                       Retry{std::move(run), std::move(cancel)});
      if (!retry_thread_.joinable()) retry_thread_ = std::thread([this] { RetryLoop(); });
      cancel = nullptr;
    }
  }
  retry_cv_.notify_all();
  if (cancel) cancel();  // closed meanwhile
}

void Client::Router::RetryLoop() {
  std::unique_lock<std::mutex> lock(retry_mu_);
  while (!retry_stopping_) {
    if (retries_.empty()) {
      retry_cv_.wait(lock);
      continue;
    }
    auto due = retries_.begin()->first;
    if (std::chrono::steady_clock::now() < due) {
      retry_cv_.wait_until(lock, due);
      continue;
    }
    Retry retry = std::move(retries_.begin()->second);
    retries_.erase(retries_.begin());
    lock.unlock();
    retry.run();
    lock.lock();
  }
}

}  // namespace felix
