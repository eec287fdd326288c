#include "etcd/grpc_etcd_client.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "etcd/backoff.h"
#include "rpc.grpc.pb.h"

namespace felix::etcd {
namespace {

namespace pb = etcdserverpb;
using SteadyClock = std::chrono::steady_clock;

// ---- conversions between the API types and the protobuf messages ----

KeyValue FromPb(const mvccpb::KeyValue& kv) {
  return KeyValue{kv.key(),          kv.value(),   kv.create_revision(),
                  kv.mod_revision(), kv.version(), kv.lease()};
}

std::vector<KeyValue> FromPb(const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs) {
  std::vector<KeyValue> out;
  out.reserve(static_cast<size_t>(kvs.size()));
  for (const auto& kv : kvs) out.push_back(FromPb(kv));
  return out;
}

pb::Compare ToPb(const Compare& c) {
  pb::Compare out;
  out.set_key(c.key);
  switch (c.op) {
    case CompareOp::kEqual:
      out.set_result(pb::Compare::EQUAL);
      break;
    case CompareOp::kGreater:
      out.set_result(pb::Compare::GREATER);
      break;
    case CompareOp::kLess:
      out.set_result(pb::Compare::LESS);
      break;
    case CompareOp::kNotEqual:
      out.set_result(pb::Compare::NOT_EQUAL);
      break;
  }
  switch (c.target) {
    case CompareTarget::kVersion:
      out.set_target(pb::Compare::VERSION);
      out.set_version(c.number);
      break;
    case CompareTarget::kCreate:
      out.set_target(pb::Compare::CREATE);
      out.set_create_revision(c.number);
      break;
    case CompareTarget::kMod:
      out.set_target(pb::Compare::MOD);
      out.set_mod_revision(c.number);
      break;
    case CompareTarget::kValue:
      out.set_target(pb::Compare::VALUE);
      out.set_value(c.value);
      break;
    case CompareTarget::kLease:
      out.set_target(pb::Compare::LEASE);
      out.set_lease(c.number);
      break;
  }
  return out;
}

pb::RequestOp ToPb(const TxnOp& op) {
  pb::RequestOp out;
  switch (op.kind) {
    case TxnOp::Kind::kGet: {
      auto* r = out.mutable_request_range();
      r->set_key(op.key);
      r->set_range_end(op.range_end);
      break;
    }
    case TxnOp::Kind::kPut: {
      auto* r = out.mutable_request_put();
      r->set_key(op.key);
      r->set_value(op.value);
      r->set_lease(op.lease);
      break;
    }
    case TxnOp::Kind::kDelete: {
      auto* r = out.mutable_request_delete_range();
      r->set_key(op.key);
      r->set_range_end(op.range_end);
      break;
    }
  }
  return out;
}

TxnOpResult FromPb(const pb::ResponseOp& op) {
  TxnOpResult out;
  if (op.has_response_range()) {
    out.kind = TxnOp::Kind::kGet;
    out.kvs = FromPb(op.response_range().kvs());
  } else if (op.has_response_put()) {
    out.kind = TxnOp::Kind::kPut;
  } else if (op.has_response_delete_range()) {
    out.kind = TxnOp::Kind::kDelete;
    out.deleted = op.response_delete_range().deleted();
  }
  return out;
}

Event FromPb(const mvccpb::Event& e) {
  Event out;
  out.type = e.type() == mvccpb::Event::DELETE ? Event::Type::kDelete : Event::Type::kPut;
  out.kv = FromPb(e.kv());
  if (e.has_prev_kv()) out.prev_kv = FromPb(e.prev_kv());
  return out;
}

EtcdError FromStatus(const grpc::Status& status, std::string_view what, const std::string& target) {
  std::string message = std::string(what) + " at " + target + ": " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return {EtcdErrc::kTimeout, message + " (deadline exceeded)"};
    case grpc::StatusCode::UNAVAILABLE:
      return {EtcdErrc::kUnavailable, message};
    case grpc::StatusCode::NOT_FOUND:
      return {EtcdErrc::kLeaseNotFound, message};
    case grpc::StatusCode::OUT_OF_RANGE:
      if (status.error_message().find("compacted") != std::string::npos) {
        return {EtcdErrc::kCompacted, message};
      }
      return {EtcdErrc::kInvalidArgument, message};
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return {EtcdErrc::kInvalidArgument, message};
    case grpc::StatusCode::CANCELLED:
      return {EtcdErrc::kCanceled, message};
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return {EtcdErrc::kUnavailable, message};
    default:
      return {EtcdErrc::kInternal, message};
  }
}

// One etcd member: its channel and stubs (stubs are thread-safe).
struct Endpoint {
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Watch::Stub> watch;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Maintenance::Stub> maintenance;
};

}  // namespace

EtcdResult<std::vector<std::string>> ParseEtcdEndpoints(std::string_view endpoints) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= endpoints.size()) {
    size_t comma = endpoints.find(',', start);
    if (comma == std::string_view::npos) comma = endpoints.size();
    std::string_view entry = endpoints.substr(start, comma - start);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    std::string_view rest = entry;
    auto bad = [&](const char* why) {
      return EtcdFail(EtcdErrc::kInvalidArgument,
                      "etcd endpoint '" + std::string(entry) + "': " + why);
    };
    if (rest.starts_with("https://")) return bad("TLS to etcd is not supported; use http://");
    if (rest.starts_with("http://")) rest.remove_prefix(7);
    while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    size_t colon = rest.rfind(':');
    if (rest.empty() || colon == std::string_view::npos || colon == 0) {
      return bad("expected http://HOST:PORT");
    }
    std::string_view port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad("bad port");
    }
    if (rest.find('/') != std::string_view::npos) return bad("a path is not allowed");
    out.emplace_back(rest);
    start = comma + 1;
  }
  if (out.empty()) return EtcdFail(EtcdErrc::kInvalidArgument, "no etcd endpoint given");
  return out;
}

struct GrpcEtcdClient::Impl {
  GrpcEtcdOptions options;
  std::vector<Endpoint> endpoints;
  std::atomic<size_t> current{0};

  size_t Current() const { return current.load() % endpoints.size(); }
  // Moves "current" past a failed endpoint (only if nobody moved it already).
  void Failed(size_t index) {
    size_t expected = index;
    current.compare_exchange_strong(expected, (index + 1) % endpoints.size());
  }
  static bool TransportFailure(const grpc::Status& s) {
    return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
           s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  }

  // Runs `call(endpoint, context)` under one deadline. An endpoint that cannot be connected
  // within its share of the time is skipped (the request was never sent, so even a write may
  // go to the next one). Once sent, reads retry on other endpoints while the failure is
  // "unavailable" and time is left; writes get that one attempt (their outcome is unknown).
  template <typename Call>
  EtcdResult<void> Unary(std::string_view what, bool idempotent, Call&& call) {
    auto deadline = SteadyClock::now() + options.call_timeout;
    auto system_deadline = [&](SteadyClock::time_point d) {
      return std::chrono::system_clock::now() +
             std::chrono::duration_cast<std::chrono::system_clock::duration>(d -
                                                                             SteadyClock::now());
    };
    EtcdError last{EtcdErrc::kUnavailable, std::string(what) + ": no endpoint"};
    const size_t n = endpoints.size();
    for (size_t i = 0; i < n; ++i) {
      size_t index = Current();
      Endpoint& ep = endpoints[index];
      auto now = SteadyClock::now();
      if (now >= deadline) {
        last = {EtcdErrc::kTimeout, std::string(what) + " at " + ep.target + ": deadline exceeded"};
        break;
      }
      // Kicks a connection attempt and waits for it: a fail-fast call on a channel in
      // TRANSIENT_FAILURE would fail with the cached error without trying again.
      auto share = (deadline - now) / static_cast<int64_t>(n - i);
      if (!ep.channel->WaitForConnected(system_deadline(now + share))) {
        last = {EtcdErrc::kUnavailable, std::string(what) + ": cannot connect to " + ep.target};
        Failed(index);
        continue;
      }
      grpc::ClientContext context;
      context.set_deadline(system_deadline(deadline));
      grpc::Status status = call(ep, &context);
      if (status.ok()) return EtcdOk();
      last = FromStatus(status, what, ep.target);
      if (TransportFailure(status)) Failed(index);
      if (!idempotent || status.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    }
    return tl::unexpected(last);
  }
};

namespace {

// ---- lease keepalive stream: a reader thread; Send writes under a mutex ----

class GrpcKeepAliveStream final : public KeepAliveStream {
 public:
  // The reader thread first waits for the channel to connect (a stream opened on a channel in
  // TRANSIENT_FAILURE would fail at once with a cached error, without a new connection
  // attempt); keepalives sent meanwhile are queued and written, in order, once it is open.
  GrpcKeepAliveStream(GrpcEtcdClient::Impl& client, size_t index, KeepAliveCallbacks callbacks)
      : client_(client),
        index_(index),
        target_(client.endpoints[index].target),
        callbacks_(std::move(callbacks)) {
    reader_ = std::thread([this] { ReadLoop(); });
  }
  ~GrpcKeepAliveStream() override {
    cancelled_ = true;
    context_.TryCancel();  // sticky: also cancels a call that starts after this
    reader_.join();
  }

  EtcdResult<void> Send(int64_t lease_id) override {
    std::lock_guard lock(write_mu_);
    if (closed_) {
      return EtcdFail(EtcdErrc::kUnavailable, "keepalive stream to " + target_ + " closed");
    }
    if (stream_ == nullptr) {
      pending_.push_back(lease_id);
      return EtcdOk();
    }
    pb::LeaseKeepAliveRequest request;
    request.set_id(lease_id);
    if (!stream_->Write(request)) {
      return EtcdFail(EtcdErrc::kUnavailable, "keepalive stream to " + target_ + " broke");
    }
    return EtcdOk();
  }

 private:
  void ReadLoop() {
    Endpoint& ep = client_.endpoints[index_];
    bool connected = false;
    auto give_up = SteadyClock::now() + client_.options.call_timeout;
    while (!cancelled_ && !connected && SteadyClock::now() < give_up) {
      connected = ep.channel->WaitForConnected(std::chrono::system_clock::now() +
                                               std::chrono::milliseconds(100));
    }
    grpc::Status status(grpc::StatusCode::UNAVAILABLE, "cannot connect");
    if (connected && !cancelled_) {
      {
        std::lock_guard lock(write_mu_);
        stream_ = ep.lease->LeaseKeepAlive(&context_);
        for (int64_t id : pending_) {
          pb::LeaseKeepAliveRequest request;
          request.set_id(id);
          if (!stream_->Write(request)) break;
        }
        pending_.clear();
      }
      pb::LeaseKeepAliveResponse response;
      while (stream_->Read(&response)) {
        if (callbacks_.on_answer) callbacks_.on_answer(response.id(), response.ttl());
      }
      std::lock_guard lock(write_mu_);
      closed_ = true;
      // Finish only after no Write can start; cancel first so it cannot wait for a half-close.
      context_.TryCancel();
      status = stream_->Finish();
    } else {
      std::lock_guard lock(write_mu_);
      closed_ = true;
    }
    // The next stream goes to another endpoint when this one failed at the transport level.
    if (GrpcEtcdClient::Impl::TransportFailure(status)) client_.Failed(index_);
    if (callbacks_.on_closed) {
      EtcdError error = status.ok() ? EtcdError{EtcdErrc::kUnavailable,
                                                "keepalive stream to " + target_ + " ended"}
                                    : FromStatus(status, "lease keepalive", target_);
      callbacks_.on_closed(error);
    }
  }

  GrpcEtcdClient::Impl& client_;
  const size_t index_;
  std::string target_;
  KeepAliveCallbacks callbacks_;
  std::atomic<bool> cancelled_{false};
  grpc::ClientContext context_;
  std::mutex write_mu_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>
      stream_;                    // under write_mu_ until set, then read by the reader thread
  std::vector<int64_t> pending_;  // under write_mu_: sent before the stream opened
  bool closed_ = false;           // under write_mu_
  std::thread reader_;
};

// ---- watch: one thread per watch, reconnecting with backoff ----

class GrpcWatch final : public WatchHandle {
 public:
  GrpcWatch(GrpcEtcdClient::Impl& client, WatchOptions options, WatchCallbacks callbacks)
      : client_(client),
        options_(std::move(options)),
        callbacks_(std::move(callbacks)),
        backoff_(client.options.reconnect_initial, client.options.reconnect_max),
        next_revision_(options_.start_revision) {
    thread_ = std::thread([this] { Run(); });
  }
  ~GrpcWatch() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      if (context_ != nullptr) context_->TryCancel();
    }
    cv_.notify_all();
    thread_.join();
  }
  int64_t next_revision() const override { return next_revision_.load(); }

 private:
  bool stopping() {
    std::lock_guard lock(mu_);
    return stopping_;
  }

  // Returns true when the watch ended for good (compacted or stopping).
  bool RunOnce() {
    size_t index = client_.Current();
    Endpoint& ep = client_.endpoints[index];
    auto context = std::make_unique<grpc::ClientContext>();
    {
      std::lock_guard lock(mu_);
      if (stopping_) return true;
      context_ = context.get();
    }
    // Wait (bounded) for a connection first: a fail-fast stream on a channel in
    // TRANSIENT_FAILURE fails at once with the cached error without a new connection attempt.
    // In slices, so that a destructor waiting for this thread is not held up.
    bool connected = false;
    for (int slice = 0; slice < 10 && !connected && !stopping(); ++slice) {
      connected = ep.channel->WaitForConnected(std::chrono::system_clock::now() +
                                               std::chrono::milliseconds(100));
    }
    if (!connected) {
      {
        std::lock_guard lock(mu_);
        context_ = nullptr;
        if (stopping_) return true;
      }
      client_.Failed(index);
      if (callbacks_.on_broken) {
        callbacks_.on_broken({EtcdErrc::kUnavailable, "watch: cannot connect to " + ep.target});
      }
      return false;
    }
    auto stream = ep.watch->Watch(context.get());
    pb::WatchRequest request;
    auto* create = request.mutable_create_request();
    create->set_key(options_.key);
    create->set_range_end(options_.range_end);
    create->set_start_revision(next_revision_.load());
    create->set_prev_kv(options_.prev_kv);
    create->set_progress_notify(options_.progress_notify);
    bool ended = false;
    if (stream->Write(request)) {
      pb::WatchResponse response;
      while (stream->Read(&response)) {
        if (response.compact_revision() > 0) {
          // History we need is gone: report and end (the caller re-snapshots).
          if (callbacks_.on_compacted) callbacks_.on_compacted(response.compact_revision());
          ended = true;
          break;
        }
        if (response.canceled()) break;  // another cancel reason: reconnect
        if (response.created()) {
          backoff_.Reset();
          // A watch "from now" resumes after the revision it was created at, not from "now"
          // again (which would skip what happened while it was disconnected).
          if (next_revision_.load() == 0) next_revision_ = response.header().revision() + 1;
          if (callbacks_.on_created) callbacks_.on_created();
        }
        if (response.events_size() > 0) {
          std::vector<Event> events;
          events.reserve(static_cast<size_t>(response.events_size()));
          for (const auto& e : response.events()) events.push_back(FromPb(e));
          next_revision_ = events.back().kv.mod_revision + 1;
          callbacks_.on_events(events);
        } else if (!response.created() && response.header().revision() > 0) {
          // A progress notification: every event up to this revision has been sent.
          int64_t seen = response.header().revision() + 1;
          if (seen > next_revision_.load()) next_revision_ = seen;
        }
      }
    }
    context->TryCancel();
    grpc::Status status = stream->Finish();
    {
      std::lock_guard lock(mu_);
      context_ = nullptr;
      if (stopping_) return true;
    }
    if (ended) return true;
    if (GrpcEtcdClient::Impl::TransportFailure(status)) client_.Failed(index);
    if (callbacks_.on_broken) {
      callbacks_.on_broken(status.ok()
                               ? EtcdError{EtcdErrc::kUnavailable, "watch stream to " + ep.target +
                                                                       " was cancelled by etcd"}
                               : FromStatus(status, "watch", ep.target));
    }
    return false;
  }

  void Run() {
    while (!RunOnce()) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, backoff_.Next(), [this] { return stopping_; });
      if (stopping_) return;
    }
  }

  GrpcEtcdClient::Impl& client_;
  const WatchOptions options_;
  WatchCallbacks callbacks_;
  Backoff backoff_;  // watch thread only
  std::atomic<int64_t> next_revision_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  grpc::ClientContext* context_ = nullptr;  // the live stream's, under mu_
  std::thread thread_;
};

}  // namespace

GrpcEtcdClient::GrpcEtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcEtcdClient::~GrpcEtcdClient() = default;

EtcdResult<std::unique_ptr<GrpcEtcdClient>> GrpcEtcdClient::Create(std::string_view endpoints,
                                                                   GrpcEtcdOptions options) {
  auto targets = ParseEtcdEndpoints(endpoints);
  if (!targets) return tl::unexpected(targets.error());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  for (const auto& target : *targets) {
    grpc::ChannelArguments args;
    // Reconnect quickly after an etcd restart (gRPC's defaults back off up to 120 s). The
    // "min reconnect backoff" is left alone: gRPC also uses it as the connect timeout, and a
    // short one fails handshakes on a loaded machine.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // HTTP/2 pings while streams are open, so a watch on a silently dead connection (a
    // partition without a reset) breaks and reconnects. etcd refuses pings more often than
    // every 5 s (--grpc-keepalive-min-time), hence 10 s.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    Endpoint ep;
    ep.target = target;
    ep.channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    ep.kv = pb::KV::NewStub(ep.channel);
    ep.watch = pb::Watch::NewStub(ep.channel);
    ep.lease = pb::Lease::NewStub(ep.channel);
    ep.maintenance = pb::Maintenance::NewStub(ep.channel);
    impl->endpoints.push_back(std::move(ep));
  }
  return std::unique_ptr<GrpcEtcdClient>(new GrpcEtcdClient(std::move(impl)));
}

EtcdResult<RangeResult> GrpcEtcdClient::Range(std::string_view key, const RangeOptions& options) {
  pb::RangeRequest request;
  request.set_key(std::string(key));
  request.set_range_end(options.range_end);
  request.set_revision(options.revision);
  request.set_limit(options.limit);
  pb::RangeResponse response;
  auto done = impl_->Unary("range", true, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Range(ctx, request, &response);
  });
  if (!done) return tl::unexpected(done.error());
  return RangeResult{response.header().revision(), FromPb(response.kvs()), response.more()};
}

EtcdResult<PutResult> GrpcEtcdClient::Put(std::string_view key, std::string_view value,
                                          int64_t lease) {
  pb::PutRequest request;
  request.set_key(std::string(key));
  request.set_value(std::string(value));
  request.set_lease(lease);
  pb::PutResponse response;
  auto done = impl_->Unary("put", false, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Put(ctx, request, &response);
  });
  if (!done) return tl::unexpected(done.error());
  return PutResult{response.header().revision()};
}

EtcdResult<DeleteResult> GrpcEtcdClient::Delete(std::string_view key, std::string_view range_end) {
  pb::DeleteRangeRequest request;
  request.set_key(std::string(key));
  request.set_range_end(std::string(range_end));
  pb::DeleteRangeResponse response;
  auto done = impl_->Unary("delete", false, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->DeleteRange(ctx, request, &response);
  });
  if (!done) return tl::unexpected(done.error());
  return DeleteResult{response.header().revision(), response.deleted()};
}

EtcdResult<TxnResult> GrpcEtcdClient::Transact(const Txn& txn) {
  pb::TxnRequest request;
  for (const auto& c : txn.compares) *request.add_compare() = ToPb(c);
  for (const auto& op : txn.then_ops) *request.add_success() = ToPb(op);
  for (const auto& op : txn.else_ops) *request.add_failure() = ToPb(op);
  pb::TxnResponse response;
  auto done = impl_->Unary("txn", false, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Txn(ctx, request, &response);
  });
  if (!done) return tl::unexpected(done.error());
  TxnResult result;
  result.succeeded = response.succeeded();
  result.revision = response.header().revision();
  for (const auto& op : response.responses()) result.results.push_back(FromPb(op));
  return result;
}

EtcdResult<void> GrpcEtcdClient::Compact(int64_t revision) {
  pb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(true);
  pb::CompactionResponse response;
  return impl_->Unary("compact", false, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Compact(ctx, request, &response);
  });
}

EtcdResult<LeaseGrantResult> GrpcEtcdClient::LeaseGrant(int64_t ttl_seconds) {
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  pb::LeaseGrantResponse response;
  auto done = impl_->Unary("lease grant", false, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseGrant(ctx, request, &response);
  });
  if (!done) return tl::unexpected(done.error());
  if (!response.error().empty()) {
    return EtcdFail(EtcdErrc::kInternal, "lease grant: " + response.error());
  }
  return LeaseGrantResult{response.id(), response.ttl()};
}

EtcdResult<void> GrpcEtcdClient::LeaseRevoke(int64_t lease_id) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  pb::LeaseRevokeResponse response;
  return impl_->Unary("lease revoke", false, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseRevoke(ctx, request, &response);
  });
}

EtcdResult<LeaseTtlResult> GrpcEtcdClient::LeaseTimeToLive(int64_t lease_id) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease_id);
  request.set_keys(true);
  pb::LeaseTimeToLiveResponse response;
  auto done = impl_->Unary("lease ttl", true, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseTimeToLive(ctx, request, &response);
  });
  if (!done) return tl::unexpected(done.error());
  LeaseTtlResult result;
  result.ttl_seconds = response.ttl();
  result.granted_ttl_seconds = response.grantedttl();
  for (const auto& k : response.keys()) result.keys.push_back(k);
  return result;
}

EtcdResult<std::unique_ptr<KeepAliveStream>> GrpcEtcdClient::OpenKeepAlive(
    KeepAliveCallbacks callbacks) {
  size_t index = impl_->Current();
  return std::unique_ptr<KeepAliveStream>(
      new GrpcKeepAliveStream(*impl_, index, std::move(callbacks)));
}

EtcdResult<std::unique_ptr<WatchHandle>> GrpcEtcdClient::Watch(const WatchOptions& options,
                                                               WatchCallbacks callbacks) {
  if (!callbacks.on_events) return EtcdFail(EtcdErrc::kInvalidArgument, "watch without on_events");
  return std::unique_ptr<WatchHandle>(new GrpcWatch(*impl_, options, std::move(callbacks)));
}

EtcdResult<ServerStatus> GrpcEtcdClient::Status() {
  pb::StatusRequest request;
  pb::StatusResponse response;
  auto done = impl_->Unary("status", true, [&](Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.maintenance->Status(ctx, request, &response);
  });
  if (!done) return tl::unexpected(done.error());
  return ServerStatus{response.version(), response.header().revision()};
}

}  // namespace felix::etcd
