#include "fault/nemesis.h"

#include <random>
#include <utility>

namespace felix::fault {

std::string_view FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKillBroker:
      return "kill_broker";
    case FaultKind::kPauseBroker:
      return "pause_broker";
    case FaultKind::kPauseEtcd:
      return "pause_etcd";
    case FaultKind::kIsolateBroker:
      return "isolate_broker";
    case FaultKind::kSplit:
      return "split";
    case FaultKind::kOneWay:
      return "one_way";
    case FaultKind::kSlowLink:
      return "slow_link";
    case FaultKind::kDiskFull:
      return "disk_full";
    case FaultKind::kFsyncEio:
      return "fsync_eio";
    case FaultKind::kClockJump:
      return "clock_jump";
    case FaultKind::kKillEtcdMember:
      return "kill_etcd_member";
    case FaultKind::kKillEtcdLeader:
      return "kill_etcd_leader";
    case FaultKind::kMoveShard:
      return "move_shard";
    case FaultKind::kDrainBroker:
      return "drain_broker";
  }
  return "kill_broker";
}

std::vector<FaultKind> LocalFaultKinds() {
  return {FaultKind::kKillBroker,     FaultKind::kPauseBroker,   FaultKind::kPauseEtcd,
          FaultKind::kDiskFull,       FaultKind::kFsyncEio,      FaultKind::kClockJump,
          FaultKind::kKillEtcdMember, FaultKind::kKillEtcdLeader};
}

std::vector<FaultKind> StandaloneFaultKinds() {
  return {FaultKind::kKillBroker, FaultKind::kPauseBroker, FaultKind::kDiskFull,
          FaultKind::kFsyncEio, FaultKind::kClockJump};
}

std::vector<FaultKind> WithAssignmentFaults(std::vector<FaultKind> kinds) {
  kinds.push_back(FaultKind::kMoveShard);
  kinds.push_back(FaultKind::kDrainBroker);
  return kinds;
}

std::vector<FaultKind> AllFaultKinds() {
  return {FaultKind::kKillBroker,    FaultKind::kPauseBroker,    FaultKind::kPauseEtcd,
          FaultKind::kIsolateBroker, FaultKind::kSplit,          FaultKind::kOneWay,
          FaultKind::kSlowLink,      FaultKind::kDiskFull,       FaultKind::kFsyncEio,
          FaultKind::kClockJump,     FaultKind::kKillEtcdMember, FaultKind::kKillEtcdLeader};
}

std::vector<Fault> NemesisSchedule(uint64_t seed, int count, int nodes,
                                   const std::vector<FaultKind>& all) {
  // mt19937_64 is specified bit for bit by the standard, and only its raw output is used (no
  // distribution objects, whose results differ between standard libraries).
  std::mt19937_64 rng(seed);
  std::vector<Fault> out;
  while (static_cast<int>(out.size()) < count) {
    std::vector<FaultKind> kinds = all;
    for (size_t i = kinds.size() - 1; i > 0; --i) std::swap(kinds[i], kinds[rng() % (i + 1)]);
    for (FaultKind kind : kinds) {
      if (static_cast<int>(out.size()) == count) break;
      Fault f;
      f.kind = kind;
      f.node = 1 + static_cast<int>(rng() % static_cast<uint64_t>(nodes));
      f.hold_ms = 300 + static_cast<int>(rng() % 1700);
      f.gap_ms = 300 + static_cast<int>(rng() % 1200);
      out.push_back(f);
    }
  }
  return out;
}

}  // namespace felix::fault
