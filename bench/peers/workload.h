// The benchmark workload shared by felix-bench and the peer clients, so every system runs the
// same matrix (scripts/bench-compare) and reports the same JSON fields.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "latency_histogram.h"

namespace felix::bench {

struct Workload {
  std::string name = "publish";  // label in the JSON output
  uint64_t messages = 100000;    // total published
  uint32_t payload_bytes = 256;
  uint32_t batch = 1;          // messages per publish round trip
  bool acked = true;           // false: fire-and-forget
  bool durable = false;        // durable storage with fsync before ack
  uint32_t fanout = 0;         // subscribers measuring publish→deliver
  uint32_t clients = 1;        // concurrent clients (cache mode)
  double get_ratio = 0.9;      // cache mode: share of gets
  uint32_t key_space = 10000;  // cache mode
};

inline void AddWorkloadOptions(CLI::App& app, Workload& w) {
  app.add_option("--name", w.name, "label for the result");
  app.add_option("--messages", w.messages, "messages to publish (or cache ops)");
  app.add_option("--payload", w.payload_bytes, "payload bytes");
  app.add_option("--batch", w.batch, "messages per publish round trip");
  app.add_flag("!--no-ack", w.acked, "fire-and-forget publishes");
  app.add_flag("--durable", w.durable, "durable storage, fsync before ack");
  app.add_option("--fanout", w.fanout, "subscribers measuring publish-to-deliver latency");
  app.add_option("--clients", w.clients, "concurrent clients (cache mode)");
  app.add_option("--get-ratio", w.get_ratio, "cache mode: share of gets");
  app.add_option("--keys", w.key_space, "cache mode: key space");
}

inline uint64_t NowNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Payloads carry their send time in the first 8 bytes for publish→deliver latency (all
// processes share CLOCK_MONOTONIC on one machine).
inline void StampPayload(std::string& payload) {
  uint64_t now = NowNanos();
  if (payload.size() >= sizeof now) std::memcpy(payload.data(), &now, sizeof now);
}
inline uint64_t PayloadStamp(const void* data, size_t size) {
  uint64_t stamp = 0;
  if (size >= sizeof stamp) std::memcpy(&stamp, data, sizeof stamp);
  return stamp;
}

// After publishing: waits until `received()` reaches `expected`, or nothing new arrived for
// `quiet` (the rest was lost). Benchmark code, so polling is acceptable here.
template <typename Received>
void WaitForDeliveries(Received received, uint64_t expected,
                       std::chrono::milliseconds quiet = std::chrono::seconds(2)) {
  uint64_t last_total = 0;
  uint64_t last_progress = NowNanos();
  while (true) {
    uint64_t total = received();
    if (total >= expected) return;
    if (total != last_total) {
      last_total = total;
      last_progress = NowNanos();
    }
    if (NowNanos() - last_progress > static_cast<uint64_t>(quiet.count()) * 1'000'000) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One JSON line per run: system, workload, rates and latency summaries.
inline std::string ResultJson(const std::string& system, const Workload& w, double seconds,
                              uint64_t messages, const LatencyHistogram& ack,
                              const LatencyHistogram& deliver, uint64_t delivered,
                              uint64_t expected_deliveries) {
  char head[640];
  std::snprintf(head, sizeof head,
                "{\"system\":\"%s\",\"workload\":\"%s\",\"payload\":%u,\"batch\":%u,"
                "\"acked\":%s,\"durable\":%s,\"fanout\":%u,\"clients\":%u,\"seconds\":%.3f,"
                "\"messages\":%llu,\"msgs_per_sec\":%.0f,\"mb_per_sec\":%.2f,"
                "\"delivered\":%llu,\"dropped\":%lld,",
                system.c_str(), w.name.c_str(), w.payload_bytes, w.batch,
                w.acked ? "true" : "false", w.durable ? "true" : "false", w.fanout, w.clients,
                seconds, static_cast<unsigned long long>(messages), messages / seconds,
                messages * static_cast<double>(w.payload_bytes) / seconds / 1e6,
                static_cast<unsigned long long>(delivered),
                static_cast<long long>(expected_deliveries) - static_cast<long long>(delivered));
  return std::string(head) + "\"ack_latency\":" + ack.SummaryJson() +
         ",\"deliver_latency\":" + deliver.SummaryJson() + "}";
}

}  // namespace felix::bench
