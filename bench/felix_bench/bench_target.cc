#include "bench_target.h"

#include <cstdio>
#include <cstdlib>

#include "auth/keys.h"
#include "auth/token.h"
#include "catalog/credentials.h"

namespace felix::bench {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "felix-bench: %s\n", message.c_str());
  std::exit(1);
}

ClientOptions ResolveOptions(const Target& target, const std::string& namespace_name,
                             const std::string& name, const std::vector<std::string>& permissions) {
  felix::ClientOptions o;
  o.broker = target.broker;
  o.ca_file = target.ca_file;
  o.token = target.token;
  if (!target.tenant.empty()) o.tenant_id = target.tenant;
  if (!target.credentials.empty()) {
    auto creds = felix::catalog::LoadAdminCredentials(target.credentials);
    if (!creds) Die("cannot read " + target.credentials + ": " + creds.error().message);
    if (o.broker.empty()) o.broker = creds->quic_addr;
    if (o.ca_file.empty()) o.ca_file = creds->ca_file;
    if (target.tenant.empty()) o.tenant_id = creds->tenant_id;
    if (o.token.empty()) {
      auto key = felix::auth::SigningKey::FromSeedBase64(creds->signing_kid, creds->signing_seed);
      if (!key) Die("bad signing key in " + target.credentials + ": " + key.error().ToString());
      felix::auth::TokenClaims claims;
      claims.sub = "felix-bench";
      claims.tid = o.tenant_id;
      std::string scope = o.tenant_id + "/" + namespace_name + "/" + name;
      for (std::string perm : permissions) {
        perm.replace(perm.find("{scope}"), 7, scope);
        claims.perms.push_back(std::move(perm));
      }
      claims.iat = felix::auth::NowUnixSeconds();
      claims.exp = claims.iat + 24 * 3600;
      o.token = felix::auth::MintToken(*key, claims);
    }
  }
  if (o.broker.empty()) o.broker = "127.0.0.1:5000";
  o.spin_wait = std::chrono::microseconds(target.spin_us);
  o.caller_runs_io = target.caller_io;
  if (!target.via.empty()) {
    o.broker = target.via;
    o.route_to_owners = false;
  }
  if (o.ca_file.empty() || o.token.empty())
    Die("need --credentials, or --ca and --token (see felix-bench --help)");
  return o;
}

std::unique_ptr<Client> ConnectOrDie(const ClientOptions& options) {
  auto client = felix::Client::Connect(options);
  if (!client) Die("cannot connect to " + options.broker + ": " + client.error().ToString());
  return std::move(*client);
}

std::vector<std::unique_ptr<Client>> ConnectManyOrDie(const Target& target, ClientOptions options,
                                                      uint32_t count) {
  std::vector<std::shared_ptr<IoThread>> threads;
  for (uint32_t i = 0; i < target.io_threads; ++i) {
    auto thread = IoThread::Create();
    if (!thread) Die("client I/O thread: " + thread.error().ToString());
    threads.push_back(std::move(*thread));
  }
  std::vector<std::unique_ptr<Client>> clients;
  for (uint32_t i = 0; i < count; ++i) {
    if (!threads.empty()) options.io_thread = threads[i % threads.size()];
    clients.push_back(ConnectOrDie(options));
  }
  return clients;
}

}  // namespace felix::bench
