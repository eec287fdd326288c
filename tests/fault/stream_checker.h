// Stream and counter checkers over a History (history.h) and the final state read after a
// fault run healed (cluster-etcd.md §6, the history rules that apply before replication).
//
// CheckStreams takes the final log of every shard — (offset, value) in the order a subscriber
// from earliest on the shard's owner delivered them — and checks:
//   rule 1  every acknowledged publish is present, at its acknowledged offset of its shard;
//   rule 2  no value appears twice in the final state, and each shard's offsets are dense
//           (strictly consecutive from its first offset);
//   rule 3  every read is a prefix of the final log: each (offset, value) it returned is the
//           final log's record at that offset, and it delivered consecutive offsets from where
//           it started (Op::offset for a read resumed at an offset, else the final log's first
//           offset) — no gap, no duplicate, no reordering ("read_gap", "read_out_of_order");
//   rule 5  no phantom: every value in the final state or in a read was published by someone;
//   rule 6  no publish that definitely failed is in the final state.
// Values must be unique per publish (the workloads make them so). Rules 4, 7 and 8 (real-time
// order, cache linearizability, partial batches) come with later slices.
//
// CheckCounter: the final value of each counter lies between the sum of its acknowledged adds
// plus the indeterminate adds that could have applied (all subsets of them), failed adds never.
//
// Pure functions of their inputs; safe from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fault/history.h"

namespace felix::fault {

// shard → its records (offset, value) as read from the owner, in delivery order.
using FinalLogs = std::map<uint32_t, std::vector<std::pair<uint64_t, std::string>>>;

struct Violation {
  int rule = 0;
  std::string what;  // "lost", "wrong_offset", "duplicate", "gap", "read_mismatch", ...
  uint32_t shard = 0;
  std::string value;                 // the record concerned
  std::optional<uint64_t> expected;  // the acknowledged / read offset
  std::vector<uint64_t> found;       // where the final state has it
  uint64_t op_id = 0;                // the history op concerned, 0 when none
  std::string ToString() const;
};

struct StreamVerdict {
  std::vector<Violation> violations;
  size_t acknowledged = 0;
  size_t failed = 0;
  size_t indeterminate = 0;
  size_t indeterminate_present = 0;  // indeterminate publishes that did apply
  size_t reads = 0;
  size_t final_records = 0;
  bool ok() const { return violations.empty(); }
  // One line per count, then one per violation.
  std::string Summary() const;
  size_t Count(int rule) const;
};

StreamVerdict CheckStreams(const std::vector<Op>& history, const FinalLogs& final_logs);

struct CounterVerdict {
  std::vector<std::string> violations;  // "counter K: final F outside [lo, hi] (acked A)"
  bool ok() const { return violations.empty(); }
};

// `final_values`: counter key → its value after the heal (absent = 0).
CounterVerdict CheckCounters(const std::vector<Op>& history,
                             const std::map<std::string, int64_t>& final_values);

}  // namespace felix::fault
