// Transport benchmarks over real UDP on loopback, client and server endpoints in one process
// (two loop threads): 64-byte request/response latency (p50/p99 reported as counters, driven
// entirely on the client's loop thread) and 1 KiB one-way throughput on one stream.
// Beside them the floor of any request/response on this machine: the same 64-byte exchange over
// a bare UDP socket and a bare TCP socket (TCP_NODELAY), a server thread sleeping in `ppoll` as
// the endpoint's loop does, the benchmark thread sending and blocking in `recv` — no QUIC, no
// TLS, no application. It is what the QUIC round trip adds to, and what Redis's TCP round trip
// is built on (docs/performance.md, "The goal rows, one by one"). And the many-clients floor:
// 32 caller threads, each blocking on its own connection's answer, over Felix's QUIC transport
// and over bare TCP sockets (Redis's shape) — what the cache row with 32 Clients is built on.
//   build/release/bench/transport/bench_transport --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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

// Dials `to` from `from` and waits for the handshake: the connection, or nullptr.
std::shared_ptr<Connection> DialAndWait(Endpoint& from, const HostPort& to) {
  std::promise<std::shared_ptr<Connection>> p;
  auto f = p.get_future();
  from.Dial(to, {"localhost"},
            [&p](Result<std::shared_ptr<Connection>> r) { p.set_value(r ? *r : nullptr); });
  return f.get();
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
    conn = DialAndWait(*client, server->local_address());
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
    conns.push_back(DialAndWait(*from, pair.server->local_address()));
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

// `state.range(0)` caller threads, each with a connection of its own (an endpoint, a socket
// each) and one request in flight: the caller sends a 64-byte request and blocks until its echo
// is read, `state.range(1)` times — the shape of felix-bench's cache row with 32 Clients, with
// no FLX1, no cache and no broker above the transport, and the client endpoints set as
// felix::Client sets them (EndpointOptions::ack_hold). `state.range(2)`: 0, the endpoints share
// one loop thread (felix::IoThread: a caller posts its request to it and sleeps on an atomic the
// loop's handler wakes); 1, each endpoint is drivable and its caller drives it (Endpoint::Drive,
// the default for a Client of its own: the caller writes the request and reads the answer on
// its own thread). Reports operations per second and the process's CPU per operation (both
// ends) — what the cache row with many Clients can reach on this machine before any of Felix's
// work above the transport (docs/performance.md, "The goal rows, one by one").
void BM_BlockingCallers64(benchmark::State& state) {
  Pair pair(true);
  const int kCallers = int(state.range(0));
  const int kRounds = int(state.range(1));
  const bool drive = state.range(2) != 0;
  static const std::vector<uint8_t> msg(64, 0x42);
  struct Caller {
    std::unique_ptr<Endpoint> endpoint;
    std::shared_ptr<Connection> conn;
    std::shared_ptr<Stream> stream;
    std::atomic<uint32_t> answered{0};
    std::atomic<bool> sleeping{false};
    // Loop thread (or the driving caller): one more answer; a futex wake only for a sleeper,
    // as felix::Client's AnswerSlot makes one.
    void Answered() {
      answered.fetch_add(1, std::memory_order_seq_cst);
      if (sleeping.exchange(false, std::memory_order_seq_cst)) {
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&answered), FUTEX_WAKE_PRIVATE, 1, nullptr,
                nullptr, 0);
      }
    }
    void WaitFor(uint32_t want) {
      for (;;) {
        const uint32_t seen = answered.load(std::memory_order_acquire);
        if (seen >= want) return;
        sleeping.store(true, std::memory_order_seq_cst);
        if (answered.load(std::memory_order_seq_cst) != seen) continue;
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&answered), FUTEX_WAIT_PRIVATE, seen,
                nullptr, nullptr, 0);
      }
    }
  };
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 0; i < kCallers; ++i) {
    auto c = std::make_unique<Caller>();
    EndpointOptions o;
    o.tls = Tls({"felix/1"});
    o.name = "bench-caller";
    o.ack_hold = std::chrono::microseconds(1000);  // as felix::Client sets them
    o.ack_hold_packets = 2;
    if (drive) {
      o.drivable = true;
      o.ack_hold_min_datagrams = 0;
    } else {
      o.share_loop_of = pair.client.get();
    }
    auto ep = Endpoint::Create({"127.0.0.1", 0}, o, pair.metrics, std::nullopt);
    if (!ep) {
      state.SkipWithError("caller endpoint failed");
      return;
    }
    c->endpoint = std::move(*ep);
    std::promise<std::shared_ptr<Stream>> opened;
    auto f = opened.get_future();
    Caller* raw = c.get();
    c->endpoint->Dial(
        pair.server->local_address(), {"localhost"},
        [raw, &opened](Result<std::shared_ptr<Connection>> r) {
          if (!r) {
            opened.set_value(nullptr);
            return;
          }
          raw->conn = *r;
          auto s = raw->conn->OpenBidiStream();
          if (!s) {
            opened.set_value(nullptr);
            return;
          }
          (*s)->SetHandlers(StreamHandlers{[raw](Stream& st, std::span<const uint8_t> d) {
                                             for (size_t have = d.size(); have >= 64; have -= 64) {
                                               st.Consume(64);
                                               raw->Answered();
                                             }
                                           },
                                           nullptr, nullptr, nullptr});
          opened.set_value(*s);
        });
    c->stream = f.get();
    if (!c->stream) {
      state.SkipWithError("dial failed");
      return;
    }
    callers.push_back(std::move(c));
  }
  double ops_per_s = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    std::atomic<int> failed{0};
    const double cpu0 = ProcessCpuSeconds();
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (auto& c : callers) {
      threads.emplace_back([&failed, drive, kRounds, c = c.get()] {
        const auto deadline = Clock::now() + std::chrono::seconds(30);
        const uint32_t first = c->answered.load();
        for (uint32_t want = first + 1; want <= first + uint32_t(kRounds); ++want) {
          auto send = [c] { (void)c->stream->Write(msg); };
          auto done = [c, want] { return c->answered.load(std::memory_order_acquire) >= want; };
          if (!drive || !c->endpoint->Drive(send, done, deadline)) {
            if (!drive) c->endpoint->Post(send);
            c->WaitFor(want);
          }
          if (Clock::now() > deadline) {
            ++failed;
            return;
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    cpu_s = ProcessCpuSeconds() - cpu0;
    ops_per_s = double(kCallers) * kRounds / seconds;
    if (failed > 0) state.SkipWithError("a caller timed out");
  }
  state.counters["ops_per_s"] = ops_per_s;
  state.counters["cpu_us"] = cpu_s * 1e6 / (double(kCallers) * kRounds);  // both ends, per op
  for (auto& c : callers) c->endpoint->Post([s = c->stream] { s->Finish(); });
  for (auto& c : callers) {
    if (!drive) c->endpoint->Stop();  // before the loop they share stops
  }
}
BENCHMARK(BM_BlockingCallers64)
    ->ArgNames({"callers", "rounds", "drive"})
    ->Args({32, 5000, 0})
    ->Args({32, 5000, 1})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// A stream per request, FLX1's shape for consumer-group calls (client-protocol.md §1.2: `auth`,
// one request, one answer, each call on a bidirectional stream of its own): `state.range(0)`
// connections, each opening `state.range(1)` streams at once, every stream carrying a 160-byte
// request (about an `auth` and a `group_ack`) and its end, answered on the server with 48 bytes
// (about a `cache_ok`) and the stream's end; a connection's next round starts when all its
// streams are answered, `state.range(2)` rounds, all on the client's loop thread. Reports
// streams per second and the process's CPU per stream (both ends) — the transport's share of
// `queue-drain-…-ack-together`, before the broker's work and the cursor's fsync
// (docs/performance.md, "The goal rows, one by one").
void BM_StreamPerRequest(benchmark::State& state) {
  const int kConnections = int(state.range(0));
  const int kStreams = int(state.range(1));
  const int kRounds = int(state.range(2));
  constexpr size_t kRequest = 160;
  constexpr size_t kAnswer = 48;
  MetricsRegistry metrics;
  ListenHandlers lh;
  lh.on_connection = [](const std::shared_ptr<Connection>& c) {
    c->SetHandlers(ConnectionHandlers{
        [](const std::shared_ptr<Stream>& s) {
          s->SetHandlers(StreamHandlers{[](Stream& st, std::span<const uint8_t> d) {
                                          if (d.size() < kRequest) return;
                                          st.Consume(d.size());
                                          static const std::vector<uint8_t> answer(kAnswer, 0x61);
                                          (void)st.Write(answer);
                                          st.Finish();
                                        },
                                        nullptr, nullptr, nullptr});
        },
        nullptr});
  };
  EndpointOptions so;
  so.tls = Tls();
  auto server = Endpoint::Create({"127.0.0.1", 0}, so, metrics, lh);
  EndpointOptions co;
  co.tls = Tls({"felix/1"});
  co.name = "bench-client";
  auto client = Endpoint::Create({"127.0.0.1", 0}, co, metrics, std::nullopt);
  if (!server || !client) {
    state.SkipWithError("endpoint failed");
    return;
  }
  std::vector<std::shared_ptr<Connection>> conns(static_cast<size_t>(kConnections));
  for (auto& conn : conns) conn = DialAndWait(**client, (*server)->local_address());
  if (std::find(conns.begin(), conns.end(), nullptr) != conns.end()) {
    state.SkipWithError("dial failed");
    return;
  }
  double streams_per_s = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    std::promise<void> done;
    auto f = done.get_future();
    struct Round {
      std::shared_ptr<Connection> conn;
      int left_in_round = 0;
      int rounds_left = 0;
    };
    auto rounds = std::make_shared<std::vector<Round>>(conns.size());
    auto connections_left = std::make_shared<int>(kConnections);
    auto failed = std::make_shared<bool>(false);
    auto start_round = std::make_shared<std::function<void(Round&)>>();
    *start_round = [&, start_round, connections_left, failed](Round& r) {
      static const std::vector<uint8_t> request(kRequest, 0x72);
      r.left_in_round = kStreams;
      for (int k = 0; k < kStreams; ++k) {
        auto s = r.conn->OpenBidiStream();
        if (!s) {
          if (!*failed) {
            *failed = true;
            done.set_value();
          }
          return;
        }
        (*s)->SetHandlers(StreamHandlers{
            [&, start_round, connections_left, failed](Stream& st, std::span<const uint8_t> d) {
              if (d.size() < kAnswer) return;
              st.Consume(d.size());
              if (--r.left_in_round > 0) return;
              if (--r.rounds_left > 0) {
                (*start_round)(r);
              } else if (--*connections_left == 0 && !*failed) {  // a failure already ended it
                done.set_value();
              }
            },
            nullptr, nullptr, nullptr});
        (void)(*s)->Write(request);
        (*s)->Finish();
      }
    };
    const double cpu0 = ProcessCpuSeconds();
    const auto start = Clock::now();
    (*client)->Post([&, rounds, start_round] {
      for (size_t i = 0; i < conns.size(); ++i) {
        (*rounds)[i].conn = conns[i];
        (*rounds)[i].rounds_left = kRounds;
        (*start_round)((*rounds)[i]);
      }
    });
    f.wait();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    cpu_s = ProcessCpuSeconds() - cpu0;
    (*client)->Post([start_round] { *start_round = nullptr; });  // its captures hold it
    if (*failed) {
      state.SkipWithError("a stream could not be opened");
      return;
    }
    streams_per_s = double(kConnections) * kStreams * kRounds / seconds;
  }
  state.counters["ops_per_s"] = streams_per_s;
  state.counters["cpu_us"] =
      cpu_s * 1e6 / (double(kConnections) * kStreams * kRounds);  // both ends, per stream
  conns.clear();
  (*client)->Stop();
  (*server)->Stop();
}
BENCHMARK(BM_StreamPerRequest)
    ->ArgNames({"conns", "streams", "rounds"})
    ->Args({4, 100, 500})
    ->Iterations(1)
    ->UseRealTime()
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

// The same many-callers shape over bare TCP (TCP_NODELAY), Redis's: `state.range(0)` caller
// threads each send a 64-byte request on a socket of their own and block in `recv` for its
// answer, `state.range(1)` times; one server thread waits in `epoll_wait` and answers every
// 64 bytes it reads. No QUIC, no TLS, no application: beside BM_BlockingCallers64 it is what
// the transport and the threads cost, each way (docs/performance.md, "The goal rows").
void BM_TcpBlockingCallers64(benchmark::State& state) {
  const int kCallers = int(state.range(0));
  const int kRounds = int(state.range(1));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      listen(listener, kCallers) != 0) {
    state.SkipWithError("cannot bind a loopback socket");
    return;
  }
  const int one = 1;
  std::vector<int> clients;
  std::vector<int> served;
  const int ep = epoll_create1(0);
  for (int i = 0; i < kCallers; ++i) {
    const int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      state.SkipWithError("cannot connect");
      return;
    }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int a = accept(listener, nullptr, nullptr);
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = a;
    epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev);
    clients.push_back(c);
    served.push_back(a);
  }
  std::atomic<bool> stop{false};
  std::thread server([&] {
    epoll_event events[64];
    uint8_t buf[4096];
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = epoll_wait(ep, events, 64, 50);
      for (int i = 0; i < n; ++i) {
        const ssize_t got = recv(events[i].data.fd, buf, sizeof buf, MSG_DONTWAIT);
        for (ssize_t at = 0; at + 64 <= got; at += 64)
          (void)send(events[i].data.fd, buf + at, 64, 0);
      }
    }
  });
  double ops_per_s = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    const double cpu0 = ProcessCpuSeconds();
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int fd : clients) {
      threads.emplace_back([fd, kRounds] {
        uint8_t msg[64];
        std::fill(std::begin(msg), std::end(msg), uint8_t{0x42});
        for (int k = 0; k < kRounds; ++k) {
          if (send(fd, msg, sizeof msg, 0) != ssize_t(sizeof msg)) return;
          uint8_t answer[64];
          for (size_t got = 0; got < sizeof answer;) {
            const ssize_t n = recv(fd, answer + got, sizeof answer - got, 0);
            if (n <= 0) return;
            got += size_t(n);
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    cpu_s = ProcessCpuSeconds() - cpu0;
    ops_per_s = double(kCallers) * kRounds / seconds;
  }
  stop = true;
  server.join();
  for (int fd : clients) close(fd);
  for (int fd : served) close(fd);
  close(ep);
  close(listener);
  state.counters["ops_per_s"] = ops_per_s;
  state.counters["cpu_us"] = cpu_s * 1e6 / (double(kCallers) * kRounds);  // both ends, per op
}
BENCHMARK(BM_TcpBlockingCallers64)
    ->ArgNames({"callers", "rounds"})
    ->Args({32, 5000})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace felix::transport

BENCHMARK_MAIN();
