// ReportWriter: a shard leader's replica reports in etcd (cluster-etcd.md §2 `reports/`,
// replication.md §14) — which followers hold everything this leader may have acknowledged, so
// that the controller can promote one of them when the leader is down (PlanFailover).
//
// Every `interval` it asks `collect` for the reports of the shards this broker leads and
// writes those that changed since it last wrote them. A report is written in one transaction
// that compares the shard's assignment `mod_revision` with the one the writer last read
// together with its value ({generation == report.generation, leader == this node}); a failed
// compare re-reads the assignment from the same transaction's else branch and, if the
// assignment still names this node at that generation, writes again — so a deposed leader's
// report is refused and an ordinary write costs one round trip. Reports only inform promotion
// and placement; nothing on a client's write path waits for them.
//
// MakeReport is the pure rule for one shard: a follower is caught up when it is not halted and
// its confirmed durable offset reaches the floor on every log that counts (the shard's own log:
// the leader's tail under `Leader`, the mark under `Quorum`; a cache's counter log: its tail).
//
// Threading: Start/Stop from the owner; one internal thread in between runs `collect` and the
// etcd calls. `etcd` and `metrics` must outlive the writer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cluster/etcd_keys.h"
#include "cluster/etcd_records.h"
#include "cluster/shard_replicator.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "common/result.h"
#include "common/strong_types.h"
#include "etcd/etcd_client.h"

namespace felix::cluster {

struct LeaderReport {
  ShardRef shard;
  Report report;
};

// The floor a follower's confirmed offset must reach on `log` to count as caught up.
struct CaughtUpFloor {
  storage::LogKind log = storage::LogKind::kStream;
  Offset floor;
};

// `followers`: the replica set without the leader (a follower with no cursor on a counted log
// is not caught up). `durable` holds the leader at `leader_durable` and each follower at its
// confirmed offset on the first floor's log.
Report MakeReport(uint64_t generation, const std::string& leader, Offset leader_durable,
                  Offset commit, const std::vector<std::string>& followers,
                  const std::vector<CaughtUpFloor>& floors,
                  const std::vector<ReplicaCursorStatus>& cursors);

struct ReportWriterOptions {
  etcd::EtcdClient& etcd;
  ClusterKeys keys;
  std::string node_id;
  std::function<std::vector<LeaderReport>()> collect;
  std::chrono::milliseconds interval{100};
  MetricsRegistry* metrics = nullptr;  // felix_cluster_reports_written_total{outcome}
};

class ReportWriter {
 public:
  explicit ReportWriter(ReportWriterOptions options);
  ~ReportWriter();  // Stop()
  ReportWriter(const ReportWriter&) = delete;
  ReportWriter& operator=(const ReportWriter&) = delete;

  void Start();
  void Stop();

  // One round now, on the caller's thread (tests; not while started): collects and writes.
  // Returns how many reports were written.
  Result<size_t> WriteChanged();

 private:
  // The assignment as last read: its mod_revision and the generation it named this node at.
  struct AssignSeen {
    int64_t mod_revision = 0;
    uint64_t generation = 0;
  };
  struct Written {
    Report report;  // last written
    AssignSeen assign;
  };
  // Writes one report; false when the assignment no longer names this node at its generation.
  Result<bool> WriteOne(const LeaderReport& r, AssignSeen& seen);
  void Run();

  ReportWriterOptions options_;
  std::map<ShardRef, Written> written_;  // the writer's thread only
  Counter* written_ok_ = nullptr;
  Counter* written_stale_ = nullptr;
  Counter* written_error_ = nullptr;
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace felix::cluster
