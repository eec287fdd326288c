// The `felix` CLI is a CLI11 app with one subcommand group per subsystem. Each group lives in
// its own file and registers itself here; main.cc only wires the groups together.
//
// A Register* function adds its subcommands to `app` and sets their callbacks. A callback
// reports failure by throwing CLI::RuntimeError(exit_code) after printing a message to stderr,
// which is how CLI11 carries exit codes out of callbacks.
#pragma once

#include <CLI/CLI.hpp>

namespace felix::cli {

void RegisterVersionCommand(CLI::App& app);
// tenant, namespace, stream, cache and token groups (admin API client).
void RegisterAdminCommands(CLI::App& app);
// felix wire decode/encode: FLX1 and FLXI frames <-> canonical JSON.
void RegisterWireCommand(CLI::App& app);
// felix log inspect/verify/dump of shard directories.
void RegisterLogCommand(CLI::App& app);
// pub and sub (the C++ client library against a broker's QUIC listener).
void RegisterClientCommands(CLI::App& app);
// cache put/get/del/incr/counter (the client library); joins the admin `cache` group.
void RegisterCacheCommands(CLI::App& app);
// cert ca / cert node: a cluster CA and node certificates for peer mTLS.
void RegisterCertCommands(CLI::App& app);
// cluster status: nodes, controller and shard placement (GET /v1/cluster).
void RegisterClusterCommands(CLI::App& app);
// group consume / describe / dead-letters (consumer groups through the client library).
void RegisterGroupCommands(CLI::App& app);

}  // namespace felix::cli
