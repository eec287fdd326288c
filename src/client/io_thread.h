// IoThread::Impl (include/felix/client.h): the transport endpoint whose loop thread the
// connections of Clients made with an IoThread run on (EndpointOptions::share_loop_of).
//
// Threading: host() may be used from any thread; the endpoint lives as long as the IoThread,
// which every Client made with it holds, so it outlives every endpoint sharing its loop.
#pragma once

#include <memory>

#include "common/metrics.h"
#include "felix/client.h"
#include "transport/endpoint.h"

namespace felix {

struct IoThread::Impl {
  // The host's own metric series (nobody reads them); declared first, so it outlives `host`.
  std::unique_ptr<MetricsRegistry> metrics;
  std::unique_ptr<transport::Endpoint> host;  // binds a UDP port of its own; dials nothing
};

}  // namespace felix
