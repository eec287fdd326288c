// How felix-bench reaches the broker: address, CA file and a token, given directly or derived
// from the broker's credential file (admin-credentials.json), whose signing key mints a token
// scoped to the objects a run touches. Shared by every felix-bench mode.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "felix/client.h"

namespace felix::bench {

struct Target {
  std::string credentials;
  std::string broker;  // one broker, or a cluster's comma list
  std::string via;     // cluster: the one ingress everything goes through (forwarded path)
  std::string ca_file;
  std::string token;
  std::string tenant;
  std::string stream = "bench";  // publish and queue modes
  std::string cache;             // cache mode
  std::string group;             // queue mode
  // Cache and queue modes: connections share this many client I/O threads (IoThread),
  // assigned in turn; 0: every connection has its own (the library's default).
  uint32_t io_threads = 0;
  // Cache mode: the --clients threads share this many connections (felix::Client), assigned in
  // turn; 0: one connection per thread.
  uint32_t connections = 0;
  // ClientOptions::spin_wait of every connection, in µs (0: blocking calls sleep at once).
  uint32_t spin_us = 0;
  // ClientOptions::caller_runs_io of every connection (acked publishes and cache calls do their
  // connection's I/O on the calling thread).
  bool caller_io = true;
  // Publish mode with --fanout: the subscribers' connections alone spin this long (overrides
  // spin_us for them).
  uint32_t subscriber_spin_us = 0;
  // Publish mode with --fanout: the subscribers take their events with a handler on their
  // connection's I/O thread (SubscribeOptions::on_event) instead of a thread calling Next.
  bool subscriber_handler = false;
};

// Prints "felix-bench: <message>" and exits 1.
[[noreturn]] void Die(const std::string& message);

// `permissions` are "action:resource" strings in which {scope} stands for
// tenant/namespace_name/name, e.g. "stream.publish:stream:{scope}".
ClientOptions ResolveOptions(const Target& target, const std::string& namespace_name,
                             const std::string& name, const std::vector<std::string>& permissions);

std::unique_ptr<Client> ConnectOrDie(const ClientOptions& options);

// `count` connections for cache and queue modes, on target.io_threads shared I/O threads (or
// one thread each when 0).
std::vector<std::unique_ptr<Client>> ConnectManyOrDie(const Target& target, ClientOptions options,
                                                      uint32_t count);

}  // namespace felix::bench
