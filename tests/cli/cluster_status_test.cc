// `felix cluster status` against an HTTP server that answers GET /v1/cluster the way a cluster
// broker does (the real brokers are exercised by tests/cluster): the admin token is sent, the
// nodes, controller and shard table are printed, --json prints the answer unchanged, and an
// HTTP error or a missing controller are reported.
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "support/child_process.h"

namespace felix {
namespace {

using testing::BuiltProgram;
using testing::RunProgram;

const char* kAnswer =
    R"({"cluster":"felix","controller":{"node_id":"n2","incarnation":4},)"
    R"("nodes":[{"node_id":"n1","incarnation":1,"internal_addr":"127.0.0.1:7001",)"
    R"("client_addr":"127.0.0.1:7000","zone":"z-a","version":"0.1.0"},)"
    R"({"node_id":"n2","incarnation":4,"internal_addr":"127.0.0.1:7011",)"
    R"("client_addr":"127.0.0.1:7010","zone":"","version":"0.1.0"}],)"
    R"("shards":[{"kind":"stream","tenant":"default","namespace":"default","name":"orders",)"
    R"("shard":3,"leader":"n2","replicas":["n2","n1"],"generation":7,"state":"active"}]})";

const char* kReplication =
    R"({"node_id":"n2","led":[{"kind":"stream","tenant":"default","namespace":"default",)"
    R"("name":"orders","shard":3,"generation":7,"followers":[{"node_id":"n1","log":"stream",)"
    R"("next":40,"confirmed":40,"lag":2,"in_sync":false,"stalled":false,"rebuilding":false,)"
    R"("halted":"","halt_detail":""},{"node_id":"n3","log":"stream","next":9,"confirmed":9,)"
    R"("lag":33,"in_sync":false,"stalled":false,"rebuilding":false,"halted":"diverged",)"
    R"("halt_detail":"conflict at 9"}]}],)"
    R"("followed":[{"kind":"cache","tenant":"default","namespace":"default","name":"s",)"
    R"("shard":0,"open":true,"generation":2,"logs":[{"log":"cache","base":0,"tail":12,)"
    R"("durable":12,"halted":"","halt_detail":""}]}]})";

class CliClusterStatus : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/replication", [](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer secret") {
        res.status = 403;
        return;
      }
      res.set_content(kReplication, "application/json");
    });
    server_.Get("/v1/cluster", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer secret") {
        res.status = 403;
        res.set_content(R"({"code":"forbidden","message":"bad admin token"})", "application/json");
        return;
      }
      res.set_content(answer_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // bind_to_any_port also listens: a request made now waits in the backlog until accepted.
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  std::pair<int, std::string> Status(const std::string& token,
                                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"cluster",       "status",
                                     "--url",         "http://127.0.0.1:" + std::to_string(port_),
                                     "--admin-token", token};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunProgram(BuiltProgram("src/cli/felix"), args, {{"FELIX_DATA_DIR", "/nonexistent"}});
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::string answer_ = kAnswer;
};

TEST_F(CliClusterStatus, PrintsNodesControllerAndShards) {
  auto [code, out] = Status("secret");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("cluster felix\n"), std::string::npos) << out;
  EXPECT_NE(out.find("controller n2 (incarnation 4)"), std::string::npos) << out;
  EXPECT_NE(out.find("nodes (2)"), std::string::npos) << out;
  EXPECT_NE(out.find("n1    1            127.0.0.1:7000  127.0.0.1:7001  z-a   0.1.0"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("n2    4            127.0.0.1:7010  127.0.0.1:7011  -     0.1.0"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("shards (1)"), std::string::npos) << out;
  EXPECT_NE(out.find("stream default/default/orders#3  n2      n2,n1     7           active"),
            std::string::npos)
      << out;
  // Replication as the asked broker runs it: per follower and log, and per followed log.
  EXPECT_NE(out.find("replication led by n2"), std::string::npos) << out;
  EXPECT_NE(out.find("SHARD                            GENERATION  REPLICA  LOG     DURABLE  LAG  "
                     "IN_SYNC  HALTED"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("stream default/default/orders#3  7           n1       stream  40       2    "
                     "no       -"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("stream default/default/orders#3  7           n3       stream  9        33   "
                     "no       diverged"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("replication followed on n2"), std::string::npos) << out;
  EXPECT_NE(out.find("cache default/default/s#0  2           cache  12    12       -"),
            std::string::npos)
      << out;
}

TEST_F(CliClusterStatus, JsonIsTheAnswerUnchanged) {
  auto [code, out] = Status("secret", {"--json"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out, std::string(kAnswer) + "\n");
}

TEST_F(CliClusterStatus, NoControllerAndRefusedToken) {
  answer_ = R"({"cluster":"felix","controller":null,"nodes":[],"shards":[]})";
  auto [code, out] = Status("secret");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("controller none"), std::string::npos) << out;
  auto [code2, out2] = Status("wrong");
  EXPECT_EQ(code2, 1);
  EXPECT_NE(out2.find("HTTP 403: bad admin token"), std::string::npos) << out2;
}

}  // namespace
}  // namespace felix
