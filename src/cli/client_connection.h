// How the client-library commands (pub, sub, cache, group) reach a broker: the options they
// share and their resolution from the credential file the broker writes in its data directory
// (QUIC address, tenant, the CA file that verifies the broker, and a token minted locally from
// its signing key, scoped to what the command touches). --broker, --tenant, --token, --ca
// override each. Without --broker, $FELIX_BROKERS (comma list, as `scripts/cluster` writes it)
// comes before the credential file's quic_addr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "felix/client.h"

namespace felix::cli {

// Prints "felix: <message>" and ends the command with exit code `code`.
[[noreturn]] void Die(const std::string& message, int code = 1);

struct ClientConnection {
  std::string credentials;
  std::string broker;
  std::string tenant;
  std::string token;
  std::string ca;
  std::string server_name = "localhost";
  int64_t timeout_ms = 10000;
};

void AddClientConnectionOptions(CLI::App* cmd, ClientConnection& c);

// The client options; a token missing from --token / $FELIX_AUTH_TOKEN is minted with
// `permissions`, in which "{scope}" stands for tenant/namespace_name/name.
ClientOptions ResolveClientOptions(const ClientConnection& c, const std::string& namespace_name,
                                   const std::string& name,
                                   const std::vector<std::string>& permissions);

// Connects to options.broker; a comma list (--broker a,b or $FELIX_BROKERS) is tried in order
// and the first broker that connects is used (every entry but the last with a connect timeout of
// at most 3 s, so a dead first broker does not stall each command); against a cluster the
// client then sends each publish and cache operation to its shard's owner and follows
// redirects (felix/client.h). Dies naming every failure otherwise.
std::unique_ptr<Client> ConnectOrDie(const ClientOptions& options);

}  // namespace felix::cli
