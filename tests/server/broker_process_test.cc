// End to end: the real felix-broker process, its HTTP endpoints and its shutdown.
#include <signal.h>

#include <filesystem>
#include <fstream>

#include <httplib.h>

#include <gtest/gtest.h>

#include "common/net_address.h"
#include "support/child_process.h"

namespace felix {
namespace {

using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;
using felix::testing::RunProgram;

// Starts a broker on free ports and returns the HTTP address it printed.
HostPort StartBroker(ChildProcess& broker) {
  auto line = broker.WaitForLine("felix-broker listening");
  EXPECT_TRUE(line) << broker.stderr_text();
  if (!line) return {};
  size_t at = line->find("http=");
  std::string addr = line->substr(at + 5, line->find(' ', at) - at - 5);
  auto parsed = ParseHostPort(addr);
  EXPECT_TRUE(parsed) << *line;
  return parsed ? *parsed : HostPort{};
}

std::map<std::string, std::string> TestEnv(const std::string& data_dir) {
  return {{"FELIX_DATA_DIR", data_dir},
          {"FELIX_QUIC_BIND", "127.0.0.1:0"},
          {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
          {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"}};
}

TEST(BrokerProcess, ServesHealthAndMetricsThenShutsDownCleanly) {
  std::string dir = MakeTempDir("felix-broker");
  ChildProcess broker(BuiltProgram("src/server/felix-broker"), {}, TestEnv(dir + "/data"));
  HostPort http = StartBroker(broker);
  ASSERT_NE(http.port, 0);

  httplib::Client client(http.host, http.port);
  auto live = client.Get("/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(live->body, "ok");
  auto ready = client.Get("/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("# TYPE felix_ready_state gauge"), std::string::npos);
  EXPECT_NE(metrics->body.find("felix_ready_state 1"), std::string::npos);
  EXPECT_EQ(client.Get("/nope")->status, 404);

  EXPECT_EQ(broker.Stop(SIGTERM), 0) << broker.stderr_text();
  EXPECT_NE(broker.stderr_text().find("drain complete"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/data"));
}

TEST(BrokerProcess, SigintAlsoShutsDownCleanly) {
  std::string dir = MakeTempDir("felix-broker");
  ChildProcess broker(BuiltProgram("src/server/felix-broker"), {}, TestEnv(dir));
  ASSERT_NE(StartBroker(broker).port, 0);
  EXPECT_EQ(broker.Stop(SIGINT), 0);
}

TEST(BrokerProcess, RefusesEqualClientAndInternalPorts) {
  auto env = TestEnv(MakeTempDir("felix-broker"));
  env["FELIX_QUIC_BIND"] = "127.0.0.1:6123";
  env["FELIX_INTERNAL_BIND"] = "127.0.0.1:6123";
  auto [code, output] = RunProgram(BuiltProgram("src/server/felix-broker"), {}, env);
  EXPECT_EQ(code, 2);
  EXPECT_NE(output.find("FELIX_INTERNAL_BIND"), std::string::npos) << output;
}

TEST(BrokerProcess, RefusesUnknownYamlKeyNamingIt) {
  std::string dir = MakeTempDir("felix-broker");
  std::string path = dir + "/c.yml";
  std::ofstream(path) << "metrics_bnd: 127.0.0.1:0\n";
  auto [code, output] =
      RunProgram(BuiltProgram("src/server/felix-broker"), {"--config", path}, TestEnv(dir));
  EXPECT_EQ(code, 2);
  EXPECT_NE(output.find("unknown key 'metrics_bnd'"), std::string::npos) << output;
}

TEST(BrokerProcess, PrintConfigValidatesWithoutBinding) {
  auto env = TestEnv(MakeTempDir("felix-broker"));
  env["FELIX_ADMIN_TOKEN"] = "hunter2";
  auto [code, output] =
      RunProgram(BuiltProgram("src/server/felix-broker"), {"--print-config"}, env);
  EXPECT_EQ(code, 0) << output;
  EXPECT_NE(output.find("quic_bind: \"127.0.0.1:0\""), std::string::npos) << output;
  EXPECT_EQ(output.find("hunter2"), std::string::npos);
}

TEST(BrokerProcess, RefusesHttpPortInUse) {
  std::string dir = MakeTempDir("felix-broker");
  ChildProcess first(BuiltProgram("src/server/felix-broker"), {}, TestEnv(dir + "/a"));
  HostPort http = StartBroker(first);
  ASSERT_NE(http.port, 0);
  auto env = TestEnv(dir + "/b");
  env["FELIX_BROKER_METRICS_BIND"] = http.ToString();
  auto [code, output] = RunProgram(BuiltProgram("src/server/felix-broker"), {}, env);
  EXPECT_NE(code, 0);
  EXPECT_NE(output.find("FELIX_BROKER_METRICS_BIND"), std::string::npos) << output;
}

TEST(FelixCli, PrintsVersionAndHelp) {
  auto [code, output] = RunProgram(BuiltProgram("src/cli/felix"), {"version"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(output.find("felix 0."), std::string::npos) << output;
  auto [help_code, help] = RunProgram(BuiltProgram("src/cli/felix"), {"--help"});
  EXPECT_EQ(help_code, 0);
  EXPECT_NE(help.find("version"), std::string::npos) << help;
}

}  // namespace
}  // namespace felix
