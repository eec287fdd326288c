// The consumer-group checker over a History (history.h) and the final logs read after a fault
// run healed: a group's polls, acks and nacks (ops kPoll / kAck / kNack, the group's name in
// `key`, its shard in `shard`) against the final log of that shard.
//
// For each (group, shard) in the history:
//   redelivered_after_ack  a poll invoked after an acknowledged ack of offset X completed
//                          delivered X again, from the broker that answered the ack, while
//                          that broker kept leading the group's shard. consumer-groups.md
//                          keeps claims and acks above a gap in the leader's memory only (the
//                          cursor log holds one contiguous position, storage.md §19) and
//                          replicates group writes behind the leader, so a rebuilt tracker
//                          (restart, failover, a lost lease) may deliver an acked record again:
//                          at-least-once. Such a redelivery is counted, not a violation, when
//                          it came from another broker, or when between the ack and the poll a
//                          group request was refused or indeterminate, or a disruption touched
//                          the ack's broker (a fault on it, or on every node);
//   nack_not_redelivered   an acknowledged nack of X with no later delivery of X (the workload
//                          drains the group before the check, and nacks first deliveries only,
//                          so nothing is dead-lettered);
//   delivery_mismatch      a delivered (offset, value) that is not the final log's record at
//                          that offset (a phantom delivery, or a record lost after delivery);
//   undelivered            a record of the shard's final log that no poll ever delivered (lost
//                          to the group). The workload's groups start at earliest, and this is
//                          only meaningful once the group was drained: the caller checks then.
//
// Pure function of its inputs; safe from any thread.
#pragma once

#include <vector>

#include "fault/history.h"
#include "fault/stream_checker.h"

namespace felix::fault {

// A span in which a fault could rebuild a group's tracker: a fault on broker `node` (1..N), or
// on every broker when `node` is 0 (etcd faults, partitions), from its injection to the end of
// its quiet time after the heal.
struct Disruption {
  int node = 0;
  int64_t from_us = 0;
  int64_t to_us = 0;
};

struct GroupVerdict {
  std::vector<Violation> violations;  // rule 0: a group rule (what names it)
  size_t polls = 0;
  size_t deliveries = 0;  // records delivered by ok polls, redeliveries included
  size_t acks = 0;        // acknowledged acks
  size_t nacks = 0;       // acknowledged nacks
  size_t redeliveries = 0;
  size_t redelivered_after_rebuild = 0;  // after an ack, across a leader change (allowed)
  bool ok() const { return violations.empty(); }
  std::string Summary() const;
};

GroupVerdict CheckGroups(const std::vector<Op>& history, const FinalLogs& final_logs,
                         const std::vector<Disruption>& disruptions = {});

}  // namespace felix::fault
