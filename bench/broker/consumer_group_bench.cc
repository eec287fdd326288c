// A consumer group's per-record state work, without I/O: rounds of four consumers each claiming
// a batch and acknowledging it, the later batches first (the acks-together drain's pattern,
// where most acks finish an offset above the cursor). Reports the time per record (claim +
// ack); docs/performance.md change 71.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "broker/consumer_group.h"

namespace felix::broker {
namespace {

void BM_ConsumerGroupClaimAckRound(benchmark::State& state) {
  const auto batch = static_cast<uint64_t>(state.range(0));
  constexpr uint64_t kConsumers = 4;
  ConsumerGroup group(std::nullopt, Offset(0), {});
  const GroupMember member{"tenant/consumer", 1};
  const GroupTime start = GroupClock::now();
  Offset tail(0);
  std::vector<std::vector<Offset>> claimed(kConsumers);
  uint64_t records = 0;
  for (auto _ : state) {
    tail += batch * kConsumers;
    const GroupTime visible_until =
        start + std::chrono::seconds(30) + std::chrono::microseconds(records);
    for (auto& batch_of : claimed) {
      batch_of.clear();
      while (batch_of.size() < batch) {
        auto next = group.NextCandidate(tail);
        if (!next) break;
        group.Claim(*next, visible_until, member);
        batch_of.push_back(*next);
      }
    }
    for (auto it = claimed.rbegin(); it != claimed.rend(); ++it) {
      for (Offset offset : *it) benchmark::DoNotOptimize(group.Ack(offset, tail));
    }
    records += batch * kConsumers;
  }
  if (group.position() != tail) state.SkipWithError("the cursor did not reach the tail");
  state.SetItemsProcessed(static_cast<int64_t>(records));
}
BENCHMARK(BM_ConsumerGroupClaimAckRound)->Arg(1)->Arg(100)->Arg(2500);

}  // namespace
}  // namespace felix::broker

BENCHMARK_MAIN();
