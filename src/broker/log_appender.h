// The one append path of a shard's durable logs — stream records, cache, counters, group
// cursors and dead letters all append through a LogAppender, so the write fence and (with
// replication) quorum acknowledgement have a single home.
//
// ShardFence: what every append of one shard checks just before it takes its offset, and the
// generation it stamps on the records (storage keeps it in each record header). On a single
// node it admits everything at the shard's stored generation (0 until a cluster assigned one);
// the cluster adds the node-lease check (cluster-etcd.md §3) through `SetLeaseCheck` and the
// leadership check (replication.md §3 condition 3: the shard is open here at exactly the
// generation the routing view names this broker leader at) through `SetLeadershipCheck`.
//
// LogAppender: checks the fence, stamps the generation, writes the batch at once on the
// calling thread (its offsets are taken there, in call order) and reports durability without a
// thread hop of its own: with AckAfter::kPolicy `done` runs before Append returns unless the
// log's fsync mode is on_commit, in which case it runs after the group-committed flush on the
// log's flusher thread; with AckAfter::kFlush it always waits for the flush.
//
// Threading: a shard's fence and appenders are used only on the shard's executor; `done` may
// run on the flusher thread (callers post back). The DurableLog must outlive the appender, the
// fence must outlive every appender that uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>

#include "common/health.h"
#include "common/metrics.h"
#include "common/result.h"
#include "common/strong_types.h"
#include "storage/durable_log.h"

namespace felix::broker {

class ShardFence {
 public:
  explicit ShardFence(Generation generation = Generation()) : generation_(generation) {}

  // The generation to stamp, or why this broker may not append now (kUnavailable).
  Result<Generation> Admit() const;

  Generation generation() const { return generation_; }
  void SetGeneration(Generation generation) { generation_ = generation; }
  // `lease_valid` answers whether this node's lease is usable at this instant; empty = always.
  void SetLeaseCheck(std::function<bool()> lease_valid) { lease_valid_ = std::move(lease_valid); }
  // `leads` answers whether this broker still leads the shard at `generation()` (empty =
  // always); its error (kUnavailable: nothing written, retryable) is the refusal.
  void SetLeadershipCheck(std::function<Result<void>()> leads) { leads_ = std::move(leads); }

 private:
  Generation generation_;
  std::function<bool()> lease_valid_;
  std::function<Result<void>()> leads_;
};

enum class AckAfter { kPolicy, kFlush };

// Where an appender reports failing writes (issue 12 item 8); both optional, both must outlive
// it. The log's first failed write is logged at error level (again at most every 10 s while it
// keeps failing, and once when writes succeed again), the log is listed on /health while its
// writes fail, and refusals for lack of space count in felix_storage_full_total.
struct WriteFaultReporting {
  HealthRegistry* health = nullptr;
  Counter* full = nullptr;  // appends refused with ENOSPC or EDQUOT
};

class LogAppender {
 public:
  LogAppender(storage::DurableLog& log, const ShardFence& fence, AckAfter ack_after,
              WriteFaultReporting reporting = {})
      : log_(log), fence_(fence), ack_after_(ack_after), reporting_(reporting) {}

  using Done = std::function<void(Result<storage::AppendResult>)>;
  // `records`' generation fields are overwritten with the fence's. `done` runs exactly once.
  void Append(std::span<storage::AppendRecord> records, Done done);

  storage::DurableLog& log() { return log_; }
  const storage::DurableLog& log() const { return log_; }

 private:
  // Tracks whether the log's writes fail, for the log and /health.
  void NoteWrite(const storage::StorageResult<storage::AppendResult>& appended);

  storage::DurableLog& log_;
  const ShardFence& fence_;
  AckAfter ack_after_;
  WriteFaultReporting reporting_;
  bool write_failing_ = false;
  uint64_t failed_appends_ = 0;
  std::chrono::steady_clock::time_point last_failure_log_;
};

}  // namespace felix::broker
