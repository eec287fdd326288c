// The catalog's metadata model (control-plane.md §2): tenants, namespaces, streams, caches and
// tenant signing keys, their validation, and their JSON form. The JSON form is both the admin
// API's wire shape (control-plane.md §4.2) and what the embedded store persists.
//
// Plain value types; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "auth/keys.h"
#include "common/result.h"
#include "storage/fsync_mode.h"

namespace felix::catalog {

using Json = nlohmann::ordered_json;

enum class StreamKind : uint8_t { kStream, kQueue, kCache };
enum class Consistency : uint8_t { kLeader, kQuorum };
enum class Delivery : uint8_t { kAtMostOnce, kAtLeastOnce };
enum class Routing : uint8_t { kModulo, kJumpHash };
using FsyncMode = storage::FsyncMode;  // one definition (storage/fsync_mode.h)

struct Tenant {
  std::string tenant_id;
  std::string display_name;
  bool operator==(const Tenant&) const = default;
};

struct Namespace {
  std::string tenant_id;
  std::string name;  // JSON "namespace"
  std::string display_name;
  bool operator==(const Namespace&) const = default;
};

struct Retention {
  std::optional<uint64_t> max_age_seconds;  // null: broker default
  std::optional<uint64_t> max_size_bytes;   // per shard log; null: broker default
  bool operator==(const Retention&) const = default;
};

struct Stream {
  std::string tenant_id;
  std::string namespace_name;
  std::string name;
  StreamKind kind = StreamKind::kStream;
  uint32_t shards = 1;  // fixed at creation
  uint32_t replication_factor = 1;
  Retention retention;
  Consistency consistency = Consistency::kLeader;
  Delivery delivery = Delivery::kAtLeastOnce;
  bool durable = false;                 // false: in-memory ring log
  std::optional<FsyncMode> fsync_mode;  // null: broker default (FELIX_DURABLE_FSYNC_MODE)
  Routing routing = Routing::kModulo;
  bool operator==(const Stream&) const = default;
};

struct Cache {
  std::string tenant_id;
  std::string namespace_name;
  std::string name;
  std::string display_name;
  uint32_t shards = 1;
  uint32_t replication_factor = 1;
  Consistency consistency = Consistency::kLeader;
  bool durable = false;
  std::optional<uint64_t> default_ttl_ms;  // null: entries never expire unless put with a TTL
  bool operator==(const Cache&) const = default;
};

// A tenant's public verification key; `current` marks the signing key.
struct TenantKey {
  std::string tenant_id;
  auth::VerifyingKey key;
  bool current = true;
  bool operator==(const TenantKey&) const = default;
};

// Limits (C++ choices where control-plane.md only says u32).
inline constexpr uint32_t kMaxShards = 65535;
inline constexpr uint32_t kMaxReplicationFactor = 16;
inline constexpr size_t kMaxDisplayNameBytes = 1024;

// control-plane.md §2.1: 1–128 chars of [A-Za-z0-9._-], first alphanumeric.
bool IsValidName(std::string_view name);
// kInvalidArgument naming `what` ("tenant_id", "namespace", ...) when the name is invalid.
Result<void> ValidateName(std::string_view what, std::string_view name);

Result<void> Validate(const Tenant& tenant);
Result<void> Validate(const Namespace& ns);
Result<void> Validate(const Stream& stream);
Result<void> Validate(const Cache& cache);

Json ToJson(const Tenant& tenant);
Json ToJson(const Namespace& ns);
Json ToJson(const Stream& stream);
Json ToJson(const Cache& cache);

// Create bodies (control-plane.md §4.2) and stored entities. Omitted optional fields take
// their defaults; wrong types and unknown enum spellings are kInvalidArgument naming the
// field. The key fields outside the body (tenant, namespace) are passed in. Results are
// validated.
Result<Tenant> TenantFromJson(const Json& body);
Result<Namespace> NamespaceFromJson(std::string tenant_id, const Json& body);
Result<Stream> StreamFromJson(std::string tenant_id, std::string namespace_name, const Json& body);
Result<Cache> CacheFromJson(std::string tenant_id, std::string namespace_name, const Json& body);

const char* StreamKindName(StreamKind kind);
const char* ConsistencyName(Consistency consistency);
const char* DeliveryName(Delivery delivery);
const char* RoutingName(Routing routing);

}  // namespace felix::catalog
