// `felix cluster status`: the cluster as one broker sees it, from GET /v1/cluster on its admin
// HTTP API (the admin token and URL from the credential file, admin_http.h): the nodes, the
// controller and a table of shards with leader, replicas, generation and state; then, from GET
// /replication on the same broker, replication of the shards it leads (per follower and log:
// durable offset, lag, in sync, halted reason) and of the shards it follows. --json prints the
// /v1/cluster answer unchanged (GET /replication is JSON already).
// `felix cluster move`: POST /v1/shard-moves, then waits until the target leads the shard.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/admin_http.h"
#include "cli/command.h"

namespace felix::cli {

namespace {

using catalog::Json;
using Row = std::vector<std::string>;

// Left-aligned columns two spaces apart, sized to the widest cell.
void PrintTable(const Row& header, const std::vector<Row>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const Row& r) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  };
  measure(header);
  for (const auto& r : rows) measure(r);
  auto print = [&](const Row& r) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  };
  print(header);
  for (const auto& r : rows) print(r);
}

// A table cell: JsonText, with an empty string (no zone) shown as "-" too.
std::string Cell(const Json& j, const char* name) {
  std::string text = JsonText(j, name);
  return text.empty() ? "-" : text;
}

const Json& ArrayField(const Json& j, const char* name) {
  static const Json kEmpty = Json::array();
  auto it = j.find(name);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

std::string Joined(const Json& list) {
  if (!list.is_array() || list.empty()) return "-";
  std::string out;
  for (const auto& item : list) {
    if (!out.empty()) out += ",";
    out += item.is_string() ? item.get<std::string>() : item.dump();
  }
  return out;
}

void PrintStatus(const Json& answer) {
  std::cout << "cluster " << JsonText(answer, "cluster") << "\n";
  auto controller = answer.find("controller");
  if (controller != answer.end() && controller->is_object()) {
    std::cout << "controller " << JsonText(*controller, "node_id") << " (incarnation "
              << JsonText(*controller, "incarnation") << ")\n";
  } else {
    std::cout << "controller none\n";
  }

  const Json& nodes = ArrayField(answer, "nodes");
  std::cout << "\nnodes (" << nodes.size() << ")\n";
  std::vector<Row> node_rows;
  for (const auto& n : nodes) {
    node_rows.push_back({Cell(n, "node_id"), Cell(n, "incarnation"), Cell(n, "client_addr"),
                         Cell(n, "internal_addr"), Cell(n, "zone"), Cell(n, "version")});
  }
  PrintTable({"NODE", "INCARNATION", "CLIENT", "INTERNAL", "ZONE", "VERSION"}, node_rows);

  const Json& shards = ArrayField(answer, "shards");
  std::cout << "\nshards (" << shards.size() << ")\n";
  std::vector<Row> shard_rows;
  for (const auto& s : shards) {
    std::string name = JsonText(s, "kind") + " " + JsonText(s, "tenant") + "/" +
                       JsonText(s, "namespace") + "/" + JsonText(s, "name") + "#" +
                       JsonText(s, "shard");
    auto replicas = s.find("replicas");
    shard_rows.push_back(
        {name, Cell(s, "leader"), replicas != s.end() ? Joined(*replicas) : std::string("-"),
         Cell(s, "generation"),
         s.contains("joining") ? Cell(s, "state") + " (restoring to " + JsonText(s, "joining") + ")"
         : s.contains("moving_to") ? Cell(s, "state") + " (to " + JsonText(s, "moving_to") + ")"
                                   : Cell(s, "state")});
  }
  PrintTable({"SHARD", "LEADER", "REPLICAS", "GENERATION", "STATE"}, shard_rows);
}

std::string ShardName(const Json& s) {
  return JsonText(s, "kind") + " " + JsonText(s, "tenant") + "/" + JsonText(s, "namespace") + "/" +
         JsonText(s, "name") + "#" + JsonText(s, "shard");
}

// What the asked broker replicates: the shards it leads (one row per follower and log) and the
// shards it follows (one row per log). Other leaders' shards: ask them.
void PrintReplication(const Json& answer) {
  std::cout << "\nreplication led by " << JsonText(answer, "node_id") << "\n";
  std::vector<Row> led;
  for (const auto& s : ArrayField(answer, "led")) {
    for (const auto& f : ArrayField(s, "followers")) {
      std::string halted = JsonText(f, "halted");
      led.push_back({ShardName(s), Cell(s, "generation"), Cell(f, "node_id"), Cell(f, "log"),
                     Cell(f, "confirmed"), Cell(f, "lag"), f.value("in_sync", false) ? "yes" : "no",
                     halted.empty() ? "-" : halted});
    }
  }
  PrintTable({"SHARD", "GENERATION", "REPLICA", "LOG", "DURABLE", "LAG", "IN_SYNC", "HALTED"}, led);
  std::cout << "\nreplication followed on " << JsonText(answer, "node_id") << "\n";
  std::vector<Row> followed;
  for (const auto& s : ArrayField(answer, "followed")) {
    for (const auto& l : ArrayField(s, "logs")) {
      std::string halted = JsonText(l, "halted");
      followed.push_back({ShardName(s), Cell(s, "generation"), Cell(l, "log"), Cell(l, "tail"),
                          Cell(l, "durable"), halted.empty() ? "-" : halted});
    }
  }
  PrintTable({"SHARD", "GENERATION", "LOG", "TAIL", "DURABLE", "HALTED"}, followed);
}

}  // namespace

void RegisterClusterCommands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("cluster", "inspect a Felix cluster");
  group->require_subcommand(1);
  auto conn = std::make_shared<AdminConnection>();
  CLI::App* status = group->add_subcommand(
      "status",
      "nodes, controller, per-shard leader/replicas/generation (GET /v1/cluster) and the "
      "replication this broker runs (GET /replication)");
  AddAdminConnectionOptions(status, *conn);
  status->callback([conn] {
    Json answer = AdminCall(*conn, "GET", "/v1/cluster");
    if (conn->json) {
      std::cout << answer.dump() << "\n";
      return;
    }
    PrintStatus(answer);
    PrintReplication(AdminCall(*conn, "GET", "/replication"));
  });

  // felix cluster move: POST /v1/shard-moves, then (unless --no-wait) watch /v1/cluster until
  // the target leads the shard.
  struct MoveArgs {
    std::string stream, cache, ns = "default", to;
    uint32_t shard = 0;
    bool no_wait = false;
    double timeout_s = 30;
  };
  auto args = std::make_shared<MoveArgs>();
  auto mconn = std::make_shared<AdminConnection>();
  CLI::App* move = group->add_subcommand(
      "move",
      "hand a shard's leadership to another broker (copied in first when not a replica; publishes "
      "in the window are refused retryably, nothing acknowledged is lost)");
  AddAdminConnectionOptions(move, *mconn);
  auto* which = move->add_option_group("shard", "the stream or cache");
  which->add_option("--stream", args->stream, "stream name");
  which->add_option("--cache", args->cache, "cache name");
  which->require_option(1);
  move->add_option("--namespace", args->ns, "namespace (default: default)");
  move->add_option("--shard", args->shard, "shard number (default 0)");
  move->add_option("--to", args->to, "node id of the broker that is to lead")->required();
  move->add_flag("--no-wait", args->no_wait, "return once the move is requested");
  move->add_option("--timeout", args->timeout_s, "seconds to wait for the cut-over (default 30)");
  move->callback([args, mconn] {
    const bool cache = !args->cache.empty();
    const std::string name = cache ? args->cache : args->stream;
    Json body{{"kind", cache ? "cache" : "stream"},
              {"namespace", args->ns},
              {"name", name},
              {"shard", args->shard},
              {"to", args->to}};
    Json answer = AdminCall(*mconn, "POST", "/v1/shard-moves", &body);
    const std::string shard = JsonText(answer, "shard");
    if (JsonText(answer, "status") == "already_leader") {
      std::cout << args->to << " already leads " << shard << "\n";
      return;
    }
    std::cout << "move of " << shard << " from " << JsonText(answer, "from") << " to " << args->to
              << " requested\n";
    if (args->no_wait) return;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(args->timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      Json status = AdminCall(*mconn, "GET", "/v1/cluster");
      for (const auto& s : ArrayField(status, "shards")) {
        const bool same = JsonText(s, "kind") == JsonText(body, "kind") &&
                          JsonText(s, "namespace") == args->ns && JsonText(s, "name") == name &&
                          JsonText(s, "shard") == std::to_string(args->shard);
        if (same && JsonText(s, "leader") == args->to && JsonText(s, "state") == "active") {
          std::cout << args->to << " leads " << shard << " at generation "
                    << JsonText(s, "generation") << "\n";
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::cerr << "felix: " << shard << " not led by " << args->to << " within " << args->timeout_s
              << " s (see felix cluster status)\n";
    std::exit(1);
  });
}

}  // namespace felix::cli
