// Permission grammar and matching: the tables and rules of auth.md §6.
#include <gtest/gtest.h>

#include "auth/permissions.h"

namespace felix::auth {
namespace {

PermissionSet Set(std::vector<std::string> perms) {
  auto set = PermissionSet::Compile(perms);
  EXPECT_TRUE(set) << set.error().ToString();
  return set ? std::move(*set) : PermissionSet();
}

CacheKey Key(std::string_view k) {
  return {CacheKey::Kind::kKey, k};
}
CacheKey Prefix(std::string_view p) {
  return {CacheKey::Kind::kPrefix, p};
}

TEST(Actions, CanonicalNamesRoundTrip) {
  const char* names[] = {"rbac.view",     "rbac.policy.manage", "rbac.assignment.manage",
                         "tenant.manage", "ns.manage",          "stream.manage",
                         "cache.manage",  "stream.publish",     "stream.subscribe",
                         "cache.read",    "cache.write",        "group.consume",
                         "group.manage",  "node.view",          "node.manage",
                         "token.delegate"};
  ASSERT_EQ(std::size(names), kActionCount);
  for (const char* name : names) {
    auto action = ParseAction(name);
    ASSERT_TRUE(action) << name;
    EXPECT_STREQ(ActionName(*action), name);
  }
  EXPECT_FALSE(ParseAction("stream.*"));
  EXPECT_FALSE(ParseAction("Stream.Publish"));
  EXPECT_FALSE(ParseAction(""));
}

TEST(Actions, Implications) {
  EXPECT_TRUE(Implies(Action::kStreamSubscribe, Action::kGroupConsume));
  EXPECT_TRUE(Implies(Action::kStreamManage, Action::kGroupManage));
  EXPECT_TRUE(Implies(Action::kCacheRead, Action::kCacheRead));
  EXPECT_FALSE(Implies(Action::kGroupConsume, Action::kStreamSubscribe));
  EXPECT_FALSE(Implies(Action::kStreamSubscribe, Action::kGroupManage));
  EXPECT_FALSE(Implies(Action::kStreamManage, Action::kGroupConsume));
  EXPECT_FALSE(Implies(Action::kTenantManage, Action::kStreamPublish));  // never expanded here
  EXPECT_FALSE(Implies(Action::kCacheWrite, Action::kCacheRead));
}

struct GlobCase {
  const char* pattern;
  const char* value;
  bool match;
};

TEST(Wildcard, MatchTable) {
  const GlobCase cases[] = {
      {"*", "", true},
      {"*", "anything/at:all", true},
      {"", "", true},
      {"", "a", false},
      {"stream:acme/payments/*", "stream:acme/payments/orders", true},
      {"stream:acme/payments/*", "stream:acme/payments/", true},
      {"stream:acme/payments/*", "stream:acme/payments", false},
      {"stream:acme/*/*", "stream:acme/a/b", true},
      {"stream:acme/*/*", "stream:acme/a/b/c", true},  // '*' crosses '/'
      {"stream:acme/*/orders", "stream:acme/x/orders", true},
      {"stream:acme/*/orders", "stream:acme/x/orders2", false},
      {"a*b*c", "abc", true},
      {"a*b*c", "aXbYbZc", true},
      {"a*b*c", "aXbYbZ", false},
      {"a**", "a", true},
      {"*a", "bab", false},
      {"*ab", "aab", true},
      {"Stream:acme/a/b", "stream:acme/a/b", false},  // case-sensitive
      {"stream:acme/a/b", "stream:acme/a/b", true},
      {"stream:acme/a/?", "stream:acme/a/b", false},  // no other metacharacters
      {"stream:acme/a/[b]", "stream:acme/a/b", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(WildcardMatch(c.pattern, c.value), c.match) << c.pattern << " ~ " << c.value;
    // The compiled form agrees with the reference algorithm.
    auto set = Set({std::string("stream.publish:") + c.pattern});
    EXPECT_EQ(set.Allows(Action::kStreamPublish, c.value), c.match)
        << c.pattern << " ~ " << c.value;
  }
}

TEST(Wildcard, CanMatchPrefix) {
  EXPECT_TRUE(WildcardCanMatchPrefix("group:t/ns/s/g1", "group:t/ns/s/"));
  EXPECT_TRUE(WildcardCanMatchPrefix("group:t/ns/*", "group:t/ns/s/"));
  EXPECT_TRUE(WildcardCanMatchPrefix("group:t/*/s/g", "group:t/ns/s/"));
  EXPECT_TRUE(WildcardCanMatchPrefix("group:*", "group:t/ns/s/"));
  EXPECT_FALSE(WildcardCanMatchPrefix("group:t/ns/s", "group:t/ns/s/"));
  EXPECT_FALSE(WildcardCanMatchPrefix("group:t/ns/other/g", "group:t/ns/s/"));
  EXPECT_FALSE(WildcardCanMatchPrefix("group:t/ns/s2/*", "group:t/ns/s/"));
}

TEST(PermissionGrammar, SplitsAtFirstColon) {
  auto p = ParsePermission("cache.read:cache:acme/ns/c/user:1*");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->action, Action::kCacheRead);
  EXPECT_EQ(p->resource, "cache:acme/ns/c/user:1*");
  EXPECT_EQ(p->ToString(), "cache.read:cache:acme/ns/c/user:1*");
  EXPECT_EQ(ParsePermission("nocolon").error().kind, AuthErrorKind::kInvalidPermission);
  EXPECT_EQ(ParsePermission("stream.write:stream:a/b/c").error().kind,
            AuthErrorKind::kInvalidPermission);
  // An empty resource parses (it simply matches nothing but the empty string).
  EXPECT_TRUE(ParsePermission("stream.publish:"));
}

TEST(PermissionSet, ExamplePayloadFromSpec) {
  auto set = Set({"stream.publish:stream:acme/payments/*",
                  "stream.subscribe:stream:acme/payments/orders", "cache.read:cache:acme/*/*"});
  EXPECT_TRUE(set.AllowsStream(Action::kStreamPublish, "acme", "payments", "orders"));
  EXPECT_TRUE(set.AllowsStream(Action::kStreamPublish, "acme", "payments", "refunds"));
  EXPECT_FALSE(set.AllowsStream(Action::kStreamPublish, "acme", "billing", "orders"));
  EXPECT_FALSE(set.AllowsStream(Action::kStreamPublish, "globex", "payments", "orders"));
  EXPECT_TRUE(set.AllowsStream(Action::kStreamSubscribe, "acme", "payments", "orders"));
  EXPECT_FALSE(set.AllowsStream(Action::kStreamSubscribe, "acme", "payments", "refunds"));
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheRead, "acme", "any", "c", Key("k")));
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheRead, "acme", "any", "c", Prefix("")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheWrite, "acme", "any", "c", Key("k")));
  EXPECT_FALSE(set.AllowsClusterExact(Action::kNodeView));
}

TEST(PermissionSet, DemoPermissions) {
  const std::string t = "t1";
  auto set = Set({"tenant.manage:tenant:" + t, "ns.manage:namespace:" + t + "/*",
                  "stream.publish:stream:" + t + "/*/*", "stream.subscribe:stream:" + t + "/*/*",
                  "cache.read:cache:" + t + "/*/*", "cache.write:cache:" + t + "/*/*"});
  EXPECT_TRUE(set.Allows(Action::kTenantManage, "tenant:t1"));
  EXPECT_FALSE(set.Allows(Action::kTenantManage, "tenant:t2"));
  EXPECT_TRUE(set.AllowsStream(Action::kStreamPublish, "t1", "a", "b"));
  EXPECT_FALSE(set.AllowsStream(Action::kStreamPublish, "t2", "a", "b"));
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheWrite, "t1", "a", "b", Key("x")));
  // Implication: stream.subscribe ⇒ group.consume, not group.manage.
  EXPECT_TRUE(set.AllowsGroup(Action::kGroupConsume, "t1", "a", "b", "g"));
  EXPECT_FALSE(set.AllowsGroup(Action::kGroupManage, "t1", "a", "b", "g"));
}

TEST(PermissionSet, GroupGrantsNarrowTheStreamGrantForThatActionOnly) {
  auto set = Set({"stream.subscribe:stream:t/ns/*", "group.consume:group:t/ns/orders/billing",
                  "stream.manage:stream:t/ns/orders"});
  // The stream grant covers any group on streams without group grants.
  EXPECT_TRUE(set.AllowsGroup(Action::kGroupConsume, "t", "ns", "refunds", "anything"));
  // On `orders` the group grant narrows group.consume to `billing`.
  EXPECT_TRUE(set.AllowsGroup(Action::kGroupConsume, "t", "ns", "orders", "billing"));
  EXPECT_FALSE(set.AllowsGroup(Action::kGroupConsume, "t", "ns", "orders", "shipping"));
  // group.manage is another action: stream.manage still implies it for every group.
  EXPECT_TRUE(set.AllowsGroup(Action::kGroupManage, "t", "ns", "orders", "shipping"));
  EXPECT_FALSE(set.AllowsGroup(Action::kGroupManage, "t", "ns", "refunds", "x"));
}

TEST(PermissionSet, GroupWildcardGrants) {
  auto set = Set({"group.consume:group:t/ns/orders/*"});
  EXPECT_TRUE(set.AllowsGroup(Action::kGroupConsume, "t", "ns", "orders", "g1"));
  EXPECT_FALSE(set.AllowsGroup(Action::kGroupConsume, "t", "ns", "other", "g1"));
  auto narrowed = Set({"stream.subscribe:stream:t/*/*", "group.consume:group:t/ns/*/audit"});
  // The group pattern can match groups of any stream in `ns`, so it narrows them all.
  EXPECT_TRUE(narrowed.AllowsGroup(Action::kGroupConsume, "t", "ns", "orders", "audit"));
  EXPECT_FALSE(narrowed.AllowsGroup(Action::kGroupConsume, "t", "ns", "orders", "other"));
  EXPECT_TRUE(narrowed.AllowsGroup(Action::kGroupConsume, "t", "ns2", "orders", "other"));
}

TEST(PermissionSet, CacheKeyGrants) {
  auto set = Set({"cache.read:cache:t/ns/users/user:1*", "cache.write:cache:t/ns/users/user:42",
                  "cache.read:cache:t/*/sessions/s1", "cache.read:cache:t/ns/c/a*b",
                  "cache.read:cache:t/ns/c/**"});
  // Prefix grant: plain string prefix.
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "users", Key("user:1")));
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "users", Key("user:10")));
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "users", Prefix("user:12")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "users", Prefix("user:")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "users", Key("user:2")));
  // Exact-key grant covers only that key, never a prefix watch.
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheWrite, "t", "ns", "users", Key("user:42")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheWrite, "t", "ns", "users", Key("user:420")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheWrite, "t", "ns", "users", Prefix("user:42")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheWrite, "t", "ns", "users", Key("user:43")));
  // Segment-wise matching: '*' in the namespace does not cross into the key.
  EXPECT_TRUE(set.AllowsCacheKey(Action::kCacheRead, "t", "any", "sessions", Key("s1")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "other", Key("s1")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheRead, "t", "any", "sessions", Key("s2")));
  // A key part with a '*' not at the end, or two stars, is not a key grant at all.
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "c", Key("ab")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "c", Key("aXb")));
  EXPECT_FALSE(set.AllowsCacheKey(Action::kCacheRead, "t", "ns", "c", Key("x")));
  // Keys may contain '/'.
  auto slash = Set({"cache.read:cache:t/ns/c/dir/sub*"});
  EXPECT_TRUE(slash.AllowsCacheKey(Action::kCacheRead, "t", "ns", "c", Key("dir/sub/x")));
  // A key grant is not a whole-cache grant, and key grants do not narrow whole-cache grants.
  EXPECT_FALSE(set.Allows(Action::kCacheRead, "cache:t/ns/users"));
  auto both = Set({"cache.read:cache:t/ns/users/user:1*", "cache.read:cache:t/ns/*"});
  EXPECT_TRUE(both.AllowsCacheKey(Action::kCacheRead, "t", "ns", "users", Key("other")));
}

TEST(PermissionSet, ClusterGrantMustBeExact) {
  EXPECT_TRUE(Set({"node.view:cluster:*"}).AllowsClusterExact(Action::kNodeView));
  EXPECT_FALSE(Set({"node.view:*"}).AllowsClusterExact(Action::kNodeView));
  EXPECT_FALSE(Set({"node.manage:cluster:*"}).AllowsClusterExact(Action::kNodeView));
}

TEST(PermissionSet, AnyUnparsableEntryFailsTheSet) {
  std::vector<std::string> perms = {"stream.publish:stream:t/a/b", "bogus:stream:t/a/b"};
  EXPECT_FALSE(PermissionSet::Compile(perms));
  std::vector<std::string> empty;
  auto set = PermissionSet::Compile(empty);
  ASSERT_TRUE(set);
  EXPECT_FALSE(set->AllowsStream(Action::kStreamPublish, "t", "a", "b"));
}

TEST(PermissionSet, LongResourceNamesStillMatch) {
  std::string ns(600, 'n'), s(600, 's');
  auto set = Set({"stream.publish:stream:t/" + ns + "/*"});
  EXPECT_TRUE(set.AllowsStream(Action::kStreamPublish, "t", ns, s));
  EXPECT_FALSE(set.AllowsStream(Action::kStreamPublish, "t", s, ns));
}

TEST(PolicyGrammar, ValidatesObjectsForIssuance) {
  const char* ok[] = {"tenant.manage:tenant:acme",
                      "ns.manage:namespace:acme/*",
                      "ns.manage:namespace:acme/payments",
                      "stream.publish:stream:acme/payments/orders",
                      "stream.publish:stream:acme/payments/*",
                      "stream.subscribe:stream:acme/*/*",
                      "cache.read:cache:acme/*/*",
                      "cache.read:cache:acme/ns/c/user:1*",
                      "cache.write:cache:acme/ns/c/dir/key",
                      "group.consume:group:acme/ns/s/g",
                      "group.consume:group:acme/ns/s/*",
                      "group.manage:group:acme/ns/*/*",
                      "node.view:cluster:*",
                      "node.manage:node:broker-1"};
  for (const char* p : ok) EXPECT_TRUE(ValidatePolicyPermission(p, "acme")) << p;
  const char* bad[] = {"tenant.manage:tenant:*",           "tenant.manage:tenant:other",
                       "stream.publish:stream:*",          "stream.publish:stream:acme/*/orders",
                       "stream.publish:stream:other/a/b",  "cache.read:cache:*/*",
                       "cache.read:cache:acme/*/c/key",    "cache.read:cache:acme/ns/c/a*b",
                       "cache.manage:cache:acme/ns/c/key", "group.consume:group:acme/ns/*/g",
                       "node.view:cluster:nodes",          "node.view:cluster:",
                       "token.delegate:tenant:acme",       "stream.publish:topic:acme/a/b",
                       "stream.fly:stream:acme/a/b",       "stream.publish"};
  for (const char* p : bad) EXPECT_FALSE(ValidatePolicyPermission(p, "acme")) << p;
}

}  // namespace
}  // namespace felix::auth
