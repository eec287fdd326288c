// Cost of decoding one FLX1 JSON message, as the broker decodes every request and the client
// every answer (DecodeMessageJson: the flat scanner, then the decoder its "type" names).
//   build/release/bench/wire/bench_wire
#include <benchmark/benchmark.h>

#include <string>

#include "group_records_sample.h"
#include "wire/flx1/frame.h"
#include "wire/flx1/json_codec.h"

namespace {

using felix::wire::flx1::DecodeMessageJson;

void Decode(benchmark::State& state, const std::string& text) {
  for (auto _ : state) {
    auto message = DecodeMessageJson(text);
    if (!message) {
      state.SkipWithError("the text does not decode");
      return;
    }
    benchmark::DoNotOptimize(message);
  }
}

// A consumer's acknowledgement (queue drains), a cache lookup and the answers a client reads.
void BM_DecodeGroupAck(benchmark::State& state) {
  Decode(
      state,
      R"({"type":"group_ack","tenant_id":"default","namespace":"default","stream":"bench-dur","shard":0,"group":"drain-1-12345","offset":123456,"request_id":7})");
}
void BM_DecodeCacheGet(benchmark::State& state) {
  Decode(
      state,
      R"({"type":"cache_get","tenant_id":"default","namespace":"default","cache":"bench-cache","key":"k-1234","request_id":9})");
}
void BM_DecodeCacheOk(benchmark::State& state) {
  Decode(state, R"({"type":"cache_ok","request_id":9})");
}
void BM_DecodePublishOk(benchmark::State& state) {
  Decode(state, R"({"type":"publish_ok","offset":12345,"shard":0,"request_id":3})");
}
// A poll's answer as the consumer reads it: 100 records of 256 bytes.
void BM_DecodeGroupRecords100(benchmark::State& state) {
  std::string frame;
  if (!felix::wire::flx1::AppendMessageFrame(felix::wire::flx1::GroupRecords100(), frame)) {
    state.SkipWithError("the message does not encode");
    return;
  }
  Decode(state, frame.substr(felix::wire::flx1::kHeaderSize));
}
BENCHMARK(BM_DecodeGroupAck);
BENCHMARK(BM_DecodeGroupRecords100);
BENCHMARK(BM_DecodeCacheGet);
BENCHMARK(BM_DecodeCacheOk);
BENCHMARK(BM_DecodePublishOk);

}  // namespace

BENCHMARK_MAIN();
