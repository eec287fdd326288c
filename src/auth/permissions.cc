#include "auth/permissions.h"

#include <algorithm>
#include <cstring>

namespace felix::auth {

namespace {

constexpr std::array<const char*, kActionCount> kActionNames = {
    "rbac.view",      "rbac.policy.manage", "rbac.assignment.manage",
    "tenant.manage",  "ns.manage",          "stream.manage",
    "cache.manage",   "stream.publish",     "stream.subscribe",
    "cache.read",     "cache.write",        "group.consume",
    "group.manage",   "node.view",          "node.manage",
    "token.delegate",
};

// Builds "kind:a/b/c[/d]" without allocating when it fits in 1 KiB (names are ≤ 256 bytes).
class ResourceString {
 public:
  ResourceString(std::string_view kind, std::initializer_list<std::string_view> parts) {
    size_t total = kind.size() + 1;
    for (auto part : parts) total += part.size() + 1;
    char* out = buf_;
    if (total > sizeof buf_) {
      heap_.resize(total);
      out = heap_.data();
    }
    size_t n = 0;
    auto put = [&](std::string_view s) {
      std::memcpy(out + n, s.data(), s.size());
      n += s.size();
    };
    put(kind);
    out[n++] = ':';
    bool first = true;
    for (auto part : parts) {
      if (!first) out[n++] = '/';
      first = false;
      put(part);
    }
    view_ = std::string_view(out, n);
  }
  ResourceString(const ResourceString&) = delete;
  ResourceString& operator=(const ResourceString&) = delete;
  std::string_view view() const { return view_; }

 private:
  char buf_[1024];
  std::string heap_;
  std::string_view view_;
};

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Splits `s` on '/' into at most `max` parts (the last keeps the rest). Returns the count.
size_t SplitSlash(std::string_view s, std::string_view* parts, size_t max) {
  size_t n = 0;
  while (n + 1 < max) {
    size_t at = s.find('/');
    if (at == std::string_view::npos) break;
    parts[n++] = s.substr(0, at);
    s.remove_prefix(at + 1);
  }
  parts[n++] = s;
  return n;
}

}  // namespace

const char* ActionName(Action action) {
  return kActionNames[static_cast<size_t>(action)];
}

std::optional<Action> ParseAction(std::string_view name) {
  for (size_t i = 0; i < kActionCount; ++i) {
    if (name == kActionNames[i]) return static_cast<Action>(i);
  }
  return std::nullopt;
}

bool Implies(Action granted, Action requested) {
  return granted == requested ||
         (requested == Action::kGroupConsume && granted == Action::kStreamSubscribe) ||
         (requested == Action::kGroupManage && granted == Action::kStreamManage);
}

bool WildcardMatch(std::string_view pattern, std::string_view value) {
  size_t p = 0, v = 0, mark = 0;
  size_t star = std::string_view::npos;
  while (v < value.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = v;
    } else if (p < pattern.size() && pattern[p] == value[v]) {
      ++p;
      ++v;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      v = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool WildcardCanMatchPrefix(std::string_view pattern, std::string_view prefix) {
  // As WildcardMatch, but reaching the end of `prefix` in any pattern state is a success:
  // the rest of the pattern can always be satisfied by a suitable continuation.
  size_t p = 0, v = 0, mark = 0;
  size_t star = std::string_view::npos;
  while (v < prefix.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = v;
    } else if (p < pattern.size() && pattern[p] == prefix[v]) {
      ++p;
      ++v;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      v = ++mark;
    } else {
      return false;
    }
  }
  return true;
}

std::string Permission::ToString() const {
  return std::string(ActionName(action)) + ":" + resource;
}

AuthResult<Permission> ParsePermission(std::string_view text) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return AuthFail(AuthErrorKind::kInvalidPermission,
                    "permission '" + std::string(text) + "' has no ':'");
  }
  auto action = ParseAction(text.substr(0, colon));
  if (!action) {
    return AuthFail(AuthErrorKind::kInvalidPermission,
                    "unknown action '" + std::string(text.substr(0, colon)) + "'");
  }
  return Permission{*action, std::string(text.substr(colon + 1))};
}

Result<Permission> ValidatePolicyPermission(std::string_view text, std::string_view tenant_id) {
  auto parsed = ParsePermission(text);
  if (!parsed) return Fail(ErrorCode::kInvalidArgument, parsed.error().detail);
  const Permission& perm = *parsed;
  std::string_view res = perm.resource;
  auto bad = [&](const std::string& why) {
    return Fail(ErrorCode::kInvalidArgument, "permission '" + std::string(text) + "': " + why);
  };
  auto named = [](std::string_view s) {
    return !s.empty() && s.find('*') == std::string_view::npos;
  };
  auto named_or_star = [&](std::string_view s) { return s == "*" || named(s); };
  if (perm.action == Action::kTokenDelegate) return bad("token.delegate is never put in tokens");
  size_t colon = res.find(':');
  if (colon == std::string_view::npos) return bad("resource has no kind");
  std::string_view kind = res.substr(0, colon);
  std::string_view rest = res.substr(colon + 1);
  if (kind == "cluster") {
    if (rest != "*") return bad("the cluster object is spelled 'cluster:*'");
    return perm;
  }
  if (kind == "node") {
    if (!named(rest) || rest.find('/') != std::string_view::npos) return bad("node id expected");
    return perm;
  }
  std::string_view parts[5];
  size_t n = SplitSlash(rest, parts, kind == "cache" ? 4 : 5);
  if (parts[0] != tenant_id) {
    return bad("resource must name tenant '" + std::string(tenant_id) + "'");
  }
  if (kind == "tenant") {
    if (n != 1) return bad("expected tenant:{t}");
  } else if (kind == "namespace") {
    if (n != 2 || !named_or_star(parts[1])) return bad("expected namespace:{t}/{ns|*}");
  } else if (kind == "stream" || kind == "cache") {
    bool ok = n == 3 && ((named(parts[1]) && named_or_star(parts[2])) ||
                         (parts[1] == "*" && parts[2] == "*"));
    if (kind == "cache" && n == 4) {
      // Cache key grant: namespace and cache named, key literal with at most a trailing '*'.
      std::string_view key = parts[3];
      size_t star = key.find('*');
      ok = named(parts[1]) && named(parts[2]) && !key.empty() &&
           (star == std::string_view::npos || star == key.size() - 1);
      if (ok && perm.action != Action::kCacheRead && perm.action != Action::kCacheWrite) {
        return bad("cache key grants take only cache.read or cache.write");
      }
    }
    if (!ok) return bad("expected " + std::string(kind) + ":{t}/{ns}/{name|*} or {t}/*/*");
  } else if (kind == "group") {
    bool ok =
        n == 4 && named(parts[1]) &&
        ((named(parts[2]) && named_or_star(parts[3])) || (parts[2] == "*" && parts[3] == "*"));
    if (!ok) return bad("expected group:{t}/{ns}/{s}/{g|*} or group:{t}/{ns}/*/*");
  } else {
    return bad("unknown object kind '" + std::string(kind) + "'");
  }
  return perm;
}

AuthResult<PermissionSet> PermissionSet::Compile(std::span<const std::string> perms) {
  if (perms.size() > 65535) {
    return AuthFail(AuthErrorKind::kInvalidPermission, "more than 65535 permissions");
  }
  PermissionSet set;
  set.permissions_.reserve(perms.size());
  set.patterns_.reserve(perms.size());
  for (const auto& text : perms) {
    auto perm = ParsePermission(text);
    if (!perm) return tl::unexpected(perm.error());
    const std::string& r = perm->resource;
    size_t stars = std::count(r.begin(), r.end(), '*');
    Pattern pattern{r, stars == 0, stars == 1 && r.back() == '*', StartsWith(r, "group:"),
                    StartsWith(r, "cache:")};
    auto index = static_cast<uint16_t>(set.patterns_.size());
    for (size_t a = 0; a < kActionCount; ++a) {
      if (Implies(perm->action, static_cast<Action>(a))) set.by_action_[a].push_back(index);
    }
    set.patterns_.push_back(std::move(pattern));
    set.permissions_.push_back(std::move(*perm));
  }
  return set;
}

bool PermissionSet::Matches(const Pattern& p, std::string_view value) const {
  if (p.literal) return value == p.resource;
  if (p.trailing_star) {
    return StartsWith(value, std::string_view(p.resource).substr(0, p.resource.size() - 1));
  }
  return WildcardMatch(p.resource, value);
}

bool PermissionSet::Allows(Action action, std::string_view resource) const {
  for (uint16_t i : by_action_[static_cast<size_t>(action)]) {
    if (Matches(patterns_[i], resource)) return true;
  }
  return false;
}

bool PermissionSet::AllowsStream(Action action, std::string_view tenant, std::string_view ns,
                                 std::string_view stream) const {
  ResourceString resource("stream", {tenant, ns, stream});
  return Allows(action, resource.view());
}

bool PermissionSet::AllowsGroup(Action action, std::string_view tenant, std::string_view ns,
                                std::string_view stream, std::string_view group) const {
  {
    ResourceString resource("group", {tenant, ns, stream, group});
    if (Allows(action, resource.view())) return true;
  }
  ResourceString prefix("group", {tenant, ns, stream, ""});  // "group:t/ns/s/"
  for (uint16_t i : by_action_[static_cast<size_t>(action)]) {
    const Pattern& p = patterns_[i];
    if (p.group_object && WildcardCanMatchPrefix(p.resource, prefix.view())) return false;
  }
  return AllowsStream(action, tenant, ns, stream);
}

bool PermissionSet::AllowsCacheKey(Action action, std::string_view tenant, std::string_view ns,
                                   std::string_view cache, CacheKey key) const {
  {
    ResourceString resource("cache", {tenant, ns, cache});
    if (Allows(action, resource.view())) return true;
  }
  for (uint16_t i : by_action_[static_cast<size_t>(action)]) {
    const Pattern& p = patterns_[i];
    if (!p.cache_object) continue;
    std::string_view parts[4];
    if (SplitSlash(std::string_view(p.resource).substr(6), parts, 4) < 4) continue;
    std::string_view kp = parts[3];
    size_t stars = std::count(kp.begin(), kp.end(), '*');
    bool grant_is_prefix = stars == 1 && kp.back() == '*';
    if (!grant_is_prefix && (stars != 0 || kp.empty())) continue;  // not a key grant
    if (!WildcardMatch(parts[0], tenant) || !WildcardMatch(parts[1], ns) ||
        !WildcardMatch(parts[2], cache)) {
      continue;
    }
    if (grant_is_prefix) {
      if (StartsWith(key.value, kp.substr(0, kp.size() - 1))) return true;
    } else if (key.kind == CacheKey::Kind::kKey && key.value == kp) {
      return true;
    }
  }
  return false;
}

bool PermissionSet::AllowsClusterExact(Action action) const {
  for (uint16_t i : by_action_[static_cast<size_t>(action)]) {
    if (patterns_[i].resource == "cluster:*") return true;
  }
  return false;
}

}  // namespace felix::auth
