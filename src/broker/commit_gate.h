// CommitGate: the acknowledgement gate of a `Quorum` stream shard led with replication
// (replication.md §8.2–8.4, semantics.md §2.2, cluster-etcd.md D3).
//
// A batch the shard's own log committed is held here — neither fanned out nor answered — until
// the quorum commit offset (the replication leader's mark of the stream log: a majority of the
// replica set, leader included, holds it at the leader's generation) reaches the batch's end.
// Covered batches are released in offset order; the shard then fans each out and answers its
// publisher. So readers (subscribers, consumer groups) never see a record a failover could
// still lose, and no publisher is acknowledged early.
//
// A held batch not covered within `timeout` (FELIX_PUBLISH_QUORUM_TIMEOUT_MS) is answered at
// once with ErrorCode::kTimeout, which the client protocol sends as `quorum_timeout` (code 7,
// class outcome_unknown): the batch is durable on the leader and may still reach a majority,
// so it is not a refusal. It stays held: once a majority holds it, it is released to readers
// like any other, but its publisher is never answered a second time (only its `late` callback
// runs: the idempotent producer table learns the offset that way). Close() answers what is
// still unanswered with ErrorCode::kInternal (`internal`, also outcome_unknown: the shard
// stopped leading before a majority confirmed) and releases nothing.
//
// Batches must be held in offset order (the log's commits settle in append order). Advance
// may run ahead of Hold (the mark can cover a batch before the shard learns its own commit):
// a batch held below the commit offset is released at once.
//
// Threading: every method, the release callback and the timer run on `executor`. Destroy the
// gate on the executor or after the executor stopped (the destructor cancels the timer, and
// the timer task holds the gate only weakly).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "broker/executor.h"
#include "broker/record_log.h"
#include "common/metrics.h"
#include "common/result.h"

namespace felix::broker {

struct CommitGateOptions {
  std::chrono::milliseconds timeout{5000};  // FELIX_PUBLISH_QUORUM_TIMEOUT_MS
  // Optional (must outlive the gate): felix_broker_publish_quorum_failed_total with
  // reason="timed_out" and reason="not_leading" (replication.md §24).
  Counter* timed_out = nullptr;
  Counter* not_leading = nullptr;
};

struct HeldBatch {
  std::shared_ptr<PayloadBatch> batch;  // holds the payloads until the fanout
  Offset first;                         // offset of the batch's first record
  // The publisher's answer; after a timeout answered it, whatever the publisher asked to run
  // on a late release instead (often nothing). Runs on the executor.
  std::function<void(Result<Offset>)> done;
  std::function<void(Result<Offset>)> late;  // moved into `done` by the timeout
  Executor::Clock::time_point deadline;
  Offset end() const { return first + batch->payloads.size(); }
};

class CommitGate {
 public:
  // Runs for each released batch, in offset order: fan it out, then answer `done` if set.
  using Release = std::function<void(HeldBatch&)>;

  CommitGate(Executor& executor, CommitGateOptions options, Release release);
  ~CommitGate();
  CommitGate(const CommitGate&) = delete;
  CommitGate& operator=(const CommitGate&) = delete;

  // A batch committed locally at [first, first + size): released now if the commit offset
  // covers it, else held until it does (answered with the timeout error if that takes longer
  // than the timeout; then `late`, if set, runs with the offset when the batch is released
  // after all). Batches arrive in offset order. After Close, answered with the close error at
  // once.
  void Hold(std::shared_ptr<PayloadBatch> batch, Offset first,
            std::function<void(Result<Offset>)> done,
            std::function<void(Result<Offset>)> late = {});
  // The quorum commit offset is at least `commit` (lower values are ignored).
  void Advance(Offset commit);
  // The shard stops serving: every unanswered held batch is answered with kInternal naming
  // `why`; nothing more is released.
  void Close(const std::string& why);

  Offset commit() const { return commit_; }
  size_t held() const { return held_.size(); }

 private:
  void ReleaseCovered();
  void ArmTimer();
  void OnTimer();

  Executor& executor_;
  const CommitGateOptions options_;
  Release release_;
  Offset commit_;
  bool closed_ = false;
  std::string close_reason_;
  std::deque<HeldBatch> held_;
  size_t answered_ = 0;  // held_[0, answered_) are answered already (timed out)
  Executor::TimerId timer_ = 0;
  std::shared_ptr<CommitGate*> self_;  // the timer's weak handle on the gate
};

}  // namespace felix::broker
