// BrokerProcess: one real felix-broker process for end-to-end tests, on free loopback ports,
// over a data directory that survives restarts, with the admin API calls tests need.
//
// Not thread-safe: one test thread drives it.
#pragma once

#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "catalog/credentials.h"
#include "common/net_address.h"
#include "flx1_test_client.h"
#include "support/child_process.h"

namespace felix::broker::testing {

class BrokerProcess {
 public:
  using Json = nlohmann::json;

  // `env` is added to the broker's environment (over the test defaults).
  explicit BrokerProcess(std::string data_dir, std::map<std::string, std::string> env = {});

  // Starts the broker and waits for its "listening" line; a failure fails the test.
  void Start();
  int Stop(int sig = SIGTERM) { return process_->Stop(sig); }

  // Admin API call; returns {status, body}.
  std::pair<int, Json> Admin(const std::string& method, const std::string& path,
                             const Json& body = nullptr);
  void CreateStream(const std::string& name, bool durable, uint32_t shards = 1);
  void CreateCache(const std::string& name, bool durable, uint32_t shards = 1);
  std::string Token(std::vector<std::string> permissions);
  // Every stream, group and cache permission on the broker's tenant.
  std::string AllToken();
  std::unique_ptr<Flx1TestClient> Connect();
  // A new stream on `client`, authenticated with `token` offering every flag but idempotence
  // and the given features; fails the test if auth_ok does not come.
  std::shared_ptr<TestStream> Authed(Flx1TestClient& client, const std::string& token,
                                     uint32_t features);
  std::string Metrics();
  // The value of an unlabelled series in the Prometheus text, or -1.
  double Metric(const std::string& name);

  const std::string& tenant() const { return creds_.tenant_id; }
  const std::string& data_dir() const { return data_dir_; }
  felix::testing::ChildProcess& process() { return *process_; }

 private:
  std::string data_dir_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<felix::testing::ChildProcess> process_;
  HostPort quic_;
  HostPort http_;
  catalog::AdminCredentials creds_;
};

}  // namespace felix::broker::testing
