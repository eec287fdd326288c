// The felix-bench modes. Each prints one JSON line (bench/common/workload.h ResultJson) and
// returns the process exit code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench_target.h"
#include "workload.h"

namespace felix::bench {

// Publish mode: `publishers` connections send w.messages in batches of w.batch (acked: one
// batch per round trip, or `window` batches in flight; --no-ack: fire and forget), optionally
// paced to w.rate; w.fanout subscribers (own connections, from `latest`) measure
// publish→deliver latency from a send-time stamp in each payload.
int RunPublish(const Target& target, const Workload& w, uint32_t publishers, size_t window);

// Cache mode (--cache NAME): w.clients connections issue gets (share w.get_ratio) and puts of
// w.payload_bytes values over w.key_space keys, one request at a time each.
int RunCache(const Target& target, const Workload& w);

// Queue mode (--group NAME): publishes a backlog of w.messages records to the (durable)
// stream, then w.clients consumers of the group drain it, polling up to w.batch records and
// acknowledging each; reports the drain rate and the acknowledgement round trip.
int RunQueue(const Target& target, const Workload& w);

// Probe mode (--probe-ms N): one acknowledged one-record publish every `interval_ms` on one
// connection (made anew after it closes), each bounded by `timeout_ms`, for w.duration seconds
// or until SIGTERM; prints "ok <sent_ms> <answered_ms> <offset>" or "err <sent_ms> <answered_ms>
// <code>" per attempt (unix milliseconds)
// (scripts/bench-failover reads the unavailability a client sees from them).
int RunProbe(const Target& target, const Workload& w, uint32_t interval_ms, uint32_t timeout_ms);

// Idle mode (--idle-subscriptions N): w.clients connections and N subscriptions from `latest`
// (round-robin over the connections), held without traffic for w.duration seconds (10 when
// unset) after one JSON line says they are open (scripts/bench-memory reads the broker's
// memory meanwhile).
int RunIdle(const Target& target, const Workload& w, uint32_t subscriptions);

}  // namespace felix::bench
