// ShardProducers: idempotent publishing on one stream shard (semantics.md §7).
//
// Wraps the shard's ProducerTable with what it needs around it: the append through the
// StreamShard, a durable *mark* per written batch (producer, sequence, digest, count, first
// offset) in the shard's `producers` log, replayed by Recover() so that a broker restart still
// answers resends correctly, and the duplicates that arrive while their original is still
// being written (answered when it is).
//
// A batch is answered only after its mark is durable (so an acknowledged batch is known after
// a restart). A crash between the stream append and the mark leaves a written batch without
// a mark: its resend is appended again (at-least-once, never a loss). In-memory shards keep
// marks in memory only (a restart forgets every producer: `unknown_producer`).
//
// On a `Quorum` shard with a commit gate, a batch answered `quorum_timeout` is written all the
// same: it keeps its sequence (a resend waits, as for a batch still being written) and is
// committed here, mark and all, when a majority holds it after all (StreamShard's `late`).
//
// Threading: every method runs on the shard's executor; completions are posted back to it.
// Lifetime: as StreamShard's (the executor is drained and the log closed before destruction).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "broker/executor.h"
#include "broker/log_appender.h"
#include "broker/producer_table.h"
#include "broker/stream_shard.h"
#include "storage/durable_log.h"

namespace felix::broker {

struct IdempotentOutcome {
  enum class Kind { kWritten, kDuplicate, kRefused, kFailed };
  Kind kind = Kind::kWritten;
  std::optional<uint64_t> first_offset;  // kWritten / kDuplicate
  ProducerTable::Verdict::Kind refusal = ProducerTable::Verdict::Kind::kAppend;  // kRefused
  uint64_t expected = 0;                                                         // kGap
  Error error;                                                                   // kFailed
};

class ShardProducers {
 public:
  // `marks`: the append path of the shard's producers log, or null for an in-memory shard.
  ShardProducers(Executor& executor, StreamShard& shard, LogAppender* marks);

  // Replays the marks log into the table.
  Result<void> Recover();

  using Done = std::function<void(IdempotentOutcome)>;
  // Admits and appends (or answers) one batch; `done` runs on the executor.
  void Publish(PayloadBatch batch, uint64_t producer, uint64_t sequence, Done done);

  size_t producers() const { return table_.producers(); }

 private:
  void OnAppended(uint64_t producer, uint64_t sequence, uint64_t digest, uint32_t count,
                  Result<Offset> result, Done done);
  void Settle(uint64_t producer, uint64_t sequence, const IdempotentOutcome& outcome,
              const Done& done);

  Executor& executor_;
  StreamShard& shard_;
  LogAppender* marks_;
  ProducerTable table_;
  // Resends of a batch still being written, answered with it.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Done>> waiting_;
  std::shared_ptr<ShardProducers*> alive_;  // completions check it before touching `this`
};

}  // namespace felix::broker
