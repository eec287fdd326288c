// What the end-to-end tests on a ClusterHarness share: waiting for cluster state that arrives
// through etcd watches on other processes, and admin calls on one node.
// Not thread-safe beyond what the harness is: one test thread drives it.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/net_address.h"
#include "support/cluster_harness.h"

namespace felix::cluster::e2e {

// Polls `pred` until it holds or `limit` passes (cluster state arrives through etcd watches on
// other processes: there is no event to wait on from here).
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

inline HostPort Addr(const std::string& text) {
  return *ParseHostPort(text);
}

// Admin call (GET or POST) on node n with the harness's admin token: {status, body}; status 0
// when the node did not answer.
inline std::pair<int, nlohmann::json> Admin(const felix::testing::ClusterHarness& cluster, int n,
                                            const std::string& method, const std::string& path,
                                            const nlohmann::json& body = nullptr) {
  HostPort http = Addr(cluster.http_addr(n));
  httplib::Client client(http.host, http.port);
  client.set_read_timeout(10, 0);
  httplib::Headers headers{{"Authorization", "Bearer " + cluster.admin_token()}};
  auto r = method == "POST" ? client.Post(path, headers, body.dump(), "application/json")
                            : client.Get(path, headers);
  if (!r) return {0, nullptr};
  return {r->status,
          r->body.empty() ? nlohmann::json() : nlohmann::json::parse(r->body, nullptr, false)};
}

// A token of the default tenant that may publish to and subscribe to every stream (minted by
// node 1's admin API).
inline std::string StreamToken(const felix::testing::ClusterHarness& cluster) {
  auto [status, body] =
      Admin(cluster, 1, "POST", "/v1/tenants/default/tokens",
            nlohmann::json{
                {"subject", "tester"},
                {"permissions",
                 {"stream.publish:stream:default/*/*", "stream.subscribe:stream:default/*/*"}}});
  EXPECT_EQ(status, 200) << body.dump();
  return body.value("felix_token", "");
}

}  // namespace felix::cluster::e2e
