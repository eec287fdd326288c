#include "cluster/assignment_txn.h"

#include <charconv>

namespace felix::cluster {
namespace {

using etcd::Compare;
using etcd::Txn;
using etcd::TxnOp;

Error FromEtcd(const etcd::EtcdError& e) {
  return e.ToError();
}

Result<std::optional<ControllerTerm>> TermFrom(const std::vector<etcd::KeyValue>& kvs) {
  if (kvs.empty()) return std::optional<ControllerTerm>();
  auto record = DecodeControllerRecord(kvs.front().value);
  if (!record) return tl::unexpected(record.error());
  return std::optional<ControllerTerm>(
      ControllerTerm{*record, kvs.front().create_revision, kvs.front().lease});
}

Result<AssignmentRead> ReadFrom(const std::vector<etcd::KeyValue>& kvs) {
  AssignmentRead read;
  if (kvs.empty()) return read;
  auto value = DecodeAssignment(kvs.front().value);
  if (!value) return tl::unexpected(value.error());
  read.value = *value;
  read.mod_revision = kvs.front().mod_revision;
  return read;
}

}  // namespace

Result<CampaignResult> Campaign(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                const ControllerRecord& me, int64_t lease) {
  Txn txn;
  txn.compares.push_back(Compare::Absent(keys.Controller()));
  txn.then_ops.push_back(TxnOp::Put(keys.Controller(), EncodeControllerRecord(me), lease));
  txn.else_ops.push_back(TxnOp::Get(keys.Controller()));
  auto r = etcd.Transact(txn);
  if (!r) return tl::unexpected(FromEtcd(r.error()));
  CampaignResult result;
  if (r->succeeded) {
    result.won = true;
    result.term = ControllerTerm{me, r->revision, lease};
    return result;
  }
  auto holder = TermFrom(r->results.front().kvs);
  if (!holder) return tl::unexpected(holder.error());
  // The key existed at compare time and the else branch read it in the same revision.
  if (*holder) result.term = **holder;
  return result;
}

Result<bool> Resign(etcd::EtcdClient& etcd, const ClusterKeys& keys, const ControllerTerm& term) {
  Txn txn;
  txn.compares.push_back(Compare::CreateRevisionIs(keys.Controller(), term.create_revision));
  txn.then_ops.push_back(TxnOp::Delete(keys.Controller()));
  auto r = etcd.Transact(txn);
  if (!r) return tl::unexpected(FromEtcd(r.error()));
  return r->succeeded;
}

Result<std::optional<ControllerTerm>> ReadController(etcd::EtcdClient& etcd,
                                                     const ClusterKeys& keys) {
  auto r = etcd.Range(keys.Controller(), {});
  if (!r) return tl::unexpected(FromEtcd(r.error()));
  return TermFrom(r->kvs);
}

Result<uint64_t> NextIncarnation(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                 const std::string& node_id) {
  const std::string key = keys.NodeIncarnation(node_id);
  // Concurrent starts of the same node id are an operator error, but stay correct: each
  // attempt compares what it read, so two starts never get the same incarnation.
  for (int attempt = 0; attempt < 16; ++attempt) {
    auto read = etcd.Range(key, {});
    if (!read) return tl::unexpected(FromEtcd(read.error()));
    uint64_t current = 0;
    Txn txn;
    if (read->kvs.empty()) {
      txn.compares.push_back(Compare::Absent(key));
    } else {
      const std::string& v = read->kvs.front().value;
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), current);
      if (ec != std::errc() || ptr != v.data() + v.size()) {
        return Fail(ErrorCode::kCorruption, key + ": '" + v + "' is not a counter");
      }
      txn.compares.push_back(Compare::ModRevisionIs(key, read->kvs.front().mod_revision));
    }
    txn.then_ops.push_back(TxnOp::Put(key, std::to_string(current + 1)));
    auto r = etcd.Transact(txn);
    if (!r) return tl::unexpected(FromEtcd(r.error()));
    if (r->succeeded) return current + 1;
  }
  return Fail(ErrorCode::kUnavailable, key + ": too many concurrent increments");
}

Result<AssignmentRead> ReadAssignment(etcd::EtcdClient& etcd, const std::string& key) {
  auto r = etcd.Range(key, {});
  if (!r) return tl::unexpected(FromEtcd(r.error()));
  return ReadFrom(r->kvs);
}

namespace {

// The else branch of a controller txn read the controller key, the assignment (and the key that
// had to be absent) in one revision: which compare failed.
Result<WriteOutcome> FailedOutcome(const etcd::TxnResult& r, const ControllerTerm& term,
                                   const AssignmentRead& planned_from) {
  const auto& controller = r.results.at(0).kvs;
  bool ours = !controller.empty() && controller.front().create_revision == term.create_revision;
  auto current = ReadFrom(r.results.at(1).kvs);
  if (!current) return tl::unexpected(current.error());
  WriteOutcome out;
  out.kind = ours ? WriteOutcome::Kind::kLostRace : WriteOutcome::Kind::kDeposed;
  if (ours && current->mod_revision == planned_from.mod_revision && r.results.size() > 2 &&
      !r.results[2].kvs.empty()) {
    out.kind = WriteOutcome::Kind::kNodeReturned;
  }
  out.current = std::move(*current);
  return out;
}

// A controller txn: compares the term, the planned-from revision and (when named) that
// `absent_key` does not exist; runs `op` when all hold.
Txn ControllerTxn(const ClusterKeys& keys, const ControllerTerm& term, const std::string& key,
                  const AssignmentRead& planned_from, TxnOp op,
                  const std::string& absent_key = {}) {
  Txn txn;
  txn.compares.push_back(Compare::CreateRevisionIs(keys.Controller(), term.create_revision));
  txn.compares.push_back(planned_from.mod_revision == 0
                             ? Compare::Absent(key)
                             : Compare::ModRevisionIs(key, planned_from.mod_revision));
  if (!absent_key.empty()) txn.compares.push_back(Compare::Absent(absent_key));
  txn.then_ops.push_back(std::move(op));
  txn.else_ops.push_back(TxnOp::Get(keys.Controller()));
  txn.else_ops.push_back(TxnOp::Get(key));
  if (!absent_key.empty()) txn.else_ops.push_back(TxnOp::Get(absent_key));
  return txn;
}

}  // namespace

Result<WriteOutcome> WriteAssignment(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                     const ControllerTerm& term, const std::string& key,
                                     const AssignmentRead& planned_from, Assignment next,
                                     const std::string& absent_node_key) {
  uint64_t base = planned_from.value ? planned_from.value->generation : 0;
  next.generation = base + 1;
  if (auto ok = ValidateAssignment(next); !ok) return tl::unexpected(ok.error());
  auto r = etcd.Transact(ControllerTxn(keys, term, key, planned_from,
                                       TxnOp::Put(key, EncodeAssignment(next)), absent_node_key));
  if (!r) return tl::unexpected(FromEtcd(r.error()));
  if (!r->succeeded) return FailedOutcome(*r, term, planned_from);
  WriteOutcome out;
  out.kind = WriteOutcome::Kind::kWritten;
  out.current.value = std::move(next);
  out.current.mod_revision = r->revision;
  return out;
}

Result<WriteOutcome> DeleteAssignment(etcd::EtcdClient& etcd, const ClusterKeys& keys,
                                      const ControllerTerm& term, const std::string& key,
                                      const AssignmentRead& planned_from) {
  if (planned_from.mod_revision == 0) {
    return Fail(ErrorCode::kInvalidArgument, key + ": deleting an assignment not read");
  }
  auto r = etcd.Transact(ControllerTxn(keys, term, key, planned_from, TxnOp::Delete(key)));
  if (!r) return tl::unexpected(FromEtcd(r.error()));
  if (!r->succeeded) return FailedOutcome(*r, term, planned_from);
  WriteOutcome out;
  out.kind = WriteOutcome::Kind::kWritten;
  out.current.mod_revision = r->revision;
  return out;
}

}  // namespace felix::cluster
