// History: what a fault run's clients did and saw, as the checkers read it (cluster-etcd.md §6).
//
// One Op per client request: who sent it (client id), when it was invoked and when its answer
// (or the giving up) came, in microseconds since the run began, and its outcome:
//   ok            the broker acknowledged it (a publish carries the acknowledged offset);
//   fail          a *definite* failure: a refusal whose retry class says nothing was applied
//                 (`retry`, `retry_after`, `redirect` — client-protocol.md §8.1). Only these;
//   indeterminate anything else: a timeout, a dropped connection, an `outcome_unknown` or
//                 `fatal` refusal, an answer we could not read. It may or may not have applied.
// Reads carry the records they returned ((offset, value) pairs of one shard); cache gets and
// deletes the value they returned, if any (checked for linearizability by porcupine/).
//
// The history is written as JSON lines (one op per line, schema in docs/reliability.md) so a run
// leaves it on disk and a checker can be rerun on it later.
//
// Threading: History::Add is thread-safe (client threads append concurrently); everything else
// is for one thread once the clients have stopped.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace felix::fault {

enum class Outcome { kOk, kFail, kIndeterminate };
enum class OpKind {
  kPublish,  // one keyed record `value` to `shard`; ok carries `offset`
  kRead,     // records of `shard` read by a subscriber: `read`
  kAdd,      // counter add of `delta` to counter `key`
  kPut,      // cache put of `value` under `key`
  kGet,      // cache get of `key`; ok: `found` and the `value` it returned
  kDelete,   // cache delete of `key`; ok: `found` and the `value` it held
  kPoll,     // group poll of `shard` (group `key`): the records it claimed, in `read`
  kAck,      // group ack of `offset` of `shard` (group `key`)
  kNack,     // group nack (hand back for redelivery) of `offset` of `shard` (group `key`)
};

struct Op {
  uint64_t id = 0;  // unique in the history (assigned by History::Add when 0)
  int client = 0;
  OpKind kind = OpKind::kPublish;
  int64_t invoke_us = 0;
  int64_t complete_us = 0;
  Outcome outcome = Outcome::kIndeterminate;
  uint32_t shard = 0;
  std::string key;
  std::string value;  // publish: the (unique) payload; put: written; get/delete: returned
  // publish of more than one record: every record of the batch (batch[0] == value), one
  // publish request; the acknowledged offset is the first's, record i sits at offset + i.
  std::vector<std::string> batch;
  bool found = false;              // get/delete ok: the key held a value (JSON: "value" present)
  std::optional<uint64_t> offset;  // publish ok: the acknowledged offset; ack/nack: the record
  int64_t delta = 0;               // add
  std::vector<std::pair<uint64_t, std::string>> read;  // read / poll: (offset, value)
  std::string error;  // refusal code/message or why it is indeterminate; "" when ok
  int node = 0;       // the broker (1..N) the request went to, 0 when none
};

// The value a read records at an offset the broker told it holds no event (felix::Event::
// skipped_before: a `Quorum` leader's generation-start record, or records retention removed):
// a hole the reader was told of is no gap. Never a published value ("c<client>-<n>").
inline constexpr std::string_view kNoEvent = "<no event>";

// Appends one event of a read at `offset` to `read`, preceded by a kNoEvent entry for each of
// the `skipped_before` offsets directly below it.
void AppendRead(std::vector<std::pair<uint64_t, std::string>>& read, uint64_t offset,
                uint64_t skipped_before, std::string value);

// The outcome of a refusal with retry class `retry_class` (the JSON string or the binary byte's
// name): only retry / retry_after / redirect are definite failures; every other class, and an
// absent one, leaves the outcome unknown.
Outcome RefusalOutcome(std::string_view retry_class);

std::string_view OutcomeName(Outcome outcome);
std::string_view OpKindName(OpKind kind);
// The records a publish carried: `batch`, or `value` alone.
std::vector<std::string> PublishedValues(const Op& op);

class History {
 public:
  History() = default;
  History(const History& other) : ops_(other.ops()), next_id_(other.next_id_) {}
  History& operator=(const History& other);

  // Appends `op` (thread-safe); gives it the next id when op.id == 0. Returns the id.
  uint64_t Add(Op op);
  std::vector<Op> ops() const;
  size_t size() const;

  // One JSON object per line, in the order added.
  std::string ToJsonLines() const;
  Result<void> WriteFile(const std::string& path) const;
  // Parses ToJsonLines' format; a malformed line is an error naming its line number.
  static Result<History> FromJsonLines(std::string_view text);
  static Result<History> ReadFile(const std::string& path);

 private:
  mutable std::mutex mu_;
  std::vector<Op> ops_;
  uint64_t next_id_ = 1;
};

}  // namespace felix::fault
