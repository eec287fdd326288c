#include "etcd/fake_etcd.h"

#include <algorithm>
#include <atomic>
#include <deque>

namespace felix::etcd {

namespace {

bool InRange(const std::string& k, const std::string& key, const std::string& range_end) {
  if (range_end.empty()) return k == key;
  if (range_end == std::string(1, '\0')) return k >= key;
  return k >= key && k < range_end;
}

template <typename T>
bool Holds(CompareOp op, const T& have, const T& want) {
  switch (op) {
    case CompareOp::kEqual:
      return have == want;
    case CompareOp::kGreater:
      return have > want;
    case CompareOp::kLess:
      return have < want;
    case CompareOp::kNotEqual:
      return have != want;
  }
  return false;
}

}  // namespace

struct FakeEtcd::Watcher final : WatchHandle {
  Watcher(FakeEtcd& fake, WatchOptions options, WatchCallbacks callbacks)
      : fake(fake), options(std::move(options)), callbacks(std::move(callbacks)) {}
  ~Watcher() override { fake.Unregister(this); }
  int64_t next_revision() const override { return next.load(); }

  // Delivers the events of `batch` that this watch covers (deliver_mu_ held).
  void Deliver(const std::vector<Event>& batch) {
    std::vector<Event> mine;
    for (const auto& e : batch) {
      if (e.kv.mod_revision < next.load()) continue;
      if (!InRange(e.kv.key, options.key, options.range_end)) continue;
      Event copy = e;
      if (!options.prev_kv) copy.prev_kv.reset();
      mine.push_back(std::move(copy));
    }
    if (mine.empty()) return;
    next = mine.back().kv.mod_revision + 1;
    callbacks.on_events(mine);
  }

  FakeEtcd& fake;
  WatchOptions options;
  WatchCallbacks callbacks;
  std::atomic<int64_t> next{0};
};

struct FakeEtcd::Stream final : KeepAliveStream {
  Stream(FakeEtcd& fake, KeepAliveCallbacks callbacks)
      : fake(fake), callbacks(std::move(callbacks)) {}
  ~Stream() override { fake.CloseStream(this); }

  EtcdResult<void> Send(int64_t lease_id) override {
    std::lock_guard deliver(fake.deliver_mu_);
    int64_t ttl = 0;
    {
      std::lock_guard lock(fake.mu_);
      if (auto ok = fake.CheckAvailable(); !ok) return ok;
      if (fake.hold_keepalives_) {
        held.push_back(lease_id);
        return EtcdOk();
      }
      auto it = fake.leases_.find(lease_id);
      if (it != fake.leases_.end()) ttl = it->second.ttl;
    }
    if (callbacks.on_answer) callbacks.on_answer(lease_id, ttl);
    return EtcdOk();
  }

  FakeEtcd& fake;
  KeepAliveCallbacks callbacks;
  std::deque<int64_t> held;  // under fake.mu_
};

FakeEtcd::FakeEtcd() = default;
FakeEtcd::~FakeEtcd() = default;

EtcdResult<void> FakeEtcd::CheckAvailable() const {
  if (!available_) return EtcdFail(EtcdErrc::kUnavailable, "fake etcd is unavailable");
  return EtcdOk();
}

std::vector<KeyValue> FakeEtcd::RangeLocked(const std::string& key,
                                            const std::string& range_end) const {
  std::vector<KeyValue> out;
  if (range_end.empty()) {
    auto it = kvs_.find(key);
    if (it != kvs_.end()) out.push_back(it->second);
    return out;
  }
  for (auto it = kvs_.lower_bound(key); it != kvs_.end(); ++it) {
    if (!InRange(it->first, key, range_end)) break;
    out.push_back(it->second);
  }
  return out;
}

void FakeEtcd::PutLocked(const std::string& key, const std::string& value, int64_t lease,
                         std::vector<Event>& out) {
  Event e;
  auto it = kvs_.find(key);
  KeyValue kv;
  if (it != kvs_.end()) {
    e.prev_kv = it->second;
    kv = it->second;
    if (kv.lease != 0 && kv.lease != lease) {
      if (auto old = leases_.find(kv.lease); old != leases_.end()) old->second.keys.erase(key);
    }
  } else {
    kv.key = key;
    kv.create_revision = revision_;
    kv.version = 0;
  }
  kv.value = value;
  kv.mod_revision = revision_;
  kv.version += 1;
  kv.lease = lease;
  if (lease != 0) leases_.at(lease).keys.insert(key);  // checked by Transact
  kvs_[key] = kv;
  e.type = Event::Type::kPut;
  e.kv = kv;
  out.push_back(std::move(e));
}

int64_t FakeEtcd::DeleteLocked(const std::string& key, const std::string& range_end,
                               std::vector<Event>& out) {
  auto victims = RangeLocked(key, range_end);
  for (const auto& kv : victims) {
    if (kv.lease != 0) {
      if (auto l = leases_.find(kv.lease); l != leases_.end()) l->second.keys.erase(kv.key);
    }
    kvs_.erase(kv.key);
    Event e;
    e.type = Event::Type::kDelete;
    e.kv.key = kv.key;
    e.kv.mod_revision = revision_;
    e.prev_kv = kv;
    out.push_back(std::move(e));
  }
  return static_cast<int64_t>(victims.size());
}

bool FakeEtcd::CompareLocked(const Compare& c) const {
  auto it = kvs_.find(c.key);
  const KeyValue* kv = it == kvs_.end() ? nullptr : &it->second;
  switch (c.target) {
    case CompareTarget::kVersion:
      return Holds(c.op, kv ? kv->version : 0, c.number);
    case CompareTarget::kCreate:
      return Holds(c.op, kv ? kv->create_revision : 0, c.number);
    case CompareTarget::kMod:
      return Holds(c.op, kv ? kv->mod_revision : 0, c.number);
    case CompareTarget::kLease:
      return Holds(c.op, kv ? kv->lease : 0, c.number);
    case CompareTarget::kValue:
      return kv != nullptr && Holds(c.op, kv->value, c.value);
  }
  return false;
}

void FakeEtcd::Publish(std::vector<Event> events) {
  if (events.empty()) return;
  std::vector<Watcher*> targets;
  {
    std::lock_guard lock(mu_);
    history_.insert(history_.end(), events.begin(), events.end());
    if (HeldLocked(events.front().kv.mod_revision)) return;
    targets.assign(watchers_.begin(), watchers_.end());
  }
  for (Watcher* w : targets) w->Deliver(events);
}

EtcdResult<RangeResult> FakeEtcd::Range(std::string_view key, const RangeOptions& options) {
  std::lock_guard lock(mu_);
  if (auto ok = CheckAvailable(); !ok) return tl::unexpected(ok.error());
  if (options.revision != 0 && options.revision != revision_) {
    if (options.revision < compacted_) {
      return EtcdFail(EtcdErrc::kCompacted, "fake etcd: revision has been compacted");
    }
    if (options.revision > revision_) {
      return EtcdFail(EtcdErrc::kInvalidArgument, "fake etcd: future revision");
    }
    return EtcdFail(EtcdErrc::kInvalidArgument, "fake etcd: reads at old revisions unsupported");
  }
  RangeResult result;
  result.revision = revision_;
  result.kvs = RangeLocked(std::string(key), options.range_end);
  if (options.limit > 0 && static_cast<int64_t>(result.kvs.size()) > options.limit) {
    result.kvs.resize(static_cast<size_t>(options.limit));
    result.more = true;
  }
  return result;
}

EtcdResult<PutResult> FakeEtcd::Put(std::string_view key, std::string_view value, int64_t lease) {
  Txn txn;
  txn.then_ops.push_back(TxnOp::Put(std::string(key), std::string(value), lease));
  auto r = Transact(txn);
  if (!r) return tl::unexpected(r.error());
  return PutResult{r->revision};
}

EtcdResult<DeleteResult> FakeEtcd::Delete(std::string_view key, std::string_view range_end) {
  Txn txn;
  txn.then_ops.push_back(TxnOp::Delete(std::string(key), std::string(range_end)));
  auto r = Transact(txn);
  if (!r) return tl::unexpected(r.error());
  return DeleteResult{r->revision, r->results.front().deleted};
}

EtcdResult<TxnResult> FakeEtcd::Transact(const Txn& txn) {
  std::lock_guard deliver(deliver_mu_);
  std::vector<Event> events;
  TxnResult result;
  {
    std::lock_guard lock(mu_);
    if (auto ok = CheckAvailable(); !ok) return tl::unexpected(ok.error());
    // Refuse a put under an unknown lease before changing anything (etcd does the same).
    result.succeeded = std::all_of(txn.compares.begin(), txn.compares.end(),
                                   [&](const Compare& c) { return CompareLocked(c); });
    const auto& ops = result.succeeded ? txn.then_ops : txn.else_ops;
    for (const auto& op : ops) {
      if (op.kind == TxnOp::Kind::kPut && op.lease != 0 && !leases_.contains(op.lease)) {
        return EtcdFail(EtcdErrc::kLeaseNotFound, "fake etcd: requested lease not found");
      }
    }
    bool writes = std::any_of(ops.begin(), ops.end(),
                              [](const TxnOp& op) { return op.kind != TxnOp::Kind::kGet; });
    if (writes) ++revision_;
    for (const auto& op : ops) {
      TxnOpResult r;
      r.kind = op.kind;
      switch (op.kind) {
        case TxnOp::Kind::kGet:
          r.kvs = RangeLocked(op.key, op.range_end);
          break;
        case TxnOp::Kind::kPut:
          PutLocked(op.key, op.value, op.lease, events);
          break;
        case TxnOp::Kind::kDelete:
          r.deleted = DeleteLocked(op.key, op.range_end, events);
          break;
      }
      result.results.push_back(std::move(r));
    }
    // A write that changed nothing (delete of nothing) still used a revision in etcd only when
    // something changed; undo the bump otherwise.
    if (writes && events.empty()) --revision_;
    result.revision = revision_;
  }
  Publish(std::move(events));
  return result;
}

EtcdResult<void> FakeEtcd::Compact(int64_t revision) {
  std::lock_guard lock(mu_);
  if (auto ok = CheckAvailable(); !ok) return ok;
  if (revision <= compacted_) {
    return EtcdFail(EtcdErrc::kCompacted, "fake etcd: revision has been compacted");
  }
  if (revision > revision_)
    return EtcdFail(EtcdErrc::kInvalidArgument, "fake etcd: future revision");
  compacted_ = revision;
  std::erase_if(history_, [&](const Event& e) { return e.kv.mod_revision < revision; });
  return EtcdOk();
}

EtcdResult<LeaseGrantResult> FakeEtcd::LeaseGrant(int64_t ttl_seconds) {
  std::lock_guard lock(mu_);
  if (auto ok = CheckAvailable(); !ok) return tl::unexpected(ok.error());
  if (ttl_seconds <= 0) return EtcdFail(EtcdErrc::kInvalidArgument, "fake etcd: TTL must be > 0");
  int64_t id = ++next_lease_;
  leases_[id].ttl = ttl_seconds;
  return LeaseGrantResult{id, ttl_seconds};
}

EtcdResult<void> FakeEtcd::LeaseRevoke(int64_t lease_id) {
  {
    std::lock_guard lock(mu_);
    if (auto ok = CheckAvailable(); !ok) return ok;
    if (!leases_.contains(lease_id)) {
      return EtcdFail(EtcdErrc::kLeaseNotFound, "fake etcd: requested lease not found");
    }
  }
  ExpireLease(lease_id);
  return EtcdOk();
}

void FakeEtcd::ExpireLease(int64_t lease_id) {
  std::lock_guard deliver(deliver_mu_);
  std::vector<Event> events;
  {
    std::lock_guard lock(mu_);
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return;
    std::set<std::string> keys = std::move(it->second.keys);
    leases_.erase(it);
    if (!keys.empty()) {
      ++revision_;
      for (const auto& k : keys) DeleteLocked(k, {}, events);
    }
  }
  Publish(std::move(events));
}

EtcdResult<LeaseTtlResult> FakeEtcd::LeaseTimeToLive(int64_t lease_id) {
  std::lock_guard lock(mu_);
  if (auto ok = CheckAvailable(); !ok) return tl::unexpected(ok.error());
  LeaseTtlResult result;
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return result;  // ttl -1, as etcd answers for an expired lease
  result.ttl_seconds = it->second.ttl;
  result.granted_ttl_seconds = it->second.ttl;
  result.keys.assign(it->second.keys.begin(), it->second.keys.end());
  return result;
}

EtcdResult<std::unique_ptr<KeepAliveStream>> FakeEtcd::OpenKeepAlive(KeepAliveCallbacks callbacks) {
  std::lock_guard lock(mu_);
  if (auto ok = CheckAvailable(); !ok) return tl::unexpected(ok.error());
  auto stream = std::make_unique<Stream>(*this, std::move(callbacks));
  streams_.insert(stream.get());
  return std::unique_ptr<KeepAliveStream>(std::move(stream));
}

void FakeEtcd::CloseStream(Stream* s) {
  std::lock_guard deliver(deliver_mu_);
  std::lock_guard lock(mu_);
  streams_.erase(s);
}

void FakeEtcd::HoldKeepAlives(bool hold) {
  std::lock_guard deliver(deliver_mu_);
  std::vector<std::pair<Stream*, std::vector<std::pair<int64_t, int64_t>>>> answers;
  {
    std::lock_guard lock(mu_);
    hold_keepalives_ = hold;
    if (hold) return;
    for (Stream* s : streams_) {
      std::vector<std::pair<int64_t, int64_t>> mine;
      for (int64_t id : s->held) {
        auto it = leases_.find(id);
        mine.emplace_back(id, it == leases_.end() ? 0 : it->second.ttl);
      }
      s->held.clear();
      answers.emplace_back(s, std::move(mine));
    }
  }
  for (auto& [s, list] : answers) {
    for (auto [id, ttl] : list) {
      if (s->callbacks.on_answer) s->callbacks.on_answer(id, ttl);
    }
  }
}

bool FakeEtcd::HeldLocked(int64_t revision) const {
  return hold_watches_from_ != 0 && revision >= hold_watches_from_;
}

void FakeEtcd::HoldWatches(bool hold) {
  if (hold) {
    std::lock_guard deliver(deliver_mu_);
    std::lock_guard lock(mu_);
    hold_watches_from_ = revision_ + 1;
    return;
  }
  SetWatchHold(0);
}

void FakeEtcd::HoldWatchesFrom(int64_t revision) {
  std::lock_guard deliver(deliver_mu_);
  std::lock_guard lock(mu_);
  hold_watches_from_ = std::max<int64_t>(revision, 1);
}

void FakeEtcd::ReleaseWatchesThrough(int64_t revision) {
  SetWatchHold(revision + 1);
}

void FakeEtcd::SetWatchHold(int64_t from) {
  std::lock_guard deliver(deliver_mu_);
  std::vector<Watcher*> targets;
  std::vector<Event> released;
  {
    std::lock_guard lock(mu_);
    hold_watches_from_ = from;
    targets.assign(watchers_.begin(), watchers_.end());
    for (const auto& e : history_) {
      if (!HeldLocked(e.kv.mod_revision)) released.push_back(e);
    }
  }
  for (Watcher* w : targets) w->Deliver(released);  // each takes what it has not seen yet
}

EtcdResult<std::unique_ptr<WatchHandle>> FakeEtcd::Watch(const WatchOptions& options,
                                                         WatchCallbacks callbacks) {
  if (!callbacks.on_events) return EtcdFail(EtcdErrc::kInvalidArgument, "watch without on_events");
  // Made before the locks are taken: an early return destroys it after releasing them (its
  // destructor takes both).
  auto watcher = std::make_unique<Watcher>(*this, options, std::move(callbacks));
  std::lock_guard deliver(deliver_mu_);
  std::vector<Event> replay;
  bool compacted = false;
  int64_t compact_revision = 0;
  {
    std::lock_guard lock(mu_);
    if (auto ok = CheckAvailable(); !ok) return tl::unexpected(ok.error());
    int64_t start = options.start_revision > 0 ? options.start_revision : revision_ + 1;
    if (start < compacted_) {
      compacted = true;
      compact_revision = compacted_;
    } else {
      for (const auto& e : history_) {
        if (e.kv.mod_revision >= start && !HeldLocked(e.kv.mod_revision)) replay.push_back(e);
      }
    }
    watcher->next = start;
    if (!compacted) watchers_.insert(watcher.get());
  }
  if (compacted) {
    if (watcher->callbacks.on_compacted) watcher->callbacks.on_compacted(compact_revision);
  } else {
    if (watcher->callbacks.on_created) watcher->callbacks.on_created();
    watcher->Deliver(replay);
  }
  return std::unique_ptr<WatchHandle>(std::move(watcher));
}

void FakeEtcd::Unregister(Watcher* w) {
  std::lock_guard deliver(deliver_mu_);
  std::lock_guard lock(mu_);
  watchers_.erase(w);
}

EtcdResult<ServerStatus> FakeEtcd::Status() {
  std::lock_guard lock(mu_);
  if (auto ok = CheckAvailable(); !ok) return tl::unexpected(ok.error());
  return ServerStatus{version_, revision_};
}

void FakeEtcd::SetAvailable(bool available) {
  std::lock_guard lock(mu_);
  available_ = available;
}

void FakeEtcd::SetVersion(std::string version) {
  std::lock_guard lock(mu_);
  version_ = std::move(version);
}

int64_t FakeEtcd::revision() const {
  std::lock_guard lock(mu_);
  return revision_;
}

}  // namespace felix::etcd
