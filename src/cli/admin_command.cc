// Admin command groups: `felix tenant|namespace|stream|cache …` over the broker's admin HTTP
// API, and `felix token issue`. They find the broker and its admin token in the credential
// file the broker writes (--credentials PATH, else $FELIX_DATA_DIR/admin-credentials.json,
// else ./felix-data/admin-credentials.json); --url and --admin-token override it.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>

#include "auth/token.h"
#include "catalog/credentials.h"
#include "catalog/model.h"
#include "cli/admin_http.h"
#include "cli/client_connection.h"
#include "cli/command.h"
#include "cli/credentials.h"

namespace felix::cli {

namespace {

using catalog::Json;

void Print(const AdminConnection& conn, const Json& j) {
  std::cout << (conn.json ? j.dump() : j.dump(2)) << "\n";
}

// Lists: one line per item (or the raw JSON with --json).
void PrintList(const AdminConnection& conn, const Json& answer, const char* name_field,
               const std::vector<const char*>& extra) {
  if (conn.json) return Print(conn, answer);
  if (!answer.contains("items") || !answer["items"].is_array()) return Print(conn, answer);
  for (const auto& item : answer["items"]) {
    std::cout << JsonText(item, name_field);
    for (const char* field : extra) std::cout << " " << field << "=" << JsonText(item, field);
    std::cout << "\n";
  }
}

std::string NsPath(const std::string& tenant, const std::string& ns) {
  return "/v1/tenants/" + tenant + "/namespaces/" + ns;
}

void RegisterTenant(CLI::App& app) {
  CLI::App* group = app.add_subcommand("tenant", "list and create tenants");
  group->require_subcommand(1);
  auto conn = std::make_shared<AdminConnection>();
  CLI::App* list = group->add_subcommand("list", "list tenants");
  AddAdminConnectionOptions(list, *conn);
  list->callback([conn] {
    PrintList(*conn, AdminCall(*conn, "GET", "/v1/tenants"), "tenant_id", {"display_name"});
  });
  auto create_opts = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App* create = group->add_subcommand("create", "create a tenant (with its signing key)");
  AddAdminConnectionOptions(create, *conn);
  create->add_option("tenant_id", create_opts->first, "tenant id")->required();
  create->add_option("--display-name", create_opts->second, "display name");
  create->callback([conn, create_opts] {
    Json body{{"tenant_id", create_opts->first}, {"display_name", create_opts->second}};
    Print(*conn, AdminCall(*conn, "POST", "/v1/tenants", &body));
  });
}

struct Scope {
  std::string tenant = "default";
  std::string ns = "default";
};

void AddScope(CLI::App* cmd, Scope& scope, bool with_namespace = true) {
  cmd->add_option("--tenant,-t", scope.tenant, "tenant (default: default)");
  if (with_namespace) cmd->add_option("--namespace,-n", scope.ns, "namespace (default: default)");
}

void RegisterNamespace(CLI::App& app) {
  CLI::App* group = app.add_subcommand("namespace", "list and create namespaces");
  group->require_subcommand(1);
  auto conn = std::make_shared<AdminConnection>();
  auto scope = std::make_shared<Scope>();
  CLI::App* list = group->add_subcommand("list", "list a tenant's namespaces");
  AddAdminConnectionOptions(list, *conn);
  AddScope(list, *scope, false);
  list->callback([conn, scope] {
    PrintList(*conn, AdminCall(*conn, "GET", "/v1/tenants/" + scope->tenant + "/namespaces"),
              "namespace", {"display_name"});
  });
  auto opts = std::make_shared<std::pair<std::string, std::string>>();
  CLI::App* create = group->add_subcommand("create", "create a namespace");
  AddAdminConnectionOptions(create, *conn);
  AddScope(create, *scope, false);
  create->add_option("namespace", opts->first, "namespace name")->required();
  create->add_option("--display-name", opts->second, "display name");
  create->callback([conn, scope, opts] {
    Json body{{"namespace", opts->first}, {"display_name", opts->second}};
    Print(*conn, AdminCall(*conn, "POST", "/v1/tenants/" + scope->tenant + "/namespaces", &body));
  });
}

struct StreamOptions {
  std::string name;
  std::string kind = "Stream";
  uint32_t shards = 1;
  bool durable = false;
  bool in_memory = false;
  std::string fsync_mode;
  uint64_t retention_bytes = 0;
  uint64_t retention_seconds = 0;
  std::string routing;
  uint32_t replication_factor = 1;
  std::string consistency;
};

void RegisterStream(CLI::App& app) {
  CLI::App* group = app.add_subcommand("stream", "create, list, inspect and delete streams");
  group->require_subcommand(1);
  auto conn = std::make_shared<AdminConnection>();
  auto scope = std::make_shared<Scope>();
  auto opts = std::make_shared<StreamOptions>();

  CLI::App* create = group->add_subcommand("create", "create a stream");
  AddAdminConnectionOptions(create, *conn);
  AddScope(create, *scope);
  create->add_option("stream", opts->name, "stream name")->required();
  create->add_option("--shards", opts->shards, "shard count (fixed at creation)");
  create->add_option("--kind", opts->kind, "Stream or Queue");
  create->add_flag("--durable", opts->durable, "keep the stream in durable segmented logs");
  create->add_flag("--in-memory", opts->in_memory, "keep the stream in memory only (default)");
  create->add_option("--fsync-mode", opts->fsync_mode, "none, periodic or on_commit (durable)");
  create->add_option("--retention-bytes", opts->retention_bytes, "per shard log; 0: default");
  create->add_option("--retention-seconds", opts->retention_seconds, "0: broker default");
  create->add_option("--routing", opts->routing, "modulo (default) or jump");
  create->add_option("--replication-factor", opts->replication_factor, "copies (default 1)");
  create->add_option("--consistency", opts->consistency,
                     "Leader (default: ack on the leader's commit) or Quorum (ack once a majority "
                     "of the replicas holds the write)");
  create->callback([conn, scope, opts] {
    if (opts->durable && opts->in_memory) Die("--durable and --in-memory exclude each other");
    Json body = Json::object();
    body["stream"] = opts->name;
    body["kind"] = opts->kind;
    body["shards"] = opts->shards;
    body["replication_factor"] = opts->replication_factor;
    Json retention{{"max_age_seconds", nullptr}, {"max_size_bytes", nullptr}};
    if (opts->retention_seconds) retention["max_age_seconds"] = opts->retention_seconds;
    if (opts->retention_bytes) retention["max_size_bytes"] = opts->retention_bytes;
    body["retention"] = retention;
    body["durable"] = opts->durable;
    if (!opts->fsync_mode.empty()) body["fsync_mode"] = opts->fsync_mode;
    if (!opts->routing.empty()) body["routing"] = opts->routing;
    if (!opts->consistency.empty()) body["consistency"] = opts->consistency;
    Print(*conn, AdminCall(*conn, "POST", NsPath(scope->tenant, scope->ns) + "/streams", &body));
  });

  CLI::App* list = group->add_subcommand("list", "list the streams of a namespace");
  AddAdminConnectionOptions(list, *conn);
  AddScope(list, *scope);
  list->callback([conn, scope] {
    PrintList(*conn, AdminCall(*conn, "GET", NsPath(scope->tenant, scope->ns) + "/streams"),
              "stream", {"shards", "durable", "kind"});
  });

  auto name = std::make_shared<std::string>();
  CLI::App* get = group->add_subcommand("get", "show one stream");
  AddAdminConnectionOptions(get, *conn);
  AddScope(get, *scope);
  get->add_option("stream", *name, "stream name")->required();
  get->callback([conn, scope, name] {
    Print(*conn, AdminCall(*conn, "GET", NsPath(scope->tenant, scope->ns) + "/streams/" + *name));
  });

  CLI::App* del = group->add_subcommand("delete", "delete a stream");
  AddAdminConnectionOptions(del, *conn);
  AddScope(del, *scope);
  del->add_option("stream", *name, "stream name")->required();
  del->callback([conn, scope, name] {
    AdminCall(*conn, "DELETE", NsPath(scope->tenant, scope->ns) + "/streams/" + *name);
    std::cout << "deleted stream " << scope->tenant << "/" << scope->ns << "/" << *name << "\n";
  });
}

struct CacheOptions {
  std::string name;
  std::string display_name;
  uint32_t shards = 1;
  bool durable = false;
  uint64_t default_ttl_ms = 0;
  uint32_t replication_factor = 1;
  std::string consistency;
};

void RegisterCache(CLI::App& app) {
  CLI::App* group = app.add_subcommand("cache", "create, list and delete caches");
  group->require_subcommand(1);
  auto conn = std::make_shared<AdminConnection>();
  auto scope = std::make_shared<Scope>();
  auto opts = std::make_shared<CacheOptions>();

  CLI::App* create = group->add_subcommand("create", "create a cache");
  AddAdminConnectionOptions(create, *conn);
  AddScope(create, *scope);
  create->add_option("cache", opts->name, "cache name")->required();
  create->add_option("--display-name", opts->display_name, "display name");
  create->add_option("--shards", opts->shards, "shard count");
  create->add_flag("--durable", opts->durable, "persist the cache");
  create->add_option("--default-ttl-ms", opts->default_ttl_ms, "default entry TTL; 0: none");
  create->add_option("--replication-factor", opts->replication_factor, "copies (default 1)");
  create->add_option("--consistency", opts->consistency, "Leader (default) or Quorum");
  create->callback([conn, scope, opts] {
    Json body{{"cache", opts->name},
              {"display_name", opts->display_name},
              {"shards", opts->shards},
              {"durable", opts->durable},
              {"replication_factor", opts->replication_factor}};
    if (!opts->consistency.empty()) body["consistency"] = opts->consistency;
    if (opts->default_ttl_ms) body["default_ttl_ms"] = opts->default_ttl_ms;
    Print(*conn, AdminCall(*conn, "POST", NsPath(scope->tenant, scope->ns) + "/caches", &body));
  });

  CLI::App* list = group->add_subcommand("list", "list the caches of a namespace");
  AddAdminConnectionOptions(list, *conn);
  AddScope(list, *scope);
  list->callback([conn, scope] {
    PrintList(*conn, AdminCall(*conn, "GET", NsPath(scope->tenant, scope->ns) + "/caches"), "cache",
              {"shards", "durable", "default_ttl_ms"});
  });

  auto name = std::make_shared<std::string>();
  CLI::App* del = group->add_subcommand("delete", "delete a cache");
  AddAdminConnectionOptions(del, *conn);
  AddScope(del, *scope);
  del->add_option("cache", *name, "cache name")->required();
  del->callback([conn, scope, name] {
    AdminCall(*conn, "DELETE", NsPath(scope->tenant, scope->ns) + "/caches/" + *name);
    std::cout << "deleted cache " << scope->tenant << "/" << scope->ns << "/" << *name << "\n";
  });
}

struct TokenOptions {
  std::string tenant;
  std::string subject;
  std::vector<std::string> permissions;
  int64_t ttl = auth::kDefaultTokenTtlSeconds;
  std::string audience = auth::kBrokerAudience;
  bool offline = false;
};

void RegisterToken(CLI::App& app) {
  CLI::App* group = app.add_subcommand("token", "issue Felix tokens");
  group->require_subcommand(1);
  auto conn = std::make_shared<AdminConnection>();
  auto opts = std::make_shared<TokenOptions>();
  CLI::App* issue =
      group->add_subcommand("issue", "mint a scoped Felix token (prints only the token)");
  AddAdminConnectionOptions(issue, *conn);
  issue->add_option("--tenant,-t", opts->tenant, "tenant (default: the credential file's tenant)");
  issue->add_option("--subject,-s", opts->subject, "principal (sub claim)")->required();
  issue
      ->add_option("--permissions,-p", opts->permissions,
                   "action:resource grants, repeated or comma-separated, e.g. "
                   "stream.publish:stream:default/default/*")
      ->required()
      ->delimiter(',');
  issue->add_option("--ttl", opts->ttl, "lifetime in seconds (default 900)");
  issue->add_option("--audience", opts->audience, "felix-broker (default) or felix-controlplane");
  issue->add_flag("--offline", opts->offline,
                  "sign locally with the credential file's key instead of asking the broker");
  issue->callback([conn, opts] {
    if (opts->offline) {
      catalog::AdminCredentials creds = AdminCredentialsOrDie(*conn, /*need_file=*/true);
      std::string tenant = opts->tenant.empty() ? creds.tenant_id : opts->tenant;
      auto token = MintLocalToken(creds, tenant, opts->subject, opts->permissions, opts->ttl,
                                  opts->audience);
      if (!token) Die(token.error().message);
      std::cout << *token << "\n";
      return;
    }
    std::string tenant = opts->tenant;
    if (tenant.empty()) tenant = AdminCredentialsOrDie(*conn).tenant_id;
    Json body{{"subject", opts->subject},
              {"permissions", opts->permissions},
              {"ttl_seconds", opts->ttl},
              {"audience", opts->audience}};
    Json answer = AdminCall(*conn, "POST", "/v1/tenants/" + tenant + "/tokens", &body);
    if (conn->json) return Print(*conn, answer);
    std::cout << JsonText(answer, "felix_token") << "\n";
  });
}

}  // namespace

void RegisterAdminCommands(CLI::App& app) {
  RegisterTenant(app);
  RegisterNamespace(app);
  RegisterStream(app);
  RegisterCache(app);
  RegisterToken(app);
}

}  // namespace felix::cli
