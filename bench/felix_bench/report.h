// `felix-bench report`: turns the JSON lines of a bench-compare run (felix-bench and the peer
// clients, several repetitions of each row) into the Markdown tables of docs/benchmarks.md and
// gnuplot data for its plots.
#pragma once

#include <string>

namespace felix::bench {

struct ReportOptions {
  std::string input;     // JSON lines, one per run
  std::string markdown;  // tables written here
  std::string plot_dir;  // throughput.dat, latency.dat and plots.gp written here (optional)
  std::string command;   // the command line that produced the input, quoted in the tables
  std::string machine;   // one line describing the machine
};

// Exit code: 0, or 1 with a message on stderr when the input cannot be read.
int RunReport(const ReportOptions& options);

}  // namespace felix::bench
