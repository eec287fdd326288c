// Cost of what the broker does per `auth` (VerifyToken) and per request (permission checks).
#include <benchmark/benchmark.h>

#include "auth/token.h"

namespace {

using namespace felix::auth;

std::vector<std::string> DemoPerms() {
  return {"tenant.manage:tenant:t1",
          "ns.manage:namespace:t1/*",
          "stream.publish:stream:t1/payments/*",
          "stream.subscribe:stream:t1/*/*",
          "cache.read:cache:t1/*/*",
          "cache.write:cache:t1/ns/sessions/user:1*"};
}

void BM_VerifyToken(benchmark::State& state) {
  SigningKey key = SigningKey::Generate("k1");
  TokenClaims claims;
  claims.sub = "p:demo";
  claims.tid = "t1";
  claims.iat = 1767225600;
  claims.exp = claims.iat + 900;
  claims.perms = DemoPerms();
  std::string token = MintToken(key, claims);
  std::vector<VerifyingKey> keys = {key.verifying_key()};
  VerifyOptions options;
  options.now_unix_seconds = claims.iat;
  for (auto _ : state) {
    auto ctx = VerifyToken(token, "t1", keys, options);
    benchmark::DoNotOptimize(ctx);
  }
}
BENCHMARK(BM_VerifyToken);

void BM_AllowsStreamPublish(benchmark::State& state) {
  auto perms = DemoPerms();
  auto set = PermissionSet::Compile(perms);
  for (auto _ : state) {
    bool ok = set->AllowsStream(Action::kStreamPublish, "t1", "payments", "orders");
    benchmark::DoNotOptimize(ok);
  }
}
BENCHMARK(BM_AllowsStreamPublish);

void BM_AllowsCacheKey(benchmark::State& state) {
  auto perms = DemoPerms();
  auto set = PermissionSet::Compile(perms);
  for (auto _ : state) {
    bool ok = set->AllowsCacheKey(Action::kCacheWrite, "t1", "ns", "sessions",
                                  {CacheKey::Kind::kKey, "user:1234"});
    benchmark::DoNotOptimize(ok);
  }
}
BENCHMARK(BM_AllowsCacheKey);

}  // namespace

BENCHMARK_MAIN();
