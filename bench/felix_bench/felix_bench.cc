// felix-bench: a load generator that speaks FLX1 to a Felix broker through the C++ client
// library, running the workload scripts/bench-compare also runs against the peers
// (bench/common/workload.h), and printing one JSON line per run.
//
// Publish mode: N publishers (one connection each) send `messages` in batches of `batch`, one
// batch per round trip (acked: Publish waits for the acknowledgement; --no-ack: fire and
// forget), optionally paced to --rate. M = --fanout subscribers (one connection each,
// subscribed at `latest` before publishing starts) measure publish→deliver latency from a
// send-time stamp in the first 8 bytes of every payload. --window > 1 pipelines acked batches
// (PublishAsync) instead of waiting for each.
//
// `felix-bench report` turns the JSON lines of many runs into docs/benchmarks.md tables (report.h).
//
// The broker and credentials come from --credentials (the broker's admin-credentials.json: its
// QUIC address, CA file and signing key, from which a token scoped to the stream is minted),
// or from --broker/--ca/--token. The stream must exist (`felix stream create`).
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
  app.add_option("--broker", target.broker, "broker QUIC address host:port");
  app.add_option("--ca", target.ca_file, "PEM file that verifies the broker");
  app.add_option("--token", target.token, "Felix token");
  app.add_option("--tenant", target.tenant, "tenant (default: the credential file's)");
  app.add_option("--stream", target.stream, "stream (namespace/stream or stream), must exist");
  app.add_option("--publishers", publishers, "publishing connections (default 1)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--window", window, "acked batches in flight per publisher (default 1)")
      ->check(CLI::Range(size_t{1}, size_t{4096}));
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
  return felix::bench::RunPublish(target, w, publishers, window);
}
