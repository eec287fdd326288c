// Shared by the broker end-to-end tests: one real felix-broker process on free ports over a
// data directory that survives restarts, its admin API, and small FLX1 helpers built on
// Flx1TestClient. Test-only; one test thread drives one Broker.
#pragma once

#include <signal.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "catalog/credentials.h"
#include "common/net_address.h"
#include "flx1_test_client.h"
#include "support/child_process.h"

namespace felix::broker::e2e {

namespace flx1 = felix::wire::flx1;

// A subscribe to `stream` of tenant and namespace "default" from its earliest record.
inline flx1::Subscribe SubscribeEarliest(const std::string& stream) {
  flx1::Subscribe subscribe;
  subscribe.tenant_id = "default";
  subscribe.namespace_ = "default";
  subscribe.stream = stream;
  subscribe.start = flx1::StartPosition{flx1::StartPosition::Kind::kEarliest, 0};
  return subscribe;
}

// Waits (bounded, 30 s by default) until `condition` holds: for what runs on its own schedule
// (retention timers, metrics).
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::seconds limit = std::chrono::seconds(30)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    // Polling an observable condition, not a delay.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}
using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;
using testing::Flx1TestClient;
using testing::TestStream;
using Json = nlohmann::json;

inline std::string Field(const std::string& line, const std::string& name) {
  size_t at = line.find(name + "=");
  if (at == std::string::npos) return "";
  at += name.size() + 1;
  return line.substr(at, line.find(' ', at) - at);
}

// One broker process on free ports over a data directory that survives restarts.
class Broker {
 public:
  // `env` adds to (or overrides) the test defaults below, for every start.
  explicit Broker(std::string data_dir, std::map<std::string, std::string> env = {})
      : data_dir_(std::move(data_dir)), env_(std::move(env)) {
    Start();
  }

  void Start() {
    std::map<std::string, std::string> env{{"FELIX_DATA_DIR", data_dir_},
                                           {"FELIX_QUIC_BIND", "127.0.0.1:0"},
                                           {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
                                           {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"},
                                           {"FELIX_DURABLE_FSYNC_MODE", "on_commit"}};
    for (const auto& [k, v] : env_) env[k] = v;
    process_ = std::make_unique<ChildProcess>(BuiltProgram("src/server/felix-broker"),
                                              std::vector<std::string>{}, env);
    auto line = process_->WaitForLine("felix-broker listening");
    ASSERT_TRUE(line) << process_->stderr_text();
    quic_ = *ParseHostPort(Field(*line, "quic"));
    http_ = *ParseHostPort(Field(*line, "http"));
    auto creds = catalog::LoadAdminCredentials(data_dir_ + "/" + catalog::kCredentialsFile);
    ASSERT_TRUE(creds.has_value());
    creds_ = *creds;
  }
  int Stop(int sig = SIGTERM) { return process_->Stop(sig); }
  ChildProcess& process() { return *process_; }
  // Changes the environment of the next Start().
  void SetEnv(const std::string& key, const std::string& value) { env_[key] = value; }
  const std::string& data_dir() const { return data_dir_; }
  const HostPort& quic() const { return quic_; }
  const HostPort& http() const { return http_; }
  const catalog::AdminCredentials& creds() const { return creds_; }
  void Restart() {
    ASSERT_EQ(Stop(), 0) << process_->stderr_text();
    Start();
  }

  // Admin API call; returns {status, body}.
  std::pair<int, Json> Admin(const std::string& method, const std::string& path,
                             const Json& body = nullptr) {
    httplib::Client client(http_.host, http_.port);
    httplib::Headers headers{{"Authorization", "Bearer " + creds_.admin_token}};
    httplib::Result r = method == "POST"
                            ? client.Post(path, headers, body.dump(), "application/json")
                        : method == "DELETE" ? client.Delete(path, headers)
                                             : client.Get(path, headers);
    EXPECT_TRUE(r);
    if (!r) return {0, nullptr};
    return {r->status, r->body.empty() ? Json() : Json::parse(r->body, nullptr, false)};
  }
  void CreateStream(const std::string& tenant, const std::string& name, bool durable,
                    uint32_t shards = 1, const std::string& fsync_mode = "") {
    Json request{{"stream", name}, {"durable", durable}, {"shards", shards}};
    if (!fsync_mode.empty()) request["fsync_mode"] = fsync_mode;
    auto [status, body] =
        Admin("POST", "/v1/tenants/" + tenant + "/namespaces/default/streams", request);
    ASSERT_EQ(status, 201) << body.dump();
  }
  void CreateTenant(const std::string& tenant) {
    ASSERT_EQ(Admin("POST", "/v1/tenants", Json{{"tenant_id", tenant}}).first, 201);
    ASSERT_EQ(Admin("POST", "/v1/tenants/" + tenant + "/namespaces", Json{{"namespace", "default"}})
                  .first,
              201);
  }
  std::string Token(const std::string& tenant, std::vector<std::string> permissions) {
    auto [status, body] = Admin("POST", "/v1/tenants/" + tenant + "/tokens",
                                Json{{"subject", "tester"}, {"permissions", permissions}});
    EXPECT_EQ(status, 200) << body.dump();
    return body.value("felix_token", "");
  }
  std::string AllToken(const std::string& tenant = "default") {
    return Token(tenant, {"stream.publish:stream:" + tenant + "/*/*",
                          "stream.subscribe:stream:" + tenant + "/*/*"});
  }
  // Every stream, group and cache permission on `tenant` (stream.subscribe implies
  // group.consume, stream.manage implies group.manage).
  std::string FullToken(const std::string& tenant = "default") {
    std::string streams = "stream:" + tenant + "/*/*";
    std::string caches = "cache:" + tenant + "/*/*";
    return Token(tenant,
                 {"stream.publish:" + streams, "stream.subscribe:" + streams,
                  "stream.manage:" + streams, "cache.read:" + caches, "cache.write:" + caches});
  }
  void CreateCache(const std::string& tenant, const std::string& name, bool durable,
                   uint32_t shards = 1) {
    auto [status, body] = Admin("POST", "/v1/tenants/" + tenant + "/namespaces/default/caches",
                                Json{{"cache", name}, {"shards", shards}, {"durable", durable}});
    ASSERT_EQ(status, 201) << body.dump();
  }
  std::unique_ptr<Flx1TestClient> Connect() {
    return Flx1TestClient::Connect(quic_, creds_.ca_file);
  }
  std::string Metrics() {
    httplib::Client client(http_.host, http_.port);
    auto r = client.Get("/metrics");
    return r ? r->body : "";
  }
  // The value of an unlabelled series in the Prometheus text, or -1.
  double Metric(const std::string& name) {
    std::string text = Metrics();
    size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + name.size() + 2));
  }

 private:
  std::string data_dir_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<ChildProcess> process_;
  HostPort quic_;
  HostPort http_;
  catalog::AdminCredentials creds_;
};

constexpr uint16_t kAllClientFlags = flx1::kKnownFlags & ~flx1::kFlagBinaryPublishIdempotent;
// Error codes, and acks after the write (with offsets), as our C++ client offers by default.
constexpr uint32_t kDefaultFeatures = flx1::kFeatureErrorCodes | flx1::kFeatureAckOnCommit;

inline flx1::Auth AuthMessage(const std::string& tenant, const std::string& token,
                              std::optional<uint16_t> flags = kAllClientFlags,
                              std::optional<uint32_t> features = kDefaultFeatures) {
  flx1::Auth auth;
  auth.tenant_id = tenant;
  auth.token = token;
  auth.client_flags = flags;
  auth.client_features = features;
  return auth;
}

// An authenticated stream with every flag offered.
inline std::shared_ptr<TestStream> Authed(Flx1TestClient& client, const std::string& token,
                                          const std::string& tenant = "default",
                                          uint32_t features = kDefaultFeatures) {
  auto stream = client.OpenStream();
  stream->SendMessage(AuthMessage(tenant, token, kAllClientFlags, features));
  auto ok = stream->Read<flx1::AuthOk>();
  EXPECT_TRUE(ok.has_value());
  return stream;
}

// One binary publish frame: acknowledged with `request_id` (per batch) or fire-and-forget
// (nullopt), keyed or not.
inline std::vector<uint8_t> PublishFrame(std::optional<uint64_t> request_id,
                                         const std::string& stream,
                                         const std::vector<std::string>& payloads,
                                         const std::optional<std::string>& key = std::nullopt,
                                         const std::string& tenant = "default") {
  flx1::BinaryPublishBatch batch;
  if (request_id)
    batch.acked = flx1::BinaryPublishBatch::Acked{*request_id, flx1::AckMode::kPerBatch};
  batch.tenant_id = tenant;
  batch.namespace_ = "default";
  batch.stream = stream;
  if (key) batch.key = *key;
  for (const auto& p : payloads) batch.payloads.push_back(p);
  std::vector<uint8_t> out;
  EXPECT_TRUE(flx1::AppendFrame(flx1::Flx1Frame{batch}, out));
  return out;
}

inline std::vector<uint8_t> BinaryPublish(uint64_t request_id, const std::string& stream,
                                          std::vector<std::string> payloads,
                                          const std::string& tenant = "default") {
  return PublishFrame(request_id, stream, payloads, std::nullopt, tenant);
}

inline flx1::BinaryPublishAck ReadAck(TestStream& stream) {
  auto frame = stream.ReadFrame();
  EXPECT_TRUE(frame.has_value());
  auto* ack = frame ? std::get_if<flx1::BinaryPublishAck>(&*frame) : nullptr;
  EXPECT_NE(ack, nullptr);
  return ack ? *ack : flx1::BinaryPublishAck{};
}

// Reads event batches until `count` events arrived; returns {offset, payload} pairs.
inline std::vector<std::pair<uint64_t, std::string>> ReadEvents(TestStream& events, size_t count) {
  std::vector<std::pair<uint64_t, std::string>> out;
  while (out.size() < count) {
    auto frame = events.ReadFrame();
    if (!frame) break;
    auto* batch = std::get_if<flx1::BinaryEventBatch>(&*frame);
    EXPECT_NE(batch, nullptr);
    if (batch == nullptr) break;
    for (size_t i = 0; i < batch->events.size(); ++i) {
      out.emplace_back(batch->base_offset.value_or(UINT64_MAX) + i,
                       std::string(batch->events[i].payload));
    }
  }
  return out;
}

// Every record of durable `stream` (tenant and namespace "default") from the earliest, read
// through a subscription whose live offset must be `count`: {offset, payload}.
inline std::vector<std::pair<uint64_t, std::string>> StoredRecords(Broker& broker,
                                                                   Flx1TestClient& client,
                                                                   const std::string& stream,
                                                                   size_t count) {
  auto sub_stream = Authed(client, broker.AllToken());
  sub_stream->SendMessage(SubscribeEarliest(stream));
  auto events = client.AcceptEventStream();
  EXPECT_TRUE(events);
  if (!events) return {};
  EXPECT_TRUE(events->Read<flx1::EventStreamHello>());
  auto subscribed = sub_stream->Read<flx1::Subscribed>();
  EXPECT_TRUE(subscribed);
  if (subscribed) {
    EXPECT_EQ(subscribed->live_offset, count);
  }
  return ReadEvents(*events, count);
}

// Reads an event stream up to its last frame. Every event batch must continue exactly where the
// one before ended (from `first`: no gap, no jump); `next` is the offset after the last event,
// `last` the closing JSON message (nullopt if the stream ended or went quiet without one).
struct EventStreamEnd {
  uint64_t next = 0;
  bool contiguous = true;
  std::optional<flx1::Message> last;
};
inline EventStreamEnd ReadToLastFrame(TestStream& events, uint64_t first = 0) {
  EventStreamEnd out;
  out.next = first;
  while (auto frame = events.ReadFrame()) {
    if (auto* batch = std::get_if<flx1::BinaryEventBatch>(&*frame)) {
      if (batch->base_offset != out.next) out.contiguous = false;
      out.next = batch->base_offset.value_or(out.next) + batch->events.size();
      continue;
    }
    if (auto* message = std::get_if<flx1::Message>(&*frame)) out.last = *message;
    break;
  }
  return out;
}

}  // namespace felix::broker::e2e
