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

}  // namespace felix::bench
