// `felix group`: consumer groups with the C++ client library.
//   felix group consume STREAM GROUP     poll, print offset<TAB>payload, ack (unless --no-ack)
//   felix group describe STREAM GROUP    cursor, tail, in flight, owed, dead letters
//   felix group dead-letters list STREAM GROUP
//   felix group dead-letters redrive STREAM GROUP OFFSET...
// Like `pub`/`sub`, the broker address, tenant, CA file and token come from the credential file
// the broker writes in its data directory (the token is minted locally, scoped to the one
// stream: stream.subscribe, which implies group.consume, and stream.manage, which implies
// group.manage); --broker, --tenant, --token, --ca override each.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/client_connection.h"
#include "cli/command.h"
#include "felix/client.h"

namespace felix::cli {

namespace {

struct GroupConnection : ClientConnection {
  std::string stream;
  std::string group;
  uint32_t shard = 0;
};

void AddGroupOptions(CLI::App* cmd, GroupConnection& c) {
  cmd->add_option("stream", c.stream, "STREAM or NAMESPACE/STREAM")->required();
  cmd->add_option("group", c.group, "consumer group name")->required();
  cmd->add_option("--shard", c.shard, "shard of the stream (default 0)");
  AddClientConnectionOptions(cmd, c);
}

GroupRef ParseGroup(const GroupConnection& c) {
  auto stream = StreamRef::Parse(c.stream);
  if (!stream) Die(stream.error().message, 2);
  return GroupRef{*stream, c.shard, c.group};
}

std::unique_ptr<Client> Connect(const GroupConnection& c, const GroupRef& group) {
  return ConnectOrDie(
      ResolveClientOptions(c, group.stream.namespace_name, group.stream.stream,
                           {"stream.subscribe:stream:{scope}", "stream.manage:stream:{scope}"}));
}

struct ConsumeOptions {
  size_t count = 0;  // 0: until a poll finds nothing within max_wait
  int64_t max_wait_ms = 5000;
  uint32_t batch = 100;
  bool no_ack = false;
};

void RunConsume(const GroupConnection& c, const ConsumeOptions& options) {
  GroupRef group = ParseGroup(c);
  auto client = Connect(c, group);
  size_t handled = 0;
  while (options.count == 0 || handled < options.count) {
    uint32_t want = options.batch;
    if (options.count != 0)
      want = static_cast<uint32_t>(std::min<size_t>(want, options.count - handled));
    auto records = client->GroupPoll(
        group, {.max_records = want, .wait = std::chrono::milliseconds(options.max_wait_ms)});
    if (!records) Die("poll failed: " + records.error().ToString());
    if (records->empty()) break;  // nothing within --max-wait
    for (const auto& r : *records) {
      std::cout << r.offset << "\t" << r.payload << "\n";
      if (!options.no_ack) {
        if (auto acked = client->GroupAck(group, r.offset); !acked)
          Die("ack of offset " + std::to_string(r.offset) + " failed: " + acked.error().ToString());
      }
      ++handled;
    }
    std::cout.flush();
  }
  if (options.count != 0 && handled < options.count) {
    Die("only " + std::to_string(handled) + " of " + std::to_string(options.count) +
            " records within --max-wait",
        3);
  }
}

void RunDescribe(const GroupConnection& c) {
  GroupRef group = ParseGroup(c);
  auto client = Connect(c, group);
  auto info = client->GroupDescribe(group);
  if (!info) Die(info.error().ToString());
  std::cout << "committed\t" << (info->committed ? std::to_string(*info->committed) : "none")
            << "\ntail\t" << info->tail << "\nin_flight\t" << info->in_flight << "\nowed\t"
            << info->owed << "\ndead_letters\t" << info->dead_letters << "\n";
}

void RunListDeadLetters(const GroupConnection& c) {
  GroupRef group = ParseGroup(c);
  auto client = Connect(c, group);
  auto offsets = client->GroupDeadLetters(group);
  if (!offsets) Die(offsets.error().ToString());
  for (uint64_t o : *offsets) std::cout << o << "\n";
}

void RunRedrive(const GroupConnection& c, const std::vector<uint64_t>& offsets) {
  GroupRef group = ParseGroup(c);
  auto client = Connect(c, group);
  for (uint64_t o : offsets) {
    if (auto redriven = client->GroupRedrive(group, o); !redriven)
      Die("redrive of offset " + std::to_string(o) + " failed: " + redriven.error().ToString());
    std::cout << "redriven\t" << o << "\n";
  }
}

}  // namespace

void RegisterGroupCommands(CLI::App& app) {
  CLI::App* g = app.add_subcommand("group", "consumer groups (queues) on durable streams");
  g->require_subcommand(1);

  auto consume_conn = std::make_shared<GroupConnection>();
  auto consume = std::make_shared<ConsumeOptions>();
  CLI::App* c = g->add_subcommand(
      "consume", "poll GROUP on one shard of STREAM; prints offset<TAB>payload, acks each");
  AddGroupOptions(c, *consume_conn);
  c->add_option("--count", consume->count, "exit after N records (default: until idle)");
  c->add_option("--max-wait", consume->max_wait_ms,
                "ms a poll waits for records; an empty poll ends the command (default 5000)");
  c->add_option("--batch", consume->batch, "records per poll (default 100)");
  c->add_flag("--no-ack", consume->no_ack, "print without acknowledging (records come back)");
  c->callback([consume_conn, consume] { RunConsume(*consume_conn, *consume); });

  auto describe_conn = std::make_shared<GroupConnection>();
  CLI::App* d = g->add_subcommand("describe", "cursor, tail, in flight, owed and dead letters");
  AddGroupOptions(d, *describe_conn);
  d->callback([describe_conn] { RunDescribe(*describe_conn); });

  CLI::App* dl = g->add_subcommand("dead-letters", "list or redrive dead-lettered records");
  dl->require_subcommand(1);
  auto list_conn = std::make_shared<GroupConnection>();
  CLI::App* l = dl->add_subcommand("list", "dead-lettered offsets, lowest first");
  AddGroupOptions(l, *list_conn);
  l->callback([list_conn] { RunListDeadLetters(*list_conn); });

  auto redrive_conn = std::make_shared<GroupConnection>();
  auto redrive_offsets = std::make_shared<std::vector<uint64_t>>();
  CLI::App* r = dl->add_subcommand("redrive", "make dead-lettered offsets owed again");
  AddGroupOptions(r, *redrive_conn);
  r->add_option("offsets", *redrive_offsets, "offsets to redrive")->required();
  r->callback([redrive_conn, redrive_offsets] { RunRedrive(*redrive_conn, *redrive_offsets); });
}

}  // namespace felix::cli
