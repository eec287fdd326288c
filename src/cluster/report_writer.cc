#include "cluster/report_writer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "cluster/assignment_txn.h"

namespace felix::cluster {
namespace {

const ReplicaCursorStatus* CursorOf(const std::vector<ReplicaCursorStatus>& cursors,
                                    const std::string& node, storage::LogKind log) {
  for (const auto& c : cursors) {
    if (c.node_id == node && c.log == log) return &c;
  }
  return nullptr;
}

}  // namespace

Report MakeReport(uint64_t generation, const std::string& leader, Offset leader_durable,
                  Offset commit, const std::vector<std::string>& followers,
                  const std::vector<CaughtUpFloor>& floors,
                  const std::vector<ReplicaCursorStatus>& cursors) {
  Report report;
  report.generation = generation;
  report.leader = leader;
  report.commit = commit.value();
  report.durable[leader] = leader_durable.value();
  for (const auto& node : followers) {
    if (node == leader) continue;
    bool caught_up = !floors.empty();
    for (const auto& f : floors) {
      const ReplicaCursorStatus* c = CursorOf(cursors, node, f.log);
      // A halted follower counts for nothing (replication.md §23), an unanswered one neither.
      if (!c || c->halt != ReplicaHalt::kNone || c->confirmed < f.floor) caught_up = false;
    }
    if (caught_up) report.caught_up.push_back(node);
    if (!floors.empty()) {
      if (const ReplicaCursorStatus* c = CursorOf(cursors, node, floors.front().log)) {
        report.durable[node] = c->confirmed.value();
      }
    }
  }
  return report;
}

ReportWriter::ReportWriter(ReportWriterOptions options) : options_(std::move(options)) {
  if (options_.metrics) {
    const char* help = "replica reports this broker wrote as a shard leader, by outcome";
    written_ok_ = &options_.metrics->AddCounter("felix_cluster_reports_written_total", help,
                                                "outcome=\"ok\"");
    written_stale_ = &options_.metrics->AddCounter("felix_cluster_reports_written_total", help,
                                                   "outcome=\"not_leader\"");
    written_error_ = &options_.metrics->AddCounter("felix_cluster_reports_written_total", help,
                                                   "outcome=\"error\"");
  }
}

ReportWriter::~ReportWriter() {
  Stop();
}

void ReportWriter::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ReportWriter::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ReportWriter::Run() {
  while (true) {
    {
      MutexLock lock(mu_);
      cv_.wait_for(lock.native(), options_.interval,
                   [&]() NO_THREAD_SAFETY_ANALYSIS { return stopping_; });
      if (stopping_) return;
    }
    auto written = WriteChanged();
    if (!written) {
      spdlog::warn("replica reports: {}", written.error().ToString());
    }
  }
}

Result<size_t> ReportWriter::WriteChanged() {
  std::vector<LeaderReport> reports;
  if (options_.collect) reports = options_.collect();
  std::map<ShardRef, Written> still;
  size_t count = 0;
  std::optional<Error> first_error;
  for (const auto& r : reports) {
    auto last = written_.find(r.shard);
    AssignSeen seen = last == written_.end() ? AssignSeen{} : last->second.assign;
    if (last != written_.end() && last->second.report == r.report) {
      still.emplace(r.shard, std::move(last->second));
      continue;
    }
    auto wrote = WriteOne(r, seen);
    if (!wrote) {
      if (written_error_) written_error_->Increment();
      if (!first_error) first_error = wrote.error();
      // Keep what was written before, so the next round tries again.
      if (last != written_.end()) still.emplace(r.shard, std::move(last->second));
      continue;
    }
    if (!*wrote) {
      if (written_stale_) written_stale_->Increment();
      continue;
    }
    if (written_ok_) written_ok_->Increment();
    ++count;
    still.emplace(r.shard, Written{r.report, seen});
  }
  written_ = std::move(still);  // shards no longer led here are forgotten
  if (first_error) return tl::unexpected(*first_error);
  return count;
}

Result<bool> ReportWriter::WriteOne(const LeaderReport& r, AssignSeen& seen) {
  const std::string assign_key = options_.keys.Assign(r.shard);
  const std::string report_key = options_.keys.Report(r.shard);
  // At most two rounds: the cached mod_revision, then the one the else branch returned.
  // A cached read of another generation proves nothing about this report: compare against
  // revision 0 (always fails on an existing key) so that the else branch reads it afresh.
  if (seen.generation != r.report.generation) seen = {};
  for (int round = 0; round < 2; ++round) {
    etcd::Txn txn;
    txn.compares.push_back(etcd::Compare::ModRevisionIs(assign_key, seen.mod_revision));
    // An absent key has mod_revision 0 too: it must exist.
    txn.compares.push_back(
        {assign_key, etcd::CompareTarget::kCreate, etcd::CompareOp::kGreater, 0, {}});
    txn.then_ops.push_back(etcd::TxnOp::Put(report_key, EncodeReport(r.report)));
    txn.else_ops.push_back(etcd::TxnOp::Get(assign_key));
    auto result = options_.etcd.Transact(txn);
    if (!result) return tl::unexpected(result.error().ToError());
    if (result->succeeded) return true;
    // The assignment changed since it was last checked (or never was): is this node still
    // its leader at the report's generation?
    if (result->results.empty() || result->results[0].kvs.empty()) return false;
    const etcd::KeyValue& kv = result->results[0].kvs[0];
    auto assignment = DecodeAssignment(kv.value);
    if (!assignment || assignment->generation != r.report.generation ||
        assignment->leader != options_.node_id) {
      return false;  // deposed or not yet caught up with the assignment: no report
    }
    seen = {kv.mod_revision, assignment->generation};
  }
  return false;  // the assignment keeps changing; the next round tries again
}

}  // namespace felix::cluster
