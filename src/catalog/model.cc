#include "catalog/model.h"

#include <limits>

namespace felix::catalog {

namespace {

constexpr uint64_t kMaxSigned = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

tl::unexpected<Error> Invalid(std::string message) {
  return Fail(ErrorCode::kInvalidArgument, std::move(message));
}

// Field readers: absent (or null) leaves the default; a wrong type is an error naming it.
class Reader {
 public:
  explicit Reader(const Json& body) : body_(body) {}

  Result<void> Object() const {
    if (!body_.is_object()) return Invalid("body must be a JSON object");
    return Ok();
  }
  const Json* Find(const char* name) const {
    auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }
  Result<void> String(const char* name, std::string& out, bool required = false) const {
    const Json* v = Find(name);
    if (!v) return required ? Invalid(std::string("'") + name + "' is required") : Ok();
    if (!v->is_string()) return Invalid(std::string("'") + name + "' must be a string");
    out = v->get<std::string>();
    return Ok();
  }
  Result<void> Bool(const char* name, bool& out) const {
    const Json* v = Find(name);
    if (!v) return Ok();
    if (!v->is_boolean()) return Invalid(std::string("'") + name + "' must be true or false");
    out = v->get<bool>();
    return Ok();
  }
  static Result<uint64_t> Unsigned(const Json& v, const std::string& name) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      return Invalid("'" + name + "' must be a non-negative integer");
    }
    return v.get<uint64_t>();
  }
  Result<void> U32(const char* name, uint32_t& out) const {
    const Json* v = Find(name);
    if (!v) return Ok();
    auto n = Unsigned(*v, name);
    if (!n) return tl::unexpected(n.error());
    if (*n > std::numeric_limits<uint32_t>::max()) {
      return Invalid(std::string("'") + name + "' is too large");
    }
    out = static_cast<uint32_t>(*n);
    return Ok();
  }
  Result<void> OptionalU64(const Json& obj, const char* name, std::optional<uint64_t>& out,
                           const std::string& path) const {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return Ok();
    auto n = Unsigned(*it, path);
    if (!n) return tl::unexpected(n.error());
    out = *n;
    return Ok();
  }
  template <typename E, size_t N>
  Result<void> Enum(const char* name, E& out, const std::pair<const char*, E> (&table)[N]) const {
    const Json* v = Find(name);
    if (!v) return Ok();
    if (v->is_string()) {
      std::string s = v->get<std::string>();
      for (const auto& [spelling, value] : table) {
        if (s == spelling) {
          out = value;
          return Ok();
        }
      }
    }
    std::string allowed;
    for (const auto& [spelling, value] : table) {
      (void)value;
      allowed += (allowed.empty() ? "" : ", ") + std::string(spelling);
    }
    return Invalid(std::string("'") + name + "' must be one of " + allowed);
  }
  const Json& body() const { return body_; }

 private:
  const Json& body_;
};

const std::pair<const char*, StreamKind> kKinds[] = {
    {"Stream", StreamKind::kStream}, {"Queue", StreamKind::kQueue}, {"Cache", StreamKind::kCache}};
const std::pair<const char*, Consistency> kConsistency[] = {{"Leader", Consistency::kLeader},
                                                            {"Quorum", Consistency::kQuorum}};
const std::pair<const char*, Delivery> kDelivery[] = {{"AtMostOnce", Delivery::kAtMostOnce},
                                                      {"AtLeastOnce", Delivery::kAtLeastOnce}};
// "jump" is accepted as a short spelling of "jump_hash" on input.
const std::pair<const char*, Routing> kRouting[] = {
    {"modulo", Routing::kModulo}, {"jump_hash", Routing::kJumpHash}, {"jump", Routing::kJumpHash}};
const std::pair<const char*, FsyncMode> kFsync[] = {{"none", FsyncMode::kNone},
                                                    {"periodic", FsyncMode::kPeriodic},
                                                    {"on_commit", FsyncMode::kOnCommit}};

Result<void> ValidateDisplayName(const std::string& display_name) {
  if (display_name.size() > kMaxDisplayNameBytes) {
    return Invalid("'display_name' is longer than 1024 bytes");
  }
  return Ok();
}

Result<void> ValidateShape(uint32_t shards, uint32_t replication_factor) {
  if (shards < 1 || shards > kMaxShards) return Invalid("'shards' must be 1 to 65535");
  if (replication_factor < 1 || replication_factor > kMaxReplicationFactor) {
    return Invalid("'replication_factor' must be 1 to 16");
  }
  return Ok();
}

Result<void> ValidatePositive(const std::optional<uint64_t>& value, const char* name) {
  if (!value) return Ok();
  if (*value == 0) return Invalid(std::string("'") + name + "' must not be 0 (use null)");
  if (*value > kMaxSigned) return Invalid(std::string("'") + name + "' is too large");
  return Ok();
}

#define FELIX_TRY(expr)                                           \
  do {                                                            \
    if (auto _r = (expr); !_r) return tl::unexpected(_r.error()); \
  } while (0)

}  // namespace

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return false;
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

Result<void> ValidateName(std::string_view what, std::string_view name) {
  if (IsValidName(name)) return Ok();
  return Invalid("'" + std::string(what) + "' must be 1-128 characters of [A-Za-z0-9._-] " +
                 "starting with a letter or digit (got '" + std::string(name.substr(0, 200)) +
                 "')");
}

Result<void> Validate(const Tenant& t) {
  FELIX_TRY(ValidateName("tenant_id", t.tenant_id));
  return ValidateDisplayName(t.display_name);
}

Result<void> Validate(const Namespace& ns) {
  FELIX_TRY(ValidateName("tenant_id", ns.tenant_id));
  FELIX_TRY(ValidateName("namespace", ns.name));
  return ValidateDisplayName(ns.display_name);
}

Result<void> Validate(const Stream& s) {
  FELIX_TRY(ValidateName("tenant_id", s.tenant_id));
  FELIX_TRY(ValidateName("namespace", s.namespace_name));
  FELIX_TRY(ValidateName("stream", s.name));
  FELIX_TRY(ValidateShape(s.shards, s.replication_factor));
  FELIX_TRY(ValidatePositive(s.retention.max_age_seconds, "retention.max_age_seconds"));
  FELIX_TRY(ValidatePositive(s.retention.max_size_bytes, "retention.max_size_bytes"));
  if (s.fsync_mode && !s.durable) return Invalid("'fsync_mode' needs 'durable': true");
  return Ok();
}

Result<void> Validate(const Cache& c) {
  FELIX_TRY(ValidateName("tenant_id", c.tenant_id));
  FELIX_TRY(ValidateName("namespace", c.namespace_name));
  FELIX_TRY(ValidateName("cache", c.name));
  FELIX_TRY(ValidateDisplayName(c.display_name));
  FELIX_TRY(ValidateShape(c.shards, c.replication_factor));
  return ValidatePositive(c.default_ttl_ms, "default_ttl_ms");
}

const char* StreamKindName(StreamKind kind) {
  return kKinds[static_cast<size_t>(kind)].first;
}
const char* ConsistencyName(Consistency c) {
  return kConsistency[static_cast<size_t>(c)].first;
}
const char* DeliveryName(Delivery d) {
  return kDelivery[static_cast<size_t>(d)].first;
}
const char* RoutingName(Routing r) {
  return kRouting[static_cast<size_t>(r)].first;
}

Json ToJson(const Tenant& t) {
  return Json{{"tenant_id", t.tenant_id}, {"display_name", t.display_name}};
}

Json ToJson(const Namespace& ns) {
  return Json{
      {"tenant_id", ns.tenant_id}, {"namespace", ns.name}, {"display_name", ns.display_name}};
}

namespace {
Json OptionalNumber(const std::optional<uint64_t>& v) {
  return v ? Json(*v) : Json(nullptr);
}
}  // namespace

Json ToJson(const Stream& s) {
  Json j = Json::object();
  j["tenant_id"] = s.tenant_id;
  j["namespace"] = s.namespace_name;
  j["stream"] = s.name;
  j["kind"] = StreamKindName(s.kind);
  j["shards"] = s.shards;
  j["replication_factor"] = s.replication_factor;
  j["retention"] = Json{{"max_age_seconds", OptionalNumber(s.retention.max_age_seconds)},
                        {"max_size_bytes", OptionalNumber(s.retention.max_size_bytes)}};
  j["consistency"] = ConsistencyName(s.consistency);
  j["delivery"] = DeliveryName(s.delivery);
  j["durable"] = s.durable;
  if (s.fsync_mode) j["fsync_mode"] = FsyncModeName(*s.fsync_mode);
  // Responses omit routing when it is modulo (control-plane.md §2.3).
  if (s.routing != Routing::kModulo) j["routing"] = RoutingName(s.routing);
  return j;
}

Json ToJson(const Cache& c) {
  Json j = Json::object();
  j["tenant_id"] = c.tenant_id;
  j["namespace"] = c.namespace_name;
  j["cache"] = c.name;
  j["display_name"] = c.display_name;
  j["shards"] = c.shards;
  j["replication_factor"] = c.replication_factor;
  j["consistency"] = ConsistencyName(c.consistency);
  j["durable"] = c.durable;
  if (c.default_ttl_ms) j["default_ttl_ms"] = *c.default_ttl_ms;
  return j;
}

Result<Tenant> TenantFromJson(const Json& body) {
  Reader r(body);
  FELIX_TRY(r.Object());
  Tenant t;
  FELIX_TRY(r.String("tenant_id", t.tenant_id, /*required=*/true));
  FELIX_TRY(r.String("display_name", t.display_name));
  FELIX_TRY(Validate(t));
  return t;
}

Result<Namespace> NamespaceFromJson(std::string tenant_id, const Json& body) {
  Reader r(body);
  FELIX_TRY(r.Object());
  Namespace ns;
  ns.tenant_id = std::move(tenant_id);
  FELIX_TRY(r.String("namespace", ns.name, /*required=*/true));
  FELIX_TRY(r.String("display_name", ns.display_name));
  FELIX_TRY(Validate(ns));
  return ns;
}

Result<Stream> StreamFromJson(std::string tenant_id, std::string namespace_name, const Json& body) {
  Reader r(body);
  FELIX_TRY(r.Object());
  Stream s;
  s.tenant_id = std::move(tenant_id);
  s.namespace_name = std::move(namespace_name);
  FELIX_TRY(r.String("stream", s.name, /*required=*/true));
  FELIX_TRY(r.Enum("kind", s.kind, kKinds));
  FELIX_TRY(r.U32("shards", s.shards));
  FELIX_TRY(r.U32("replication_factor", s.replication_factor));
  if (const Json* retention = r.Find("retention")) {
    if (!retention->is_object()) return Invalid("'retention' must be an object");
    FELIX_TRY(r.OptionalU64(*retention, "max_age_seconds", s.retention.max_age_seconds,
                            "retention.max_age_seconds"));
    FELIX_TRY(r.OptionalU64(*retention, "max_size_bytes", s.retention.max_size_bytes,
                            "retention.max_size_bytes"));
  }
  FELIX_TRY(r.Enum("consistency", s.consistency, kConsistency));
  FELIX_TRY(r.Enum("delivery", s.delivery, kDelivery));
  FELIX_TRY(r.Bool("durable", s.durable));
  if (r.Find("fsync_mode")) {
    FsyncMode mode = FsyncMode::kPeriodic;
    FELIX_TRY(r.Enum("fsync_mode", mode, kFsync));
    s.fsync_mode = mode;
  }
  FELIX_TRY(r.Enum("routing", s.routing, kRouting));
  FELIX_TRY(Validate(s));
  return s;
}

Result<Cache> CacheFromJson(std::string tenant_id, std::string namespace_name, const Json& body) {
  Reader r(body);
  FELIX_TRY(r.Object());
  Cache c;
  c.tenant_id = std::move(tenant_id);
  c.namespace_name = std::move(namespace_name);
  FELIX_TRY(r.String("cache", c.name, /*required=*/true));
  FELIX_TRY(r.String("display_name", c.display_name));
  FELIX_TRY(r.U32("shards", c.shards));
  FELIX_TRY(r.U32("replication_factor", c.replication_factor));
  FELIX_TRY(r.Enum("consistency", c.consistency, kConsistency));
  FELIX_TRY(r.Bool("durable", c.durable));
  FELIX_TRY(r.OptionalU64(body, "default_ttl_ms", c.default_ttl_ms, "default_ttl_ms"));
  FELIX_TRY(Validate(c));
  return c;
}

}  // namespace felix::catalog
