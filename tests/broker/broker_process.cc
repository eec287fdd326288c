#include "broker_process.h"

#include <httplib.h>

#include <gtest/gtest.h>

namespace felix::broker::testing {
namespace {

std::string Field(const std::string& line, const std::string& name) {
  size_t at = line.find(name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 1;
  return line.substr(at, line.find(' ', at) - at);
}

}  // namespace

BrokerProcess::BrokerProcess(std::string data_dir, std::map<std::string, std::string> env)
    : data_dir_(std::move(data_dir)), env_(std::move(env)) {
  Start();
}

void BrokerProcess::Start() {
  std::map<std::string, std::string> env{{"FELIX_DATA_DIR", data_dir_},
                                         {"FELIX_QUIC_BIND", "127.0.0.1:0"},
                                         {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
                                         {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"},
                                         {"FELIX_DURABLE_FSYNC_MODE", "on_commit"}};
  for (const auto& [name, value] : env_) env[name] = value;
  process_ = std::make_unique<felix::testing::ChildProcess>(
      felix::testing::BuiltProgram("src/server/felix-broker"), std::vector<std::string>{}, env);
  auto line = process_->WaitForLine("felix-broker listening");
  ASSERT_TRUE(line) << process_->stderr_text();
  quic_ = *ParseHostPort(Field(*line, "quic"));
  http_ = *ParseHostPort(Field(*line, "http"));
  auto creds = catalog::LoadAdminCredentials(data_dir_ + "/" + catalog::kCredentialsFile);
  ASSERT_TRUE(creds.has_value());
  creds_ = *creds;
}

std::pair<int, BrokerProcess::Json> BrokerProcess::Admin(const std::string& method,
                                                         const std::string& path,
                                                         const Json& body) {
  httplib::Client client(http_.host, http_.port);
  httplib::Headers headers{{"Authorization", "Bearer " + creds_.admin_token}};
  httplib::Result r = method == "POST" ? client.Post(path, headers, body.dump(), "application/json")
                      : method == "DELETE" ? client.Delete(path, headers)
                                           : client.Get(path, headers);
  EXPECT_TRUE(r);
  if (!r) return {0, nullptr};
  return {r->status, r->body.empty() ? Json() : Json::parse(r->body, nullptr, false)};
}

void BrokerProcess::CreateStream(const std::string& name, bool durable, uint32_t shards) {
  auto [status, body] = Admin("POST", "/v1/tenants/" + tenant() + "/namespaces/default/streams",
                              Json{{"stream", name}, {"durable", durable}, {"shards", shards}});
  ASSERT_EQ(status, 201) << body.dump();
}

void BrokerProcess::CreateCache(const std::string& name, bool durable, uint32_t shards) {
  auto [status, body] = Admin("POST", "/v1/tenants/" + tenant() + "/namespaces/default/caches",
                              Json{{"cache", name}, {"shards", shards}, {"durable", durable}});
  ASSERT_EQ(status, 201) << body.dump();
}

std::string BrokerProcess::Token(std::vector<std::string> permissions) {
  auto [status, body] = Admin("POST", "/v1/tenants/" + tenant() + "/tokens",
                              Json{{"subject", "tester"}, {"permissions", permissions}});
  EXPECT_EQ(status, 200) << body.dump();
  return body.value("felix_token", "");
}

std::string BrokerProcess::AllToken() {
  std::string streams = "stream:" + tenant() + "/*/*";
  std::string caches = "cache:" + tenant() + "/*/*";
  // stream.subscribe implies group.consume, stream.manage implies group.manage.
  return Token({"stream.publish:" + streams, "stream.subscribe:" + streams,
                "stream.manage:" + streams, "cache.read:" + caches, "cache.write:" + caches});
}

std::unique_ptr<Flx1TestClient> BrokerProcess::Connect() {
  return Flx1TestClient::Connect(quic_, creds_.ca_file);
}

std::shared_ptr<TestStream> BrokerProcess::Authed(Flx1TestClient& client, const std::string& token,
                                                  uint32_t features) {
  auto stream = client.OpenStream();
  wire::flx1::Auth auth;
  auth.tenant_id = tenant();
  auth.token = token;
  auth.client_flags = wire::flx1::kKnownFlags & ~wire::flx1::kFlagBinaryPublishIdempotent;
  auth.client_features = features;
  stream->SendMessage(auth);
  EXPECT_TRUE(stream->Read<wire::flx1::AuthOk>().has_value());
  return stream;
}

std::string BrokerProcess::Metrics() {
  httplib::Client client(http_.host, http_.port);
  auto r = client.Get("/metrics");
  return r ? r->body : "";
}

double BrokerProcess::Metric(const std::string& name) {
  std::string text = Metrics();
  size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

}  // namespace felix::broker::testing
