// felix-bench cache mode: w.clients threads issue gets (share w.get_ratio) and puts of
// w.payload_bytes values over w.key_space keys, one request at a time per thread, as
// peer-bench-redis --cache does against Redis. Each thread has a connection of its own, or
// with --connections the threads share that many (felix::Client is called from any thread).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_target.h"
#include "modes.h"

namespace felix::bench {

int RunCache(const Target& target, const Workload& w) {
  auto cache = CacheRef::Parse(target.cache);
  if (!cache) Die(cache.error().message);
  auto options = ResolveOptions(target, cache->namespace_name, cache->cache,
                                {"cache.read:cache:{scope}", "cache.write:cache:{scope}"});
  uint32_t clients = w.clients == 0 ? 1 : w.clients;
  const uint32_t shared = target.connections == 0 ? clients : std::min(target.connections, clients);
  std::vector<std::unique_ptr<Client>> connections = ConnectManyOrDie(target, options, shared);

  std::vector<LatencyHistogram> latencies(clients);
  std::vector<uint64_t> ops(clients, 0), failures(clients, 0);
  uint64_t per_client = w.messages / clients;
  std::vector<std::thread> threads;
  uint64_t start = NowNanos();
  for (uint32_t t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      std::uniform_int_distribution<uint32_t> key(0, w.key_space == 0 ? 0 : w.key_space - 1);
      std::uniform_real_distribution<double> op(0, 1);
      std::string value(w.payload_bytes, 'v');
      Client& client = *connections[t % shared];
      uint64_t i = 0;
      for (; i < per_client && w.More(i, start, NowNanos()); ++i) {
        std::string k = "bench:" + std::to_string(key(rng));
        uint64_t t0 = NowNanos();
        bool ok = op(rng) < w.get_ratio ? client.CacheGet(*cache, k).has_value()
                                        : client.CachePut(*cache, k, value).has_value();
        if (!ok) ++failures[t];
        latencies[t].Record(NowNanos() - t0);
      }
      ops[t] = i;
    });
  }
  for (auto& th : threads) th.join();
  double seconds = static_cast<double>(NowNanos() - start) / 1e9;
  LatencyHistogram all, none;
  uint64_t total = 0, failed = 0;
  for (uint32_t t = 0; t < clients; ++t) {
    all.Merge(latencies[t]);
    total += ops[t];
    failed += failures[t];
  }
  std::printf("%s\n", ResultJson("felix", w, seconds, total, all, none, 0, 0).c_str());
  if (failed != 0) {
    std::fprintf(stderr, "felix-bench: %llu cache requests failed\n",
                 static_cast<unsigned long long>(failed));
    return 1;
  }
  return 0;
}

}  // namespace felix::bench
