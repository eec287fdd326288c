// How the broker's settings reach the code they configure: BrokerConfig (what the operator
// set, docs/operations.md) → the options of the broker core and the client service. One
// place, so that a test can show every documented setting lands where it says
// (tests/server/broker_options_test.cc), and main.cc only adds what is not a setting (the
// health registry, test seams).
//
// Pure functions of the config; any thread.
#pragma once

#include "broker/broker_core.h"
#include "broker/client_service.h"
#include "server/broker_config.h"

namespace felix::server {

// Everything but `health`, `before_open` and `lease_valid`, which the daemon fills in.
broker::BrokerCoreOptions CoreOptionsFromConfig(const BrokerConfig& config);
broker::ClientServiceOptions ServiceOptionsFromConfig(const BrokerConfig& config);

}  // namespace felix::server
