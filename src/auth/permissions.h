// Felix permissions (auth.md §6): `<action>:<resource>` strings, split at the first ':', the
// resource a glob where `*` matches any run of bytes (including '/').
//
// PermissionSet is the compiled form the broker keeps per authenticated stream: built once
// from a token's `perms`, then queried for every request. Checks never allocate: patterns are
// pre-indexed by the action they satisfy (implications included), and resource strings up to
// 1 KiB are assembled in a stack buffer. A PermissionSet is immutable after Compile(); any
// number of threads may query it concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "auth/auth_error.h"

namespace felix::auth {

// The canonical actions (frozen strings, auth.md §6.1).
enum class Action : uint8_t {
  kRbacView,
  kRbacPolicyManage,
  kRbacAssignmentManage,
  kTenantManage,
  kNsManage,
  kStreamManage,
  kCacheManage,
  kStreamPublish,
  kStreamSubscribe,
  kCacheRead,
  kCacheWrite,
  kGroupConsume,
  kGroupManage,
  kNodeView,
  kNodeManage,
  kTokenDelegate,
};
inline constexpr size_t kActionCount = 16;

const char* ActionName(Action action);
std::optional<Action> ParseAction(std::string_view name);

// implies(granted, requested) (auth.md §6.3): equal, or stream.subscribe ⇒ group.consume,
// or stream.manage ⇒ group.manage.
bool Implies(Action granted, Action requested);

// `*` glob, byte-wise, whole string (auth.md §6.3).
bool WildcardMatch(std::string_view pattern, std::string_view value);
// Whether `pattern` can match some string that starts with `prefix`.
bool WildcardCanMatchPrefix(std::string_view pattern, std::string_view prefix);

struct Permission {
  Action action;
  std::string resource;

  std::string ToString() const;
  bool operator==(const Permission&) const = default;
};

// Broker-side parse (auth.md §5 step 6): fails only on a missing ':' or an unknown action.
AuthResult<Permission> ParsePermission(std::string_view text);

// Policy-grammar check for permissions an operator asks to put into a token (auth.md §6.2):
// known object kinds, the tenant named (no `tenant:*`, `stream:*`, `cache:*/*`), wildcards
// only where the grammar allows them. `tenant_id` must be the tenant named by the object,
// except for `cluster:*` and `node:{id}`. The message says what is wrong.
Result<Permission> ValidatePolicyPermission(std::string_view text, std::string_view tenant_id);

// A cache key (get/put/...) or a key prefix (prefix watch), for AllowsCacheKeys.
struct CacheKey {
  enum class Kind : uint8_t { kKey, kPrefix };
  Kind kind;
  std::string_view value;
};

class PermissionSet {
 public:
  PermissionSet() = default;

  // Parses every entry; any entry that does not parse fails the whole set (auth.md §5).
  static AuthResult<PermissionSet> Compile(std::span<const std::string> perms);

  // allows(action, resource): some grant implying `action` whose pattern matches `resource`.
  bool Allows(Action action, std::string_view resource) const;
  // `stream:{t}/{ns}/{s}` — publish (stream.publish), subscribe/read (stream.subscribe).
  bool AllowsStream(Action action, std::string_view tenant, std::string_view ns,
                    std::string_view stream) const;
  // The group rule (allows_group): group grants on a stream narrow that stream's grant.
  bool AllowsGroup(Action action, std::string_view tenant, std::string_view ns,
                   std::string_view stream, std::string_view group) const;
  // The cache-key rule (allows_cache_keys): whole-cache grants, then key/prefix grants.
  bool AllowsCacheKey(Action action, std::string_view tenant, std::string_view ns,
                      std::string_view cache, CacheKey key) const;
  // `node.view` / `node.manage` on exactly `cluster:*` (a wildcard grant does not count).
  bool AllowsClusterExact(Action action) const;

  size_t size() const { return patterns_.size(); }
  const std::vector<Permission>& permissions() const { return permissions_; }

 private:
  struct Pattern {
    std::string resource;
    bool literal;        // no '*': plain comparison
    bool trailing_star;  // exactly one '*', at the end: prefix comparison
    bool group_object;   // starts with "group:"
    bool cache_object;   // starts with "cache:"
  };
  bool Matches(const Pattern& p, std::string_view value) const;

  std::vector<Permission> permissions_;
  std::vector<Pattern> patterns_;
  // For each requested action, indexes of the patterns whose action implies it.
  std::array<std::vector<uint16_t>, kActionCount> by_action_;
};

}  // namespace felix::auth
