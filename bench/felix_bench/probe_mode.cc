// felix-bench probe mode (--probe-ms N): one acknowledged publish of one record every N ms on one
// connection, each answered or timed out within --probe-timeout-ms, for --duration seconds (or
// until SIGTERM/SIGINT). Every outcome is one line on stdout, flushed at once:
//   ok <sent_unix_ms> <answered_unix_ms> <offset>   acknowledged (client retries included)
//   err <sent_unix_ms> <answered_unix_ms> <code>    refused, timed out or indeterminate
// scripts/bench-failover kills a shard's leader and reads the time of the first `ok` after the
// kill from these lines: the unavailability a client sees, client library included.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "bench_target.h"
#include "modes.h"

namespace felix::bench {

namespace {

std::atomic<bool> g_stop{false};  // set by the signal handler only

void OnSignal(int) {
  g_stop.store(true);
}

long long UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int RunProbe(const Target& target, const Workload& w, uint32_t interval_ms, uint32_t timeout_ms) {
  auto stream = StreamRef::Parse(target.stream);
  if (!stream) Die(stream.error().message);
  auto options = ResolveOptions(target, stream->namespace_name, stream->stream,
                                {"stream.publish:stream:{scope}"});
  options.request_timeout = std::chrono::milliseconds(timeout_ms);
  options.connect_timeout = std::chrono::milliseconds(timeout_ms);
  options.seed_connect_timeout = std::chrono::milliseconds(timeout_ms);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  const auto start = std::chrono::steady_clock::now();
  const auto interval = std::chrono::milliseconds(interval_ms);
  std::unique_ptr<Client> client;
  std::vector<std::string> record(1, std::string(w.payload_bytes, 'p'));
  auto next = start;
  while (!g_stop.load()) {
    if (w.duration > 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::duration<double>(w.duration)) {
      break;
    }
    std::this_thread::sleep_until(next);
    next += interval;
    if (!client) {
      // A connection that failed (every seed down, or the one it reached died) is made anew:
      // the probe measures what a client that keeps trying sees.
      auto connected = Client::Connect(options);
      if (!connected) {
        std::printf("err %lld %lld connect:%s\n", UnixMillis(), UnixMillis(),
                    ClientErrorCodeName(connected.error().code));
        std::fflush(stdout);
        continue;
      }
      client = std::move(*connected);
    }
    const long long sent = UnixMillis();
    auto receipt = client->Publish(*stream, record, PublishOptions{});
    if (receipt) {
      std::printf("ok %lld %lld %llu\n", sent, UnixMillis(),
                  static_cast<unsigned long long>(receipt->offset.value_or(0)));
    } else {
      std::printf("err %lld %lld %s\n", sent, UnixMillis(),
                  ClientErrorCodeName(receipt.error().code));
      std::fprintf(stderr, "felix-bench: probe: %s\n", receipt.error().ToString().c_str());
      // Only a closed client is replaced; finding a live broker after a failover is the client
      // library's job (what is measured).
      if (receipt.error().code == ClientErrorCode::kClosed) client.reset();
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace felix::bench
