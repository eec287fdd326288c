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

#include "cli/client_connection.h"
#include "cli/command.h"
#include "felix/client.h"

namespace felix::cli {

namespace {

constexpr int kExitNoValue = 3;

struct CacheArgs {
  std::string cache;
  std::string key;
  std::string value;
  int64_t ttl_ms = -1;  // -1: none given
  int64_t by = 1;
};

ClientOptions Resolve(const ClientConnection& c, const CacheRef& cache) {
  return ResolveClientOptions(c, cache.namespace_name, cache.cache,
                              {"cache.read:cache:{scope}", "cache.write:cache:{scope}"});
}

// Connects for `args.cache` and runs `fn` with the client and the cache.
template <typename Fn>
void WithClient(const ClientConnection& c, const CacheArgs& args, Fn fn) {
  auto cache = CacheRef::Parse(args.cache);
  if (!cache) Die(cache.error().message, 2);
  auto client = ConnectOrDie(Resolve(c, *cache));
  fn(*client, *cache);
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
  auto conn = std::make_shared<ClientConnection>();
  auto args = std::make_shared<CacheArgs>();
  auto positional = [args](CLI::App* cmd, bool with_value) {
    cmd->add_option("cache", args->cache, "cache or namespace/cache")->required();
    cmd->add_option("key", args->key, "key")->required();
    if (with_value) cmd->add_option("value", args->value, "value (may be empty)")->required();
  };

  CLI::App* put = group->add_subcommand("put", "store a value");
  AddClientConnectionOptions(put, *conn);
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
  AddClientConnectionOptions(get, *conn);
  positional(get, false);
  get->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      PrintOrMiss(OrDie(client.CacheGet(cache, args->key), "get"));
    });
  });

  CLI::App* del = group->add_subcommand("del", "delete a value, print what it was (exit 3: none)");
  AddClientConnectionOptions(del, *conn);
  positional(del, false);
  del->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      PrintOrMiss(OrDie(client.CacheDelete(cache, args->key), "delete"));
    });
  });

  CLI::App* incr = group->add_subcommand("incr", "add to a counter, print the new sum");
  AddClientConnectionOptions(incr, *conn);
  positional(incr, false);
  incr->add_option("--by", args->by, "delta, may be negative (default 1)");
  incr->callback([conn, args] {
    WithClient(*conn, *args, [&](Client& client, const CacheRef& cache) {
      std::cout << OrDie(client.CounterAdd(cache, args->key, args->by), "incr") << "\n";
    });
  });

  CLI::App* counter =
      group->add_subcommand("counter", "print a counter's sum (exit 3: never written)");
  AddClientConnectionOptions(counter, *conn);
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
