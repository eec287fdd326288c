// The benchmark workload shared by felix-bench and the peer clients, so every system runs the
// same matrix (scripts/bench-compare) and reports the same JSON fields.
#pragma once

#include <atomic>
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
  double rate = 0;             // target messages/s per publisher; 0: as fast as possible
  double duration = 0;         // seconds: stop publishing after this long (0: no limit)
  // Queue mode: acknowledge each fetched batch's records together — every record still gets
  // its own ack, all are sent before any answer is awaited — instead of one round trip each.
  bool ack_together = false;

  // Only subscribers read a payload's send time (StampPayload): without them no loop stamps.
  bool StampsPayloads() const { return fanout > 0; }

  // Publishing goes on while this holds (message count and duration limits).
  bool More(uint64_t sent, uint64_t start_nanos, uint64_t now_nanos) const {
    return sent < messages &&
           (duration <= 0 || static_cast<double>(now_nanos - start_nanos) < duration * 1e9);
  }
};

inline void AddWorkloadOptions(CLI::App& app, Workload& w) {
  app.add_option("--name", w.name, "label for the result");
  app.add_option("--messages", w.messages, "messages to publish (or cache ops)");
  app.add_option("--payload", w.payload_bytes, "payload bytes");
  app.add_option("--batch", w.batch, "messages per publish round trip");
  app.add_flag("!--no-ack", w.acked, "fire-and-forget publishes");
  app.add_flag("--durable", w.durable, "durable storage, fsync before ack");
  app.add_option("--fanout", w.fanout, "subscribers measuring publish-to-deliver latency");
  app.add_option("--clients", w.clients, "concurrent clients (cache, queue and idle modes)");
  app.add_flag("--ack-together", w.ack_together,
               "queue mode: send a batch's acks (one per record) before awaiting their answers");
  app.add_option("--get-ratio", w.get_ratio, "cache mode: share of gets");
  app.add_option("--keys", w.key_space, "cache mode: key space");
  app.add_option("--rate", w.rate, "target messages per second (0: as fast as possible)");
  app.add_option("--duration", w.duration, "stop publishing after this many seconds");
}

inline uint64_t NowNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// A publishing loop's stop test: the message count, and the duration read from the clock once
// every kClockEvery tests — a loop of one-record fire-and-forget publishes spends ~8 % of its
// thread on each clock read per publish (docs/performance.md), which measures the harness, not
// the system. Stops at most kClockEvery − 1 publishes after the duration passed.
class PublishLimit {
 public:
  static constexpr uint32_t kClockEvery = 16;
  PublishLimit(const Workload& w, uint64_t messages, uint64_t start_nanos)
      : messages_(messages),
        duration_nanos_(w.duration > 0 ? static_cast<uint64_t>(w.duration * 1e9) : 0),
        start_nanos_(start_nanos) {}
  bool More(uint64_t sent) {
    if (sent >= messages_) return false;
    if (duration_nanos_ == 0 || ++tests_ % kClockEvery != 1) return true;
    return NowNanos() - start_nanos_ < duration_nanos_;
  }

 private:
  uint64_t messages_;
  uint64_t duration_nanos_;  // 0: no duration limit
  uint64_t start_nanos_;
  uint64_t tests_ = 0;
};

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

// Paces a publisher at a target rate: Wait(sent) returns when message number `sent` is due.
// Open-loop: a publisher that fell behind sends at once (latency then includes its backlog).
class Pacer {
 public:
  explicit Pacer(double rate) : rate_(rate), start_(NowNanos()) {}
  void Wait(uint64_t sent) const {
    if (rate_ <= 0) return;
    uint64_t due = start_ + static_cast<uint64_t>(static_cast<double>(sent) * 1e9 / rate_);
    uint64_t now = NowNanos();
    if (due > now) std::this_thread::sleep_for(std::chrono::nanoseconds(due - now));
  }

 private:
  double rate_;
  uint64_t start_;
};

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

// WaitForDeliveries over subscribers held by pointer, each with an atomic `received` count.
template <typename Subscribers>
void WaitForSubscribers(const Subscribers& subscribers, uint64_t expected) {
  WaitForDeliveries(
      [&] {
        uint64_t total = 0;
        for (const auto& s : subscribers) total += s->received.load(std::memory_order_acquire);
        return total;
      },
      expected);
}

// One JSON line per run: system, workload, rates and latency summaries.
inline std::string ResultJson(const std::string& system, const Workload& w, double seconds,
                              uint64_t messages, const LatencyHistogram& ack,
                              const LatencyHistogram& deliver, uint64_t delivered,
                              uint64_t expected_deliveries) {
  char head[768];
  std::snprintf(head, sizeof head,
                "{\"system\":\"%s\",\"workload\":\"%s\",\"payload\":%u,\"batch\":%u,"
                "\"acked\":%s,\"durable\":%s,\"fanout\":%u,\"clients\":%u,\"rate\":%.0f,"
                "\"seconds\":%.3f,"
                "\"messages\":%llu,\"msgs_per_sec\":%.0f,\"mb_per_sec\":%.2f,"
                "\"delivered\":%llu,\"dropped\":%lld,",
                system.c_str(), w.name.c_str(), w.payload_bytes, w.batch,
                w.acked ? "true" : "false", w.durable ? "true" : "false", w.fanout, w.clients,
                w.rate, seconds, static_cast<unsigned long long>(messages), messages / seconds,
                messages * static_cast<double>(w.payload_bytes) / seconds / 1e6,
                static_cast<unsigned long long>(delivered),
                static_cast<long long>(expected_deliveries) - static_cast<long long>(delivered));
  return std::string(head) + "\"ack_latency\":" + ack.SummaryJson() +
         ",\"deliver_latency\":" + deliver.SummaryJson() + "}";
}

}  // namespace felix::bench
