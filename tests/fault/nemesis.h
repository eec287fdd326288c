// The nemesis schedule of a seeded fault run (fault_run.h): which fault, on which node, for
// how long, derived from the seed alone so that a seed names a run. Pure; any thread.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace felix::fault {

enum class FaultKind { kKillBroker, kPauseBroker, kPauseEtcd };
std::string_view FaultKindName(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kKillBroker;
  int node = 0;     // 1..N; unused for etcd
  int hold_ms = 0;  // how long the fault lasts once proved
  int gap_ms = 0;   // quiet time after the heal
};

// The nemesis schedule for `seed`: `count` faults, every kind once in each group of three (in a
// seed-chosen order), targets and durations drawn from the seed. Same seed, same schedule.
std::vector<Fault> NemesisSchedule(uint64_t seed, int count, int nodes);

}  // namespace felix::fault
