// Cost of encoding one FLX1 answer frame as the broker sends it: a consumer's poll answered
// with 100 records of 256 bytes (`group_records`, queue drains) and the acknowledgement's answer
// (`cache_ok`). EncodeMessageFrame is the general entry point; AppendMessageFrame into a kept
// buffer is ClientSession::Send's path (docs/performance.md changes 65 and 68).
//   build/release/bench/wire/bench_wire --benchmark_filter=Encode
#include <benchmark/benchmark.h>

#include <string>

#include "group_records_sample.h"
#include "wire/flx1/frame.h"

namespace {

namespace flx1 = felix::wire::flx1;

using flx1::GroupRecords100;

void EncodeLoop(benchmark::State& state, const flx1::Message& message) {
  for (auto _ : state) {
    auto frame = flx1::EncodeMessageFrame(message);
    benchmark::DoNotOptimize(frame);
  }
}

void AppendLoop(benchmark::State& state, const flx1::Message& message) {
  std::string buffer;
  for (auto _ : state) {
    buffer.clear();
    if (!flx1::AppendMessageFrame(message, buffer)) {
      state.SkipWithError("the message does not encode");
      return;
    }
    benchmark::DoNotOptimize(buffer.data());
  }
}

void BM_EncodeFrameGroupRecords100(benchmark::State& state) {
  EncodeLoop(state, GroupRecords100());
}
void BM_AppendFrameGroupRecords100(benchmark::State& state) {
  AppendLoop(state, GroupRecords100());
}
// A consumer's acknowledgement as the client encodes it (a window of `GroupAckAll`).
flx1::Message GroupAck() {
  return flx1::GroupAck{.tenant_id = "default",
                        .namespace_ = "default",
                        .stream = "bench-dur",
                        .group = "drain-1-12345",
                        .offset = 123456,
                        .request_id = 7};
}
void BM_EncodeFrameGroupAck(benchmark::State& state) {
  EncodeLoop(state, GroupAck());
}
void BM_EncodeFrameCacheOk(benchmark::State& state) {
  EncodeLoop(state, flx1::CacheOk{9});
}
void BM_AppendFrameCacheOk(benchmark::State& state) {
  AppendLoop(state, flx1::CacheOk{9});
}

BENCHMARK(BM_EncodeFrameGroupRecords100);
BENCHMARK(BM_AppendFrameGroupRecords100);
BENCHMARK(BM_EncodeFrameGroupAck);
BENCHMARK(BM_EncodeFrameCacheOk);
BENCHMARK(BM_AppendFrameCacheOk);

}  // namespace
