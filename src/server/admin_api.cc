#include "server/admin_api.h"

#include <httplib.h>

#include <filesystem>
#include <functional>
#include <vector>

#include "auth/permissions.h"
#include "auth/token.h"
#include "catalog/credentials.h"
#include "catalog/model.h"

namespace felix::server {

namespace {

using catalog::Json;
using Req = httplib::Request;
using Res = httplib::Response;

constexpr int64_t kMaxTokenTtlSeconds = 366 * 24 * 3600;

void SendJson(Res& res, int status, const Json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), "application/json");
}

void SendError(Res& res, int status, const char* code, const std::string& message) {
  SendJson(res, status, Json{{"code", code}, {"message", message}, {"request_id", nullptr}});
}

void SendFailure(Res& res, const Error& error) {
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
      return SendError(res, 400, "invalid_request", error.message);
    case ErrorCode::kNotFound:
      return SendError(res, 404, "not_found", error.message);
    case ErrorCode::kAlreadyExists:
      return SendError(res, 409, "conflict", error.message);
    case ErrorCode::kUnavailable:
      return SendError(res, 503, "unavailable", error.message);
    default:
      return SendError(res, 500, "internal", error.message);
  }
}

std::optional<Json> ParseBody(const Req& req, Res& res) {
  Json body = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    SendError(res, 400, "invalid_request", "body must be a JSON object");
    return std::nullopt;
  }
  return body;
}

// Constant-time in the presented token's content (its length may leak, which is harmless).
bool TokenEquals(std::string_view presented, std::string_view expected) {
  if (expected.empty()) return false;
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i % expected.size()]);
  }
  return diff == 0;
}

template <typename T>
Json Items(const std::vector<T>& entities) {
  Json items = Json::array();
  for (const auto& e : entities) items.push_back(catalog::ToJson(e));
  return Json{{"items", items}};
}

Json KeyJson(const catalog::TenantKey& key) {
  Json jwk = Json::parse(auth::ToJwkJson(key.key));
  jwk["current"] = key.current;
  return jwk;
}

}  // namespace

std::string LocalUrl(const HostPort& addr) {
  HostPort local = addr;
  if (local.host == "0.0.0.0" || local.host.empty()) local.host = "127.0.0.1";
  if (local.host == "::") local.host = "::1";
  return "http://" + local.ToString();
}

Result<std::unique_ptr<AdminApi>> AdminApi::Open(const BrokerConfig& config,
                                                 MetricsRegistry& metrics,
                                                 catalog::Catalog* cluster_catalog) {
  std::unique_ptr<catalog::Catalog> owned;
  if (cluster_catalog == nullptr) {
    auto opened = catalog::EmbeddedCatalog::Open(config.data_dir);
    if (!opened) {
      return Fail(opened.error().code, "FELIX_DATA_DIR: catalog: " + opened.error().message);
    }
    owned = std::move(*opened);
  }
  catalog::Catalog& catalog = cluster_catalog != nullptr ? *cluster_catalog : *owned;
  std::string path = config.data_dir + "/" + catalog::kCredentialsFile;
  std::string token = config.admin_token;
  if (token.empty()) {
    auto existing = catalog::LoadAdminCredentials(path);
    token = existing ? existing->admin_token : catalog::NewAdminToken();
  }
  return std::unique_ptr<AdminApi>(
      new AdminApi(config, metrics, std::move(owned), catalog, std::move(token)));
}

AdminApi::AdminApi(const BrokerConfig& config, MetricsRegistry& metrics,
                   std::unique_ptr<catalog::Catalog> owned, catalog::Catalog& catalog,
                   std::string admin_token)
    : config_(config),
      owned_catalog_(std::move(owned)),
      catalog_(&catalog),
      admin_token_(std::move(admin_token)),
      credentials_path_(config.data_dir + "/" + catalog::kCredentialsFile),
      missing_token_(metrics.AddCounter("felix_admin_auth_rejected_total",
                                        "admin API requests refused before any work",
                                        "reason=\"missing_token\"")),
      invalid_token_(metrics.AddCounter("felix_admin_auth_rejected_total",
                                        "admin API requests refused before any work",
                                        "reason=\"invalid_token\"")) {}

Result<void> AdminApi::WriteCredentials(const HostPort& http_addr, const HostPort& quic_addr,
                                        const std::string& ca_file) {
  catalog::AdminCredentials creds;
  creds.admin_url = LocalUrl(http_addr);
  creds.admin_token = admin_token_;
  HostPort quic = quic_addr;
  if (quic.host == "0.0.0.0") quic.host = "127.0.0.1";
  if (quic.host == "::") quic.host = "::1";
  creds.quic_addr = quic.ToString();
  creds.ca_file = ca_file;
  creds.tenant_id = catalog::kDefaultTenant;
  creds.namespace_name = catalog::kDefaultNamespace;
  if (auto key = catalog_->SigningKeyFor(catalog::kDefaultTenant)) {
    creds.signing_kid = key->kid();
    creds.signing_seed = key->SeedBase64();
  }
  auto r = catalog::WriteAdminCredentials(credentials_path_, creds);
  if (!r) return Fail(r.error().code, "admin credential file: " + r.error().message);
  return Ok();
}

HttpEndpoint::Handler AdminApi::Guarded(HttpEndpoint::Handler handler) {
  return [this, handler = std::move(handler)](const Req& req, Res& res) {
    std::string header = req.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0) {
      missing_token_.Increment();
      res.set_header("WWW-Authenticate", "Bearer");
      return SendError(res, 401, "unauthorized", "missing bearer token");
    }
    if (!TokenEquals(std::string_view(header).substr(kBearer.size()), admin_token_)) {
      invalid_token_.Increment();
      return SendError(res, 403, "forbidden", "invalid admin token");
    }
    handler(req, res);
  };
}

void AdminApi::RegisterGuardedGet(HttpEndpoint& http, const std::string& pattern, JsonGet handler) {
  http.Get(pattern, Guarded([handler = std::move(handler)](const Req&, Res& res) {
             SendJson(res, 200, handler());
           }));
}

void AdminApi::RegisterGuardedPost(HttpEndpoint& http, const std::string& pattern,
                                   JsonPost handler) {
  http.Post(pattern, Guarded([handler = std::move(handler)](const Req& req, Res& res) {
              auto body = ParseBody(req, res);
              if (!body) return;
              auto answer = handler(*body);
              if (!answer) return SendFailure(res, answer.error());
              SendJson(res, 202, *answer);
            }));
}

void AdminApi::Register(HttpEndpoint& http) {
  auto guarded = [this](auto handler) { return Guarded(std::move(handler)); };
  catalog::Catalog& cat = *catalog_;

  // Tenants.
  http.Get("/v1/tenants",
           guarded([&cat](const Req&, Res& res) { SendJson(res, 200, Items(cat.ListTenants())); }));
  http.Post("/v1/tenants", guarded([&cat](const Req& req, Res& res) {
              auto body = ParseBody(req, res);
              if (!body) return;
              auto tenant = catalog::TenantFromJson(*body);
              if (tenant) tenant = cat.CreateTenant(*tenant);
              if (!tenant) return SendFailure(res, tenant.error());
              SendJson(res, 201, catalog::ToJson(*tenant));
            }));
  http.Get(R"(/v1/tenants/([^/]+))", guarded([&cat](const Req& req, Res& res) {
             auto tenant = cat.GetTenant(req.matches[1].str());
             if (!tenant) return SendFailure(res, tenant.error());
             SendJson(res, 200, catalog::ToJson(*tenant));
           }));
  // Cascading deletes drop the data of every stream and cache inside (delete means delete).
  auto drop_inside = [this, &cat](const std::string& tenant, const std::string* ns) {
    auto snapshot = cat.Snapshot();
    std::vector<std::function<void()>> drops;
    for (const auto& s : snapshot->AllStreams()) {
      if (s.tenant_id != tenant || (ns && s.namespace_name != *ns) || !hooks_.drop_stream) continue;
      drops.push_back([this, s] { hooks_.drop_stream(s.tenant_id, s.namespace_name, s.name); });
    }
    for (const auto& c : snapshot->AllCaches()) {
      if (c.tenant_id != tenant || (ns && c.namespace_name != *ns) || !hooks_.drop_cache) continue;
      drops.push_back([this, c] { hooks_.drop_cache(c.tenant_id, c.namespace_name, c.name); });
    }
    return drops;
  };
  http.Delete(R"(/v1/tenants/([^/]+))", guarded([&cat, drop_inside](const Req& req, Res& res) {
                auto drops = drop_inside(req.matches[1].str(), nullptr);
                auto r = cat.DeleteTenant(req.matches[1].str());
                if (!r) return SendFailure(res, r.error());
                for (auto& drop : drops) drop();
                res.status = 204;
              }));

  // Namespaces.
  http.Get(R"(/v1/tenants/([^/]+)/namespaces)", guarded([&cat](const Req& req, Res& res) {
             auto list = cat.ListNamespaces(req.matches[1].str());
             if (!list) return SendFailure(res, list.error());
             SendJson(res, 200, Items(*list));
           }));
  http.Post(R"(/v1/tenants/([^/]+)/namespaces)", guarded([&cat](const Req& req, Res& res) {
              auto body = ParseBody(req, res);
              if (!body) return;
              auto ns = catalog::NamespaceFromJson(req.matches[1].str(), *body);
              if (ns) ns = cat.CreateNamespace(*ns);
              if (!ns) return SendFailure(res, ns.error());
              SendJson(res, 201, catalog::ToJson(*ns));
            }));
  http.Get(R"(/v1/tenants/([^/]+)/namespaces/([^/]+))", guarded([&cat](const Req& req, Res& res) {
             auto ns = cat.GetNamespace(req.matches[1].str(), req.matches[2].str());
             if (!ns) return SendFailure(res, ns.error());
             SendJson(res, 200, catalog::ToJson(*ns));
           }));
  http.Delete(R"(/v1/tenants/([^/]+)/namespaces/([^/]+))",
              guarded([&cat, drop_inside](const Req& req, Res& res) {
                std::string ns = req.matches[2].str();
                auto drops = drop_inside(req.matches[1].str(), &ns);
                auto r = cat.DeleteNamespace(req.matches[1].str(), ns);
                if (!r) return SendFailure(res, r.error());
                for (auto& drop : drops) drop();
                res.status = 204;
              }));

  // Streams.
  const std::string streams = R"(/v1/tenants/([^/]+)/namespaces/([^/]+)/streams)";
  http.Get(streams, guarded([&cat](const Req& req, Res& res) {
             auto list = cat.ListStreams(req.matches[1].str(), req.matches[2].str());
             if (!list) return SendFailure(res, list.error());
             SendJson(res, 200, Items(*list));
           }));
  http.Post(
      streams, guarded([this, &cat](const Req& req, Res& res) {
        auto body = ParseBody(req, res);
        if (!body) return;
        auto stream = catalog::StreamFromJson(req.matches[1].str(), req.matches[2].str(), *body);
        if (stream && hooks_.drop_stream &&
            !cat.Snapshot()->FindStream(stream->tenant_id, stream->namespace_name, stream->name)) {
          // Leftovers of a delete that did not finish (crash) never reach a new stream.
          hooks_.drop_stream(stream->tenant_id, stream->namespace_name, stream->name);
        }
        if (stream) stream = cat.CreateStream(*stream);
        if (!stream) return SendFailure(res, stream.error());
        SendJson(res, 201, catalog::ToJson(*stream));
      }));
  http.Get(streams + "/([^/]+)", guarded([&cat](const Req& req, Res& res) {
             auto stream =
                 cat.GetStream(req.matches[1].str(), req.matches[2].str(), req.matches[3].str());
             if (!stream) return SendFailure(res, stream.error());
             SendJson(res, 200, catalog::ToJson(*stream));
           }));
  http.Delete(
      streams + "/([^/]+)", guarded([this, &cat](const Req& req, Res& res) {
        auto r = cat.DeleteStream(req.matches[1].str(), req.matches[2].str(), req.matches[3].str());
        if (!r) return SendFailure(res, r.error());
        // Delete means delete: readers end, the logs go (answered once they are gone).
        if (hooks_.drop_stream) {
          hooks_.drop_stream(req.matches[1].str(), req.matches[2].str(), req.matches[3].str());
        }
        res.status = 204;
      }));

  // Caches.
  const std::string caches = R"(/v1/tenants/([^/]+)/namespaces/([^/]+)/caches)";
  http.Get(caches, guarded([&cat](const Req& req, Res& res) {
             auto list = cat.ListCaches(req.matches[1].str(), req.matches[2].str());
             if (!list) return SendFailure(res, list.error());
             SendJson(res, 200, Items(*list));
           }));
  http.Post(
      caches, guarded([this, &cat](const Req& req, Res& res) {
        auto body = ParseBody(req, res);
        if (!body) return;
        auto cache = catalog::CacheFromJson(req.matches[1].str(), req.matches[2].str(), *body);
        if (cache && hooks_.drop_cache &&
            !cat.Snapshot()->FindCache(cache->tenant_id, cache->namespace_name, cache->name)) {
          hooks_.drop_cache(cache->tenant_id, cache->namespace_name, cache->name);
        }
        if (cache) cache = cat.CreateCache(*cache);
        if (!cache) return SendFailure(res, cache.error());
        SendJson(res, 201, catalog::ToJson(*cache));
      }));
  http.Get(caches + "/([^/]+)", guarded([&cat](const Req& req, Res& res) {
             auto cache =
                 cat.GetCache(req.matches[1].str(), req.matches[2].str(), req.matches[3].str());
             if (!cache) return SendFailure(res, cache.error());
             SendJson(res, 200, catalog::ToJson(*cache));
           }));
  http.Delete(
      caches + "/([^/]+)", guarded([this, &cat](const Req& req, Res& res) {
        auto r = cat.DeleteCache(req.matches[1].str(), req.matches[2].str(), req.matches[3].str());
        if (!r) return SendFailure(res, r.error());
        if (hooks_.drop_cache) {
          hooks_.drop_cache(req.matches[1].str(), req.matches[2].str(), req.matches[3].str());
        }
        res.status = 204;
      }));

  // Keys: the JWKS is public (auth.md §4); the listing with `current` needs the admin token.
  http.Get(R"(/v1/tenants/([^/]+)/\.well-known/jwks\.json)", [&cat](const Req& req, Res& res) {
    auto snapshot = cat.Snapshot();
    std::string tenant = req.matches[1].str();
    if (!snapshot->FindTenant(tenant)) {
      return SendError(res, 404, "not_found", "tenant '" + tenant + "' not found");
    }
    auto keys = snapshot->VerifyingKeys(tenant);
    res.status = 200;
    res.set_content(auth::ToJwksJson(keys), "application/json");
  });
  http.Get(R"(/v1/tenants/([^/]+)/signing-keys)", guarded([&cat](const Req& req, Res& res) {
             auto snapshot = cat.Snapshot();
             std::string tenant = req.matches[1].str();
             if (!snapshot->FindTenant(tenant)) {
               return SendError(res, 404, "not_found", "tenant '" + tenant + "' not found");
             }
             Json items = Json::array();
             for (const auto& key : snapshot->Keys()) {
               if (key.tenant_id == tenant) items.push_back(KeyJson(key));
             }
             SendJson(res, 200, Json{{"items", items}});
           }));

  // Token issuance: {subject, permissions:[…], ttl_seconds?, audience?} →
  // {felix_token, expires_in, token_type:"Bearer"} signed with the tenant's current key.
  http.Post(R"(/v1/tenants/([^/]+)/tokens)", guarded([&cat](const Req& req, Res& res) {
              auto body = ParseBody(req, res);
              if (!body) return;
              std::string tenant = req.matches[1].str();
              if (!cat.Snapshot()->FindTenant(tenant)) {
                return SendError(res, 404, "not_found", "tenant '" + tenant + "' not found");
              }
              auth::TokenClaims claims;
              claims.tid = tenant;
              auto subject = body->find("subject");
              if (subject == body->end() || !subject->is_string() ||
                  subject->get<std::string>().empty()) {
                return SendError(res, 400, "invalid_request", "'subject' is required");
              }
              claims.sub = subject->get<std::string>();
              auto perms = body->find("permissions");
              if (perms == body->end() || !perms->is_array() || perms->empty()) {
                return SendError(res, 400, "invalid_request",
                                 "'permissions' must be a non-empty array of strings");
              }
              for (const auto& p : *perms) {
                if (!p.is_string()) {
                  return SendError(res, 400, "invalid_request", "'permissions' entry not a string");
                }
                auto valid = auth::ValidatePolicyPermission(p.get<std::string>(), tenant);
                if (!valid) return SendFailure(res, valid.error());
                claims.perms.push_back(p.get<std::string>());
              }
              int64_t ttl = auth::kDefaultTokenTtlSeconds;
              if (auto t = body->find("ttl_seconds"); t != body->end() && !t->is_null()) {
                if (!t->is_number_integer() || t->get<int64_t>() < 1 ||
                    t->get<int64_t>() > kMaxTokenTtlSeconds) {
                  return SendError(res, 400, "invalid_request",
                                   "'ttl_seconds' must be 1 to 31622400");
                }
                ttl = t->get<int64_t>();
              }
              if (auto a = body->find("audience"); a != body->end() && !a->is_null()) {
                std::string aud = a->is_string() ? a->get<std::string>() : "";
                if (aud != auth::kBrokerAudience && aud != auth::kControlPlaneAudience) {
                  return SendError(res, 400, "invalid_request",
                                   "'audience' must be felix-broker or felix-controlplane");
                }
                claims.aud = aud;
              }
              auto key = cat.SigningKeyFor(tenant);
              if (!key) return SendFailure(res, key.error());
              claims.iat = auth::NowUnixSeconds();
              claims.exp = claims.iat + ttl;
              SendJson(res, 200,
                       Json{{"felix_token", auth::MintToken(*key, claims)},
                            {"expires_in", ttl},
                            {"token_type", "Bearer"}});
            }));
}

}  // namespace felix::server
