#include "fault/fault_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <type_traits>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fault/net_lab.h"
#include "fault/shell.h"
#include "felix/client.h"
#include "support/child_process.h"
#include "support/cluster_harness.h"
#include "wire/shard_hash.h"

namespace felix::fault {

using Json = nlohmann::json;
using felix::testing::ClusterHarness;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr char kStream[] = "fault";
constexpr char kCache[] = "counters";  // one shard: every counter lives on its leader
constexpr int kCounters = 3;

// Polls `pred` until it holds or `limit` passes: cluster state changes in other processes and
// reaches us only through their HTTP endpoints, so there is no event to wait on.
bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

// Fills `op`'s outcome from a publish answer. A refusal the broker classed retry / retry_after /
// redirect is a definite failure; anything else that is not an ack (timeout, lost connection,
// outcome_unknown, fatal) is indeterminate. Returns false when the connection must be dropped
// (a client-side failure): a late answer must never be taken for a later request's.
template <typename T>
bool NoteAnswer(Op& op, const felix::ClientResult<T>& answer) {
  if (answer) {
    op.outcome = Outcome::kOk;
    if constexpr (std::is_same_v<T, felix::PublishReceipt>) op.offset = answer->offset;
    return true;
  }
  bool broker_said = static_cast<uint16_t>(answer.error().code) <
                     static_cast<uint16_t>(felix::ClientErrorCode::kUnknown);
  op.outcome = broker_said ? RefusalOutcome(felix::RetryClassName(answer.error().retry))
                           : Outcome::kIndeterminate;
  op.error = answer.error().ToString();
  return broker_said;
}

int PortOf(const std::string& addr) {
  return std::stoi(addr.substr(addr.rfind(':') + 1));
}

std::string HostOf(const std::string& addr) {
  return addr.substr(0, addr.rfind(':'));
}

// The network lab when partitions are wanted and possible; *network says which it is.
std::unique_ptr<NetLab> MakeLab(const FaultRunOptions& options, std::string* network) {
  if (!options.partitions) {
    *network = "loopback; partitions OFF: not asked for";
    return nullptr;
  }
  if (options.brokers < 3) {
    *network = "loopback; partitions OFF: one broker, no link between brokers to cut";
    return nullptr;
  }
  std::string why;
  auto lab = NetLab::Create(3, &why);
  *network = lab ? lab->Describe() : "loopback; partitions OFF: " + why;
  return lab;
}

class Run {
 public:
  explicit Run(const FaultRunOptions& options)
      : options_(options), lab_(MakeLab(options, &network_)), cluster_(MakeClusterOptions()) {}

  FaultRunResult Go();

 private:
  felix::testing::ClusterOptions MakeClusterOptions() const {
    felix::testing::ClusterOptions o;
    o.nodes = options_.brokers;
    // A standalone broker uses no etcd: one member is started (the harness always starts one)
    // and never named to the broker.
    o.etcd_members = options_.standalone ? 1 : options_.etcd_members;
    o.env = options_.env;
    o.env["FELIX_DURABLE_FSYNC_MODE"] = "on_commit";
    // Claims of polls whose answer was lost lapse soon (the group drain waits for them).
    o.env["FELIX_GROUP_VISIBILITY_TIMEOUT_MS"] = "2000";
    // The fsync-EIO fault poisons logs; the restart that heals it reopens them (test seam).
    o.env["FELIX_TEST_CLEAR_POISON"] = "1";
    // A follower's loop applies a small Quorum batch itself only while its applies are quick
    // (1 ms by default), which under the sanitizers they often are not: every other seed lets
    // it do so however slow they are, so runs reach both apply paths (run.json counts them).
    if (options_.quorum && options_.seed % 2 == 0 &&
        !o.env.count("FELIX_FOLLOWER_INLINE_APPLY_US")) {
      o.env["FELIX_FOLLOWER_INLINE_APPLY_US"] = "100000";
    }
    // Small segments and a pass a second: followers run their retention and a cache's
    // followers their compaction (follower_compaction.h) under the nemesis, and a promoted
    // follower folds a log whose head it deleted itself.
    if (options_.quorum) {
      o.env.emplace("FELIX_DURABLE_SEGMENT_BYTES", "65536");
      o.env.emplace("FELIX_DURABLE_RETENTION_INTERVAL_SECONDS", "1");
    }
    if (lab_) {
      o.etcd_host = lab_->etcd_host();
      for (int n = 1; n <= o.nodes; ++n) {
        o.node_hosts.push_back(lab_->broker_host(n));
        o.node_launch_prefix.push_back(lab_->LaunchPrefix(n));
      }
    }
    return o;
  }
  int64_t NowUs() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0_).count();
  }
  std::pair<int, Json> Admin(int n, const std::string& method, const std::string& path,
                             const Json& body = nullptr, std::chrono::milliseconds timeout = 5s);
  double Metric(int n, const std::string& name);
  // The sum of every series of `name` (any labels) on node n; -1 when unreadable.
  double MetricSum(int n, const std::string& name);
  // Replaces node n's FELIX_STORAGE_FAULT_FILE (atomically: the broker re-reads it every 10 ms).
  bool WriteFaultFile(int n, const std::string& text);
  std::string FaultFile(int n) const { return options_.dir + "/faults-n" + std::to_string(n); }
  // shard → leader node number of the stream (or the cache), from node n's /v1/cluster (only
  // shards with a leader).
  std::map<uint32_t, int> Leaders(int n, const std::string& kind = "stream");
  bool Setup(FaultRunResult& result);
  // A client whose first seed is node `node`. With `quorum` every broker is a seed (the client
  // library routes to owners and skips a dead seed); node 0 then rotates the first seed.
  std::unique_ptr<felix::Client> Connect(int node);
  // The node a client op targets and names in the history: the shard's fixed leader, or 0
  // ("routed, unknown") with `quorum`, where leaders move.
  int Target(int leader) const { return options_.quorum ? 0 : leader; }
  // The stream's shard leaders (kind "cache": the cache's) as the first answering broker sees
  // them with every shard led; empty when none does.
  std::map<uint32_t, int> LeadersNow(const std::string& kind = "stream");
  // The sum of the generations of the stream's and the cache's shards as node n sees them: it
  // grows with every failover, move or replica change (-1 when unreadable).
  int64_t GenerationSum(int n);
  void Publisher(int client);
  void Reader();
  void CacheLoop(int client, const std::function<bool(felix::Client&, Op&)>& request);
  void Counter();
  void CacheClient(int client);
  // One group poll on shard 0's leader and the acks (and, with `nacks`, some nacks) of what it
  // claimed: the number of records claimed, -1 when a request failed.
  int GroupStep(std::unique_ptr<felix::Client>& c, std::mt19937_64& rng, bool nacks);
  void GroupConsumer();
  // After the heal: polls and acks until the group owes nothing (≤ 30 s).
  bool DrainGroup(FaultRunResult& result);
  // Disk and clock faults through the fault file: inject and prove, then heal.
  void InjectLocal(const Fault& fault, FaultOutcome& out);
  void HealLocal(const Fault& fault, FaultOutcome& out);
  std::vector<Disruption> Disruptions(const FaultRunResult& result) const;
  // The node a disk fault goes to: `node` when it leads a shard, else a leader.
  int DiskTarget(int node);
  // Puts the clock probe (TTL 10 min) on the cache leader and reads it back: present?
  std::optional<bool> ClockProbe(bool put);
  // etcd member m's own id and the leader it follows (POST /v3/maintenance/status), if it answers.
  std::optional<std::pair<std::string, std::string>> EtcdStatus(int m);
  // Kills a follower or the leader of a multi-member etcd and proves the survivors lead on.
  void InjectEtcd(const Fault& fault, FaultOutcome& out);
  // Assignment faults (Quorum regime): a planned move of a stream shard to fault.node, proved by
  // the shard's leader becoming it (a move is not undone: its heal is the cluster settling); or
  // a SIGTERM of fault.node, proved by a clean exit after it handed off every shard it led,
  // healed by a restart.
  void InjectAssignment(const Fault& fault, FaultOutcome& out);
  void HealEtcd(FaultOutcome& out);
  void PauseAllEtcd(bool pause);
  void CheckCache(FaultRunResult& result);
  bool ReadCounters(FaultRunResult& result, std::map<std::string, int64_t>& values);
  FaultOutcome Inject(const Fault& fault);
  // Network faults (lab_ set): cut or slow links, prove the effect, and the heal's check.
  void InjectNetwork(const Fault& fault, FaultOutcome& out);
  bool NetworkHealed(std::string* missing);
  bool AllReadyAndLed(std::string* missing);
  // Quorum regime (cluster-etcd.md §6 liveness: "nothing halted, a caught-up replica reported"):
  // every shard of the stream and the cache is led by exactly one broker's replication host, with
  // every follower of every log caught up (lag 0) and none halted, and no broker's follower side
  // halted.
  bool ReplicationSettled(std::string* missing);
  std::string UnreplicatedShards(const std::set<std::pair<std::string, uint32_t>>& led);
  bool Liveness(FaultRunResult& result);
  bool ReadFinal(FaultRunResult& result, FinalLogs& logs);
  void WriteFiles(const FaultRunResult& result, const FinalLogs& logs);

  FaultRunOptions options_;
  std::string network_;
  std::unique_ptr<NetLab> lab_;  // before cluster_: outlives the brokers in its namespaces
  ClusterHarness cluster_;
  Clock::time_point t0_ = Clock::now();
  std::string token_;
  std::vector<std::string> keys_;  // shard → a key routed to it
  // Fixed before the clients start; with `quorum` re-read after the heal (written only while no
  // client thread runs).
  std::map<uint32_t, int> leaders_;
  int cache_leader_ = 0;   // the counters cache's one shard
  felix::GroupRef group_;  // the consumer group on shard 0
  History history_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> not_sent_{0};
  std::atomic<int> next_seed_{0};          // Connect(0)'s rotation
  std::map<uint32_t, int> first_leaders_;  // leaders_ as set up
  int64_t first_generations_ = -1;         // GenerationSum as set up
};

std::pair<int, Json> Run::Admin(int n, const std::string& method, const std::string& path,
                                const Json& body, std::chrono::milliseconds timeout) {
  httplib::Client client(HostOf(cluster_.http_addr(n)), PortOf(cluster_.http_addr(n)));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  httplib::Headers headers{{"Authorization", "Bearer " + cluster_.admin_token()}};
  auto r = method == "POST" ? client.Post(path, headers, body.dump(), "application/json")
                            : client.Get(path, headers);
  if (!r) return {0, nullptr};
  return {r->status, r->body.empty() ? Json() : Json::parse(r->body, nullptr, false)};
}

double Run::Metric(int n, const std::string& name) {
  auto text = cluster_.AdminGet(n, "/metrics");
  if (!text) return -1;
  size_t at = text->find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text->substr(at + name.size() + 2));
}

double Run::MetricSum(int n, const std::string& name) {
  auto text = cluster_.AdminGet(n, "/metrics");
  if (!text) return -1;
  double sum = 0;
  for (size_t at = text->find("\n" + name); at != std::string::npos;
       at = text->find("\n" + name, at + 1)) {
    size_t end = at + 1 + name.size();
    if (end >= text->size() || ((*text)[end] != ' ' && (*text)[end] != '{')) continue;
    size_t value_at = end + 1;
    if ((*text)[end] == '{') {
      size_t close = text->find("} ", end);
      if (close == std::string::npos) continue;
      value_at = close + 2;
    }
    sum += std::stod(text->substr(value_at));
  }
  return sum;
}

bool Run::WriteFaultFile(int n, const std::string& text) {
  std::string tmp = FaultFile(n) + ".tmp";
  std::ofstream(tmp) << text;
  return std::rename(tmp.c_str(), FaultFile(n).c_str()) == 0;
}

std::map<uint32_t, int> Run::Leaders(int n, const std::string& kind) {
  std::map<uint32_t, int> out;
  if (options_.standalone) {  // no /v1/cluster: the one broker holds every shard
    const uint32_t shards = kind == "stream" ? options_.shards : 1;
    for (uint32_t shard = 0; shard < shards; ++shard) out[shard] = 1;
    return out;
  }
  Json status = Admin(n, "GET", "/v1/cluster").second;
  if (!status.is_object() || !status.contains("shards")) return out;
  for (const auto& s : status["shards"]) {
    std::string leader = s.value("leader", "");
    std::string name = kind == "stream" ? kStream : kCache;
    if (s.value("kind", "") == kind && s.value("name", "") == name && leader.size() > 1) {
      out[s["shard"].get<uint32_t>()] = std::stoi(leader.substr(1));
    }
  }
  return out;
}

std::map<uint32_t, int> Run::LeadersNow(const std::string& kind) {
  const size_t shards = kind == "stream" ? options_.shards : 1;
  for (int n = 1; n <= cluster_.size(); ++n) {
    auto leaders = Leaders(n, kind);
    if (leaders.size() == shards) return leaders;
  }
  return {};
}

int64_t Run::GenerationSum(int n) {
  Json status = Admin(n, "GET", "/v1/cluster").second;
  if (!status.is_object() || !status.contains("shards")) return -1;
  int64_t sum = 0;
  for (const auto& s : status["shards"]) {
    std::string name = s.value("name", "");
    if (name == kStream || name == kCache) sum += s.value("generation", int64_t{0});
  }
  return sum;
}

bool Run::Setup(FaultRunResult& result) {
  auto fail = [&](std::string why) {
    result.setup_error = std::move(why);
    return false;
  };
  for (int n = 1; n <= cluster_.size(); ++n) {
    cluster_.SetNodeEnv(n, "FELIX_STORAGE_FAULT_FILE", FaultFile(n));
    // The cluster settings off: a single node (its internal listener keeps the harness's free
    // port rather than the default 5001, which a parallel test may hold).
    if (options_.standalone) {
      for (const char* name :
           {"FELIX_NODE_ID", "FELIX_ETCD_ENDPOINTS", "FELIX_CLIENT_ADVERTISE_ADDR",
            "FELIX_NODE_ADVERTISE_ADDR", "FELIX_CLUSTER_NAME"}) {
        cluster_.SetNodeEnv(n, name, std::nullopt);
      }
    }
  }
  if (!cluster_.StartAll()) return fail("cluster: " + cluster_.error());
  // RF 1 `Leader`, or RF 3 `Quorum` (failover under the nemesis).
  const Json regime = options_.quorum ? Json{{"replication_factor", 3}, {"consistency", "Quorum"}}
                                      : Json{{"replication_factor", 1}, {"consistency", "Leader"}};
  Json stream_body = Json{{"stream", kStream},
                          {"durable", true},
                          {"shards", options_.shards},
                          {"fsync_mode", "on_commit"}};
  stream_body.update(regime);
  auto [status, body] =
      Admin(1, "POST", "/v1/tenants/default/namespaces/default/streams", stream_body);
  if (status != 201) return fail("create stream: " + std::to_string(status) + " " + body.dump());
  if (!Eventually([&] { return Leaders(1).size() == options_.shards; }, 30s)) {
    return fail("not every shard got a leader: " + Admin(1, "GET", "/v1/cluster").second.dump());
  }
  leaders_ = Leaders(1);
  Json cache_body = Json{{"cache", kCache}, {"shards", 1}, {"durable", true}};
  cache_body.update(regime);
  auto cache = Admin(1, "POST", "/v1/tenants/default/namespaces/default/caches", cache_body);
  if (cache.first != 201) return fail("create cache: " + cache.second.dump());
  if (!Eventually([&] { return Leaders(1, "cache").size() == 1; }, 30s)) {
    return fail("the cache got no leader");
  }
  cache_leader_ = Leaders(1, "cache").at(0);
  first_leaders_ = leaders_;
  first_leaders_[options_.shards] = cache_leader_;  // the cache's shard after the stream's
  first_generations_ = GenerationSum(1);
  // Every broker must know the stream and agree on its leaders before clients go to them.
  for (int n = 2; n <= cluster_.size(); ++n) {
    if (!Eventually([&] { return Leaders(n) == leaders_; }, 30s)) {
      return fail("node " + std::to_string(n) + " disagrees on leaders");
    }
  }
  auto token =
      Admin(1, "POST", "/v1/tenants/default/tokens",
            Json{{"subject", "fault-run"},
                 {"permissions",
                  {"stream.publish:stream:default/*/*", "stream.subscribe:stream:default/*/*",
                   "cache.read:cache:default/default/*", "cache.write:cache:default/default/*",
                   "group.manage:group:default/default/fault/*"}}});
  if (token.first != 200) return fail("token: " + token.second.dump());
  token_ = token.second.value("felix_token", "");
  for (uint32_t shard = 0; shard < options_.shards; ++shard) {
    for (int i = 0;; ++i) {
      std::string key = "k" + std::to_string(i);
      if (wire::ShardModulo(options_.shards, key) == shard) {
        keys_.push_back(key);
        break;
      }
    }
  }
  group_ = felix::GroupRef{felix::StreamRef{"default", kStream}, 0, "g"};
  auto c = Connect(Target(leaders_.at(0)));
  if (!c) return fail("group: no connection to shard 0's leader");
  if (auto seek = c->GroupSeek(group_, felix::StartPosition::Earliest(), true); !seek) {
    return fail("group: " + seek.error().ToString());
  }
  // cluster-etcd.md §6 harness startup: a publish through a non-owner (forwarded) is
  // acknowledged on every shard before the workload starts; recorded like any publish.
  if (cluster_.size() > 1) {
    for (uint32_t shard = 0; shard < options_.shards; ++shard) {
      const int via = leaders_.at(shard) % cluster_.size() + 1;
      felix::ClientOptions o;
      o.broker = cluster_.client_addr(via);
      o.ca_file = cluster_.ca_file();
      o.token = token_;
      o.request_timeout = 5s;
      o.ack_on_commit = true;
      o.route_to_owners = false;  // everything through `via`, which forwards to the owner
      auto forwarded = felix::Client::Connect(o);
      if (!forwarded) return fail("forwarding probe: no connection to n" + std::to_string(via));
      Op op;
      op.client = 999;
      op.kind = OpKind::kPublish;
      op.shard = shard;
      op.key = keys_[shard];
      op.value = "forwarded-" + std::to_string(shard);
      op.node = via;
      felix::PublishOptions po;
      po.key = op.key;
      op.invoke_us = NowUs();
      auto r = (*forwarded)->Publish(felix::StreamRef{"default", kStream}, {op.value}, po);
      op.complete_us = NowUs();
      NoteAnswer(op, r);
      const bool acked = op.outcome == Outcome::kOk;
      history_.Add(std::move(op));
      if (!acked) {
        return fail("shard " + std::to_string(shard) + ": a publish through non-owner n" +
                    std::to_string(via) +
                    " was not acknowledged: " + (r ? std::string("?") : r.error().ToString()));
      }
    }
  }
  return true;
}

std::unique_ptr<felix::Client> Run::Connect(int node) {
  felix::ClientOptions o;
  if (!options_.quorum) {
    o.broker = cluster_.client_addr(node);
  } else {
    const int size = cluster_.size();
    if (node == 0) node = 1 + next_seed_++ % size;
    for (int i = 0; i < size; ++i) {
      o.broker += (i == 0 ? "" : ",") + cluster_.client_addr((node - 1 + i) % size + 1);
    }
  }
  o.ca_file = cluster_.ca_file();
  o.token = token_;
  o.connect_timeout = 2s;
  o.request_timeout = 2s;
  o.ack_on_commit = true;
  auto client = felix::Client::Connect(o);
  if (!client) return nullptr;
  return std::move(*client);
}

// One client: keyed publishes of unique values ("c<client>-<seq>") to random shards, each sent
// to the shard's leader and waited for (NoteAnswer classifies the answer).
void Run::Publisher(int client) {
  std::mt19937_64 rng(options_.seed * 1009 + static_cast<uint64_t>(client));
  std::map<int, std::unique_ptr<felix::Client>> clients;
  uint64_t seq = 0;
  felix::StreamRef stream{"default", kStream};
  while (!stop_.load()) {
    uint32_t shard = static_cast<uint32_t>(rng() % options_.shards);
    int node = Target(leaders_.at(shard));
    auto& c = clients[node];
    if (!c) c = Connect(node);
    if (!c) {
      ++not_sent_;
      std::this_thread::sleep_for(100ms);  // back off from a broker that is down
      continue;
    }
    Op op;
    op.client = client;
    op.kind = OpKind::kPublish;
    op.shard = shard;
    op.key = keys_[shard];
    // One publish in four is a batch of three records (rule 8: all or nothing).
    std::vector<std::string> values(rng() % 4 == 0 ? 3 : 1);
    for (auto& v : values) v = "c" + std::to_string(client) + "-" + std::to_string(seq++);
    op.value = values[0];
    if (values.size() > 1) op.batch = values;
    op.node = node;
    felix::PublishOptions po;
    po.key = op.key;
    op.invoke_us = NowUs();
    auto r = c->Publish(stream, values, po);
    op.complete_us = NowUs();
    if (!NoteAnswer(op, r)) c.reset();
    bool refused = op.outcome == Outcome::kFail;
    history_.Add(std::move(op));
    if (refused) std::this_thread::sleep_for(20ms);  // back off as a client would
  }
}

// Snapshot reads: subscribe to a random shard from earliest on its leader and read up to the
// tail it reported. A read cut short (fault) is still recorded with what it returned.
void Run::Reader() {
  std::mt19937_64 rng(options_.seed * 7919);
  felix::StreamRef stream{"default", kStream};
  std::map<uint32_t, uint64_t> seen_tail;  // shard → the highest live_offset a read reported
  while (!stop_.load()) {
    uint32_t shard = static_cast<uint32_t>(rng() % options_.shards);
    int node = Target(leaders_.at(shard));
    auto c = Connect(node);
    if (!c) {
      std::this_thread::sleep_for(100ms);
      continue;
    }
    Op op;
    op.client = 100;
    op.kind = OpKind::kRead;
    op.shard = shard;
    op.node = node;
    op.invoke_us = NowUs();
    felix::SubscribeOptions so;
    so.shard = shard;
    so.start = felix::StartPosition::Earliest();
    // Every other read resumes at an offset below a tail an earlier read saw (the checker then
    // wants consecutive offsets from exactly there).
    if (rng() % 2 == 0 && seen_tail[shard] > 0) {
      op.offset = rng() % seen_tail[shard];
      so.start = felix::StartPosition::Offset(*op.offset);
    }
    auto sub = c->Subscribe(stream, so);
    if (!sub) {  // nothing read: nothing to check
      std::this_thread::sleep_for(100ms);
      continue;
    }
    uint64_t tail = (*sub)->live_offset().value_or(0);
    seen_tail[shard] = std::max(seen_tail[shard], tail);
    op.outcome = Outcome::kOk;
    while (op.read.empty() || op.read.back().first + 1 < tail) {
      if (tail == 0) break;
      auto event = (*sub)->Next(2s);
      if (!event || !*event) {
        op.outcome = Outcome::kIndeterminate;
        op.error = event ? "timeout" : event.error().ToString();
        break;
      }
      AppendRead(op.read, (*event)->offset.value_or(UINT64_MAX), (*event)->skipped_before,
                 (*event)->payload);
    }
    op.complete_us = NowUs();
    history_.Add(std::move(op));
    std::this_thread::sleep_for(200ms);  // pacing: reads are snapshots, not a stream
  }
}

// One client thread on the cache's leader: `request` fills and sends one op (after invoke_us is
// set) and returns false when the connection must be dropped; the loop records the op, backs
// off after a refusal and reconnects as needed.
void Run::CacheLoop(int client, const std::function<bool(felix::Client&, Op&)>& request) {
  std::unique_ptr<felix::Client> c;
  const int node = Target(cache_leader_);
  while (!stop_.load()) {
    if (!c) c = Connect(node);
    if (!c) {
      std::this_thread::sleep_for(100ms);  // back off from a broker that is down
      continue;
    }
    Op op;
    op.client = client;
    op.node = node;
    op.invoke_us = NowUs();
    bool keep = request(*c, op);
    op.complete_us = NowUs();
    if (!keep) c.reset();
    bool refused = op.outcome == Outcome::kFail;
    history_.Add(std::move(op));
    if (refused) std::this_thread::sleep_for(20ms);
  }
}

// Counter adds of 1..5 to counters "n0".."n2" on the cache's leader (CounterAdd is not
// deduplicated: an add whose answer was lost is indeterminate).
void Run::Counter() {
  std::mt19937_64 rng(options_.seed * 104729);
  felix::CacheRef cache{"default", kCache};
  CacheLoop(50, [&](felix::Client& c, Op& op) {
    op.kind = OpKind::kAdd;
    op.key = "n" + std::to_string(rng() % kCounters);
    op.delta = 1 + static_cast<int64_t>(rng() % 5);
    return NoteAnswer(op, c.CounterAdd(cache, op.key, op.delta));
  });
}

// Cache puts (unique values "p<client>-<seq>"), gets and deletes on keys "r0".."r<n-1>" of the
// cache's leader: a history for the register model of porcupine/ (rule 7, no stale read).
void Run::CacheClient(int client) {
  std::mt19937_64 rng(options_.seed * 15485863 + static_cast<uint64_t>(client));
  felix::CacheRef cache{"default", kCache};
  uint64_t seq = 0;
  CacheLoop(client, [&](felix::Client& c, Op& op) {
    op.key = "r" + std::to_string(rng() % static_cast<uint64_t>(std::max(1, options_.cache_keys)));
    uint64_t roll = rng() % 10;
    if (roll < 4) {
      op.kind = OpKind::kPut;
      op.value = "p" + std::to_string(client) + "-" + std::to_string(seq++);
      return NoteAnswer(op, c.CachePut(cache, op.key, op.value));
    }
    op.kind = roll < 8 ? OpKind::kGet : OpKind::kDelete;
    auto r = op.kind == OpKind::kGet ? c.CacheGet(cache, op.key) : c.CacheDelete(cache, op.key);
    if (r && *r) {
      op.found = true;
      op.value = **r;
    }
    return NoteAnswer(op, r);
  });
}

int Run::GroupStep(std::unique_ptr<felix::Client>& c, std::mt19937_64& rng, bool nacks) {
  const int node = Target(leaders_.at(0));
  if (!c) c = Connect(node);
  if (!c) {
    std::this_thread::sleep_for(100ms);  // back off from a broker that is down
    return -1;
  }
  auto op_for = [&](OpKind kind) {
    Op op;
    op.client = 70;
    op.kind = kind;
    op.shard = group_.shard;
    op.key = group_.group;
    op.node = node;
    return op;
  };
  Op poll = op_for(OpKind::kPoll);
  felix::GroupPollOptions po;
  po.max_records = 20;
  po.wait = 200ms;
  po.visibility = 2000ms;
  poll.invoke_us = NowUs();
  auto claimed = c->GroupPoll(group_, po);
  poll.complete_us = NowUs();
  if (claimed) {
    for (const auto& r : *claimed) poll.read.emplace_back(r.offset, r.payload);
  }
  bool keep = NoteAnswer(poll, claimed);
  bool refused = poll.outcome == Outcome::kFail;
  history_.Add(std::move(poll));
  if (!keep) c.reset();
  if (!claimed) {
    if (refused) std::this_thread::sleep_for(20ms);
    return -1;
  }
  // Half of the polls' acks are sent together (Client::GroupAckAll), so the broker sees many
  // acks of the group at once and answers some from a shared cursor write (performance.md
  // change 32); each offset is recorded as its own ack with the call's span and outcome.
  std::vector<uint64_t> together;
  const bool ack_together = rng() % 2 == 0;
  for (const auto& record : *claimed) {
    // A tenth of first deliveries are handed back: each must come again (group checker).
    bool nack = nacks && record.attempts <= 1 && rng() % 10 == 0;
    if (!nack && ack_together) {
      together.push_back(record.offset);
      continue;
    }
    Op op = op_for(nack ? OpKind::kNack : OpKind::kAck);
    op.offset = record.offset;
    op.invoke_us = NowUs();
    auto answer = nack ? c->GroupNack(group_, record.offset) : c->GroupAck(group_, record.offset);
    op.complete_us = NowUs();
    keep = NoteAnswer(op, answer);
    history_.Add(std::move(op));
    if (!keep) {
      c.reset();
      return -1;
    }
  }
  if (!together.empty()) {
    const int64_t invoke_us = NowUs();
    auto answer = c->GroupAckAll(group_, together);
    const int64_t complete_us = NowUs();
    for (uint64_t offset : together) {
      Op op = op_for(OpKind::kAck);
      op.offset = offset;
      op.invoke_us = invoke_us;
      op.complete_us = complete_us;
      keep = NoteAnswer(op, answer);
      history_.Add(std::move(op));
    }
    if (!keep) {
      c.reset();
      return -1;
    }
  }
  return static_cast<int>(claimed->size());
}

// One consumer of group "g" on shard 0: polls, acks, and nacks a tenth of first deliveries.
void Run::GroupConsumer() {
  std::mt19937_64 rng(options_.seed * 31337);
  std::unique_ptr<felix::Client> c;
  while (!stop_.load()) GroupStep(c, rng, true);
}

bool Run::DrainGroup(FaultRunResult& result) {
  std::mt19937_64 rng(options_.seed * 31338);
  std::unique_ptr<felix::Client> c;
  auto deadline = Clock::now() + 30s;
  std::string last = "nothing polled";
  while (Clock::now() < deadline) {
    if (GroupStep(c, rng, false) != 0 || !c) continue;
    // Nothing available now: done when nothing is owed or claimed and the cursor is at the tail.
    auto info = c->GroupDescribe(group_);
    if (!info) {
      last = "describe: " + info.error().ToString();
      c.reset();
      continue;
    }
    last = "committed " + (info->committed ? std::to_string(*info->committed) : "none") + " tail " +
           std::to_string(info->tail) + " in_flight " + std::to_string(info->in_flight) + " owed " +
           std::to_string(info->owed) + " dead_letters " + std::to_string(info->dead_letters);
    if (info->owed == 0 && info->in_flight == 0 && info->committed == info->tail) {
      result.group_drain = "drained: " + last;
      return true;
    }
  }
  result.group_drain = "not drained within 30 s: " + last;
  return false;
}

// Runs porcupine-check on the history as written to the run's directory.
void Run::CheckCache(FaultRunResult& result) {
  std::string path = options_.dir + "/history.jsonl";
  if (auto written = history_.WriteFile(path); !written) {
    result.cache_report = "cannot write the history: " + written.error().message;
    return;
  }
  std::string checker = felix::testing::BuiltProgram("tests/fault/porcupine-check");
  int status =
      RunShell("'" + checker + "' -timeout 60s -html '" + options_.dir + "' '" + path + "'",
               &result.cache_report);
  result.cache_checked = status == 0 || status == 1;
  result.cache_linearizable = status == 0;
  if (!result.cache_checked) {
    result.cache_report =
        checker + " exited " + std::to_string(status) + ": " + result.cache_report;
  }
}

bool Run::ReadCounters(FaultRunResult& result, std::map<std::string, int64_t>& values) {
  auto c = Connect(Target(cache_leader_));
  if (!c) {
    result.final_read_error = "counters: no connection to n" + std::to_string(cache_leader_);
    return false;
  }
  for (int i = 0; i < kCounters; ++i) {
    std::string key = "n" + std::to_string(i);
    auto value = c->CounterGet(felix::CacheRef{"default", kCache}, key);
    if (!value) {
      result.final_read_error = "counter " + key + ": " + value.error().ToString();
      return false;
    }
    if (*value) values[key] = **value;
  }
  return true;
}

// Applies `fault`, proves it took effect, holds it, heals it.
FaultOutcome Run::Inject(const Fault& fault) {
  FaultOutcome out;
  out.fault = fault;
  out.start_us = NowUs();
  int n = fault.node;
  int peer = n % cluster_.size() + 1;
  // With one broker there is no peer to watch its node key go: the process being gone (a
  // kill) or its /ready going unanswered (a pause) is the whole proof.
  const bool alone = cluster_.size() == 1;
  auto peer_sees_it_gone = [&] {
    return alone ||
           Eventually([&] { return Metric(peer, "felix_cluster_nodes") == cluster_.size() - 1; },
                      15s);
  };
  const std::string peer_saw =
      alone ? " (one broker: no peer to watch)"
            : " saw its node key go (felix_cluster_nodes=" + std::to_string(cluster_.size() - 1) +
                  ")";
  switch (fault.kind) {
    case FaultKind::kKillBroker: {
      cluster_.Kill(n);
      bool gone = !cluster_.Running(n);
      bool seen = gone && peer_sees_it_gone();
      out.proved = gone && seen;
      out.proof = std::string("n") + std::to_string(n) + " process " +
                  (gone ? "gone" : "still running") + "; n" + std::to_string(peer) +
                  (seen ? peer_saw : " never saw it go");
      break;
    }
    case FaultKind::kPauseBroker: {
      cluster_.Pause(n);
      bool seen = peer_sees_it_gone();
      int status = Admin(n, "GET", "/ready", nullptr, 500ms).first;
      out.proved = seen && status == 0;
      out.proof = "n" + std::to_string(n) + " /ready " +
                  (status == 0 ? "unanswered in 500 ms" : "answered " + std::to_string(status)) +
                  "; n" + std::to_string(peer) + (seen ? peer_saw : " never saw it go");
      break;
    }
    case FaultKind::kPauseEtcd: {
      PauseAllEtcd(true);
      int lapsed = 0;
      bool seen = Eventually(
          [&] {
            for (int m = 1; m <= cluster_.size(); ++m) {
              if (Metric(m, "felix_node_lease_valid") == 0) lapsed = m;
            }
            return lapsed != 0;
          },
          15s);
      // Asked only now: SIGSTOP reaches every thread of etcd a moment after kill() returns.
      bool unhealthy = !cluster_.etcd().Healthy(500ms);
      out.proved = unhealthy && seen;
      out.proof = std::string("etcd /health ") + (unhealthy ? "unanswered" : "still answering") +
                  "; " +
                  (seen ? "n" + std::to_string(lapsed) + " felix_node_lease_valid=0"
                        : "no broker lost its lease");
      break;
    }
    case FaultKind::kIsolateBroker:
    case FaultKind::kSplit:
    case FaultKind::kOneWay:
    case FaultKind::kSlowLink:
      InjectNetwork(fault, out);
      break;
    case FaultKind::kDiskFull:
    case FaultKind::kFsyncEio:
    case FaultKind::kClockJump:
      InjectLocal(fault, out);
      break;
    case FaultKind::kKillEtcdMember:
    case FaultKind::kKillEtcdLeader:
      InjectEtcd(fault, out);
      break;
    case FaultKind::kMoveShard:
    case FaultKind::kDrainBroker:
      InjectAssignment(fault, out);
      break;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(fault.hold_ms));  // the fault's span
  switch (fault.kind) {
    case FaultKind::kKillBroker:
      out.healed = cluster_.StartReady(n, 60s);
      out.heal = out.healed ? "restarted, ready" : cluster_.error();
      break;
    case FaultKind::kPauseBroker:
      cluster_.Resume(n);
      out.healed = cluster_.WaitReady(n, 60s);
      out.heal = out.healed ? "resumed, ready" : cluster_.error();
      break;
    case FaultKind::kPauseEtcd:
      PauseAllEtcd(false);
      out.healed = true;
      for (int m = 1; m <= cluster_.size(); ++m) out.healed &= cluster_.WaitReady(m, 60s);
      out.heal = out.healed ? "etcd resumed, every broker ready" : cluster_.error();
      break;
    case FaultKind::kIsolateBroker:
    case FaultKind::kSplit:
    case FaultKind::kOneWay:
    case FaultKind::kSlowLink: {
      std::string missing;
      out.healed = lab_->HealAll();
      out.heal = out.healed ? "no cut or qdisc left" : lab_->error();
      if (out.healed && !Eventually([&] { return NetworkHealed(&missing); }, 60s)) {
        out.healed = false;
        out.heal += "; then " + missing;
      } else if (out.healed) {
        out.heal += ", every broker holds its lease and sees every node";
      }
      break;
    }
    case FaultKind::kDiskFull:
    case FaultKind::kFsyncEio:
    case FaultKind::kClockJump:
      HealLocal(fault, out);
      break;
    case FaultKind::kKillEtcdMember:
    case FaultKind::kKillEtcdLeader:
      HealEtcd(out);
      break;
    case FaultKind::kMoveShard:
      out.healed = true;
      out.heal = "nothing to undo (the shard stays on its new leader)";
      break;
    case FaultKind::kDrainBroker:
      out.healed = cluster_.StartReady(n, 60s);
      out.heal = out.healed ? "restarted, ready" : cluster_.error();
      break;
  }
  std::string missing;
  if (out.healed && !Eventually([&] { return AllReadyAndLed(&missing); }, 60s)) {
    out.healed = false;
    out.heal += "; then " + missing;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(fault.gap_ms));  // quiet time
  out.end_us = NowUs();
  return out;
}

void Run::InjectAssignment(const Fault& fault, FaultOutcome& out) {
  const int n = fault.node;
  const std::string id = "n" + std::to_string(n);
  if (fault.kind == FaultKind::kDrainBroker) {
    std::map<uint32_t, int> before = LeadersNow();
    int led = 0;
    for (const auto& [shard, leader] : before) led += leader == n ? 1 : 0;
    const int status = cluster_.Stop(n, 60s);  // SIGTERM: hand off, then drain and exit
    std::map<uint32_t, int> after;
    bool handed_off = Eventually(
        [&] {
          after = LeadersNow();
          if (after.empty()) return false;
          for (const auto& [shard, leader] : after) {
            if (leader == n) return false;
          }
          return true;
        },
        15s);
    out.proved = status == 0 && handed_off;
    out.proof = id + " (led " + std::to_string(led) + " stream shards) exited " +
                std::to_string(status) + " after SIGTERM; " +
                (handed_off ? "every stream shard led elsewhere" : "it still leads a shard");
    return;
  }
  // A stream shard `n` does not lead, moved to `n`; when `n` leads them all (drains and kills
  // can gather every shard on one broker), one of them moved from `n` to the next broker.
  std::map<uint32_t, int> leaders;
  Eventually([&] { return !(leaders = LeadersNow()).empty(); }, 15s);
  if (leaders.empty()) {
    out.proved = false;
    out.proof = "no broker saw every stream shard led: nothing to move";
    return;
  }
  std::optional<uint32_t> shard;
  int to = n;
  for (const auto& [s, leader] : leaders) {
    if (leader != n && !shard) shard = s;
  }
  if (!shard) {
    shard = leaders.begin()->first;
    to = n % cluster_.size() + 1;
  }
  out.fault.node = to;
  const std::string to_id = "n" + std::to_string(to);
  const Json request{{"kind", "stream"}, {"name", kStream}, {"shard", *shard}, {"to", to_id}};
  int status = 0;
  for (int m = 1; m <= cluster_.size() && status == 0; ++m) {
    status = Admin(m, "POST", "/v1/shard-moves", request).first;  // any broker that answers
  }
  bool moved = status == 202 && Eventually([&] { return LeadersNow()[*shard] == to; }, 30s);
  out.proved = moved;
  out.proof = "stream shard " + std::to_string(*shard) + " from n" +
              std::to_string(leaders[*shard]) + " to " + to_id + ": request " +
              std::to_string(status) +
              (moved ? ", now led by " + to_id : ", never led by " + to_id);
}

// The spans in which a fault could have rebuilt the group's tracker (group checker): a process,
// disk or clock fault on its broker; network and etcd faults on every broker.
std::vector<Disruption> Run::Disruptions(const FaultRunResult& result) const {
  std::vector<Disruption> spans;
  for (const FaultOutcome& f : result.faults) {
    bool one_broker = f.fault.kind == FaultKind::kKillBroker ||
                      f.fault.kind == FaultKind::kPauseBroker ||
                      f.fault.kind == FaultKind::kDiskFull ||
                      f.fault.kind == FaultKind::kFsyncEio || f.fault.kind == FaultKind::kClockJump;
    spans.push_back(
        Disruption{one_broker ? f.fault.node : 0, f.start_us, f.end_us != 0 ? f.end_us : NowUs()});
  }
  return spans;
}

int Run::DiskTarget(int node) {
  // Leaders move in the quorum regime: take them as they are now.
  auto leaders = options_.quorum ? LeadersNow() : leaders_;
  if (leaders.empty()) return node;
  for (const auto& [shard, leader] : leaders) {
    if (leader == node) return node;
  }
  return leaders.begin()->second;
}

std::optional<bool> Run::ClockProbe(bool put) {
  auto c = Connect(Target(cache_leader_));
  if (!c) return std::nullopt;
  felix::CacheRef cache{"default", kCache};
  if (put && !c->CachePut(cache, "clock-probe", "t", std::chrono::minutes(10))) return std::nullopt;
  auto value = c->CacheGet(cache, "clock-probe");
  if (!value) return std::nullopt;
  return value->has_value();
}

// A full disk (every log write ENOSPC) or failing fsyncs (EIO) on a broker that leads shards,
// proved by its storage counters rising while the workload writes; or the cache leader's wall
// clock stepped an hour ahead, proved by a put with a 10 min TTL expiring while the broker
// keeps its lease (leases run on the monotonic clock, which the step does not touch).
void Run::InjectLocal(const Fault& fault, FaultOutcome& out) {
  int clock_node = cache_leader_;
  if (fault.kind == FaultKind::kClockJump && options_.quorum) {
    // The cache's leader may have moved (failover): step the clock of the one serving it now.
    if (auto now = LeadersNow("cache"); !now.empty()) clock_node = now.at(0);
  }
  out.fault.node = fault.kind == FaultKind::kClockJump ? clock_node : DiskTarget(fault.node);
  const int n = out.fault.node;
  const std::string id = "n" + std::to_string(n);
  if (fault.kind == FaultKind::kClockJump) {
    auto before = ClockProbe(true);
    bool stepped = before == true && WriteFaultFile(n, "clock_offset_ms=3600000\n");
    bool expired = stepped && Eventually([&] { return ClockProbe(false) == false; }, 15s);
    // A standalone broker holds no lease: the expiry is the whole proof.
    bool lease = expired && (options_.standalone || Metric(n, "felix_node_lease_valid") == 1);
    out.proved = expired && lease;
    out.proof = id + ": a put with a 10 min TTL " +
                (before == true ? "read back" : "could not be read back") +
                (expired ? ", then expired once the clock stepped 1 h ahead" : ", never expired") +
                (options_.standalone ? "; standalone, no lease"
                 : lease             ? "; the lease still held (monotonic clock)"
                                     : "; the lease was lost");
    return;
  }
  const bool full = fault.kind == FaultKind::kDiskFull;
  const std::string counter =
      full ? "felix_storage_full_total" : "felix_storage_sync_failures_total";
  double before = MetricSum(n, counter);
  double after = before;
  bool written = WriteFaultFile(n, full ? "write_errno=28\n" : "sync_errno=5\n");
  out.proved = written && before >= 0 &&
               Eventually(
                   [&] {
                     after = MetricSum(n, counter);
                     return after > before;
                   },
                   15s);
  out.proof = id + " " + counter + " " + std::to_string(static_cast<int64_t>(before)) + " -> " +
              std::to_string(static_cast<int64_t>(after)) +
              (full ? " (log writes refused: ENOSPC)" : " (fdatasync failed: EIO, logs poisoned)");
}

void Run::HealLocal(const Fault& fault, FaultOutcome& out) {
  const int n = out.fault.node;
  bool cleared = WriteFaultFile(n, "");
  switch (fault.kind) {
    case FaultKind::kDiskFull:
      // A failing log stays on /health until one of its writes succeeds again.
      out.healed =
          cleared &&
          Eventually(
              [&] { return MetricSum(n, "felix_health_problems{kind=\"storage_write\"}") <= 0; },
              60s);
      out.heal = out.healed ? "space again, no storage_write problem left on /health"
                            : "storage_write still listed on /health";
      break;
    case FaultKind::kFsyncEio:
      // A poisoned log stays refused until a restart reopens it (FELIX_TEST_CLEAR_POISON).
      cluster_.Kill(n);
      out.healed = cleared && cluster_.StartReady(n, 60s);
      out.heal = out.healed ? "fsyncs succeed again; restarted (poisoned logs reopened), ready"
                            : "restart failed: " + cluster_.error();
      break;
    default:
      out.healed = cleared && Eventually([&] { return ClockProbe(true) == true; }, 15s);
      out.heal = out.healed ? "clock back; a put with a 10 min TTL reads back"
                            : "a put with a 10 min TTL does not read back";
      break;
  }
}

void Run::PauseAllEtcd(bool pause) {
  for (int m = 1; m <= cluster_.etcd_members(); ++m) {
    pause ? cluster_.etcd_member(m).Pause() : cluster_.etcd_member(m).Resume();
  }
}

std::optional<std::pair<std::string, std::string>> Run::EtcdStatus(int m) {
  auto& member = cluster_.etcd_member(m);
  if (!member.running()) return std::nullopt;
  httplib::Client client("127.0.0.1", member.client_port());
  client.set_connection_timeout(500ms);
  client.set_read_timeout(500ms);
  auto r = client.Post("/v3/maintenance/status", "{}", "application/json");
  if (!r || r->status != 200) return std::nullopt;
  Json status = Json::parse(r->body, nullptr, false);
  if (!status.is_object() || !status.contains("header")) return std::nullopt;
  return std::make_pair(status["header"].value("member_id", ""), status.value("leader", ""));
}

void Run::InjectEtcd(const Fault& fault, FaultOutcome& out) {
  const bool leader_kill = fault.kind == FaultKind::kKillEtcdLeader;
  std::map<int, std::string> ids;
  std::string leader;
  std::vector<int> followers;
  for (int m = 1; m <= cluster_.etcd_members(); ++m) {
    if (auto status = EtcdStatus(m)) {
      ids[m] = status->first;
      leader = status->second;
    }
  }
  int target = 0;
  for (const auto& [m, id] : ids) {
    if (id == leader) {
      if (leader_kill) target = m;
    } else {
      followers.push_back(m);
    }
  }
  if (!leader_kill && !followers.empty()) {
    target = followers[static_cast<size_t>(fault.node) % followers.size()];
  }
  out.fault.node = target;
  if (target == 0 || leader.empty()) {
    out.proof = "no etcd " + std::string(leader_kill ? "leader" : "follower") + " found (" +
                std::to_string(ids.size()) + " of " + std::to_string(cluster_.etcd_members()) +
                " members answered)";
    return;
  }
  auto& member = cluster_.etcd_member(target);
  member.Kill();
  bool gone = !member.running() && !member.Healthy(300ms);
  std::string now_leader;
  // The survivors keep (a follower died) or elect (the leader died) a leader among themselves.
  bool led = gone && Eventually(
                         [&] {
                           for (const auto& [m, id] : ids) {
                             if (m == target) continue;
                             auto status = EtcdStatus(m);
                             if (!status || status->second.empty() || status->second == "0") {
                               continue;
                             }
                             if (leader_kill && status->second == leader) continue;
                             now_leader = status->second;
                             return true;
                           }
                           return false;
                         },
                         15s);
  out.proved = gone && led;
  out.proof =
      "etcd " + member.name() + " (" + (leader_kill ? "the leader" : "a follower") + ", id " +
      ids[target] + ") killed: " + (gone ? "no process, /health unanswered" : "still answering") +
      "; " +
      (led ? "the survivors' leader is " + now_leader +
                 (leader_kill ? " (was " + leader + ")" : " (unchanged)")
           : "the survivors report no " + std::string(leader_kill ? "new " : "") + "leader");
}

void Run::HealEtcd(FaultOutcome& out) {
  const int m = out.fault.node;
  if (m == 0) {
    out.heal = "nothing was killed";
    return;
  }
  auto& member = cluster_.etcd_member(m);
  bool up = member.Start(30s);
  std::string leader;
  // Back in the cluster: it follows the same leader as another member.
  bool joined = up && Eventually(
                          [&] {
                            auto own = EtcdStatus(m);
                            auto other = EtcdStatus(m % cluster_.etcd_members() + 1);
                            if (!own || !other || own->second.empty()) return false;
                            leader = own->second;
                            return own->second == other->second;
                          },
                          30s);
  out.healed = joined;
  out.heal = !up      ? "restart failed: " + member.error()
             : joined ? "restarted " + member.name() + ", healthy, follows leader " + leader
                      : "restarted " + member.name() + " but it does not agree on a leader";
}

// Cuts links in the hub (or slows one) and proves the effect through the brokers' own view —
// their lease and the node keys they see in etcd — or, for a slow link, the queueing
// discipline's counters. Every broker's metrics stay readable: the harness's link is never cut.
void Run::InjectNetwork(const Fault& fault, FaultOutcome& out) {
  const int n = fault.node;
  const int size = cluster_.size();
  const std::string id = "n" + std::to_string(n);
  std::vector<int> others;
  for (int m = 1; m <= size; ++m) {
    if (m != n) others.push_back(m);
  }
  auto lease = [&](int m) { return Metric(m, "felix_node_lease_valid"); };
  auto sees = [&](int m) { return Metric(m, "felix_cluster_nodes"); };
  auto others_hold = [&] {
    for (int m : others) {
      if (lease(m) != 1) return false;
    }
    return true;
  };
  auto cut_both = [&](int a, int b) { return lab_->Cut(a, b) && lab_->Cut(b, a); };
  bool cut = true;
  switch (fault.kind) {
    case FaultKind::kIsolateBroker: {
      for (int m : others) cut = cut && cut_both(n, m);
      cut = cut && cut_both(n, 0);
      bool seen =
          cut && Eventually([&] { return lease(n) == 0 && sees(others[0]) == size - 1; }, 15s);
      bool hold = seen && others_hold();
      out.proved = seen && hold;
      out.proof = id +
                  (seen ? " felix_node_lease_valid=0 and n" + std::to_string(others[0]) +
                              " saw its node key go"
                        : " kept its lease or stayed visible") +
                  (hold ? "; the others hold their leases" : "; another broker lost its lease");
      break;
    }
    case FaultKind::kSplit: {
      for (int m : others) cut = cut && cut_both(m, 0) && cut_both(m, n);
      bool seen = cut && Eventually(
                             [&] {
                               for (int m : others) {
                                 if (lease(m) != 0) return false;
                               }
                               return sees(n) == 1;
                             },
                             15s);
      bool minority = seen && lease(n) == 1;
      out.proved = seen && minority;
      out.proof = std::string("majority side ") +
                  (seen ? "lost its leases and " + id + " saw their node keys go"
                        : "kept a lease or stayed visible") +
                  "; " + id + " (with etcd) " + (minority ? "holds its lease" : "lost its lease");
      break;
    }
    case FaultKind::kOneWay: {
      for (int m : others) cut = cut && lab_->Cut(m, n);
      cut = cut && lab_->Cut(0, n);
      // It still sends (its keepalives may even reach etcd) but hears nothing back.
      bool seen = cut && Eventually([&] { return lease(n) == 0; }, 15s);
      bool hold = seen && others_hold();
      out.proved = seen && hold;
      out.proof = id +
                  (seen ? " hears nothing: felix_node_lease_valid=0 (its metrics answer)"
                        : " kept its lease") +
                  (hold ? "; the others hold their leases" : "; another broker lost its lease");
      break;
    }
    case FaultKind::kSlowLink: {
      cut = lab_->Slow(n);
      std::optional<QdiscStats> stats;
      // Each poll reads n's metrics through the slowed link: traffic of its own.
      bool seen =
          cut && Eventually(
                     [&] {
                       lease(n);
                       stats = lab_->LinkStats(n);
                       return stats && (lab_->netem() ? stats->dropped > 0 : stats->overlimits > 0);
                     },
                     15s);
      out.proved = seen;
      out.proof = id + "'s link: " +
                  (stats ? std::to_string(stats->sent_packets) + " packets sent, " +
                               std::to_string(stats->overlimits) + " held back over the rate, " +
                               std::to_string(stats->dropped) + " dropped"
                         : "no qdisc counters");
      break;
    }
    default:
      break;
  }
  if (!cut) {
    out.proved = false;
    out.proof = "the link fault could not be made: " + lab_->error();
  }
}

bool Run::NetworkHealed(std::string* missing) {
  for (int m = 1; m <= cluster_.size(); ++m) {
    double lease = Metric(m, "felix_node_lease_valid");
    double sees = Metric(m, "felix_cluster_nodes");
    if (lease != 1 || sees != cluster_.size()) {
      *missing = "n" + std::to_string(m) + " felix_node_lease_valid=" + std::to_string(lease) +
                 " felix_cluster_nodes=" + std::to_string(sees);
      return false;
    }
  }
  return true;
}

bool Run::AllReadyAndLed(std::string* missing) {
  for (int n = 1; n <= cluster_.size(); ++n) {
    int status = 0;
    cluster_.AdminGet(n, "/ready", &status);
    if (status != 200) {
      *missing = "n" + std::to_string(n) + " not ready (" + std::to_string(status) + ")";
      return false;
    }
  }
  auto leaders = Leaders(1);
  if (leaders.size() != options_.shards) {
    *missing =
        std::to_string(leaders.size()) + " of " + std::to_string(options_.shards) + " shards led";
    return false;
  }
  return true;
}

bool Run::ReplicationSettled(std::string* missing) {
  size_t led = 0;
  std::set<std::pair<std::string, uint32_t>> led_shards;
  for (int n = 1; n <= cluster_.size(); ++n) {
    const std::string id = "n" + std::to_string(n);
    Json status = Admin(n, "GET", "/replication").second;
    if (!status.is_object()) {
      *missing = id + ": /replication unanswered";
      return false;
    }
    for (const auto& entry : status.value("led", Json::array())) {
      std::string name = entry.value("name", "");
      if (name != kStream && name != kCache) continue;
      ++led;
      led_shards.emplace(name, entry.value("shard", 0u));
      std::string where = id + " leads " + name + "/" + std::to_string(entry.value("shard", 0));
      const Json followers = entry.value("followers", Json::array());
      if (followers.empty()) {
        *missing = where + " with no follower";
        return false;
      }
      for (const auto& f : followers) {
        // lag 0: the follower confirmed the leader's whole log (an empty log ships nothing,
        // so there in_sync stays false for want of an answer, and lag is 0).
        if (!f.value("halted", std::string()).empty() || f.value("lag", uint64_t{1}) != 0) {
          *missing = where + ": follower " + f.dump();
          return false;
        }
      }
    }
    for (const auto& entry : status.value("followed", Json::array())) {
      for (const auto& log : entry.value("logs", Json::array())) {
        if (!log.value("halted", std::string()).empty()) {
          *missing = id + " follows " + entry.value("name", "") + " halted: " + log.dump();
          return false;
        }
      }
    }
  }
  if (led != options_.shards + 1) {
    *missing = std::to_string(led) + " shards led by a replication host, want " +
               std::to_string(options_.shards + 1) + UnreplicatedShards(led_shards);
    return false;
  }
  return true;
}

// For a liveness failure: each shard no replication host leads, with its assignment as n1
// sees it and what its leader logged of it last (the run's files stay on the CI machine; the
// test's output is what a failure leaves to diagnose).
std::string Run::UnreplicatedShards(const std::set<std::pair<std::string, uint32_t>>& led) {
  std::string out;
  Json status = Admin(1, "GET", "/v1/cluster").second;
  if (!status.is_object() || !status.contains("shards")) return "; /v1/cluster unanswered";
  for (const auto& s : status["shards"]) {
    const std::string name = s.value("name", "");
    if (name != kStream && name != kCache) continue;
    const uint32_t shard = s.value("shard", 0u);
    if (led.contains({name, shard})) continue;
    out += "; not replicated: " + s.dump();
    const std::string leader = s.value("leader", "");
    if (leader.size() < 2) continue;
    const int n = std::atoi(leader.c_str() + 1);
    if (n < 1 || n > cluster_.size()) continue;
    const std::string path = name + "#" + std::to_string(shard);
    const std::string slash = "/" + name + "/" + std::to_string(shard);
    std::vector<std::string> lines;
    std::istringstream log(cluster_.LogTail(n, 1 << 20));
    for (std::string line; std::getline(log, line);) {
      if (line.find(path) != std::string::npos || line.find(slash) != std::string::npos) {
        lines.push_back(std::move(line));
      }
    }
    const size_t from = lines.size() > 12 ? lines.size() - 12 : 0;
    out += "\n  " + leader + "'s last lines on it:";
    for (size_t i = from; i < lines.size(); ++i) out += "\n    " + lines[i];
  }
  return out;
}

// Liveness after the heal (cluster-etcd.md §6): within 60 s every broker is ready, every shard
// is led by the broker it started on, and a probe publish to each shard is acknowledged.
bool Run::Liveness(FaultRunResult& result) {
  auto deadline = Clock::now() + 60s;
  std::string missing;
  if (!Eventually([&] { return AllReadyAndLed(&missing); }, 60s)) {
    result.liveness = missing;
    return false;
  }
  auto cache_leaders = Leaders(1, "cache");
  if (options_.quorum) {
    // Leaders may have moved (failover): the final reads go where they are now.
    leaders_ = Leaders(1);
    if (!cache_leaders.empty()) cache_leader_ = cache_leaders.at(0);
    auto now = leaders_;
    now[options_.shards] = cache_leader_;
    for (const auto& [shard, leader] : now) {
      result.moved_shards += first_leaders_[shard] != leader ? 1 : 0;
    }
    if (int64_t sum = GenerationSum(1); sum >= 0 && first_generations_ >= 0) {
      result.generation_bumps = sum - first_generations_;
    }
  } else if (auto leaders = Leaders(1); leaders != leaders_ || cache_leaders[0] != cache_leader_) {
    result.liveness = "shard leaders changed during the run (RF 1: no failover is expected)";
    return false;
  }
  felix::StreamRef stream{"default", kStream};
  for (uint32_t shard = 0; shard < options_.shards; ++shard) {
    bool acked = false;
    for (int attempt = 0; !acked && Clock::now() < deadline; ++attempt) {
      auto c = Connect(Target(leaders_[shard]));
      if (!c) {
        std::this_thread::sleep_for(100ms);  // back off
        continue;
      }
      Op op;
      op.client = 1000;
      op.kind = OpKind::kPublish;
      op.shard = shard;
      op.key = keys_[shard];
      op.value = "probe-" + std::to_string(shard) + "-" + std::to_string(attempt);
      op.node = Target(leaders_[shard]);
      felix::PublishOptions po;
      po.key = op.key;
      op.invoke_us = NowUs();
      auto r = c->Publish(stream, {op.value}, po);
      op.complete_us = NowUs();
      NoteAnswer(op, r);
      acked = op.outcome == Outcome::kOk;
      history_.Add(std::move(op));
    }
    if (!acked) {
      result.liveness = "shard " + std::to_string(shard) + " took no probe publish";
      return false;
    }
  }
  if (options_.quorum) {
    if (!Eventually([&] { return ReplicationSettled(&missing); }, 60s)) {
      result.liveness = "replication not settled within 60 s: " + missing;
      return false;
    }
    result.liveness =
        "every broker ready, every shard led, a probe acknowledged on each, every "
        "follower caught up and none halted";
    return true;
  }
  result.liveness = "every broker ready, every shard led, a probe acknowledged on each";
  return true;
}

bool Run::ReadFinal(FaultRunResult& result, FinalLogs& logs) {
  felix::StreamRef stream{"default", kStream};
  for (uint32_t shard = 0; shard < options_.shards; ++shard) {
    auto c = Connect(Target(leaders_[shard]));
    if (!c) {
      result.final_read_error = "shard " + std::to_string(shard) + ": no connection";
      return false;
    }
    felix::SubscribeOptions so;
    so.shard = shard;
    so.start = felix::StartPosition::Earliest();
    auto sub = c->Subscribe(stream, so);
    if (!sub) {
      result.final_read_error =
          "shard " + std::to_string(shard) + ": subscribe: " + sub.error().ToString();
      return false;
    }
    uint64_t tail = (*sub)->live_offset().value_or(0);
    auto& records = logs[shard];
    while (tail > 0 && (records.empty() || records.back().first + 1 < tail)) {
      auto event = (*sub)->Next(5s);
      if (!event || !*event) {
        result.final_read_error = "shard " + std::to_string(shard) + ": read stalled after " +
                                  std::to_string(records.size()) + " of tail " +
                                  std::to_string(tail);
        return false;
      }
      AppendRead(records, (*event)->offset.value_or(UINT64_MAX), (*event)->skipped_before,
                 (*event)->payload);
    }
  }
  return true;
}

void Run::WriteFiles(const FaultRunResult& result, const FinalLogs& logs) {
  const std::string& dir = options_.dir;
  std::ofstream(dir + "/run.json")
      << Json{{"seed", options_.seed},
              {"seconds", options_.seconds},
              {"min_faults", options_.min_faults},
              {"brokers", cluster_.size()},
              {"shards", options_.shards},
              {"regime", options_.quorum ? "rf3-quorum" : "rf1-leader"},
              {"standalone", options_.standalone},
              {"publishers", options_.publishers},
              {"etcd_members", options_.etcd_members},
              {"duration_ms", result.duration_ms},
              {"follower_applies",
               {{"loop", result.follower_applies_on_loop},
                {"executor", result.follower_applies_on_executor}}},
              {"network", result.network},
              {"env", options_.env}}
             .dump(2)
      << "\n";
  std::ofstream schedule(dir + "/schedule.jsonl");
  for (const auto& f : result.faults) {
    schedule << Json{{"kind", FaultKindName(f.fault.kind)},
                     {"node", f.fault.node},
                     {"hold_ms", f.fault.hold_ms},
                     {"gap_ms", f.fault.gap_ms},
                     {"start_us", f.start_us},
                     {"end_us", f.end_us},
                     {"proved", f.proved},
                     {"proof", f.proof},
                     {"healed", f.healed},
                     {"heal", f.heal}}
                    .dump()
             << "\n";
  }
  (void)history_.WriteFile(dir + "/history.jsonl");
  Json final = Json::object();
  for (const auto& [shard, records] : logs) {
    Json list = Json::array();
    for (const auto& [offset, value] : records) list.push_back(Json::array({offset, value}));
    final[std::to_string(shard)] = std::move(list);
  }
  std::ofstream(dir + "/final.json")
      << final.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  std::ofstream verdict(dir + "/verdict.txt");
  verdict << "network: " << result.network << "\n";
  if (!result.started) verdict << "setup failed: " << result.setup_error << "\n";
  for (const auto& f : result.faults) {
    verdict << "fault " << FaultKindName(f.fault.kind) << " n" << f.fault.node << ": "
            << (f.proved ? "proved" : "NOT PROVED") << " (" << f.proof << "), "
            << (f.healed ? "healed" : "NOT HEALED") << " (" << f.heal << ")\n";
  }
  if (options_.quorum) {
    verdict << "regime rf3-quorum: " << result.moved_shards << " of " << options_.shards + 1
            << " shards ended on another leader, generations +" << result.generation_bumps << "\n";
  }
  verdict << "liveness " << (result.live_after_heal ? "ok" : "FAILED") << ": " << result.liveness
          << "\nfinal_read " << (result.final_read ? "ok" : "FAILED: " + result.final_read_error)
          << "\nnot_sent " << result.not_sent << "\n"
          << result.verdict.Summary() << "group_drain " << (result.group_drained ? "ok" : "FAILED")
          << ": " << result.group_drain << "\n"
          << result.groups.Summary() << "counter_adds " << result.counter_adds << "\ncounters "
          << (result.counters.ok() ? "PASS" : "FAIL") << "\ncache_ops " << result.cache_ops
          << "\ncache "
          << (!result.cache_checked       ? "NOT CHECKED"
              : result.cache_linearizable ? "PASS (linearizable)"
                                          : "FAIL (not linearizable)")
          << "\n"
          << result.cache_report;
  for (const auto& v : result.counters.violations) verdict << v << "\n";
  for (int n = 1; n <= cluster_.size(); ++n) {
    std::ofstream(dir + "/broker-" + std::to_string(n) + ".log") << cluster_.LogTail(n, 65536);
  }
  std::ofstream(dir + "/etcd.log") << cluster_.etcd().LogTail(65536);
  for (int m = 2; m <= cluster_.etcd_members(); ++m) {
    std::ofstream(dir + "/etcd-e" + std::to_string(m) + ".log")
        << cluster_.etcd_member(m).LogTail(65536);
  }
}

FaultRunResult Run::Go() {
  FaultRunResult result;
  FinalLogs logs;
  result.partitions = lab_ != nullptr;
  result.network = network_;
  t0_ = Clock::now();  // one timeline for the history, setup probes included
  result.started = Setup(result);
  if (result.started) {
    const auto workload_start = Clock::now();
    std::vector<std::thread> threads;
    for (int c = 1; c <= options_.publishers; ++c)
      threads.emplace_back([this, c] { Publisher(c); });
    threads.emplace_back([this] { Reader(); });
    threads.emplace_back([this] { Counter(); });
    for (int c = 0; c < options_.cache_clients; ++c)
      threads.emplace_back([this, c] { CacheClient(60 + c); });
    threads.emplace_back([this] { GroupConsumer(); });
    auto kinds = options_.standalone ? StandaloneFaultKinds()
                 : lab_              ? AllFaultKinds()
                                     : LocalFaultKinds();
    if (options_.quorum) kinds = WithAssignmentFaults(std::move(kinds));
    result.kinds = kinds;
    auto schedule = NemesisSchedule(options_.seed, 64, cluster_.size(), kinds);
    const int min_faults = std::max(options_.min_faults, static_cast<int>(kinds.size()));
    auto end = workload_start + std::chrono::seconds(options_.seconds);
    // Let the workload run a moment before the first fault, so there is history to lose.
    std::this_thread::sleep_for(1s);
    for (const Fault& fault : schedule) {
      if (!options_.nemesis) break;
      int done = static_cast<int>(result.faults.size());
      if (done >= min_faults && Clock::now() >= end) break;
      result.faults.push_back(Inject(fault));
      if (!result.faults.back().healed) break;  // no point injecting into a broken cluster
    }
    if (result.faults.empty() && Clock::now() < end) std::this_thread::sleep_until(end);
    stop_ = true;
    for (auto& t : threads) t.join();
    result.live_after_heal = Liveness(result);
    // After the probes (shard 0 takes one too): the group must reach the final tail.
    result.group_drained = result.live_after_heal && DrainGroup(result);
    result.final_read = result.live_after_heal && ReadFinal(result, logs);
    std::map<std::string, int64_t> counters;
    result.final_read = result.final_read && ReadCounters(result, counters);
    for (int n = 1; options_.quorum && n <= cluster_.size(); ++n) {
      const std::string name = "felix_broker_replication_follower_applies_total";
      result.follower_applies_on_loop +=
          uint64_t(std::max(0.0, Metric(n, name + "{thread=\"loop\"}")));
      result.follower_applies_on_executor +=
          uint64_t(std::max(0.0, Metric(n, name + "{thread=\"executor\"}")));
    }
    if (result.final_read) {
      auto ops = history_.ops();
      result.verdict = CheckStreams(ops, logs);
      result.counters = CheckCounters(ops, counters);
      if (result.group_drained) result.groups = CheckGroups(ops, logs, Disruptions(result));
      for (const Op& op : ops) {
        result.counter_adds += op.kind == OpKind::kAdd ? 1 : 0;
        bool cache =
            op.kind == OpKind::kPut || op.kind == OpKind::kGet || op.kind == OpKind::kDelete;
        result.cache_ops += cache ? 1 : 0;
      }
      CheckCache(result);
    }
    result.not_sent = not_sent_.load();
    result.duration_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0_).count();
  }
  WriteFiles(result, logs);
  return result;
}

}  // namespace

FaultRunResult RunFaults(const FaultRunOptions& options) {
  Run run(options);
  return run.Go();
}

}  // namespace felix::fault
