// Cache and counters end to end: the real felix-broker process, caches created with the
// `felix` CLI, requests from the C++ client library (and `felix cache` commands).
//
// Covers: a stored empty value vs a miss; delete answering the removed value; TTL expiry
// (polled with a deadline); counters summed under concurrent adders on several clients; a
// broker restart keeping values and counters; compaction keeping offsets while the disk use
// shrinks; cache.read vs cache.write permissions; several shards; the CLI.
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/credentials.h"
#include "felix/client.h"
#include "support/child_process.h"

namespace felix {
namespace {

using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;
using felix::testing::RunProgram;
using namespace std::chrono_literals;

std::string Field(const std::string& line, const std::string& name) {
  size_t at = line.find(name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 1;
  size_t end = line.find_first_of(" \n", at);
  return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

uint64_t DirBytes(const std::filesystem::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

TEST(CacheRef, ParsesCacheOrNamespaceSlashCache) {
  auto plain = CacheRef::Parse("sessions");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->namespace_name, "default");
  EXPECT_EQ(plain->cache, "sessions");
  auto scoped = CacheRef::Parse("shop/carts");
  ASSERT_TRUE(scoped);
  EXPECT_EQ(scoped->ToString(), "shop/carts");
  for (const char* bad : {"", "/c", "ns/", "a/b/c"}) {
    auto refused = CacheRef::Parse(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().code, ClientErrorCode::kInvalidArgument);
  }
}

class CacheE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    data_dir_ = MakeTempDir("cache-e2e");
    StartBroker();
    auto creds = catalog::LoadAdminCredentials(data_dir_ + "/" + catalog::kCredentialsFile);
    ASSERT_TRUE(creds) << creds.error().message;
    creds_ = *creds;
  }
  void TearDown() override {
    if (broker_) {
      EXPECT_EQ(broker_->Stop(SIGTERM), 0);
    }
  }

  void StartBroker() {
    std::map<std::string, std::string> env = {{"FELIX_DATA_DIR", data_dir_},
                                              {"FELIX_QUIC_BIND", "127.0.0.1:0"},
                                              {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
                                              {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"}};
    broker_ = std::make_unique<ChildProcess>(BuiltProgram("src/server/felix-broker"),
                                             std::vector<std::string>{}, env);
    auto line = broker_->WaitForLine("felix-broker listening");
    ASSERT_TRUE(line) << broker_->stderr_text();
    quic_ = Field(*line, "quic");
    ASSERT_FALSE(quic_.empty()) << *line;
    ca_file_ = data_dir_ + "/tls/broker-cert.pem";
  }

  void RestartBroker() {
    ASSERT_EQ(broker_->Stop(SIGTERM), 0);
    broker_.reset();
    StartBroker();
  }

  std::pair<int, std::string> Felix(std::vector<std::string> args) {
    return RunProgram(BuiltProgram("src/cli/felix"), args, {{"FELIX_DATA_DIR", data_dir_}});
  }

  void CreateCache(const std::string& name, std::vector<std::string> extra = {"--durable"}) {
    std::vector<std::string> args = {"cache", "create", name};
    args.insert(args.end(), extra.begin(), extra.end());
    auto [rc, out] = Felix(args);
    ASSERT_EQ(rc, 0) << out;
  }

  std::string Token(std::vector<std::string> perms) {
    auto key = auth::SigningKey::FromSeedBase64(creds_.signing_kid, creds_.signing_seed);
    EXPECT_TRUE(key);
    auth::TokenClaims claims;
    claims.sub = "cache-e2e";
    claims.tid = creds_.tenant_id;
    claims.perms = std::move(perms);
    claims.iat = auth::NowUnixSeconds();
    claims.exp = claims.iat + 600;
    return key ? auth::MintToken(*key, claims) : "";
  }
  // Read and write on every cache of the default namespace.
  std::vector<std::string> AllPerms() {
    std::string scope = "cache:" + creds_.tenant_id + "/default/*";
    return {"cache.read:" + scope, "cache.write:" + scope};
  }

  std::unique_ptr<Client> Connect(std::vector<std::string> perms) {
    ClientOptions o;
    o.broker = quic_;
    o.ca_file = ca_file_;
    o.tenant_id = creds_.tenant_id;
    o.token = Token(std::move(perms));
    auto client = Client::Connect(o);
    EXPECT_TRUE(client) << client.error().ToString();
    return client ? std::move(*client) : nullptr;
  }

  std::filesystem::path CacheShardDir(const std::string& cache, int shard = 0) {
    return std::filesystem::path(data_dir_) / "shards" / "_caches" / creds_.tenant_id / "default" /
           cache / std::to_string(shard);
  }

  std::string data_dir_, quic_, ca_file_;
  std::unique_ptr<ChildProcess> broker_;
  catalog::AdminCredentials creds_;
};

TEST_F(CacheE2E, EmptyValueIsNotAMissAndDeleteReturnsTheRemovedValue) {
  CreateCache("sessions");
  auto client = Connect(AllPerms());
  ASSERT_TRUE(client);
  CacheRef cache{"default", "sessions"};
  auto miss = client->CacheGet(cache, "nobody");
  ASSERT_TRUE(miss) << miss.error().ToString();
  EXPECT_EQ(*miss, std::nullopt);

  ASSERT_TRUE(client->CachePut(cache, "empty", ""));
  ASSERT_TRUE(client->CachePut(cache, "user:1", "alice"));
  auto empty = client->CacheGet(cache, "empty");
  ASSERT_TRUE(empty) << empty.error().ToString();
  ASSERT_TRUE(empty->has_value()) << "a stored empty value must not read as a miss";
  EXPECT_EQ(**empty, "");
  EXPECT_EQ(*client->CacheGet(cache, "user:1"), "alice");

  ASSERT_TRUE(client->CachePut(cache, "user:1", "bob"));
  auto removed = client->CacheDelete(cache, "user:1");
  ASSERT_TRUE(removed) << removed.error().ToString();
  EXPECT_EQ(*removed, "bob");
  EXPECT_EQ(*client->CacheGet(cache, "user:1"), std::nullopt);
  auto removed_again = client->CacheDelete(cache, "user:1");
  ASSERT_TRUE(removed_again);
  EXPECT_EQ(*removed_again, std::nullopt);

  auto unknown = client->CacheGet(CacheRef{"default", "nope"}, "k");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ClientErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("cache scope not found"), std::string::npos);
  // The client still works after an error answer.
  EXPECT_EQ(*client->CacheGet(cache, "empty"), "");
}

TEST_F(CacheE2E, InMemoryAndMultiShardCachesRouteEveryKey) {
  CreateCache("mem", {"--shards", "4"});
  CreateCache("disk", {"--durable", "--shards", "3"});
  auto client = Connect(AllPerms());
  ASSERT_TRUE(client);
  for (const char* name : {"mem", "disk"}) {
    CacheRef cache{"default", name};
    for (int i = 0; i < 40; ++i) {
      auto put = client->CachePut(cache, "key-" + std::to_string(i), "value-" + std::to_string(i));
      ASSERT_TRUE(put) << put.error().ToString();
    }
    for (int i = 0; i < 40; ++i) {
      auto got = client->CacheGet(cache, "key-" + std::to_string(i));
      ASSERT_TRUE(got) << got.error().ToString();
      EXPECT_EQ(*got, "value-" + std::to_string(i));
    }
  }
  // Keys spread over the durable cache's three shards.
  for (int shard = 0; shard < 3; ++shard) {
    EXPECT_TRUE(std::filesystem::exists(CacheShardDir("disk", shard))) << shard;
  }
  auto counter = client->CounterAdd(CacheRef{"default", "mem"}, "n", 1);
  ASSERT_FALSE(counter) << "counters need a durable cache";
  EXPECT_EQ(counter.error().code, ClientErrorCode::kInvalidRequest);
}

TEST_F(CacheE2E, TtlExpiresAndTheDefaultTtlApplies) {
  CreateCache("ttl", {"--durable", "--default-ttl-ms", "300"});
  auto client = Connect(AllPerms());
  ASSERT_TRUE(client);
  CacheRef cache{"default", "ttl"};
  ASSERT_TRUE(client->CachePut(cache, "short", "s", 200ms));
  ASSERT_TRUE(client->CachePut(cache, "default", "d"));  // the cache's 300 ms
  ASSERT_TRUE(client->CachePut(cache, "long", "l", std::chrono::milliseconds(600'000)));
  auto expired = [&](const std::string& key) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto got = client->CacheGet(cache, key);
      EXPECT_TRUE(got) << got.error().ToString();
      if (!got || !got->has_value()) return got.has_value();
    }
    return false;
  };
  EXPECT_TRUE(expired("short"));
  EXPECT_TRUE(expired("default"));
  EXPECT_EQ(*client->CacheGet(cache, "long"), "l");
  // A put resets the countdown.
  ASSERT_TRUE(client->CachePut(cache, "short", "again", std::chrono::milliseconds(600'000)));
  EXPECT_EQ(*client->CacheGet(cache, "short"), "again");
}

TEST_F(CacheE2E, CountersSumUnderConcurrentAddersAndSurviveARestart) {
  CreateCache("counts");
  CacheRef cache{"default", "counts"};
  constexpr int kClients = 4;
  constexpr int kThreadsPerClient = 2;
  constexpr int kAdds = 50;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(Connect(AllPerms()));
    ASSERT_TRUE(clients.back());
  }
  EXPECT_EQ(*clients[0]->CounterGet(cache, "hits"), std::nullopt);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  std::vector<std::vector<int64_t>> seen(kClients * kThreadsPerClient);
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreadsPerClient; ++t) {
      threads.emplace_back([&, c, t] {
        for (int i = 0; i < kAdds; ++i) {
          auto sum = clients[c]->CounterAdd(cache, "hits", 3);
          if (!sum) {
            ++failures;
            continue;
          }
          seen[c * kThreadsPerClient + t].push_back(*sum);
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const int64_t expected = int64_t{3} * kClients * kThreadsPerClient * kAdds;
  EXPECT_EQ(*clients[0]->CounterGet(cache, "hits"), expected);
  // Every add answered a distinct running sum.
  std::set<int64_t> sums;
  for (const auto& v : seen) sums.insert(v.begin(), v.end());
  EXPECT_EQ(sums.size(), size_t(kClients * kThreadsPerClient * kAdds));
  EXPECT_EQ(*sums.rbegin(), expected);
  EXPECT_EQ(*clients[1]->CounterAdd(cache, "neg", -5), -5);
  ASSERT_TRUE(clients[1]->CachePut(cache, "hits", "a value, unrelated to the counter"));
  clients.clear();

  RestartBroker();
  auto client = Connect(AllPerms());
  ASSERT_TRUE(client);
  EXPECT_EQ(*client->CounterGet(cache, "hits"), expected);
  EXPECT_EQ(*client->CounterGet(cache, "neg"), -5);
  EXPECT_EQ(*client->CacheGet(cache, "hits"), "a value, unrelated to the counter");
  EXPECT_EQ(*client->CounterAdd(cache, "hits", 1), expected + 1);
}

// Threads of this process, from /proc/self/task.
size_t ThreadCount() {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

TEST_F(CacheE2E, ClientsSharingAnIoThreadServeConcurrentCallersAndCloseInAnyOrder) {
  CreateCache("shared");
  CacheRef cache{"default", "shared"};
  const size_t before = ThreadCount();
  auto io = IoThread::Create();
  ASSERT_TRUE(io) << io.error().ToString();
  EXPECT_EQ(ThreadCount(), before + 1);
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    ClientOptions o;
    o.broker = quic_;
    o.ca_file = ca_file_;
    o.tenant_id = creds_.tenant_id;
    o.token = Token(AllPerms());
    o.io_thread = *io;
    auto client = Client::Connect(o);
    ASSERT_TRUE(client) << client.error().ToString();
    clients.push_back(std::move(*client));
  }
  // Four connections, one I/O thread between them; the Clients hold it from here on.
  EXPECT_EQ(ThreadCount(), before + 1);
  io->reset();

  constexpr int kAdds = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, c] {
        for (int i = 0; i < kAdds; ++i) {
          if (!clients[c]->CounterAdd(cache, "n", 1)) ++failures;
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(*clients[3]->CounterGet(cache, "n"), int64_t{kClients} * 2 * kAdds);

  // The first to join the thread closes first; the others go on.
  clients.erase(clients.begin());
  ASSERT_TRUE(clients[0]->CachePut(cache, "k", "v"));
  clients.erase(clients.begin(), clients.begin() + 2);
  EXPECT_EQ(*clients[0]->CacheGet(cache, "k"), "v");
  clients.clear();
  // The last Client took the thread with it.
  EXPECT_EQ(ThreadCount(), before);
}

TEST_F(CacheE2E, RestartKeepsValuesDeletesAndEmptyValues) {
  CreateCache("keep");
  CacheRef cache{"default", "keep"};
  {
    auto client = Connect(AllPerms());
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->CachePut(cache, "a", "1"));
    ASSERT_TRUE(client->CachePut(cache, "b", "2"));
    ASSERT_TRUE(client->CachePut(cache, "e", ""));
    ASSERT_TRUE(client->CacheDelete(cache, "b"));
    ASSERT_TRUE(client->CachePut(cache, "a", "3"));
  }
  RestartBroker();
  auto client = Connect(AllPerms());
  ASSERT_TRUE(client);
  EXPECT_EQ(*client->CacheGet(cache, "a"), "3");
  EXPECT_EQ(*client->CacheGet(cache, "b"), std::nullopt);
  EXPECT_EQ(*client->CacheGet(cache, "e"), std::string());
}

TEST_F(CacheE2E, CompactionKeepsOffsetsAndShrinksDiskUse) {
  CreateCache("hot");
  CacheRef cache{"default", "hot"};
  auto client = Connect(AllPerms());
  ASSERT_TRUE(client);
  // Overwrite two keys until far more than the 1 MiB floor (and 4x the live set) is garbage.
  std::string big(8192, 'z');
  for (int i = 0; i < 200; ++i) {
    auto put = client->CachePut(cache, i % 2 ? "odd" : "even", big + std::to_string(i));
    ASSERT_TRUE(put) << put.error().ToString();
  }
  const auto log_dir = CacheShardDir("hot") / "cache";
  // 200 x 8 KiB went to the log. Compaction runs on the shard after a write once the log
  // passes the 1 MiB floor; wait (with a deadline) for the disk use to fall below half of it.
  const uint64_t written = 200 * big.size();
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (DirBytes(log_dir) > written / 2 && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(client->CacheGet(cache, "odd"));  // a round trip, no sleep
  }
  EXPECT_LT(DirBytes(log_dir), written / 2) << "compaction did not shrink the cache log";
  EXPECT_EQ(*client->CacheGet(cache, "odd"), big + "199");
  EXPECT_EQ(*client->CacheGet(cache, "even"), big + "198");

  // The log was not renumbered: its base moved up, and the tail went on past the 200 puts.
  auto [rc, out] = Felix({"log", "inspect", log_dir.string()});
  ASSERT_EQ(rc, 0) << out;
  auto base_at = out.find("base ");
  ASSERT_NE(base_at, std::string::npos) << out;
  uint64_t base = std::stoull(out.substr(base_at + 5));
  auto tail_at = out.find("tail ", base_at);
  ASSERT_NE(tail_at, std::string::npos) << out;
  uint64_t tail = std::stoull(out.substr(tail_at + 5));
  EXPECT_GT(base, 0u) << out;
  EXPECT_GE(tail, 202u) << out;  // 200 puts and at least the two copies

  ASSERT_TRUE(client->CachePut(cache, "after", "a"));
  client.reset();
  RestartBroker();
  client = Connect(AllPerms());
  ASSERT_TRUE(client);
  EXPECT_EQ(*client->CacheGet(cache, "odd"), big + "199");
  EXPECT_EQ(*client->CacheGet(cache, "even"), big + "198");
  EXPECT_EQ(*client->CacheGet(cache, "after"), "a");
}

TEST_F(CacheE2E, ReadPermissionCannotWriteAndWritePermissionCannotRead) {
  CreateCache("guarded");
  CacheRef cache{"default", "guarded"};
  std::string scope = "cache:" + creds_.tenant_id + "/default/guarded";
  auto writer = Connect({"cache.write:" + scope});
  auto reader = Connect({"cache.read:" + scope});
  auto user1 = Connect({"cache.read:" + scope + "/user:1*", "cache.write:" + scope + "/user:1*"});
  ASSERT_TRUE(writer && reader && user1);

  ASSERT_TRUE(writer->CachePut(cache, "k", "v"));
  EXPECT_TRUE(writer->CounterAdd(cache, "n", 2));
  auto read_by_writer = writer->CacheGet(cache, "k");
  ASSERT_FALSE(read_by_writer);
  EXPECT_EQ(read_by_writer.error().code, ClientErrorCode::kForbidden);
  auto counter_by_writer = writer->CounterGet(cache, "n");
  ASSERT_FALSE(counter_by_writer);
  EXPECT_EQ(counter_by_writer.error().code, ClientErrorCode::kForbidden);

  EXPECT_EQ(*reader->CacheGet(cache, "k"), "v");
  EXPECT_EQ(*reader->CounterGet(cache, "n"), 2);
  auto put_by_reader = reader->CachePut(cache, "k", "x");
  ASSERT_FALSE(put_by_reader);
  EXPECT_EQ(put_by_reader.error().code, ClientErrorCode::kForbidden);
  auto delete_by_reader = reader->CacheDelete(cache, "k");
  ASSERT_FALSE(delete_by_reader);
  EXPECT_EQ(delete_by_reader.error().code, ClientErrorCode::kForbidden);
  auto add_by_reader = reader->CounterAdd(cache, "n", 1);
  ASSERT_FALSE(add_by_reader);
  EXPECT_EQ(add_by_reader.error().code, ClientErrorCode::kForbidden);
  EXPECT_EQ(*reader->CacheGet(cache, "k"), "v") << "the refused put changed nothing";

  // Key grants: only keys under the prefix.
  ASSERT_TRUE(user1->CachePut(cache, "user:10", "ok"));
  EXPECT_EQ(*user1->CacheGet(cache, "user:10"), "ok");
  auto other = user1->CacheGet(cache, "user:2");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ClientErrorCode::kForbidden);
  // Another cache of the same namespace is not covered.
  CreateCache("other");
  auto elsewhere = reader->CacheGet(CacheRef{"default", "other"}, "k");
  ASSERT_FALSE(elsewhere);
  EXPECT_EQ(elsewhere.error().code, ClientErrorCode::kForbidden);
}

TEST_F(CacheE2E, CliPutGetDelAndCounters) {
  CreateCache("cli");
  auto run = [&](std::vector<std::string> args) {
    auto [rc, out] = Felix(args);
    EXPECT_EQ(rc, 0) << out;
    return out;
  };
  run({"cache", "put", "cli", "greeting", "hello"});
  EXPECT_EQ(run({"cache", "get", "cli", "greeting"}), "hello\n");
  run({"cache", "put", "cli", "empty", ""});
  EXPECT_EQ(run({"cache", "get", "cli", "empty"}), "\n");
  auto [miss_rc, miss_out] = Felix({"cache", "get", "cli", "nobody"});
  EXPECT_EQ(miss_rc, 3) << miss_out;  // a miss is its own exit code
  EXPECT_EQ(run({"cache", "incr", "cli", "visits"}), "1\n");
  EXPECT_EQ(run({"cache", "incr", "cli", "visits", "--by", "-5"}), "-4\n");
  EXPECT_EQ(run({"cache", "counter", "cli", "visits"}), "-4\n");
  EXPECT_EQ(run({"cache", "del", "cli", "greeting"}), "hello\n");
  auto [gone_rc, gone_out] = Felix({"cache", "get", "cli", "greeting"});
  EXPECT_EQ(gone_rc, 3) << gone_out;
  run({"cache", "put", "cli", "t", "v", "--ttl-ms", "100"});
  auto deadline = std::chrono::steady_clock::now() + 20s;
  int rc = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    rc = Felix({"cache", "get", "cli", "t"}).first;
    if (rc == 3) break;
  }
  EXPECT_EQ(rc, 3);
}

}  // namespace
}  // namespace felix
