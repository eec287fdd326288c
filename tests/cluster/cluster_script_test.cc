// End to end: scripts/cluster runs a real two-node cluster (etcd + brokers built in this build
// directory): `up` waits until ready and writes the env file, a second `up` is refused,
// `status` lists both nodes, `kill` and `start` restart a node as itself, and `down` leaves no
// process it started running.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "support/child_process.h"

namespace felix {
namespace {

using testing::MakeTempDir;
using testing::RunProgram;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Alive(const std::string& pidfile) {
  std::string text = Read(pidfile);
  if (text.empty()) return false;
  return kill(std::stoi(text), 0) == 0;
}

class ClusterScript : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("felix-cluster-script") + "/c"; }
  void TearDown() override {
    Run({"down"});  // whatever a failed assertion left running
    std::filesystem::remove_all(std::filesystem::path(dir_).parent_path());
  }
  std::pair<int, std::string> Run(const std::vector<std::string>& args) {
    std::vector<std::string> all = {std::string(std::getenv("FELIX_SOURCE_DIR")) +
                                    "/scripts/cluster"};
    all.insert(all.end(), args.begin(), args.end());
    return RunProgram("/bin/bash", all,
                      {{"FELIX_CLUSTER_DIR", dir_},
                       {"FELIX_BUILD_DIR", std::getenv("FELIX_BINARY_DIR")},
                       {"FELIX_CLUSTER_READY_TIMEOUT", "60"}});
  }
  std::string dir_;
};

TEST_F(ClusterScript, UpStatusKillStartDown) {
  auto up = Run({"up", "2"});
  ASSERT_EQ(up.first, 0) << up.second;
  std::string env = Read(dir_ + "/env");
  EXPECT_NE(env.find("export FELIX_DATA_DIR='" + dir_ + "/client'"), std::string::npos) << env;
  EXPECT_NE(env.find("export FELIX_BROKERS='127.0.0.1:"), std::string::npos) << env;
  EXPECT_NE(env.find(",127.0.0.1:"), std::string::npos) << env;
  EXPECT_NE(env.find("export FELIX_ETCD_ENDPOINTS='http://127.0.0.1:"), std::string::npos) << env;
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/client/admin-credentials.json"));

  auto again = Run({"up"});
  EXPECT_NE(again.first, 0);
  EXPECT_NE(again.second.find("already up"), std::string::npos) << again.second;

  auto status = Run({"status", "--json"});
  ASSERT_EQ(status.first, 0) << status.second;
  EXPECT_NE(status.second.find("\"node_id\":\"n1\""), std::string::npos) << status.second;
  EXPECT_NE(status.second.find("\"node_id\":\"n2\""), std::string::npos) << status.second;

  std::string n2_pid = Read(dir_ + "/nodes/n2/pid");
  auto killed = Run({"kill", "n2"});
  ASSERT_EQ(killed.first, 0) << killed.second;
  EXPECT_EQ(kill(std::stoi(n2_pid), 0), -1) << "n2 survived SIGKILL";
  auto started = Run({"start", "n2"});
  ASSERT_EQ(started.first, 0) << started.second;
  EXPECT_NE(started.second.find("n2 ready"), std::string::npos) << started.second;

  std::vector<std::string> pidfiles = {dir_ + "/nodes/n1/pid", dir_ + "/nodes/n2/pid",
                                       dir_ + "/etcd/pid"};
  std::vector<int> pids;
  for (const auto& f : pidfiles) {
    ASSERT_TRUE(Alive(f)) << f;
    pids.push_back(std::stoi(Read(f)));
  }
  auto down = Run({"down"});
  ASSERT_EQ(down.first, 0) << down.second;
  for (int pid : pids) EXPECT_EQ(kill(pid, 0), -1) << "pid " << pid << " still runs after down";
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/nodes/n1/data")) << "down removes nothing";
  auto down_again = Run({"down"});
  EXPECT_EQ(down_again.first, 0);
  EXPECT_NE(down_again.second.find("nothing was running"), std::string::npos) << down_again.second;
}

TEST_F(ClusterScript, RefusesBadArguments) {
  EXPECT_EQ(Run({}).first, 2);
  EXPECT_EQ(Run({"bogus"}).first, 2);
  auto bad_n = Run({"up", "x"});
  EXPECT_EQ(bad_n.first, 1);
  EXPECT_NE(bad_n.second.find("N must be a number"), std::string::npos) << bad_n.second;
  auto no_cluster = Run({"kill", "n1"});
  EXPECT_EQ(no_cluster.first, 1);
  EXPECT_NE(no_cluster.second.find("no cluster in"), std::string::npos) << no_cluster.second;
  auto down = Run({"down"});
  EXPECT_EQ(down.first, 0) << down.second;
  EXPECT_FALSE(std::filesystem::exists(dir_)) << "down with nothing up creates nothing";
}

}  // namespace
}  // namespace felix
