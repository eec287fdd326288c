// Transport benchmarks over real UDP on loopback, client and server endpoints in one process
// (two loop threads): 64-byte request/response latency (p50/p99 reported as counters, driven
// entirely on the client's loop thread) and 1 KiB one-way throughput on one stream.
//   build/release/bench/transport/bench_transport --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <vector>

#include "transport/endpoint.h"

namespace felix::transport {
namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<TlsContext> Tls(std::vector<std::string> alpn = {}) {
  TlsOptions o;
  o.role = Role::kClient;
  o.dial_alpn = std::move(alpn);
  return *TlsContext::Create(o);
}

struct Pair {
  MetricsRegistry metrics;
  std::unique_ptr<Endpoint> server;
  std::unique_ptr<Endpoint> client;
  std::shared_ptr<Connection> conn;
  std::atomic<uint64_t> sink_bytes{0};
  std::shared_ptr<std::promise<Clock::time_point>> sink_fin;

  explicit Pair(bool echo) {
    ListenHandlers lh;
    lh.on_connection = [this, echo](const std::shared_ptr<Connection>& c) {
      c->SetHandlers(ConnectionHandlers{[this, echo](const std::shared_ptr<Stream>& s) {
                                          s->SetHandlers(StreamHandlers{
                                              [this, echo](Stream& st, std::span<const uint8_t> d) {
                                                if (echo) (void)st.Write(d);
                                                sink_bytes += d.size();
                                                st.Consume(d.size());
                                              },
                                              [this, echo](Stream&) {
                                                if (!echo && sink_fin)
                                                  sink_fin->set_value(Clock::now());
                                              },
                                              nullptr, nullptr});
                                        },
                                        nullptr});
    };
    EndpointOptions so;
    so.tls = Tls();
    server = std::move(*Endpoint::Create({"127.0.0.1", 0}, so, metrics, lh));
    EndpointOptions co;
    co.tls = Tls({"felix/1"});
    co.name = "bench-client";
    client = std::move(*Endpoint::Create({"127.0.0.1", 0}, co, metrics, std::nullopt));
    std::promise<std::shared_ptr<Connection>> p;
    auto f = p.get_future();
    client->Dial(server->local_address(), {"localhost"},
                 [&p](Result<std::shared_ptr<Connection>> r) { p.set_value(r ? *r : nullptr); });
    conn = f.get();
  }
};

void BM_RequestResponse64(benchmark::State& state) {
  Pair pair(true);
  const int kRounds = int(state.range(0));
  std::vector<double> samples;
  for (auto _ : state) {
    samples.clear();
    samples.reserve(size_t(kRounds));
    std::promise<void> done;
    auto f = done.get_future();
    auto stream = std::make_shared<std::shared_ptr<Stream>>();
    pair.client->Post([&, stream] {
      auto s = pair.conn->OpenBidiStream();
      *stream = *s;
      auto start = std::make_shared<Clock::time_point>(Clock::now());
      auto left = std::make_shared<int>(kRounds);
      static const std::vector<uint8_t> msg(64, 0x42);
      (*s)->SetHandlers(StreamHandlers{
          [&, start, left](Stream& st, std::span<const uint8_t> d) {
            size_t have = d.size();
            while (have >= 64) {
              st.Consume(64);
              have -= 64;
              samples.push_back(
                  std::chrono::duration<double, std::micro>(Clock::now() - *start).count());
              if (--*left == 0) {
                done.set_value();
                return;
              }
              *start = Clock::now();
              (void)st.Write(msg);
            }
          },
          nullptr, nullptr, nullptr});
      (void)(*s)->Write(msg);
    });
    f.wait();
    pair.client->Post([stream] { (*stream)->Finish(); });
  }
  std::sort(samples.begin(), samples.end());
  state.counters["p50_us"] = samples[samples.size() / 2];
  state.counters["p90_us"] = samples[samples.size() * 9 / 10];
  state.counters["p99_us"] = samples[samples.size() * 99 / 100];
  state.counters["round_trips"] = double(samples.size());
}
BENCHMARK(BM_RequestResponse64)->Arg(20000)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_OneWay1KiB(benchmark::State& state) {
  Pair pair(false);
  const uint64_t kMessages = uint64_t(state.range(0));
  double msgs_per_s = 0;
  for (auto _ : state) {
    pair.sink_fin = std::make_shared<std::promise<Clock::time_point>>();
    auto fin = pair.sink_fin->get_future();
    auto start = Clock::now();
    auto stream = std::make_shared<std::shared_ptr<Stream>>();
    pair.client->Post([&, stream] {
      auto s = pair.conn->OpenBidiStream();
      *stream = *s;
      auto sent = std::make_shared<uint64_t>(0);
      static const std::vector<uint8_t> msg(1024, 0x17);
      auto pump = std::make_shared<std::function<void(Stream&)>>();
      *pump = [sent, kMessages](Stream& st) {
        while (*sent < kMessages) {
          ++*sent;
          auto ok = st.Write(msg);
          if (!ok || !*ok) break;  // wait for on_writable
        }
        if (*sent == kMessages) st.Finish();
      };
      (*s)->SetHandlers(
          StreamHandlers{nullptr, nullptr, nullptr, [pump](Stream& st) { (*pump)(st); }});
      (*pump)(**s);
    });
    auto end = fin.get();
    msgs_per_s = double(kMessages) / std::chrono::duration<double>(end - start).count();
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
  state.counters["msgs_per_s"] = msgs_per_s;
  state.counters["MB_per_s"] = msgs_per_s * 1024 / 1e6;
}
BENCHMARK(BM_OneWay1KiB)
    ->Arg(300000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace felix::transport

BENCHMARK_MAIN();
