// PromotionFence: the leader side of the promotion fence for one shard at one generation G
// (replication.md §10 "Leader side" steps 1, 3–8; §11; cluster-etcd.md D3). One attempt:
//
//   1. persist G and a ballot naming this node (ShardStore::AcceptGeneration; a store that
//      already accepted G from another node, or a newer generation, fails the attempt);
//   3. send Fence(shard @ G, own log) to every replica concurrently;
//   4. wait for a majority of the replica set including this node (Majority(replicas + 1)
//      FenceOk answers counting itself); later answers are not waited for. FencedEpoch,
//      errors and transport failures count against; when a majority can no longer be reached,
//      or attempt_timeout passes, the attempt fails;
//   5. pick the log furthest ahead by (last_generation, log_end) among this node's own and the
//      answers; if it is ahead of the own log, ReplicateLabelledFetch/TimedFetch it from
//      min(max(own commit offset, start of the own last generation), own tail) until its
//      log_end: every fetched record below the own tail is compared (payload and generation);
//      at the first disagreement the own log is truncated there (never below the commit
//      offset: DurableLog refuses) and the rest is appended at the fetched offsets with the
//      fetched generations and times; finally any own records past that log's end are cut;
//      the generation history is relabelled for what was taken (ShardStore::RelabelGenerations).
//      A replica whose log begins past that start (LogGap: compacted or trimmed by retention)
//      is compared from its base when the own log's commit offset reaches it; otherwise the own
//      log is placed at that base (DurableLog::Reset, every own record counted as truncated)
//      and the replica's log taken from there;
//   6. a cache shard: steps 3–5 again for its counter log (Fence/fetch with log = Counters,
//      compared from the counter log's base: it has no commit offset or history of its own);
//      a failure there retries the counter log only;
//   7. record where this leadership begins (history entry (G, own tail)); when the own log
//      (stream, or a cache's cache log — and after step 6 its counter log) is not empty and
//      holds no record of G yet, append the generation-start record there (replication.md
//      §17: payload G, flag kRecordFlagGenerationStart, fsynced), then call
//      on_open(start_offset) — the record's offset, where the mark's own-generation rule
//      (§8.3) starts counting;
//   8. on failure retry after `retry` (200 ms), doubling per failed attempt up to `retry_max`
//      (2 s), never giving up until Stop().
//
// Not done here (see docs/cluster.md, "Promotion fence"):
//   - step 2 (holding writes while fencing): the shard is not open in the broker core until the
//     fence is done (ReplicationHost::FenceQuorumShard runs in the core's opener), so requests
//     wait for the open or are refused retryably; routing belongs to the router;
//   - a replica answering UnsupportedKind to kind 37 is asked with 33, then 31; a fetch
//     answered without labels (kind 7/14) labels the fetched records with the replica's
//     last_generation from its FenceOk (an overclaim, replication.md §9.2).
//
// Threading: every step and callback runs on `executor`; transport answers are posted to it.
// Start() once; Stop() from any thread but the executor's, before destruction: it waits until
// no callback of this fence can run; answers arriving later are dropped. The store, transport
// and executor must outlive the fence. Blocking: the executor fsyncs (AcceptGeneration,
// appends under the log's fsync policy, truncation) while fencing; nothing is served then.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "broker/executor.h"
#include "cluster/shard_replicator.h"
#include "common/metrics.h"
#include "common/strong_types.h"
#include "storage/shard_store.h"
#include "wire/flxi/flxi.h"

namespace felix::cluster {

struct PromotionFenceOptions {
  std::string tenant, ns, name;  // as FLXI names the shard
  uint32_t shard = 0;
  bool cache_shard = false;
  Generation generation;                      // G, the generation this node now leads
  std::string self_node_id;                   // the ballot names it
  std::vector<PeerAddress> replicas;          // the replica set without this node
  std::chrono::milliseconds retry{200};       // FENCE_RETRY
  std::chrono::milliseconds retry_max{2000};  // FENCE_RETRY_MAX
  // An attempt that has neither a majority nor every answer by then fails (a silent replica
  // must not hold the shard forever); the peer request timeout.
  std::chrono::milliseconds attempt_timeout{5000};
  // 33 ReplicateLabelledFetch or 37 ReplicateTimedFetch (keeps the records' append times).
  wire::flxi::Kind fetch_kind = wire::flxi::Kind::kReplicateTimedFetch;
  uint32_t fetch_max_bytes = wire::flxi::kMaxFetchAnswerBytes;
  // felix_storage_full_total{log} of the shard's own log and (a cache shard) its counter log:
  // a generation-start record refused for lack of space counts there as a refused append does
  // (optional; must outlive the fence). The promotion's failure is its report otherwise (the
  // open fails with the reason); /health is not set from here, since no later write through
  // this fence would clear it.
  Counter* own_log_full = nullptr;
  Counter* counter_log_full = nullptr;
};

// The delay before attempt n+1 after `failures` consecutive failed attempts (failures ≥ 1):
// retry · 2^(failures−1), capped at retry_max.
std::chrono::milliseconds FenceRetryDelay(uint32_t failures, std::chrono::milliseconds retry,
                                          std::chrono::milliseconds retry_max);

class PromotionFence {
 public:
  // Runs once on the executor when the shard may serve; `start_offset` is where this
  // leadership's records begin (the own tail after catch-up).
  using OpenListener = std::function<void(Offset start_offset)>;

  PromotionFence(storage::ShardStore& store, PromotionFenceOptions options,
                 ReplicaTransport& transport, broker::Executor& executor, OpenListener on_open);
  ~PromotionFence();
  PromotionFence(const PromotionFence&) = delete;
  PromotionFence& operator=(const PromotionFence&) = delete;

  void Start();
  void Stop();

  // Any thread.
  uint32_t attempts() const;   // attempts started
  uint32_t failures() const;   // attempts failed
  uint64_t truncated() const;  // own records dropped (felix_broker_promotion_truncated_total)
  uint64_t start_records_written() const;  // generation-start records appended (0..2)
  bool opened() const;
  // The last failure's reason; executor only.
  std::string last_error() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace felix::cluster
