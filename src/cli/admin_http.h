// How the admin commands (tenant, namespace, stream, cache, token, cluster) reach a broker's
// admin HTTP API: the credential file the broker writes (--credentials PATH, else
// $FELIX_DATA_DIR/admin-credentials.json, else ./felix-data/admin-credentials.json) names the
// URL and the admin token; --url and --admin-token override it. Failures end the command
// through Die (client_connection.h).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "catalog/credentials.h"
#include "catalog/model.h"

namespace felix::cli {

// Options shared by every admin subcommand.
struct AdminConnection {
  std::string credentials;
  std::string url;
  std::string admin_token;
  bool json = false;
};

void AddAdminConnectionOptions(CLI::App* cmd, AdminConnection& conn);

// The credential file with the overrides applied; dies when it is needed (`need_file`, or no
// --url/--admin-token) and cannot be read.
catalog::AdminCredentials AdminCredentialsOrDie(const AdminConnection& conn,
                                                bool need_file = false);

// Sends one request (GET, POST or DELETE); returns the JSON body of a 2xx answer, dies with the
// server's message otherwise.
catalog::Json AdminCall(const AdminConnection& conn, const std::string& method,
                        const std::string& path, const catalog::Json* body = nullptr);

// A field of an answer as text: strings as they are, other values as JSON, "-" when absent or
// null (for tables).
std::string JsonText(const catalog::Json& j, const char* name);

}  // namespace felix::cli
