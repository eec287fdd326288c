// End to end: the real felix-broker's admin API and credential file, the catalog surviving a
// restart, and the real `felix` CLI (stream commands, token issue) against it. Issued tokens
// are verified with the auth library against the tenant's published keys.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>

#include <httplib.h>

#include <gtest/gtest.h>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/credentials.h"
#include "catalog/model.h"
#include "common/net_address.h"
#include "support/child_process.h"

namespace felix {
namespace {

using catalog::Json;
using felix::testing::BuiltProgram;
using felix::testing::ChildProcess;
using felix::testing::MakeTempDir;
using felix::testing::RunProgram;

std::map<std::string, std::string> TestEnv(const std::string& data_dir) {
  return {{"FELIX_DATA_DIR", data_dir},
          {"FELIX_QUIC_BIND", "127.0.0.1:0"},
          {"FELIX_INTERNAL_BIND", "127.0.0.1:0"},
          {"FELIX_BROKER_METRICS_BIND", "127.0.0.1:0"}};
}

// A broker on free ports over `data_dir`; http() is its HTTP address.
class Broker {
 public:
  explicit Broker(const std::string& data_dir, std::map<std::string, std::string> extra = {}) {
    auto env = TestEnv(data_dir);
    for (auto& [k, v] : extra) env[k] = v;
    process_ = std::make_unique<ChildProcess>(BuiltProgram("src/server/felix-broker"),
                                              std::vector<std::string>{}, env);
    auto line = process_->WaitForLine("felix-broker listening");
    EXPECT_TRUE(line) << process_->stderr_text();
    if (!line) return;
    size_t at = line->find("http=");
    auto parsed = ParseHostPort(line->substr(at + 5, line->find(' ', at) - at - 5));
    EXPECT_TRUE(parsed) << *line;
    if (parsed) http_ = *parsed;
  }
  int Stop() { return process_->Stop(SIGTERM); }
  const HostPort& http() const { return http_; }
  httplib::Client Client() const { return httplib::Client(http_.host, http_.port); }

 private:
  std::unique_ptr<ChildProcess> process_;
  HostPort http_;
};

mode_t FileMode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

httplib::Headers Bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

Json Body(const httplib::Result& res) {
  EXPECT_TRUE(res);
  if (!res) return Json();
  return Json::parse(res->body, nullptr, false);
}

const char* kStreams = "/v1/tenants/default/namespaces/default/streams";

std::vector<auth::VerifyingKey> TenantKeys(httplib::Client& client, const std::string& tenant) {
  auto res = client.Get(("/v1/tenants/" + tenant + "/.well-known/jwks.json").c_str());
  EXPECT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  auto keys = auth::ParseJwks(res->body);
  EXPECT_TRUE(keys);
  return keys ? *keys : std::vector<auth::VerifyingKey>{};
}

auth::AuthResult<auth::AuthContext> Verify(const std::string& token, const std::string& tenant,
                                           const std::vector<auth::VerifyingKey>& keys) {
  auth::VerifyOptions options;
  options.now_unix_seconds = auth::NowUnixSeconds();
  return auth::VerifyToken(token, tenant, keys, options);
}

TEST(AdminApi, CredentialFileAndStreamCrudOverHttp) {
  std::string dir = MakeTempDir("felix-admin") + "/data";
  Broker broker(dir);
  ASSERT_NE(broker.http().port, 0);

  std::string path = dir + "/admin-credentials.json";
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(FileMode(path), 0600u);
  EXPECT_EQ(FileMode(dir + "/signing-keys.json"), 0600u);
  auto creds = catalog::LoadAdminCredentials(path);
  ASSERT_TRUE(creds) << creds.error().ToString();
  EXPECT_EQ(creds->admin_url, "http://" + broker.http().ToString());
  EXPECT_EQ(creds->tenant_id, "default");
  EXPECT_FALSE(creds->signing_seed.empty());

  auto client = broker.Client();
  // Without a token: 401; with a wrong one: 403; nothing is created either way.
  std::string body = R"({"stream":"orders","shards":2,"durable":true})";
  auto no_token = client.Post(kStreams, body, "application/json");
  ASSERT_TRUE(no_token);
  EXPECT_EQ(no_token->status, 401);
  EXPECT_EQ(Body(no_token)["code"], "unauthorized");
  auto wrong = client.Post(kStreams, Bearer(creds->admin_token + "x"), body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 403);
  EXPECT_EQ(client.Get(kStreams)->status, 401);
  auto basic = client.Get(kStreams, {{"Authorization", "Basic " + creds->admin_token}});
  EXPECT_EQ(basic->status, 401);

  httplib::Headers auth = Bearer(creds->admin_token);
  auto empty = client.Get(kStreams, auth);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200);
  EXPECT_EQ(Body(empty)["items"].size(), 0u);

  auto created = client.Post(kStreams, auth, body, "application/json");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 201) << created->body;
  EXPECT_EQ(Body(created)["stream"], "orders");
  EXPECT_EQ(Body(created)["shards"], 2);
  auto dup = client.Post(kStreams, auth, body, "application/json");
  EXPECT_EQ(dup->status, 409);
  EXPECT_EQ(Body(dup)["code"], "conflict");
  auto invalid = client.Post(kStreams, auth, R"({"stream":"a b"})", "application/json");
  EXPECT_EQ(invalid->status, 400);
  EXPECT_EQ(client.Post(kStreams, auth, "not json", "application/json")->status, 400);
  EXPECT_EQ(
      client.Post("/v1/tenants/default/namespaces/nope/streams", auth, body, "application/json")
          ->status,
      404);

  auto got = client.Get((std::string(kStreams) + "/orders").c_str(), auth);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(Body(got)["durable"], true);
  auto list = client.Get(kStreams, auth);
  ASSERT_EQ(Body(list)["items"].size(), 1u);
  EXPECT_EQ(Body(list)["items"][0]["stream"], "orders");

  EXPECT_EQ(client.Delete((std::string(kStreams) + "/orders").c_str(), auth)->status, 204);
  EXPECT_EQ(client.Get((std::string(kStreams) + "/orders").c_str(), auth)->status, 404);
  EXPECT_EQ(client.Delete((std::string(kStreams) + "/orders").c_str(), auth)->status, 404);

  // Tenants, namespaces and caches take the same shapes.
  EXPECT_EQ(client
                .Post("/v1/tenants", auth, R"({"tenant_id":"acme","display_name":"Acme"})",
                      "application/json")
                ->status,
            201);
  EXPECT_EQ(client
                .Post("/v1/tenants/acme/namespaces", auth, R"({"namespace":"payments"})",
                      "application/json")
                ->status,
            201);
  auto cache = client.Post("/v1/tenants/acme/namespaces/payments/caches", auth,
                           R"({"cache":"sessions","default_ttl_ms":1000})", "application/json");
  EXPECT_EQ(cache->status, 201) << cache->body;
  EXPECT_EQ(Body(client.Get("/v1/tenants", auth))["items"].size(), 2u);
  EXPECT_EQ(client.Delete("/v1/tenants/acme", auth)->status, 204);
  EXPECT_EQ(client.Get("/v1/tenants/acme/namespaces/payments/caches", auth)->status, 404);

  EXPECT_EQ(broker.Stop(), 0);
}

TEST(AdminApi, CatalogAndAdminTokenSurviveRestart) {
  std::string dir = MakeTempDir("felix-admin") + "/data";
  std::string token;
  {
    Broker broker(dir);
    auto creds = catalog::LoadAdminCredentials(dir + "/admin-credentials.json");
    ASSERT_TRUE(creds);
    token = creds->admin_token;
    auto client = broker.Client();
    auto created =
        client.Post(kStreams, Bearer(token), R"({"stream":"kept","shards":3})", "application/json");
    ASSERT_EQ(created->status, 201);
    ASSERT_EQ(broker.Stop(), 0);
  }
  Broker broker(dir);
  auto creds = catalog::LoadAdminCredentials(dir + "/admin-credentials.json");
  ASSERT_TRUE(creds);
  EXPECT_EQ(creds->admin_token, token);
  EXPECT_EQ(creds->admin_url, "http://" + broker.http().ToString());
  auto client = broker.Client();
  auto got = client.Get((std::string(kStreams) + "/kept").c_str(), Bearer(token));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(Body(got)["shards"], 3);
  EXPECT_EQ(broker.Stop(), 0);
}

TEST(AdminApi, ConfiguredAdminTokenIsUsed) {
  std::string dir = MakeTempDir("felix-admin") + "/data";
  Broker broker(dir, {{"FELIX_ADMIN_TOKEN", "configured-secret"}});
  auto client = broker.Client();
  EXPECT_EQ(client.Get("/v1/tenants", Bearer("configured-secret"))->status, 200);
  auto creds = catalog::LoadAdminCredentials(dir + "/admin-credentials.json");
  ASSERT_TRUE(creds);
  EXPECT_EQ(creds->admin_token, "configured-secret");
  EXPECT_EQ(broker.Stop(), 0);
}

TEST(AdminApi, IssuedTokensVerifyAgainstTheTenantKeysOnly) {
  std::string dir = MakeTempDir("felix-admin") + "/data";
  Broker broker(dir);
  auto creds = catalog::LoadAdminCredentials(dir + "/admin-credentials.json");
  ASSERT_TRUE(creds);
  auto client = broker.Client();
  httplib::Headers auth = Bearer(creds->admin_token);
  ASSERT_EQ(client.Post("/v1/tenants", auth, R"({"tenant_id":"acme"})", "application/json")->status,
            201);
  auto issued = client.Post(
      "/v1/tenants/acme/tokens", auth,
      R"({"subject":"p:alice","permissions":["stream.publish:stream:acme/payments/*"],"ttl_seconds":120})",
      "application/json");
  ASSERT_TRUE(issued);
  ASSERT_EQ(issued->status, 200) << issued->body;
  Json answer = Body(issued);
  EXPECT_EQ(answer["token_type"], "Bearer");
  EXPECT_EQ(answer["expires_in"], 120);
  std::string token = answer["felix_token"];
  auto ctx = Verify(token, "acme", TenantKeys(client, "acme"));
  ASSERT_TRUE(ctx) << ctx.error().ToString();
  EXPECT_EQ(ctx->subject, "p:alice");
  EXPECT_TRUE(ctx->permissions.AllowsStream(auth::Action::kStreamPublish, "acme", "payments", "x"));
  EXPECT_FALSE(Verify(token, "acme", TenantKeys(client, "default")));
  // Bad grants, other tenants' objects and unknown tenants are refused.
  EXPECT_EQ(client
                .Post("/v1/tenants/acme/tokens", auth,
                      R"({"subject":"s","permissions":["stream.publish:stream:other/a/b"]})",
                      "application/json")
                ->status,
            400);
  EXPECT_EQ(client
                .Post("/v1/tenants/acme/tokens", auth, R"({"subject":"s","permissions":[]})",
                      "application/json")
                ->status,
            400);
  EXPECT_EQ(client
                .Post("/v1/tenants/ghost/tokens", auth,
                      R"({"subject":"s","permissions":["tenant.manage:tenant:ghost"]})",
                      "application/json")
                ->status,
            404);
  EXPECT_EQ(client
                .Post("/v1/tenants/acme/tokens",
                      R"({"subject":"s","permissions":["tenant.manage:tenant:acme"]})",
                      "application/json")
                ->status,
            401);
  EXPECT_EQ(broker.Stop(), 0);
}

TEST(FelixCli, StreamCommandsAndTokenIssueAgainstARealBroker) {
  std::string dir = MakeTempDir("felix-admin") + "/data";
  Broker broker(dir);
  std::string felix = BuiltProgram("src/cli/felix");
  // The CLI finds the credential file through FELIX_DATA_DIR by itself.
  std::map<std::string, std::string> env = {{"FELIX_DATA_DIR", dir}};

  auto [code, out] = RunProgram(felix, {"stream", "create", "orders", "--shards", "4"}, env);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"shards\": 4"), std::string::npos) << out;
  auto [dup_code, dup_out] = RunProgram(felix, {"stream", "create", "orders"}, env);
  EXPECT_NE(dup_code, 0);
  EXPECT_NE(dup_out.find("already exists"), std::string::npos) << dup_out;
  auto [list_code, list_out] = RunProgram(felix, {"stream", "list"}, env);
  ASSERT_EQ(list_code, 0) << list_out;
  EXPECT_NE(list_out.find("orders shards=4"), std::string::npos) << list_out;

  // --credentials works from anywhere, without FELIX_DATA_DIR.
  auto [get_code, get_out] = RunProgram(
      felix, {"stream", "get", "orders", "--credentials", dir + "/admin-credentials.json"});
  EXPECT_EQ(get_code, 0) << get_out;
  EXPECT_NE(get_out.find("\"stream\": \"orders\""), std::string::npos) << get_out;

  // A token minted through the broker, verified against the tenant's published key.
  auto [tok_code, tok_out] = RunProgram(
      felix,
      {"token", "issue", "--tenant", "default", "--subject", "p:bob", "--permissions",
       "stream.publish:stream:default/default/*,cache.read:cache:default/*/*", "--ttl", "600"},
      env);
  ASSERT_EQ(tok_code, 0) << tok_out;
  std::string token = tok_out.substr(0, tok_out.find('\n'));
  auto client = broker.Client();
  auto keys = TenantKeys(client, "default");
  auto ctx = Verify(token, "default", keys);
  ASSERT_TRUE(ctx) << ctx.error().ToString() << " token: " << tok_out;
  EXPECT_EQ(ctx->subject, "p:bob");
  EXPECT_TRUE(
      ctx->permissions.AllowsStream(auth::Action::kStreamPublish, "default", "default", "orders"));
  EXPECT_FALSE(
      ctx->permissions.AllowsStream(auth::Action::kStreamSubscribe, "default", "default", "x"));
  auto parsed = auth::ParseToken(token);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->claims.exp - parsed->claims.iat, 600);

  // Offline minting with the credential file's key verifies against the same public key.
  auto [off_code, off_out] = RunProgram(
      felix,
      {"token", "issue", "--offline", "-s", "p:carol", "-p", "stream.subscribe:stream:default/*/*"},
      env);
  ASSERT_EQ(off_code, 0) << off_out;
  auto offline = Verify(off_out.substr(0, off_out.find('\n')), "default", keys);
  ASSERT_TRUE(offline) << offline.error().ToString();
  EXPECT_EQ(offline->subject, "p:carol");

  auto [del_code, del_out] = RunProgram(felix, {"stream", "delete", "orders"}, env);
  EXPECT_EQ(del_code, 0) << del_out;
  auto [after_code, after_out] = RunProgram(felix, {"stream", "list"}, env);
  EXPECT_EQ(after_code, 0);
  EXPECT_EQ(after_out.find("orders"), std::string::npos) << after_out;
  EXPECT_EQ(broker.Stop(), 0);

  // No broker, no credential file: a clear message and a non-zero exit.
  auto [none_code, none_out] =
      RunProgram(felix, {"stream", "list"}, {{"FELIX_DATA_DIR", dir + "/missing"}});
  EXPECT_NE(none_code, 0);
  EXPECT_NE(none_out.find("admin-credentials.json"), std::string::npos) << none_out;
}

}  // namespace
}  // namespace felix
