#include "cli/admin_http.h"

#include <httplib.h>

#include "cli/client_connection.h"
#include "cli/credentials.h"

namespace felix::cli {

using catalog::Json;

catalog::AdminCredentials AdminCredentialsOrDie(const AdminConnection& conn, bool need_file) {
  auto loaded = LoadCliCredentials(conn.credentials);
  catalog::AdminCredentials creds;
  if (loaded) {
    creds = *loaded;
  } else if (need_file || conn.url.empty() || conn.admin_token.empty()) {
    Die("cannot read the admin credential file: " + loaded.error().message +
        " (start felix-broker, or pass --credentials PATH, or --url and --admin-token)");
  }
  if (!conn.url.empty()) creds.admin_url = conn.url;
  if (!conn.admin_token.empty()) creds.admin_token = conn.admin_token;
  return creds;
}

void AddAdminConnectionOptions(CLI::App* cmd, AdminConnection& conn) {
  cmd->add_option("--credentials", conn.credentials,
                  "admin credential file (default: $FELIX_DATA_DIR or ./felix-data)");
  cmd->add_option("--url", conn.url, "admin API base URL (overrides the credential file)");
  cmd->add_option("--admin-token", conn.admin_token, "admin token (overrides the credential file)");
  cmd->add_flag("--json", conn.json, "print raw JSON");
}

Json AdminCall(const AdminConnection& conn, const std::string& method, const std::string& path,
               const Json* body) {
  catalog::AdminCredentials creds = AdminCredentialsOrDie(conn);
  httplib::Client client(creds.admin_url);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  httplib::Headers headers = {{"Authorization", "Bearer " + creds.admin_token}};
  std::string payload = body ? body->dump() : std::string();
  httplib::Result res = method == "GET" ? client.Get(path.c_str(), headers)
                        : method == "POST"
                            ? client.Post(path.c_str(), headers, payload, "application/json")
                            : client.Delete(path.c_str(), headers);
  if (!res)
    Die("cannot reach the broker at " + creds.admin_url + ": " + httplib::to_string(res.error()));
  Json answer = res->body.empty() ? Json::object()
                                  : Json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (res->status < 200 || res->status >= 300) {
    std::string message =
        answer.is_object() && answer.contains("message") && answer["message"].is_string()
            ? answer["message"].get<std::string>()
            : res->body;
    Die(method + " " + path + ": HTTP " + std::to_string(res->status) + ": " + message);
  }
  if (answer.is_discarded()) Die("the broker answered something that is not JSON");
  return answer;
}

std::string JsonText(const Json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace felix::cli
