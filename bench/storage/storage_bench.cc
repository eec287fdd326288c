// bench_storage: DurableLog append throughput per fsync mode, record size and concurrency,
// the raw write+fdatasync rate of this machine for the same record sizes (with its p50/p99:
// the floor of the durable rows in bench-compare), and recovery speed.
//
// Each append benchmark iteration starts `threads` appenders that each append `per_thread`
// single-record batches to one log in a fresh directory under $TMPDIR (default /tmp).
// Counters: items_per_second = acknowledged appends/s, bytes_per_second = payload MB/s,
// fsyncs_per_s = data fdatasyncs/s, appends_per_fsync = group-commit batch size.
//
// BM_RingAppend: a full in-memory RingLog (the steady state of a busy in-memory stream: each
// append evicts as many records as it adds) taking batches of `batch` records of `bytes` each,
// with room for `records` records: 100,000 is the default ring, larger than this machine's
// caches; 1,000 fits in them. items_per_second = records stored per second.
#include <fcntl.h>
#include <unistd.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "storage/durable_log.h"
#include "storage/ring_log.h"

namespace {

using namespace felix;
using namespace felix::storage;

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/felix-bench-" + name + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

void BM_Append(benchmark::State& state, FsyncMode mode) {
  const size_t size = size_t(state.range(0));
  const int threads = int(state.range(1));
  const int64_t total = state.range(2);
  const int64_t per_thread = total / threads;
  std::string payload(size, 'p');
  double fsyncs = 0;
  double appends = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::string dir = FreshDir("append");
    MetricsRegistry registry;
    LogOptions o;
    o.fsync_mode = mode;
    o.segment_bytes = 64ull << 20;
    o.metrics = &registry;
    auto log = DurableLog::Open(dir, o);
    if (!log) {
      state.SkipWithError(log.error().ToString().c_str());
      return;
    }
    state.ResumeTiming();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (int64_t i = 0; i < per_thread; ++i) {
          auto r = (*log)->Append(AppendRecord{AsBytes(payload), Generation(1), 0});
          if (!r) std::abort();
        }
      });
    }
    for (auto& w : workers) w.join();
    state.PauseTiming();
    auto m = StorageMetrics::Register(registry, "log");
    fsyncs += double(m.sync_duration->Count());
    appends += double(per_thread * threads);
    (void)(*log)->Close();
    log->reset();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(int64_t(appends));
  state.SetBytesProcessed(int64_t(appends) * int64_t(size));
  state.counters["fsyncs_per_s"] = benchmark::Counter(fsyncs, benchmark::Counter::kIsRate);
  if (fsyncs > 0) state.counters["appends_per_fsync"] = appends / fsyncs;
}

// The device's own rate: one thread, pwrite `size` bytes at the end of a file, fdatasync.
void BM_RawFdatasync(benchmark::State& state) {
  const size_t size = size_t(state.range(0));
  std::string dir = FreshDir("raw");
  std::string path = dir + "/raw";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  std::vector<uint8_t> buf(size, 'r');
  uint64_t pos = 0;
  // Each write's latency, for the p50/p99 that bench-compare's floors table gives beside the
  // durable rows (their goal is stated against this flush's p50).
  std::vector<double> samples;
  samples.reserve(1 << 16);
  const std::clock_t cpu0 = std::clock();
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (::pwrite(fd, buf.data(), size, off_t(pos)) != ssize_t(size)) std::abort();
    if (::fdatasync(fd) != 0) std::abort();
    samples.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
    pos += size;
  }
  const double cpu_s = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
  ::close(fd);
  std::filesystem::remove_all(dir);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * int64_t(size));
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  state.counters["p50_us"] = samples[samples.size() / 2];
  state.counters["p99_us"] = samples[samples.size() * 99 / 100];
  state.counters["cpu_us"] = cpu_s * 1e6 / double(samples.size());
  state.counters["ops_per_s"] =
      benchmark::Counter(double(samples.size()), benchmark::Counter::kIsRate);
}

// Recovery: open (full validating scan of the active segment) of a log holding range(0) MiB.
void BM_Recovery(benchmark::State& state) {
  const uint64_t bytes = uint64_t(state.range(0)) << 20;
  std::string dir = FreshDir("recovery");
  LogOptions o;
  o.fsync_mode = FsyncMode::kNone;
  o.segment_bytes = bytes * 2;
  {
    auto log = DurableLog::Open(dir, o);
    if (!log) std::abort();
    std::string payload(4096, 'v');
    std::vector<AppendRecord> batch(16, AppendRecord{AsBytes(payload), Generation(1), 0});
    uint64_t written = 0;
    while (written < bytes) {
      if (!(*log)->Append(batch)) std::abort();
      written += 16 * RecordBytes(payload.size());
    }
    (void)(*log)->Close();
  }
  uint64_t scanned = 0;
  for (auto _ : state) {
    auto log = DurableLog::Open(dir, o);
    if (!log) std::abort();
    scanned += (*log)->recovery().bytes_scanned;
    benchmark::DoNotOptimize((*log)->TailOffset());
  }
  std::filesystem::remove_all(dir);
  state.SetBytesProcessed(int64_t(scanned));
}

void BM_RingAppend(benchmark::State& state) {
  const size_t size = size_t(state.range(0));
  const size_t batch = size_t(state.range(1));
  RingOptions o;
  o.max_records = uint64_t(state.range(2));
  RingLog ring(o);
  std::vector<std::string> payloads(batch, std::string(size, 'p'));
  std::vector<AppendRecord> records(batch);
  for (size_t i = 0; i < batch; ++i) records[i].payload = AsBytes(payloads[i]);
  for (uint64_t stored = 0; stored < 2 * o.max_records; stored += batch) {
    if (!ring.Append(records)) std::abort();
  }
  for (auto _ : state) {
    if (!ring.Append(records)) std::abort();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(batch));
}

void AppendArgs(benchmark::internal::Benchmark* b, std::vector<int> threads, int64_t total_small,
                int64_t total_large) {
  for (int64_t size : {128, 4096}) {
    for (int t : threads) b->Args({size, t, size == 128 ? total_small : total_large});
  }
  b->ArgNames({"bytes", "threads", "appends"})
      ->UseRealTime()
      ->Iterations(2)
      ->Unit(benchmark::kMillisecond);
}

// The raw device rate first, then on_commit right after it, so both see the same disk.
BENCHMARK(BM_RawFdatasync)
    ->Arg(128)
    ->Arg(256)
    ->Arg(4096)
    ->ArgName("bytes")
    ->MinTime(1.0)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Append, on_commit, FsyncMode::kOnCommit)->Apply([](auto* b) {
  AppendArgs(b, {1, 8, 64}, 3072, 3072);
});
BENCHMARK_CAPTURE(BM_Append, periodic, FsyncMode::kPeriodic)->Apply([](auto* b) {
  AppendArgs(b, {1, 8, 64}, 200000, 50000);
});
BENCHMARK_CAPTURE(BM_Append, none, FsyncMode::kNone)->Apply([](auto* b) {
  AppendArgs(b, {1, 8, 64}, 200000, 50000);
});
BENCHMARK(BM_RingAppend)
    ->Args({256, 250, 100000})
    ->Args({256, 250, 1000})
    ->Args({256, 1, 100000})
    ->ArgNames({"bytes", "batch", "records"});
BENCHMARK(BM_Recovery)->Arg(256)->ArgName("MiB")->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
