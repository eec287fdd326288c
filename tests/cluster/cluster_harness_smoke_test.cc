// End to end: ClusterHarness starts a real etcd and three real cluster-mode brokers with
// generated certificates; all three become ready, every broker's GET /v1/cluster lists the
// three nodes with the addresses the harness gave them, and a killed node comes back as itself.
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cluster_harness.h"

namespace felix {
namespace {

using nlohmann::json;
using testing::ClusterHarness;

// node_id -> client_addr from one broker's /v1/cluster.
std::map<std::string, std::string> Nodes(const ClusterHarness& h, int n) {
  int status = 0;
  auto body = h.AdminGet(n, "/v1/cluster", &status);
  EXPECT_TRUE(body) << "GET /v1/cluster on n" << n << ": HTTP " << status;
  std::map<std::string, std::string> out;
  if (!body) return out;
  json answer = json::parse(*body, nullptr, false);
  EXPECT_TRUE(answer.is_object() && answer.contains("nodes")) << *body;
  if (!answer.is_object() || !answer["nodes"].is_array()) return out;
  EXPECT_EQ(answer.value("cluster", ""), "felix") << *body;
  for (const auto& node : answer["nodes"])
    out[node.value("node_id", "")] = node.value("client_addr", "");
  return out;
}

TEST(ClusterHarnessSmoke, ThreeNodesRegisterAndARestartedNodeReturns) {
  ClusterHarness h;
  ASSERT_TRUE(h.StartAll()) << h.error();
  std::map<std::string, std::string> expected;
  for (int n = 1; n <= 3; ++n) expected[h.node_id(n)] = h.client_addr(n);
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(Nodes(h, n), expected) << "as seen by n" << n;

  h.Kill(2);
  EXPECT_FALSE(h.Running(2));
  ASSERT_TRUE(h.StartReady(2)) << h.error();
  EXPECT_EQ(Nodes(h, 2), expected);
}

}  // namespace
}  // namespace felix
