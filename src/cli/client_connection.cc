#include "cli/client_connection.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/credentials.h"

namespace felix::cli {

namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

void Die(const std::string& message, int code) {
  std::cerr << "felix: " << message << "\n";
  throw CLI::RuntimeError(code);
}

void AddClientConnectionOptions(CLI::App* cmd, ClientConnection& c) {
  cmd->add_option("--credentials", c.credentials,
                  "credential file (default: $FELIX_DATA_DIR or ./felix-data)");
  cmd->add_option("--broker,--brokers", c.broker,
                  "broker QUIC address host:port, or a comma list of a cluster's brokers tried "
                  "in order (default: $FELIX_BROKERS, else the credential file); in a cluster "
                  "each request then goes to its shard's owner");
  cmd->add_option("--tenant", c.tenant, "tenant (default: the credential file's tenant)");
  cmd->add_option("--token", c.token,
                  "Felix token (default: $FELIX_AUTH_TOKEN, else minted from the credential file)");
  cmd->add_option("--ca", c.ca,
                  "PEM file that verifies the broker (default: the credential file's ca_file, else "
                  "<data dir>/tls/broker-cert.pem)");
  cmd->add_option("--server-name", c.server_name, "TLS name of the broker (default localhost)");
  cmd->add_option("--timeout-ms", c.timeout_ms, "connect and answer timeout (default 10000)");
}

ClientOptions ResolveClientOptions(const ClientConnection& c, const std::string& namespace_name,
                                   const std::string& name,
                                   const std::vector<std::string>& permissions) {
  std::string path;
  auto creds = LoadCliCredentials(c.credentials, &path);
  ClientOptions o;
  // A comma list (from --broker or $FELIX_BROKERS) is tried in order by ConnectOrDie.
  o.broker = !c.broker.empty()                     ? c.broker
             : !EnvOr("FELIX_BROKERS", "").empty() ? EnvOr("FELIX_BROKERS", "")
             : creds && !creds->quic_addr.empty()  ? creds->quic_addr
                                                   : std::string("127.0.0.1:5000");
  o.tenant_id = !c.tenant.empty() ? c.tenant : creds ? creds->tenant_id : std::string("default");
  o.server_name = c.server_name;
  o.ca_file = c.ca;
  // The broker names the file that verifies it (its dev certificate, or FELIX_TLS_CERT).
  if (o.ca_file.empty() && creds && !creds->ca_file.empty() &&
      std::filesystem::exists(creds->ca_file)) {
    o.ca_file = creds->ca_file;
  }
  if (o.ca_file.empty()) {
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    o.ca_file = (dir / "tls" / "broker-cert.pem").string();
    if (!std::filesystem::exists(o.ca_file))
      Die("no CA file to verify the broker: " + o.ca_file +
          " does not exist (pass --ca PEM, or point FELIX_DATA_DIR at the broker's data dir)");
  }
  o.token = !c.token.empty() ? c.token : EnvOr("FELIX_AUTH_TOKEN", EnvOr("FELIX_TOKEN", ""));
  if (o.token.empty()) {
    if (!creds)
      Die("no token: pass --token, set FELIX_AUTH_TOKEN, or give the credential file (" +
          creds.error().message + ")");
    std::string scope = o.tenant_id + "/" + namespace_name + "/" + name;
    std::vector<std::string> perms;
    for (std::string perm : permissions) {
      if (size_t at = perm.find("{scope}"); at != std::string::npos) perm.replace(at, 7, scope);
      perms.push_back(std::move(perm));
    }
    auto token = MintLocalToken(*creds, o.tenant_id, "felix-cli", perms, 3600, "felix-broker");
    if (!token) Die("cannot mint a token: " + token.error().message);
    o.token = *token;
  }
  o.connect_timeout = std::chrono::milliseconds(c.timeout_ms);
  o.request_timeout = std::chrono::milliseconds(c.timeout_ms);
  return o;
}

std::unique_ptr<Client> ConnectOrDie(const ClientOptions& options) {
  // The library tries a comma list in order (each entry but the last with at most
  // ClientOptions::seed_connect_timeout) and, against a cluster, routes each request to its
  // shard's owner from there.
  auto client = Client::Connect(options);
  if (!client) Die("cannot connect to " + options.broker + ": " + client.error().ToString());
  return std::move(*client);
}

}  // namespace felix::cli
