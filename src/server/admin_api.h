// AdminApi: the broker's admin HTTP API (tenants, namespaces, streams, caches, signing keys,
// token issuance) on the HttpEndpoint, shaped like the reference control-plane API
// (control-plane.md §4.2, auth.md §4): JSON bodies, error body
// {"code","message","request_id":null}, 201 on create, 204 on delete, 409 on duplicates,
// 400 on validation, 404 when missing.
//
// Every route except the JWKS needs `Authorization: Bearer <admin token>`: 401 without a
// bearer token, 403 with a wrong one (checked before anything else, in constant time).
//
// On a single node it owns the embedded catalog (opened from the data directory); in cluster
// mode it writes through the cluster's catalog on etcd (the caller's, which must outlive it).
// It writes the admin credential file once the HTTP address is known. Register() must run before
// HttpEndpoint::Start(); the AdminApi must outlive the endpoint's serving. Handlers run on
// httplib's worker threads; the catalog is thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "catalog/embedded_catalog.h"
#include "common/metrics.h"
#include "common/net_address.h"
#include "common/result.h"
#include "server/broker_config.h"
#include "server/http_endpoint.h"

namespace felix::server {

class AdminApi {
 public:
  // Opens the catalog in config.data_dir (first start: default tenant, namespace and key) and
  // settles the admin token: FELIX_ADMIN_TOKEN if set, else the one in an existing credential
  // file, else a fresh random one.
  // `cluster_catalog`: the catalog on etcd (cluster mode); null opens the embedded one.
  static Result<std::unique_ptr<AdminApi>> Open(const BrokerConfig& config,
                                                MetricsRegistry& metrics,
                                                catalog::Catalog* cluster_catalog = nullptr);

  void Register(HttpEndpoint& http);

  // Serves GET `pattern` behind the admin-token check (other subsystems' admin routes, e.g.
  // /v1/cluster). `handler` returns the JSON answered with 200.
  using JsonGet = std::function<nlohmann::ordered_json()>;
  void RegisterGuardedGet(HttpEndpoint& http, const std::string& pattern, JsonGet handler);

  // Serves POST `pattern` behind the admin-token check: `handler` gets the JSON object body
  // and answers 202 with its JSON, or the error (400 invalid, 404 missing, 409 conflict, 503
  // unavailable, like every route).
  using JsonPost =
      std::function<Result<nlohmann::ordered_json>(const nlohmann::ordered_json& body)>;
  void RegisterGuardedPost(HttpEndpoint& http, const std::string& pattern, JsonPost handler);

  // What the broker does with a stream's (cache's) data when it is deleted, and before one is
  // created under a name that is free (BrokerCore::DropStream/DropCache). Runs on an HTTP
  // worker thread; the delete is answered once it returned. Set before HttpEndpoint::Start.
  using DropData = std::function<void(const std::string& tenant, const std::string& ns,
                                      const std::string& name)>;
  struct DataHooks {
    DropData drop_stream;
    DropData drop_cache;
  };
  void SetDataHooks(DataHooks hooks) { hooks_ = std::move(hooks); }

  // Writes <data_dir>/admin-credentials.json (0600) with the bound HTTP and client QUIC
  // addresses and the file that verifies the broker's certificate.
  Result<void> WriteCredentials(const HostPort& http_addr, const HostPort& quic_addr,
                                const std::string& ca_file);

  catalog::Catalog& catalog() { return *catalog_; }
  const std::string& credentials_path() const { return credentials_path_; }

 private:
  AdminApi(const BrokerConfig& config, MetricsRegistry& metrics,
           std::unique_ptr<catalog::Catalog> owned, catalog::Catalog& catalog,
           std::string admin_token);
  // Wraps a handler with the admin-token check.
  HttpEndpoint::Handler Guarded(HttpEndpoint::Handler handler);

  const BrokerConfig config_;
  std::unique_ptr<catalog::Catalog> owned_catalog_;  // single node only
  catalog::Catalog* catalog_;
  const std::string admin_token_;
  const std::string credentials_path_;
  DataHooks hooks_;
  Counter& missing_token_;
  Counter& invalid_token_;
};

// "http://host:port" reachable from this machine: a wildcard bind becomes loopback.
std::string LocalUrl(const HostPort& addr);

}  // namespace felix::server
