// Smoke test of felix-bench against the real broker: proves the load generator works (counts,
// fanout deliveries, acknowledgement samples, report output), never how fast anything is.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <gtest/gtest.h>

#include "support/child_process.h"

namespace felix {
namespace {

using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;
using felix::testing::RunProgram;

class FelixBenchSmoke : public ::testing::Test {
 protected:
  void SetUp() override {
    data_dir_ = MakeTempDir("felix-bench-smoke");
    broker_ = std::make_unique<ChildProcess>(
        BuiltProgram("src/server/felix-broker"), std::vector<std::string>{},
        std::map<std::string, std::string>{{"FELIX_DATA_DIR", data_dir_},
                                           {"FELIX_QUIC_BIND", "127.0.0.1:0"},
                                           {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
                                           {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"}});
    ASSERT_TRUE(broker_->WaitForLine("felix-broker listening")) << broker_->stderr_text();
    credentials_ = data_dir_ + "/admin-credentials.json";
  }
  void TearDown() override {
    if (broker_) {
      EXPECT_EQ(broker_->Stop(SIGTERM), 0);
    }
  }

  void CreateStream(std::vector<std::string> args) { Create("stream", std::move(args)); }
  void Create(const std::string& kind, std::vector<std::string> args) {
    args.insert(args.begin(), {kind, "create"});
    auto [rc, out] =
        RunProgram(BuiltProgram("src/cli/felix"), args, {{"FELIX_DATA_DIR", data_dir_}});
    ASSERT_EQ(rc, 0) << out;
  }

  // Runs felix-bench and returns its JSON line.
  nlohmann::json Bench(std::vector<std::string> args) {
    args.insert(args.begin(), {"--credentials", credentials_});
    auto [rc, out] = RunProgram(BuiltProgram("bench/felix_bench/felix-bench"), args);
    EXPECT_EQ(rc, 0) << out;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      auto json = nlohmann::json::parse(line, nullptr, false);
      if (json.is_object()) return json;
    }
    ADD_FAILURE() << "no JSON line in: " << out;
    return {};
  }

  std::string data_dir_, credentials_;
  std::unique_ptr<ChildProcess> broker_;
};

TEST_F(FelixBenchSmoke, PipelinedPublishWithFanoutDeliversEverything) {
  CreateStream({"smoke"});
  auto run = Bench({"--stream", "smoke", "--name", "smoke-mem", "--messages", "3000", "--batch",
                    "8", "--window", "4", "--fanout", "2"});
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run["system"], "felix");
  EXPECT_EQ(run["messages"], 3000);
  EXPECT_EQ(run["delivered"], 6000) << "every subscriber receives every message";
  EXPECT_EQ(run["dropped"], 0);
  EXPECT_EQ(run["ack_latency"]["count"], 375) << "one acknowledgement sample per batch";
  EXPECT_EQ(run["deliver_latency"]["count"], 6000);
  EXPECT_GT(run["msgs_per_sec"].get<double>(), 0);
}

TEST_F(FelixBenchSmoke, DurableAckedPublishAndReport) {
  CreateStream({"smoke-dur", "--durable", "--fsync-mode", "on_commit"});
  auto run =
      Bench({"--stream", "smoke-dur", "--name", "smoke-dur", "--messages", "200", "--durable"});
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run["messages"], 200);
  EXPECT_EQ(run["durable"], true);
  EXPECT_EQ(run["ack_latency"]["count"], 200);

  std::string jsonl = data_dir_ + "/runs.jsonl";
  std::ofstream(jsonl) << run.dump() << "\n";
  std::string markdown = data_dir_ + "/tables.md";
  auto [rc, out] = RunProgram(
      BuiltProgram("bench/felix_bench/felix-bench"),
      {"report", "--in", jsonl, "--markdown", markdown, "--plots", data_dir_, "--machine", "test"});
  ASSERT_EQ(rc, 0) << out;
  std::stringstream text;
  text << std::ifstream(markdown).rdbuf();
  EXPECT_NE(text.str().find("**smoke-dur**"), std::string::npos) << text.str();
  EXPECT_TRUE(std::filesystem::exists(data_dir_ + "/plots.gp"));
}

TEST_F(FelixBenchSmoke, CacheModeRunsGetsAndPutsFromManyClients) {
  Create("cache", {"smoke-cache", "--durable"});
  auto run = Bench({"--cache", "smoke-cache", "--name", "cache-smoke", "--messages", "400",
                    "--clients", "4", "--keys", "50", "--get-ratio", "0.5", "--payload", "32"});
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run["messages"], 400) << "4 clients x 100 requests, none failed";
  EXPECT_EQ(run["clients"], 4);
  EXPECT_EQ(run["ack_latency"]["count"], 400) << "one round-trip sample per request";
}

TEST_F(FelixBenchSmoke, QueueModeDrainsTheBacklog) {
  CreateStream({"smoke-queue", "--durable"});
  auto run = Bench({"--stream", "smoke-queue", "--group", "drain", "--name", "queue-smoke",
                    "--messages", "300", "--clients", "2", "--batch", "50"});
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run["messages"], 300) << "every backlog record acknowledged exactly once";
  EXPECT_EQ(run["ack_latency"]["count"], 300);
}

TEST_F(FelixBenchSmoke, MissingStreamFailsWithAMessage) {
  auto [rc, out] =
      RunProgram(BuiltProgram("bench/felix_bench/felix-bench"),
                 {"--credentials", credentials_, "--stream", "nope", "--messages", "1"});
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("felix-bench: publish:"), std::string::npos) << out;
}

}  // namespace
}  // namespace felix
