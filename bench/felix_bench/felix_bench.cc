// felix-bench: a load generator that speaks FLX1 to a Felix broker through the C++ client
// library, running the workload scripts/bench-compare also runs against the peers
// (bench/common/workload.h), and printing one JSON line per run.
//
// Modes (modes.h): publish (default; N publishers × M fanout subscribers), cache (--cache:
// get/put mix from many connections) and queue (--group: a consumer group drains a backlog).
//
// `felix-bench report` turns the JSON lines of many runs into docs/benchmarks.md tables (report.h).
//
// The broker and credentials come from --credentials (the broker's admin-credentials.json: its
// QUIC address, CA file and signing key, from which a token scoped to the objects is minted),
// or from --broker/--ca/--token. Streams and caches must exist (`felix stream|cache create`).
// Against a cluster, --brokers a,b,c bootstraps from any of them and the client sends each
// publish to its shard's owner (direct); --via B forces every request through broker B, which
// forwards (the forwarded path, one internal round trip more).
#include <cstddef>
#include <cstdint>

#include "bench_target.h"
#include "modes.h"
#include "report.h"
#include "workload.h"

using felix::bench::Die;

int main(int argc, char** argv) {
  CLI::App app{"felix-bench: FLX1 load generator for Felix (see docs/benchmarks.md)"};
  felix::bench::Target target;
  felix::bench::Workload w;
  uint32_t publishers = 1;
  size_t window = 1;
  app.add_option("--credentials", target.credentials,
                 "the broker's admin-credentials.json (address, CA file, signing key)");
  app.add_option("--broker,--brokers", target.broker,
                 "broker QUIC address host:port, or a cluster's brokers a,b,c (publishes go "
                 "straight to each shard's owner)");
  app.add_option("--via", target.via,
                 "cluster: send everything through this one broker (host:port), which forwards "
                 "to the owners: measures the forwarded path");
  app.add_option("--ca", target.ca_file, "PEM file that verifies the broker");
  app.add_option("--token", target.token, "Felix token");
  app.add_option("--tenant", target.tenant, "tenant (default: the credential file's)");
  app.add_option("--stream", target.stream, "stream (namespace/stream or stream), must exist");
  app.add_option("--cache", target.cache, "cache mode: the cache (namespace/cache or cache)");
  app.add_option("--group", target.group, "queue mode: consumer group draining --stream");
  app.add_option("--io-threads", target.io_threads,
                 "the --clients connections (cache and queue modes) or the --fanout "
                 "subscribers' connections share this many client I/O threads (0, the default: "
                 "one thread per connection)")
      ->check(CLI::Range(0u, 64u));
  app.add_option("--connections", target.connections,
                 "cache mode: the --clients threads share this many connections, assigned in "
                 "turn (0, the default: one connection per thread)")
      ->check(CLI::Range(0u, 4096u));
  app.add_option("--spin-us", target.spin_us,
                 "a blocking call spins this many µs for its answer before it sleeps "
                 "(ClientOptions::spin_wait; default 0)")
      ->check(CLI::Range(0u, 100000u));
  app.add_flag("--caller-io,!--no-caller-io", target.caller_io,
               "acked publishes and cache calls do their connection's I/O on the calling "
               "thread (ClientOptions::caller_runs_io; the default); --no-caller-io: through "
               "the connection's I/O thread");
  app.add_option("--subscriber-spin-us", target.subscriber_spin_us,
                 "with --fanout: the subscribers alone spin this many µs for each event before "
                 "they sleep (default: --spin-us)")
      ->check(CLI::Range(0u, 100000u));
  app.add_flag("--subscriber-handler", target.subscriber_handler,
               "with --fanout: the subscribers take events in a handler on their connection's "
               "I/O thread (push delivery) instead of a reader thread calling Next");
  app.add_option("--publishers", publishers, "publishing connections (default 1)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--window", window, "acked batches in flight per publisher (default 1)")
      ->check(CLI::Range(size_t{1}, size_t{4096}));
  uint32_t probe_ms = 0;
  uint32_t probe_timeout_ms = 100;
  app.add_option(
      "--probe-ms", probe_ms,
      "probe mode: one acked publish every N ms, one outcome line each (failover bench)");
  app.add_option("--probe-timeout-ms", probe_timeout_ms,
                 "probe mode: bound of each publish attempt and connect (default 100)");
  uint32_t idle_subscriptions = 0;
  bool idle = false;
  app.add_option("--idle-subscriptions", idle_subscriptions,
                 "idle mode: hold --clients connections and N subscriptions, no traffic");
  app.add_flag("--idle", idle, "idle mode even with no subscriptions (connections only)");
  felix::bench::AddWorkloadOptions(app, w);

  felix::bench::ReportOptions report;
  CLI::App* report_cmd =
      app.add_subcommand("report", "JSON lines of a bench-compare run to Markdown tables + plots");
  report_cmd->add_option("--in", report.input, "JSON lines (one run each)")->required();
  report_cmd->add_option("--markdown", report.markdown, "Markdown output")->required();
  report_cmd->add_option("--plots", report.plot_dir, "directory for gnuplot data and script");
  report_cmd->add_option("--command", report.command, "command line quoted in the report");
  report_cmd->add_option("--machine", report.machine, "machine description");
  CLI11_PARSE(app, argc, argv);
  if (report_cmd->parsed()) return felix::bench::RunReport(report);
  if (w.batch == 0) Die("--batch must be at least 1");
  if (probe_ms > 0) return felix::bench::RunProbe(target, w, probe_ms, probe_timeout_ms);
  if (idle || idle_subscriptions > 0) return felix::bench::RunIdle(target, w, idle_subscriptions);
  if (!target.cache.empty()) return felix::bench::RunCache(target, w);
  if (!target.group.empty()) return felix::bench::RunQueue(target, w);
  return felix::bench::RunPublish(target, w, publishers, window);
}
