#include "cluster/etcd_keys.h"

#include <charconv>
#include <vector>

namespace felix::cluster {
namespace {

constexpr size_t kMaxSegment = 255;

Result<void> ValidateLabel(std::string_view label, std::string_view what, std::string_view whole) {
  if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
    return Fail(ErrorCode::kInvalidArgument,
                std::string(what) + " '" + std::string(whole) + "' is not a DNS name");
  }
  for (char c : label) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) {
      return Fail(ErrorCode::kInvalidArgument,
                  std::string(what) + " '" + std::string(whole) +
                      "' is not a DNS name (lowercase letters, digits, '-' and '.')");
    }
  }
  return Ok();
}

// A catalog name segment inside a key: non-empty, bounded, no '/', no control bytes.
Result<void> ValidateSegment(std::string_view segment, std::string_view what) {
  if (segment.empty() || segment.size() > kMaxSegment) {
    return Fail(ErrorCode::kInvalidArgument, std::string(what) + " is empty or too long");
  }
  for (char c : segment) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Fail(ErrorCode::kInvalidArgument,
                  std::string(what) + " '" + std::string(segment) + "' has a forbidden byte");
    }
  }
  return Ok();
}

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, slash - start));
    start = slash + 1;
  }
}

Result<std::string_view> StripPrefix(std::string_view key, const std::string& prefix,
                                     std::string_view what) {
  if (!key.starts_with(prefix)) {
    return Fail(ErrorCode::kInvalidArgument, "key '" + std::string(key) + "' is not under " +
                                                 prefix + " (" + std::string(what) + ")");
  }
  return key.substr(prefix.size());
}

}  // namespace

const char* ShardKindName(ShardKind kind) {
  return kind == ShardKind::kStream ? "stream" : "cache";
}

std::string ShardRef::Path() const {
  return std::string(ShardKindName(kind)) + "/" + tenant + "/" + ns + "/" + name + "/" +
         std::to_string(shard);
}

Result<void> ValidateNodeId(std::string_view id) {
  if (id.empty() || id.size() > 253) {
    return Fail(ErrorCode::kInvalidArgument, "node id '" + std::string(id) + "' is not a DNS name");
  }
  size_t start = 0;
  while (true) {
    size_t dot = id.find('.', start);
    std::string_view label = id.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (auto ok = ValidateLabel(label, "node id", id); !ok) return ok;
    if (dot == std::string_view::npos) return Ok();
    start = dot + 1;
  }
}

Result<void> ValidateClusterName(std::string_view name) {
  return ValidateLabel(name, "cluster name", name);
}

Result<ClusterKeys> ClusterKeys::Create(std::string_view cluster) {
  if (auto ok = ValidateClusterName(cluster); !ok) return tl::unexpected(ok.error());
  return ClusterKeys("/felix/" + std::string(cluster) + "/");
}

std::string ClusterKeys::Node(std::string_view node_id) const {
  return NodesPrefix() + std::string(node_id);
}

std::string ClusterKeys::NodeIncarnation(std::string_view node_id) const {
  return prefix_ + "nodes-incarnation/" + std::string(node_id);
}

std::string ClusterKeys::CatalogTenant(std::string_view tenant) const {
  return CatalogPrefix() + "tenants/" + std::string(tenant);
}

std::string ClusterKeys::CatalogNamespace(std::string_view tenant, std::string_view ns) const {
  return CatalogPrefix() + "namespaces/" + std::string(tenant) + "/" + std::string(ns);
}

std::string ClusterKeys::CatalogStream(std::string_view tenant, std::string_view ns,
                                       std::string_view name) const {
  return CatalogPrefix() + "streams/" + std::string(tenant) + "/" + std::string(ns) + "/" +
         std::string(name);
}

std::string ClusterKeys::CatalogCache(std::string_view tenant, std::string_view ns,
                                      std::string_view name) const {
  return CatalogPrefix() + "caches/" + std::string(tenant) + "/" + std::string(ns) + "/" +
         std::string(name);
}

std::string ClusterKeys::CatalogKey(std::string_view tenant, std::string_view kid) const {
  return CatalogPrefix() + "keys/" + std::string(tenant) + "/" + std::string(kid);
}

std::string ClusterKeys::Suspect(std::string_view follower, std::string_view leader) const {
  return SuspectsPrefix() + std::string(follower) + "/" + std::string(leader);
}

Result<ShardRef> ParseShardPath(std::string_view path) {
  auto parts = Split(path);
  if (parts.size() != 5) {
    return Fail(ErrorCode::kInvalidArgument, "shard path '" + std::string(path) +
                                                 "' is not <kind>/<tenant>/<ns>/<name>/<shard>");
  }
  ShardRef ref;
  if (parts[0] == "stream") {
    ref.kind = ShardKind::kStream;
  } else if (parts[0] == "cache") {
    ref.kind = ShardKind::kCache;
  } else {
    return Fail(ErrorCode::kInvalidArgument,
                "shard path '" + std::string(path) + "': kind must be stream or cache");
  }
  for (auto [segment, what] : {std::pair{parts[1], "tenant"}, std::pair{parts[2], "namespace"},
                               std::pair{parts[3], "name"}}) {
    if (auto ok = ValidateSegment(segment, what); !ok) return tl::unexpected(ok.error());
  }
  ref.tenant = parts[1];
  ref.ns = parts[2];
  ref.name = parts[3];
  std::string_view num = parts[4];
  // Canonical decimal only ("07" or "+7" would name a second key for the same shard).
  bool canonical = !num.empty() && num.size() <= 10 &&
                   num.find_first_not_of("0123456789") == std::string_view::npos &&
                   (num.size() == 1 || num.front() != '0');
  uint64_t shard = 0;
  if (canonical) {
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), shard);
    canonical = ec == std::errc() && ptr == num.data() + num.size() && shard <= UINT32_MAX;
  }
  if (!canonical) {
    return Fail(ErrorCode::kInvalidArgument,
                "shard path '" + std::string(path) + "': bad shard number");
  }
  ref.shard = static_cast<uint32_t>(shard);
  return ref;
}

Result<std::string> ClusterKeys::ParseNode(std::string_view key) const {
  auto rest = StripPrefix(key, NodesPrefix(), "node");
  if (!rest) return tl::unexpected(rest.error());
  if (auto ok = ValidateNodeId(*rest); !ok) return tl::unexpected(ok.error());
  return std::string(*rest);
}

Result<ShardRef> ClusterKeys::ParseAssign(std::string_view key) const {
  auto rest = StripPrefix(key, AssignPrefix(), "assignment");
  if (!rest) return tl::unexpected(rest.error());
  return ParseShardPath(*rest);
}

Result<ShardRef> ClusterKeys::ParseReport(std::string_view key) const {
  auto rest = StripPrefix(key, ReportsPrefix(), "report");
  if (!rest) return tl::unexpected(rest.error());
  return ParseShardPath(*rest);
}

Result<ShardRef> ClusterKeys::ParseMove(std::string_view key) const {
  auto rest = StripPrefix(key, MovesPrefix(), "move");
  if (!rest) return tl::unexpected(rest.error());
  return ParseShardPath(*rest);
}

std::string ClusterKeys::Drain(std::string_view node_id) const {
  return DrainsPrefix() + std::string(node_id);
}

Result<std::string> ClusterKeys::ParseDrain(std::string_view key) const {
  auto rest = StripPrefix(key, DrainsPrefix(), "drain");
  if (!rest) return tl::unexpected(rest.error());
  if (auto ok = ValidateNodeId(*rest); !ok) return tl::unexpected(ok.error());
  return std::string(*rest);
}

Result<std::pair<std::string, std::string>> ClusterKeys::ParseSuspect(std::string_view key) const {
  auto rest = StripPrefix(key, SuspectsPrefix(), "suspect");
  if (!rest) return tl::unexpected(rest.error());
  auto parts = Split(*rest);
  if (parts.size() != 2) {
    return Fail(ErrorCode::kInvalidArgument,
                "suspect key '" + std::string(key) + "' is not suspects/<follower>/<leader>");
  }
  for (auto id : parts) {
    if (auto ok = ValidateNodeId(id); !ok) return tl::unexpected(ok.error());
  }
  return std::make_pair(std::string(parts[0]), std::string(parts[1]));
}

}  // namespace felix::cluster
