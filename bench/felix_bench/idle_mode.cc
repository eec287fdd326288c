// felix-bench idle mode (--idle-subscriptions N): opens w.clients connections and N
// subscriptions (from `latest`, spread round-robin over the connections), prints one JSON line
// once all are open, then holds them for w.duration seconds without traffic. The memory
// measurement (scripts/bench-memory) reads the broker's resident set size while they are held.
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "bench_target.h"
#include "modes.h"

namespace felix::bench {

int RunIdle(const Target& target, const Workload& w, uint32_t subscriptions) {
  auto stream = StreamRef::Parse(target.stream);
  if (!stream) Die(stream.error().message);
  auto options = ResolveOptions(target, stream->namespace_name, stream->stream,
                                {"stream.subscribe:stream:{scope}"});
  const uint32_t clients = w.clients == 0 ? 1 : w.clients;
  const uint64_t start = NowNanos();
  std::vector<std::unique_ptr<Client>> connections;
  connections.reserve(clients);
  for (uint32_t i = 0; i < clients; ++i) connections.push_back(ConnectOrDie(options));
  std::vector<std::unique_ptr<Subscription>> held;
  held.reserve(subscriptions);
  for (uint32_t i = 0; i < subscriptions; ++i) {
    auto sub = connections[i % clients]->Subscribe(*stream, {.start = StartPosition::Latest()});
    if (!sub) Die("subscribe " + std::to_string(i) + ": " + sub.error().ToString());
    held.push_back(std::move(*sub));
  }
  const double open_seconds = static_cast<double>(NowNanos() - start) / 1e9;
  std::printf("{\"mode\":\"idle\",\"connections\":%u,\"subscriptions\":%u,\"open_seconds\":%.2f}\n",
              clients, subscriptions, open_seconds);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(w.duration > 0 ? w.duration : 10));
  return 0;
}

}  // namespace felix::bench
