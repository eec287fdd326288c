// EtcdClient: the narrow etcd v3 interface the broker uses (KV, transactions, watches, leases,
// server status). Two implementations: GrpcEtcdClient (grpc_etcd_client.h, a real etcd over
// gRPC) and FakeEtcd (fake_etcd.h, in-process, same txn/revision/lease semantics, for unit
// tests of code built on top).
//
// Threading contract (both implementations):
// - Every method may be called from any thread, concurrently.
// - Unary calls block for at most the implementation's call deadline and never throw.
// - Watch callbacks of one watch run one at a time, in revision order, on a thread owned by the
//   implementation (GrpcEtcdClient: the watch's own thread; FakeEtcd: the writing thread).
//   A callback must not destroy its own WatchHandle and must not block for long.
// - Destroying a WatchHandle / KeepAliveStream cancels it and waits until no callback of it
//   runs any more; afterwards none is called. Both must be destroyed before the client.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/etcd_error.h"

namespace felix::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;  // number of puts since creation; 0 = absent
  int64_t lease = 0;    // 0 = no lease
  bool operator==(const KeyValue&) const = default;
};

// The range_end that makes [prefix, end) cover every key starting with `prefix`
// (etcd's rule: the prefix with its last byte incremented, trailing 0xff bytes dropped;
// "\0" = to the end of the keyspace when the prefix is all 0xff or empty).
std::string PrefixEnd(std::string_view prefix);

struct RangeOptions {
  std::string range_end;  // empty: the single key
  int64_t revision = 0;   // 0: the newest; else a snapshot at that revision (kCompacted if gone)
  int64_t limit = 0;      // 0: no limit
};

struct RangeResult {
  int64_t revision = 0;  // the store revision the read saw (the snapshot to watch after)
  std::vector<KeyValue> kvs;
  bool more = false;  // more keys exist beyond `limit`
};

struct PutResult {
  int64_t revision = 0;
};

struct DeleteResult {
  int64_t revision = 0;
  int64_t deleted = 0;
};

enum class CompareTarget { kVersion, kCreate, kMod, kValue, kLease };
enum class CompareOp { kEqual, kGreater, kLess, kNotEqual };

// One condition of a transaction. An absent key has version, create and mod revision 0 and
// lease 0; a VALUE compare on an absent key is false.
struct Compare {
  std::string key;
  CompareTarget target = CompareTarget::kMod;
  CompareOp op = CompareOp::kEqual;
  int64_t number = 0;  // for kVersion, kCreate, kMod, kLease
  std::string value;   // for kValue

  static Compare Absent(std::string key) {
    return {std::move(key), CompareTarget::kCreate, CompareOp::kEqual, 0, {}};
  }
  static Compare CreateRevisionIs(std::string key, int64_t rev) {
    return {std::move(key), CompareTarget::kCreate, CompareOp::kEqual, rev, {}};
  }
  static Compare ModRevisionIs(std::string key, int64_t rev) {
    return {std::move(key), CompareTarget::kMod, CompareOp::kEqual, rev, {}};
  }
  static Compare ValueIs(std::string key, std::string value) {
    return {std::move(key), CompareTarget::kValue, CompareOp::kEqual, 0, std::move(value)};
  }
};

struct TxnOp {
  enum class Kind { kGet, kPut, kDelete };
  Kind kind = Kind::kGet;
  std::string key;
  std::string range_end;  // kGet / kDelete: empty = the single key
  std::string value;      // kPut
  int64_t lease = 0;      // kPut

  static TxnOp Get(std::string key, std::string range_end = {}) {
    return {Kind::kGet, std::move(key), std::move(range_end), {}, 0};
  }
  static TxnOp Put(std::string key, std::string value, int64_t lease = 0) {
    return {Kind::kPut, std::move(key), {}, std::move(value), lease};
  }
  static TxnOp Delete(std::string key, std::string range_end = {}) {
    return {Kind::kDelete, std::move(key), std::move(range_end), {}, 0};
  }
};

// If every compare holds, `then_ops` run; otherwise `else_ops`. Atomic, one revision.
struct Txn {
  std::vector<Compare> compares;
  std::vector<TxnOp> then_ops;
  std::vector<TxnOp> else_ops;
};

struct TxnOpResult {
  TxnOp::Kind kind = TxnOp::Kind::kGet;
  std::vector<KeyValue> kvs;  // kGet
  int64_t deleted = 0;        // kDelete
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;  // store revision after the txn (a put's new mod_revision on success)
  std::vector<TxnOpResult> results;  // one per op of the branch that ran
};

struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // kDelete: key and mod_revision (the deletion's revision) only
  std::optional<KeyValue> prev_kv;
};

struct WatchOptions {
  std::string key;
  std::string range_end;       // empty: the single key; PrefixEnd(key) for a prefix
  int64_t start_revision = 0;  // 0: from "now" (racy — prefer the revision after a read)
  bool prev_kv = false;
  bool progress_notify = false;
};

struct WatchCallbacks {
  // Events of one or more revisions, each >= every revision delivered before. Required.
  std::function<void(const std::vector<Event>& events)> on_events;
  // The watch cannot continue: history below `compact_revision` is gone. The watch has ended;
  // the caller re-reads (a re-snapshot) and watches again from the read's revision + 1.
  std::function<void(int64_t compact_revision)> on_compacted;
  // The stream broke (the watch reconnects by itself, resuming at last seen revision + 1).
  std::function<void(const EtcdError&)> on_broken;
  // etcd confirmed the watch (after every (re)connection).
  std::function<void()> on_created;
};

class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
  // The revision the watch resumes from after a reconnect (last seen revision + 1).
  virtual int64_t next_revision() const = 0;
};

struct LeaseGrantResult {
  int64_t id = 0;
  int64_t ttl_seconds = 0;  // what etcd granted (may differ from what was asked)
};

struct LeaseTtlResult {
  int64_t ttl_seconds = -1;  // remaining; -1 = expired or unknown
  int64_t granted_ttl_seconds = 0;
  std::vector<std::string> keys;  // keys attached to the lease
};

struct KeepAliveCallbacks {
  // An answer to one keepalive (answers carry no request id; they come in send order).
  // ttl_seconds <= 0 means the lease no longer exists.
  std::function<void(int64_t lease_id, int64_t ttl_seconds)> on_answer;
  // The stream ended; open a new one to continue.
  std::function<void(const EtcdError&)> on_closed;
};

class KeepAliveStream {
 public:
  virtual ~KeepAliveStream() = default;
  // Queues one keepalive for `lease_id`; an error when the stream is already closed.
  virtual EtcdResult<void> Send(int64_t lease_id) = 0;
};

struct ServerStatus {
  std::string version;  // "3.4.23"
  int64_t revision = 0;
};

class EtcdClient {
 public:
  virtual ~EtcdClient() = default;

  virtual EtcdResult<RangeResult> Range(std::string_view key, const RangeOptions& options) = 0;
  virtual EtcdResult<PutResult> Put(std::string_view key, std::string_view value,
                                    int64_t lease = 0) = 0;
  virtual EtcdResult<DeleteResult> Delete(std::string_view key,
                                          std::string_view range_end = {}) = 0;
  virtual EtcdResult<TxnResult> Transact(const Txn& txn) = 0;
  // Discards history below `revision` (watches from older revisions get on_compacted).
  virtual EtcdResult<void> Compact(int64_t revision) = 0;

  virtual EtcdResult<LeaseGrantResult> LeaseGrant(int64_t ttl_seconds) = 0;
  // Revokes the lease and deletes every key attached to it.
  virtual EtcdResult<void> LeaseRevoke(int64_t lease_id) = 0;
  virtual EtcdResult<LeaseTtlResult> LeaseTimeToLive(int64_t lease_id) = 0;
  virtual EtcdResult<std::unique_ptr<KeepAliveStream>> OpenKeepAlive(
      KeepAliveCallbacks callbacks) = 0;

  virtual EtcdResult<std::unique_ptr<WatchHandle>> Watch(const WatchOptions& options,
                                                         WatchCallbacks callbacks) = 0;
  virtual EtcdResult<ServerStatus> Status() = 0;

  // Conveniences over Range.
  EtcdResult<RangeResult> GetPrefix(std::string_view prefix, int64_t revision = 0);
  // The key's value and the revision the read saw; nullopt kv when absent.
  EtcdResult<std::pair<std::optional<KeyValue>, int64_t>> Get(std::string_view key);
};

}  // namespace felix::etcd
