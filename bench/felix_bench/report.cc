#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace felix::bench {

namespace {

using Json = nlohmann::json;

struct Run {
  double msgs_per_sec = 0;
  double mb_per_sec = 0;
  int64_t dropped = 0;
  bool has_latency = false;
  double p50 = 0, p99 = 0, p999 = 0;
};

struct Row {
  std::string name;
  Json first;                                    // workload fields of the first run
  std::vector<std::string> systems;              // in order of appearance
  std::map<std::string, std::vector<Run>> runs;  // by system
};

double Median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The latency a row is judged by: publish→deliver with subscribers, else the acknowledgement
// (or cache operation) round trip; none for fire-and-forget without subscribers.
const Json* LatencyOf(const Json& run) {
  const char* field = run.value("fanout", 0) > 0 ? "deliver_latency" : "ack_latency";
  auto it = run.find(field);
  if (it == run.end() || !it->is_object() || it->value("count", 0) == 0) return nullptr;
  return &*it;
}

// Column of a system in the plots: felix, nats (JetStream or core) or redis (any mode). The
// fire-and-forget rows' second NATS system (publishes stored in a stream) is in the tables only.
int PlotColumn(const std::string& system) {
  if (system == "felix") return 0;
  if (system == "nats-jetstream-unacked") return -1;
  if (system.rfind("nats", 0) == 0) return 1;
  if (system.rfind("redis", 0) == 0) return 2;
  return -1;
}

std::string Fixed(double v, int digits) {
  if (std::isnan(v)) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Rate(double v) {
  if (std::isnan(v)) return "—";
  char buf[64];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f M", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1f k", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

struct Summary {
  double msgs = NAN, lo = NAN, hi = NAN, mb = NAN, p50 = NAN, p99 = NAN, p999 = NAN;
  int64_t dropped = 0;
  size_t count = 0;
};

Summary Summarize(const std::vector<Run>& runs) {
  Summary s;
  std::vector<double> msgs, mb, p50, p99, p999;
  for (const auto& r : runs) {
    msgs.push_back(r.msgs_per_sec);
    mb.push_back(r.mb_per_sec);
    s.dropped = std::max(s.dropped, r.dropped);
    if (r.has_latency) {
      p50.push_back(r.p50);
      p99.push_back(r.p99);
      p999.push_back(r.p999);
    }
  }
  s.count = runs.size();
  s.msgs = Median(msgs);
  s.mb = Median(mb);
  if (!msgs.empty()) {
    s.lo = *std::min_element(msgs.begin(), msgs.end());
    s.hi = *std::max_element(msgs.begin(), msgs.end());
  }
  s.p50 = Median(p50);
  s.p99 = Median(p99);
  s.p999 = Median(p999);
  return s;
}

std::string Describe(const Json& w) {
  std::ostringstream out;
  if (w.value("workload", "").rfind("cache", 0) == 0) {
    out << w.value("clients", 1) << " client(s), " << w.value("payload", 0) << " B values";
    return out.str();
  }
  out << w.value("payload", 0) << " B, batch " << w.value("batch", 1) << ", "
      << (w.value("acked", true) ? "acked" : "fire-and-forget") << ", "
      << (w.value("durable", false) ? "durable" : "in-memory");
  if (w.value("fanout", 0) > 0) out << ", fanout " << w.value("fanout", 0);
  if (w.value("rate", 0.0) > 0) out << ", " << Rate(w.value("rate", 0.0)) << " msg/s offered";
  return out.str();
}

}  // namespace

int RunReport(const ReportOptions& options) {
  std::ifstream in(options.input);
  if (!in) {
    std::fprintf(stderr, "felix-bench report: cannot read %s\n", options.input.c_str());
    return 1;
  }
  std::vector<Row> rows;
  std::map<std::string, size_t> index;
  std::string line;
  while (std::getline(in, line)) {
    Json run = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!run.is_object() || !run.contains("system") || !run.contains("workload")) continue;
    std::string name = run.value("workload", "");
    std::string system = run.value("system", "");
    auto [it, inserted] = index.emplace(name, rows.size());
    if (inserted) rows.push_back(Row{name, run, {}, {}});
    Row& row = rows[it->second];
    if (!row.runs.count(system)) row.systems.push_back(system);
    Run r;
    r.msgs_per_sec = run.value("msgs_per_sec", 0.0);
    r.mb_per_sec = run.value("mb_per_sec", 0.0);
    r.dropped = run.value("dropped", int64_t{0});
    if (const Json* lat = LatencyOf(run)) {
      r.has_latency = true;
      r.p50 = lat->value("p50_us", 0.0);
      r.p99 = lat->value("p99_us", 0.0);
      r.p999 = lat->value("p999_us", 0.0);
    }
    row.runs[system].push_back(r);
  }

  std::ostringstream md;
  md << "Machine: " << options.machine << "\n\n";
  if (!options.command.empty()) md << "Command: `" << options.command << "`\n\n";
  md << "Each figure is the median of the repetitions (runs alternate Felix, peer, Felix, peer "
        "… to cancel machine drift); msg/s shows the range in brackets. Latency is "
        "publish→acknowledgement (or cache round trip), or publish→deliver where the row has "
        "subscribers, in µs. **Felix ÷ peer**: throughput ratio (above 1: Felix is faster) and "
        "p50 latency ratio (below 1: Felix is faster).\n\n";
  md << "| workload | system | msg/s | MB/s | p50 µs | p99 µs | p999 µs | dropped | Felix ÷ peer "
        "(msg/s, p50) |\n";
  md << "|---|---|---|---|---|---|---|---|---|\n";

  std::ostringstream throughput, latency;
  throughput << "# row felix nats redis (msg/s)\n";
  latency << "# row felix nats redis (p99 us)\n";
  for (const Row& row : rows) {
    std::map<std::string, Summary> sums;
    for (const auto& system : row.systems) sums[system] = Summarize(row.runs.at(system));
    const Summary* felix = sums.count("felix") ? &sums["felix"] : nullptr;
    bool first = true;
    for (const auto& system : row.systems) {
      const Summary& s = sums[system];
      md << "| " << (first ? "**" + row.name + "**<br>" + Describe(row.first) : "") << " | "
         << system << " | " << Rate(s.msgs) << " [" << Rate(s.lo) << "–" << Rate(s.hi) << "] | "
         << Fixed(s.mb, 1) << " | " << Fixed(s.p50, 0) << " | " << Fixed(s.p99, 0) << " | "
         << Fixed(s.p999, 0) << " | " << s.dropped << " | ";
      if (felix != nullptr && system != "felix") {
        double ratio = felix->msgs / s.msgs;
        double lat_ratio = felix->p50 / s.p50;
        md << Fixed(ratio, 2) << "× " << (ratio >= 1 ? "(Felix faster)" : "(**peer faster**)");
        if (!std::isnan(lat_ratio)) {
          md << ", p50 " << Fixed(lat_ratio, 2) << "× "
             << (lat_ratio <= 1 ? "(Felix lower)" : "(**peer lower**)");
        }
      }
      md << " |\n";
      first = false;
    }
    double cols_t[3] = {NAN, NAN, NAN}, cols_l[3] = {NAN, NAN, NAN};
    for (const auto& system : row.systems) {
      int c = PlotColumn(system);
      if (c < 0) continue;
      cols_t[c] = sums[system].msgs;
      cols_l[c] = sums[system].p99;
    }
    throughput << '"' << row.name << '"';
    for (double v : cols_t) throughput << ' ' << (std::isnan(v) ? std::string("NaN") : Fixed(v, 0));
    throughput << '\n';
    if (!std::isnan(cols_l[0])) {
      latency << '"' << row.name << '"';
      for (double v : cols_l) latency << ' ' << (std::isnan(v) ? std::string("NaN") : Fixed(v, 0));
      latency << '\n';
    }
  }

  std::ofstream out(options.markdown);
  out << md.str();
  if (!out) {
    std::fprintf(stderr, "felix-bench report: cannot write %s\n", options.markdown.c_str());
    return 1;
  }
  if (!options.plot_dir.empty()) {
    std::ofstream(options.plot_dir + "/throughput.dat") << throughput.str();
    std::ofstream(options.plot_dir + "/latency.dat") << latency.str();
    std::ofstream gp(options.plot_dir + "/plots.gp");
    gp << "set terminal png size 1400,650 font ',10'\n"
          "set style data histograms\nset style histogram clustered gap 1\n"
          "set style fill solid 0.8 border -1\nset xtics rotate by -35\n"
          "set key top right\nset grid ytics\nset logscale y\n"
          "set datafile missing 'NaN'\n"
          "set output '"
       << options.plot_dir
       << "/throughput.png'\n"
          "set title 'Messages (or cache operations) per second, higher is better (log scale)'\n"
          "plot '"
       << options.plot_dir
       << "/throughput.dat' using 2:xtic(1) title 'Felix', '' using 3 title 'NATS', "
          "'' using 4 title 'Redis'\n"
          "set output '"
       << options.plot_dir
       << "/latency.png'\n"
          "set title 'p99 latency in µs, lower is better (log scale)'\n"
          "plot '"
       << options.plot_dir
       << "/latency.dat' using 2:xtic(1) title 'Felix', '' using 3 title 'NATS', "
          "'' using 4 title 'Redis'\n";
  }
  return 0;
}

}  // namespace felix::bench
