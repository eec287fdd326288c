// Transport benchmarks over real UDP on loopback, client and server endpoints in one process
// (two loop threads): 64-byte request/response latency (p50/p99 reported as counters, driven
// entirely on the client's loop thread) and 1 KiB one-way throughput on one stream.
// Beside them the floor of any request/response on this machine: the same 64-byte exchange over
// a bare UDP socket and a bare TCP socket (TCP_NODELAY), a server thread sleeping in `ppoll` as
// the endpoint's loop does, the benchmark thread sending and blocking in `recv` — no QUIC, no
// TLS, no application. It is what the QUIC round trip adds to, and what Redis's TCP round trip
// is built on (docs/performance.md, "The goal rows, one by one").
//   build/release/bench/transport/bench_transport --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "transport/endpoint.h"

namespace felix::transport {
namespace {

using Clock = std::chrono::steady_clock;

// CPU time of the whole process (every thread: both endpoints' loops, or both socket ends).
double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

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
  double cpu_s = 0;
  for (auto _ : state) {
    const double cpu0 = ProcessCpuSeconds();
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
    cpu_s = ProcessCpuSeconds() - cpu0;
    pair.client->Post([stream] { (*stream)->Finish(); });
  }
  std::sort(samples.begin(), samples.end());
  state.counters["p50_us"] = samples[samples.size() / 2];
  state.counters["p90_us"] = samples[samples.size() * 9 / 10];
  state.counters["p99_us"] = samples[samples.size() * 99 / 100];
  state.counters["round_trips"] = double(samples.size());
  state.counters["cpu_us"] = cpu_s * 1e6 / double(samples.size());  // both ends, per round trip
}
BENCHMARK(BM_RequestResponse64)->Arg(20000)->Iterations(1)->Unit(benchmark::kMillisecond);

// `state.range(0)` connections (as many clients, each its own connection), one request in
// flight on each: every answer (a 64-byte echo) is followed at once by that connection's next
// request, all on the client's loop thread, `state.range(1)` answers in all. Reports operations
// per second and the process's CPU per operation (both ends) — the transport's share of a
// many-clients request/response workload, with no application and no caller threads above it.
// `state.range(2)`: 0, the connections are dialled from one endpoint and share its socket (a
// loop turn's datagrams to the server leave in one `sendmmsg`, change 54); 1, each from an
// endpoint of its own on the same loop (EndpointOptions::share_loop_of), a socket each — as 32
// `felix::Client`s on one `IoThread` are.
void BM_ConcurrentRequestResponse64(benchmark::State& state) {
  Pair pair(true);
  const int kConnections = int(state.range(0));
  const int64_t kAnswers = state.range(1);
  const bool socket_each = state.range(2) != 0;
  std::vector<std::unique_ptr<Endpoint>> guests;
  std::vector<std::shared_ptr<Connection>> conns{pair.conn};
  for (int i = 1; i < kConnections; ++i) {
    Endpoint* from = pair.client.get();
    if (socket_each) {
      EndpointOptions go;
      go.tls = Tls({"felix/1"});
      go.name = "bench-guest";
      go.share_loop_of = pair.client.get();
      auto guest = Endpoint::Create({"127.0.0.1", 0}, go, pair.metrics, std::nullopt);
      if (!guest) {
        state.SkipWithError("guest endpoint failed");
        return;
      }
      guests.push_back(std::move(*guest));
      from = guests.back().get();
    }
    std::promise<std::shared_ptr<Connection>> p;
    auto f = p.get_future();
    from->Dial(pair.server->local_address(), {"localhost"},
               [&p](Result<std::shared_ptr<Connection>> r) { p.set_value(r ? *r : nullptr); });
    conns.push_back(f.get());
    if (!conns.back()) {
      state.SkipWithError("dial failed");
      return;
    }
  }
  double ops_per_s = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    std::promise<void> done;
    auto f = done.get_future();
    auto answered = std::make_shared<int64_t>(0);
    auto streams = std::make_shared<std::vector<std::shared_ptr<Stream>>>();
    const double cpu0 = ProcessCpuSeconds();
    const auto start = Clock::now();
    pair.client->Post([&, answered, streams] {
      static const std::vector<uint8_t> msg(64, 0x42);
      for (auto& conn : conns) {
        auto s = conn->OpenBidiStream();
        if (!s) continue;
        streams->push_back(*s);
        (*s)->SetHandlers(StreamHandlers{[&, answered](Stream& st, std::span<const uint8_t> d) {
                                           size_t have = d.size();
                                           while (have >= 64) {
                                             st.Consume(64);
                                             have -= 64;
                                             if (++*answered == kAnswers) done.set_value();
                                             if (*answered < kAnswers) (void)st.Write(msg);
                                           }
                                         },
                                         nullptr, nullptr, nullptr});
        (void)(*s)->Write(msg);
      }
    });
    f.wait();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    cpu_s = ProcessCpuSeconds() - cpu0;
    ops_per_s = double(kAnswers) / seconds;
    pair.client->Post([streams] {
      for (auto& s : *streams) s->Finish();
    });
  }
  state.counters["ops_per_s"] = ops_per_s;
  state.counters["cpu_us"] = cpu_s * 1e6 / double(kAnswers);  // both ends, per operation
  conns.clear();
  for (auto& guest : guests) guest->Stop();  // before the loop they share stops
}
BENCHMARK(BM_ConcurrentRequestResponse64)
    ->ArgNames({"conns", "answers", "socket_each"})
    ->Args({32, 200000, 0})
    ->Args({32, 200000, 1})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

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

// The bare-socket floor: `rounds` 64-byte requests, each answered with 64 bytes by a server
// thread that sleeps in ppoll. Reports p50/p90/p99, the server thread's CPU per round trip and
// both ends' (cpu_us, as BM_RequestResponse64 reports for its two endpoints).
void SocketFloor(benchmark::State& state, int type) {
  const int kRounds = int(state.range(0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int listener = socket(AF_INET, type, 0);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      (type == SOCK_STREAM && listen(listener, 1) != 0)) {
    state.SkipWithError("cannot bind a loopback socket");
    return;
  }
  const int client = socket(AF_INET, type, 0);
  const int one = 1;
  if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    state.SkipWithError("cannot connect");
    return;
  }
  int served = type == SOCK_STREAM ? accept(listener, nullptr, nullptr) : listener;
  if (type == SOCK_STREAM) {
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(served, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  std::atomic<bool> stop{false};
  double server_cpu_s = 0;
  std::thread server([&] {
    uint8_t buf[2048];
    timespec t0{}, t1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    while (!stop.load(std::memory_order_relaxed)) {
      pollfd p{served, POLLIN, 0};
      const timespec wait{0, 50'000'000};
      if (ppoll(&p, 1, &wait, nullptr) <= 0) continue;
      sockaddr_in peer{};
      socklen_t peer_len = sizeof peer;
      const ssize_t n = recvfrom(served, buf, sizeof buf, MSG_DONTWAIT,
                                 reinterpret_cast<sockaddr*>(&peer), &peer_len);
      if (n <= 0) {
        if (type == SOCK_STREAM && n == 0) break;
        continue;
      }
      // One answer per 64-byte request (a TCP read may hold more than one).
      for (ssize_t i = 0; i + 64 <= n; i += 64) {
        (void)sendto(served, buf, 64, 0,
                     type == SOCK_DGRAM ? reinterpret_cast<sockaddr*>(&peer) : nullptr,
                     type == SOCK_DGRAM ? peer_len : 0);
      }
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    server_cpu_s = double(t1.tv_sec - t0.tv_sec) + double(t1.tv_nsec - t0.tv_nsec) / 1e9;
  });
  std::vector<double> samples;
  samples.reserve(size_t(kRounds));
  uint8_t msg[64];
  std::fill(std::begin(msg), std::end(msg), uint8_t{0x42});
  double cpu_s = 0;
  for (auto _ : state) {
    const double cpu0 = ProcessCpuSeconds();
    for (int i = 0; i < kRounds; ++i) {
      const auto start = Clock::now();
      if (send(client, msg, sizeof msg, 0) != ssize_t(sizeof msg)) break;
      size_t got = 0;
      uint8_t answer[64];
      while (got < sizeof answer) {
        const ssize_t n = recv(client, answer + got, sizeof answer - got, 0);
        if (n <= 0) break;
        got += size_t(n);
      }
      samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    cpu_s = ProcessCpuSeconds() - cpu0;
  }
  stop = true;
  shutdown(client, SHUT_RDWR);
  server.join();
  close(client);
  if (served != listener) close(served);
  close(listener);
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  state.counters["p50_us"] = samples[samples.size() / 2];
  state.counters["p90_us"] = samples[samples.size() * 9 / 10];
  state.counters["p99_us"] = samples[samples.size() * 99 / 100];
  state.counters["round_trips"] = double(samples.size());
  state.counters["server_cpu_us"] = server_cpu_s * 1e6 / double(samples.size());
  state.counters["cpu_us"] = cpu_s * 1e6 / double(samples.size());  // both ends, per round trip
}

void BM_UdpSocketFloor64(benchmark::State& state) {
  SocketFloor(state, SOCK_DGRAM);
}
void BM_TcpSocketFloor64(benchmark::State& state) {
  SocketFloor(state, SOCK_STREAM);
}
BENCHMARK(BM_UdpSocketFloor64)->Arg(20000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TcpSocketFloor64)->Arg(20000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace felix::transport

BENCHMARK_MAIN();
