// FaultRun: one seeded fault run on a real cluster (cluster-etcd.md §6, issue 17) — one etcd and
// three `felix-broker` processes (ClusterHarness), a durable stream with fsync on_commit (RF 1
// `Leader`, or RF 3 `Quorum` with failover: FaultRunOptions::quorum), client
// threads publishing unique keyed records (single records and three-record batches) to
// each shard's leader through the C++ client library (acks after the write, with offsets), a
// reader thread taking snapshot reads from earliest, a consumer-group client acking and nacking
// shard 0's records, and a nemesis that runs a schedule derived from the seed: SIGKILL + restart of
// a broker, SIGSTOP/SIGCONT of a broker, SIGSTOP/SIGCONT of etcd, and — as root, with each broker
// in its own network namespace (net_lab.h) — a broker isolated, a majority/minority split, one-way
// loss and a slow, lossy link; through the broker's fault file (test builds) a full disk, failing
// fsyncs (EIO) and a wall-clock step. Each fault is proved to have
// taken effect before it is healed. After the last heal the run waits (≤ 60 s) until every
// broker is ready and every shard is led and accepts a probe publish, reads every shard's final
// log from its leader and the counters' final values, and runs the stream and counter checkers;
// cache puts, gets and deletes on a few keys are checked for linearizability by Porcupine
// (porcupine/main.go, built next to this test as porcupine-check).
//
// Everything lands in one directory: run.json, schedule.jsonl, history.jsonl, final.json,
// verdict.txt, broker-<n>.log and etcd.log (the tails of their logs).
//
// Threading: Run() is called from one thread (it drives the harness); it owns its client
// threads and joins them before returning.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fault/group_checker.h"
#include "fault/history.h"
#include "fault/nemesis.h"
#include "fault/stream_checker.h"

namespace felix::fault {

struct FaultRunOptions {
  uint64_t seed = 1;
  // The workload runs this many seconds; with the nemesis on, faults follow one another until
  // then (and at least min_faults of them, each with its heal).
  int seconds = 15;
  bool nemesis = true;
  int min_faults = 3;  // raised to one of each kind in the schedule
  // Put each broker in its own network namespace (NetLab) and add the network faults to the
  // schedule, when this machine can (root, iproute2); otherwise process faults only, and the
  // result says why (FaultRunResult::network).
  bool partitions = true;
  int publishers = 4;
  int cache_clients = 2;  // puts / gets / deletes on a few keys, checked by porcupine/
  // The keys "r0".."r<n-1>" they spread over: fewer ops per key keep Porcupine's search (60 s
  // per key) decidable when many writes are indeterminate. (With 4, a 20 s RF 1 run put 9,348
  // operations on one key, 266 puts indeterminate, and Porcupine ran out of memory deciding
  // it — docs/reliability.md.)
  int cache_keys = 12;
  uint32_t shards = 6;
  // 3, or 1: the same workload and checkers against one broker (a one-member cluster; no
  // network faults, there is no link between brokers to cut) — cluster-etcd.md §6
  // "conformance equivalence": a client must not be able to tell how many brokers there are.
  int brokers = 3;
  // The regime under test (cluster-etcd.md §6: "run in both regimes"). false: the stream and the
  // cache have RF 1 and consistency `Leader` — every shard stays on the broker it started on (no
  // failover), and clients go straight to it. true (three brokers): RF 3 and `Quorum` — a killed,
  // paused or cut-off leader's shards fail over behind the promotion fence, and every client is
  // routed by the client library (all brokers are its seeds; it learns owners from the cluster,
  // follows `not_leader` and forgets a broker that stopped answering). Leaders are then looked
  // up when needed (disk and clock faults, the final reads) instead of fixed at the start, and the
  // history records node 0 ("unknown") for client ops, so the group checker counts every
  // redelivery after an ack instead of reporting it (group_checker.h).
  bool quorum = false;
  // With brokers == 1: the broker runs standalone — no FELIX_NODE_ID, no etcd (the README's
  // single-node broker) — rather than as a one-member cluster; the faults are those that apply
  // (StandaloneFaultKinds: kill, pause, full disk, failing fsyncs, clock step). The same client
  // assertions hold (cluster-etcd.md §6 "conformance equivalence").
  bool standalone = false;
  int etcd_members = 3;                    // etcd member faults need 3
  std::string dir;                         // where the run writes its files (must exist)
  std::map<std::string, std::string> env;  // added to every broker's environment
};

struct FaultOutcome {
  Fault fault;
  int64_t start_us = 0;
  int64_t end_us = 0;  // after the heal and the quiet time that follows it
  bool proved = false;
  std::string proof;  // what showed it took effect, or why that could not be shown
  bool healed = false;
  std::string heal;  // how it healed, or why not
};

struct FaultRunResult {
  bool started = false;  // the cluster and the stream came up
  std::string setup_error;
  bool partitions = false;       // brokers ran in network namespaces, network faults scheduled
  std::string network;           // the network set-up, or why partitions are off
  std::vector<FaultKind> kinds;  // the kinds the schedule draws from (each at least once)
  std::vector<FaultOutcome> faults;
  // Quorum regime: shards (the stream's and the cache's) led elsewhere after the heal than at the
  // start, and how much their generations grew (failovers, moves, replica changes).
  int moved_shards = 0;
  int64_t generation_bumps = 0;
  bool live_after_heal = false;  // every broker ready, every shard led and taking a probe
  std::string liveness;          // what was waited for, or what was missing
  bool final_read = false;       // every shard's final log was read to its tail
  std::string final_read_error;
  StreamVerdict verdict;
  CounterVerdict counters;
  bool group_drained = false;       // the consumer group owed nothing after the heal
  std::string group_drain;          // its state when drained, or what was left
  GroupVerdict groups;              // checked when drained
  size_t counter_adds = 0;          // add ops in the history
  size_t cache_ops = 0;             // put / get / delete ops in the history
  bool cache_checked = false;       // porcupine-check decided (exit 0 or 1)
  bool cache_linearizable = false;  // ... and found every key linearizable
  std::string cache_report;         // its output
  size_t not_sent = 0;              // publishes never sent (no connection): not in the history
  // Quorum regime: records frames the followers applied on their loop thread and on a shard's
  // executor (felix_broker_replication_follower_applies_total, summed over the brokers after
  // the heal: since each one's last start) — which of the two apply paths the run reached.
  uint64_t follower_applies_on_loop = 0;
  uint64_t follower_applies_on_executor = 0;
  int64_t duration_ms = 0;
};

FaultRunResult RunFaults(const FaultRunOptions& options);

}  // namespace felix::fault
