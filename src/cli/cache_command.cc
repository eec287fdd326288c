// `felix cache put|get|del|incr|counter`: cache values and counters through the C++ client
// library (the `cache` group's create/list/delete live in admin_command.cc). Like pub/sub,
// these find the broker's QUIC address, the tenant, the CA file and a token by themselves
// from the broker's credential file (the token is minted locally, scoped to the one cache);
// --broker, --tenant, --token, --ca override each.
//
// Exit codes: 0 done, 1 failure, 2 usage, 3 no value (a miss, nothing deleted, a counter
// never written), so scripts can tell a miss from an error.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/credentials.h"
#include "felix/client.h"

namespace felix::cli {

namespace {

constexpr int kExitNoValue = 3;

[[noreturn]] void Die(const std::string& message, int code = 1) {
  std::cerr << "felix: " << message << "\n";
  throw CLI::RuntimeError(code);
}

struct CacheConnection {
  std::string credentials;
  std::string broker;
  std::string tenant;
  std::string token;
  std::string ca;
  std::string server_name = "localhost";
  int64_t timeout_ms = 10000;
};

struct CacheArgs {
  std::string cache;
  std::string key;
  std::string value;
  int64_t ttl_ms = -1;  // -1: none given
  int64_t by = 1;
};

void AddOptions(CLI::App* cmd, CacheConnection& c) {
  cmd->add_option("--credentials", c.credentials,
                  "credential file (default: $FELIX_DATA_DIR or ./felix-data)");
  cmd->add_option("--broker", c.broker, "broker QUIC address host:port (default: credential file)");
  cmd->add_option("--tenant", c.tenant, "tenant (default: the credential file's tenant)");
  cmd->add_option("--token", c.token,
                  "Felix token (default: $FELIX_AUTH_TOKEN, else minted from the credential file)");
  cmd->add_option("--ca", c.ca, "PEM file that verifies the broker (default: credential file)");
  cmd->add_option("--server-name", c.server_name, "TLS name of the broker (default localhost)");
  cmd->add_option("--timeout-ms", c.timeout_ms, "connect and answer timeout (default 10000)");
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

ClientOptions Resolve(const CacheConnection& c, const CacheRef& cache) {
  std::string path;
  auto creds = LoadCliCredentials(c.credentials, &path);
  ClientOptions o;
  o.broker = !c.broker.empty()                    ? c.broker
             : creds && !creds->quic_addr.empty() ? creds->quic_addr
                                                  : std::string("127.0.0.1:5000");
  o.tenant_id = !c.tenant.empty() ? c.tenant : creds ? creds->tenant_id : std::string("default");
  o.server_name = c.server_name;
  o.ca_file = c.ca;
  if (o.ca_file.empty() && creds && !creds->ca_file.empty() &&
      std::filesystem::exists(creds->ca_file)) {
    o.ca_file = creds->ca_file;
  }
  if (o.ca_file.empty()) {
    o.ca_file = (std::filesystem::path(path).parent_path() / "tls" / "broker-cert.pem").string();
    if (!std::filesystem::exists(o.ca_file))
      Die("no CA file to verify the broker: " + o.ca_file + " does not exist (pass --ca PEM)");
  }
  o.token = !c.token.empty() ? c.token : EnvOr("FELIX_AUTH_TOKEN", EnvOr("FELIX_TOKEN", ""));
  if (o.token.empty()) {
    if (!creds)
      Die("no token: pass --token, set FELIX_AUTH_TOKEN, or give the credential file (" +
          creds.error().message + ")");
    std::string scope = "cache:" + o.tenant_id + "/" + cache.namespace_name + "/" + cache.cache;
    auto token =
        MintLocalToken(*creds, o.tenant_id, "felix-cli",
                       {"cache.read:" + scope, "cache.write:" + scope}, 3600, "felix-broker");
    if (!token) Die("cannot mint a token: " + token.error().message);
    o.token = *token;
  }
  o.connect_timeout = std::chrono::milliseconds(c.timeout_ms);
  o.request_timeout = std::chrono::milliseconds(c.timeout_ms);
  return o;
}

// Connects for `args.cache` and runs `fn` with the client and the cache.
template <typename Fn>
void WithClient(const CacheConnection& c, const CacheArgs& args, Fn fn) {
  auto cache = CacheRef::Parse(args.cache);
  if (!cache) Die(cache.error().message, 2);
  ClientOptions options = Resolve(c, *cache);
  auto client = Client::Connect(options);
  if (!client) Die("cannot connect to " + options.broker + ": " + client.error().ToString());
  fn(**client, *cache);
}

template <typename T>
T OrDie(ClientResult<T> result, const std::string& what) {
  if (!result) Die(what + ": " + result.error().ToString());
  return std::move(*result);
}

void PrintOrMiss(const std::optional<std::string>& value) {
  if (!value) throw CLI::RuntimeError(kExitNoValue);
  std::cout << *value << "\n";
}

}  // namespace

void RegisterCacheCommands(CLI::App& app) {
  CLI::App* group = nullptr;
  try {
    group = app.get_subcommand("cache");  // the admin group (create/list/delete)
  } catch (const CLI::OptionNotFound&) {
    group = app.add_subcommand("cache", "cache values and counters");
    group->require_subcommand(1);
  }
  group->description("create, list and delete caches; put, get and delete values; counters");
  auto conn = std::make_shared<CacheConnection>();
  auto args = std::make_shared<CacheArgs>();
  auto positional = [args](CLI::App* cmd, bool with_value) {
    cmd->add_option("cache", args->cache, "cache or namespace/cache")->required();
    cmd->add_option("key", args->key, "key")->required();
    if (with_value) cmd->add_option("value", args->value, "value (may be empty)")->required();
  };

  CLI::App* put = group->add_subcommand("put", "store a value");
  AddOptions(put, *conn);
  positional(put, true);
  put->add_option("--ttl-ms", args->ttl_ms, "expire after this many ms (default: the cache's)");
  put->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      std::optional<std::chrono::milliseconds> ttl;
      if (args->ttl_ms >= 0) ttl = std::chrono::milliseconds(args->ttl_ms);
      auto stored = client.CachePut(cache, args->key, args->value, ttl);
      if (!stored) Die("put: " + stored.error().ToString());
    });
  });

  CLI::App* get = group->add_subcommand("get", "print a value (exit 3 when missing)");
  AddOptions(get, *conn);
  positional(get, false);
  get->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      PrintOrMiss(OrDie(client.CacheGet(cache, args->key), "get"));
    });
  });

  CLI::App* del = group->add_subcommand("del", "delete a value, print what it was (exit 3: none)");
  AddOptions(del, *conn);
  positional(del, false);
  del->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      PrintOrMiss(OrDie(client.CacheDelete(cache, args->key), "delete"));
    });
  });

  CLI::App* incr = group->add_subcommand("incr", "add to a counter, print the new sum");
  AddOptions(incr, *conn);
  positional(incr, false);
  incr->add_option("--by", args->by, "delta, may be negative (default 1)");
  incr->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      std::cout << OrDie(client.CounterAdd(cache, args->key, args->by), "incr") << "\n";
    });
  });

  CLI::App* counter =
      group->add_subcommand("counter", "print a counter's sum (exit 3: never written)");
  AddOptions(counter, *conn);
  positional(counter, false);
  counter->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      auto sum = OrDie(client.CounterGet(cache, args->key), "counter");
      if (!sum) throw CLI::RuntimeError(kExitNoValue);
      std::cout << *sum << "\n";
    });
  });
}

}  // namespace felix::cli
