// What the owner-side forward tests share: a router whose answer the test sets, routes of each
// kind, and a fixture with a real embedded catalog (tenant keys) and a real BrokerCore on a temp
// directory behind a ShardResolver, minting tokens with the tenant's own key.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "auth/token.h"
#include "broker/broker_core.h"
#include "broker/shard_resolver.h"
#include "catalog/embedded_catalog.h"
#include "cluster/forward_owner.h"
#include "support/child_process.h"

namespace felix::cluster::test {

// A router whose answer the test sets (one answer for every shard).
class SetRouter final : public broker::ShardRouter {
 public:
  broker::Route RouteShard(const broker::ShardId&) const override {
    std::lock_guard lock(mu_);
    return route_;
  }
  void Set(broker::Route route) {
    std::lock_guard lock(mu_);
    route_ = std::move(route);
  }

 private:
  mutable std::mutex mu_;
  broker::Route route_;
};

inline broker::Route LocalRoute(uint64_t generation) {
  broker::Route r;
  r.where = broker::Route::Where::kLocal;
  r.generation = Generation(generation);
  return r;
}

inline broker::Route RemoteRoute(const std::string& owner, uint64_t generation) {
  broker::Route r;
  r.where = broker::Route::Where::kRemote;
  r.owner_node_id = owner;
  r.owner_client_addr = "127.0.0.1:7000";
  r.generation = Generation(generation);
  return r;
}

// Node n1 at 127.0.0.1:6001; n2's internal address is 127.0.0.1:6002.
inline ForwardOwnerOptions OwnerOptions() {
  ForwardOwnerOptions o;
  o.own_node_id = "n1";
  o.own_internal_addr = "127.0.0.1:6001";
  o.internal_addr_of = [](std::string_view node) {
    return node == "n2" ? std::string("127.0.0.1:6002") : std::string();
  };
  return o;
}

class OwnerFixture : public ::testing::Test {
 protected:
  // Opens the catalog; the test then creates its streams/caches and calls StartCore().
  void OpenCatalog(const std::string& name) {
    dir_ = felix::testing::MakeTempDir(name);
    auto c = catalog::EmbeddedCatalog::Open(dir_ + "/catalog", {});
    ASSERT_TRUE(c) << c.error().ToString();
    catalog_ = std::move(*c);
  }
  // `tweak` (optional) adjusts the core's options before it starts (e.g. the commit gate of
  // Quorum streams).
  void StartCore(const std::function<void(broker::BrokerCoreOptions&)>& tweak = {}) {
    broker::BrokerCoreOptions o;
    o.storage_dir = dir_ + "/data";
    o.executors = 1;
    if (tweak) tweak(o);
    core_ = std::make_unique<broker::BrokerCore>(std::move(o), *catalog_, metrics_);
    resolver_ = std::make_unique<broker::ShardResolver>(*core_, router_);
  }
  void StopCore() {
    if (core_) core_->Stop();
  }

  std::string Token(std::vector<std::string> perms, std::string tenant = "default") {
    auto key = catalog_->SigningKeyFor("default");
    EXPECT_TRUE(key);
    auth::TokenClaims claims;
    claims.sub = "tester";
    claims.tid = std::move(tenant);
    claims.iat = auth::NowUnixSeconds();
    claims.exp = claims.iat + 600;
    claims.perms = std::move(perms);
    return auth::MintToken(*key, claims);
  }

  std::string dir_;
  MetricsRegistry metrics_;
  std::unique_ptr<catalog::EmbeddedCatalog> catalog_;
  SetRouter router_;
  std::unique_ptr<broker::BrokerCore> core_;
  std::unique_ptr<broker::ShardResolver> resolver_;
};

}  // namespace felix::cluster::test
