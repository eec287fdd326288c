// The nemesis schedule of a seeded fault run (fault_run.h): which fault, on which node, for
// how long, derived from the seed alone so that a seed names a run. Pure; any thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace felix::fault {

// Process faults (any machine), network faults (NetLab: root and network namespaces), then disk
// and clock faults (any machine: the broker's FELIX_STORAGE_FAULT_FILE seam, test builds), then
// etcd member faults (a 3-member etcd).
enum class FaultKind {
  kKillBroker,      // SIGKILL a broker, restart it
  kPauseBroker,     // SIGSTOP / SIGCONT a broker
  kPauseEtcd,       // SIGSTOP / SIGCONT etcd
  kIsolateBroker,   // a broker cut from its peers and etcd, both ways
  kSplit,           // {one broker, etcd} | {the other brokers}: the majority loses etcd
  kOneWay,          // packets to a broker from its peers and etcd dropped; its own still leave
  kSlowLink,        // delay and loss on a broker's link (tc netem, or tbf without netem)
  kDiskFull,        // every log write of a broker fails ENOSPC, then space again
  kFsyncEio,        // every log fdatasync of a broker fails EIO (its logs poison), then restart
  kClockJump,       // the cache leader's wall clock steps an hour ahead, then back
  kKillEtcdMember,  // SIGKILL a follower member of the 3-member etcd, restart it
  kKillEtcdLeader,  // SIGKILL the etcd leader member, restart it
  // Assignment faults (cluster-etcd.md §6), replicated shards only (the Quorum regime):
  kMoveShard,    // a planned move of a stream shard to the node (POST /v1/shard-moves)
  kDrainBroker,  // SIGTERM a broker (it hands its shards off, then exits), restart it
};
// The kinds a run without network namespaces can inject (process, disk, clock, etcd member),
// and all.
std::vector<FaultKind> LocalFaultKinds();
std::vector<FaultKind> AllFaultKinds();
// The kinds that apply to a standalone broker (no etcd, no peers): kill, pause, full disk,
// failing fsyncs, clock step.
std::vector<FaultKind> StandaloneFaultKinds();
// `kinds` and the two assignment faults (move, drain): the Quorum regime's.
std::vector<FaultKind> WithAssignmentFaults(std::vector<FaultKind> kinds);
std::string_view FaultKindName(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kKillBroker;
  int node = 0;     // 1..N; unused for etcd
  int hold_ms = 0;  // how long the fault lasts once proved
  int gap_ms = 0;   // quiet time after the heal
};

// The nemesis schedule for `seed`: `count` faults of `kinds`, every kind once in each group of
// kinds.size() (in a seed-chosen order), targets and durations drawn from the seed. Same seed
// and kinds, same schedule.
std::vector<Fault> NemesisSchedule(uint64_t seed, int count, int nodes,
                                   const std::vector<FaultKind>& kinds);

}  // namespace felix::fault
