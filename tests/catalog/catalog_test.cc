// EmbeddedCatalog: first start, CRUD with typed errors, persistence, cascades, listeners,
// the admin credential file, and token verification against the catalog's keys.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "catalog/atomic_file.h"
#include "catalog/credentials.h"
#include "catalog/embedded_catalog.h"
#include "catalog/verify.h"
#include "support/child_process.h"

namespace felix::catalog {
namespace {

using felix::testing::MakeTempDir;

mode_t FileMode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

std::unique_ptr<EmbeddedCatalog> OpenOk(const std::string& dir, OpenOptions options = {}) {
  auto c = EmbeddedCatalog::Open(dir, options);
  EXPECT_TRUE(c) << c.error().ToString();
  return c ? std::move(*c) : nullptr;
}

Stream MakeStream(std::string name, std::string ns = "default", std::string tenant = "default") {
  Stream s;
  s.tenant_id = std::move(tenant);
  s.namespace_name = std::move(ns);
  s.name = std::move(name);
  s.shards = 4;
  s.durable = true;
  s.fsync_mode = FsyncMode::kOnCommit;
  s.retention.max_size_bytes = 1 << 20;
  return s;
}

TEST(EmbeddedCatalog, FirstStartCreatesDefaultTenantNamespaceAndKey) {
  std::string dir = MakeTempDir("felix-catalog") + "/data";
  auto catalog = OpenOk(dir);
  ASSERT_TRUE(catalog);
  EXPECT_TRUE(catalog->first_start());
  EXPECT_TRUE(catalog->GetTenant("default"));
  EXPECT_TRUE(catalog->GetNamespace("default", "default"));
  auto keys = catalog->Snapshot()->VerifyingKeys("default");
  ASSERT_EQ(keys.size(), 1u);
  auto signing = catalog->SigningKeyFor("default");
  ASSERT_TRUE(signing);
  EXPECT_EQ(signing->verifying_key(), keys[0]);
  EXPECT_EQ(FileMode(dir + "/signing-keys.json"), 0600u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/catalog.json"));
  // The public catalog file does not hold the seed.
  auto text = ReadWholeFile(dir + "/catalog.json");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->find(signing->SeedBase64()), std::string::npos);

  auto reopened = OpenOk(dir);
  EXPECT_FALSE(reopened->first_start());
  EXPECT_EQ(reopened->Snapshot()->VerifyingKeys("default"), keys);
}

TEST(EmbeddedCatalog, StreamCrudWithTypedErrors) {
  auto catalog = OpenOk(MakeTempDir("felix-catalog"));
  auto created = catalog->CreateStream(MakeStream("orders"));
  ASSERT_TRUE(created) << created.error().ToString();
  auto dup = catalog->CreateStream(MakeStream("orders"));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  auto no_ns = catalog->CreateStream(MakeStream("orders", "nope"));
  ASSERT_FALSE(no_ns);
  EXPECT_EQ(no_ns.error().code, ErrorCode::kNotFound);
  Stream bad = MakeStream("bad/name");
  EXPECT_EQ(catalog->CreateStream(bad).error().code, ErrorCode::kInvalidArgument);
  bad = MakeStream("zero");
  bad.shards = 0;
  EXPECT_EQ(catalog->CreateStream(bad).error().code, ErrorCode::kInvalidArgument);

  ASSERT_TRUE(catalog->CreateStream(MakeStream("audit")));
  auto got = catalog->GetStream("default", "default", "orders");
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, MakeStream("orders"));
  auto list = catalog->ListStreams("default", "default");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "audit");  // ordered by name
  EXPECT_EQ((*list)[1].name, "orders");
  EXPECT_EQ(catalog->ListStreams("default", "nope").error().code, ErrorCode::kNotFound);

  ASSERT_TRUE(catalog->DeleteStream("default", "default", "orders"));
  EXPECT_EQ(catalog->GetStream("default", "default", "orders").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(catalog->DeleteStream("default", "default", "orders").error().code,
            ErrorCode::kNotFound);
}

TEST(EmbeddedCatalog, NamesSortInNameOrderDespiteSeparators) {
  auto catalog = OpenOk(MakeTempDir("felix-catalog"));
  ASSERT_TRUE(catalog->CreateNamespace({"default", "a", ""}));
  ASSERT_TRUE(catalog->CreateNamespace({"default", "a-b", ""}));
  ASSERT_TRUE(catalog->CreateStream(MakeStream("x", "a-b")));
  ASSERT_TRUE(catalog->CreateStream(MakeStream("y", "a")));
  // Streams of namespace "a" never leak into "a-b" and the reverse.
  EXPECT_EQ(catalog->ListStreams("default", "a")->size(), 1u);
  EXPECT_EQ(catalog->ListStreams("default", "a-b")->size(), 1u);
  EXPECT_FALSE(catalog->Snapshot()->FindStream("default", "a", "x"));
}

TEST(EmbeddedCatalog, PersistsAcrossReopen) {
  std::string dir = MakeTempDir("felix-catalog");
  {
    auto catalog = OpenOk(dir);
    ASSERT_TRUE(catalog->CreateTenant({"acme", "Acme"}));
    ASSERT_TRUE(catalog->CreateNamespace({"acme", "payments", "Payments"}));
    ASSERT_TRUE(catalog->CreateStream(MakeStream("orders", "payments", "acme")));
    Cache cache;
    cache.tenant_id = "acme";
    cache.namespace_name = "payments";
    cache.name = "sessions";
    cache.default_ttl_ms = 1000;
    ASSERT_TRUE(catalog->CreateCache(cache));
  }
  auto catalog = OpenOk(dir);
  EXPECT_EQ(catalog->GetTenant("acme")->display_name, "Acme");
  EXPECT_EQ(*catalog->GetStream("acme", "payments", "orders"),
            MakeStream("orders", "payments", "acme"));
  EXPECT_EQ(catalog->GetCache("acme", "payments", "sessions")->default_ttl_ms, 1000u);
  EXPECT_TRUE(catalog->SigningKeyFor("acme"));
  EXPECT_EQ(catalog->ListTenants().size(), 2u);
}

TEST(EmbeddedCatalog, TenantDeleteCascadesAndNotifiesListeners) {
  auto catalog = OpenOk(MakeTempDir("felix-catalog"));
  std::vector<std::string> events;
  auto id = catalog->AddListener([&](const CatalogChange& change) {
    std::string op = change.op == CatalogChange::Op::kCreated ? "+" : "-";
    std::visit(
        [&](const auto& e) {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, Tenant>) events.push_back(op + "tenant:" + e.tenant_id);
          if constexpr (std::is_same_v<T, Namespace>) events.push_back(op + "ns:" + e.name);
          if constexpr (std::is_same_v<T, Stream>) events.push_back(op + "stream:" + e.name);
          if constexpr (std::is_same_v<T, Cache>) events.push_back(op + "cache:" + e.name);
        },
        change.entity);
    // Listeners may read the catalog; the change is already visible.
    EXPECT_TRUE(catalog->Snapshot());
  });
  ASSERT_TRUE(catalog->CreateTenant({"acme", ""}));
  ASSERT_TRUE(catalog->CreateNamespace({"acme", "ns", ""}));
  ASSERT_TRUE(catalog->CreateStream(MakeStream("s1", "ns", "acme")));
  Cache cache;
  cache.tenant_id = "acme";
  cache.namespace_name = "ns";
  cache.name = "c1";
  ASSERT_TRUE(catalog->CreateCache(cache));
  ASSERT_TRUE(catalog->DeleteTenant("acme"));
  EXPECT_EQ(events,
            (std::vector<std::string>{"+tenant:acme", "+ns:ns", "+stream:s1", "+cache:c1",
                                      "-stream:s1", "-cache:c1", "-ns:ns", "-tenant:acme"}));
  EXPECT_FALSE(catalog->GetTenant("acme"));
  EXPECT_TRUE(catalog->Snapshot()->VerifyingKeys("acme").empty());
  EXPECT_EQ(catalog->SigningKeyFor("acme").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(catalog->Snapshot()->AllStreams().empty());
  catalog->RemoveListener(id);
  ASSERT_TRUE(catalog->CreateTenant({"acme", ""}));
  EXPECT_EQ(events.size(), 8u);
}

TEST(EmbeddedCatalog, SnapshotsAreImmutable) {
  auto catalog = OpenOk(MakeTempDir("felix-catalog"));
  auto before = catalog->Snapshot();
  ASSERT_TRUE(catalog->CreateStream(MakeStream("s")));
  EXPECT_FALSE(before->FindStream("default", "default", "s"));
  EXPECT_TRUE(catalog->Snapshot()->FindStream("default", "default", "s"));
}

TEST(EmbeddedCatalog, RefusesCorruptFilesNamingThem) {
  std::string dir = MakeTempDir("felix-catalog");
  { OpenOk(dir); }
  std::ofstream(dir + "/catalog.json") << R"({"version":1,"tenants":[{"tenant_id":"a b"}],)"
                                          R"("namespaces":[],"streams":[],"caches":[],"keys":[]})";
  auto c = EmbeddedCatalog::Open(dir);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kCorruption);
  EXPECT_NE(c.error().message.find("catalog.json"), std::string::npos);
  std::ofstream(dir + "/catalog.json") << "{";
  EXPECT_EQ(EmbeddedCatalog::Open(dir).error().code, ErrorCode::kCorruption);
}

TEST(EmbeddedCatalog, IoFailureLeavesCatalogUnchanged) {
  std::string dir = MakeTempDir("felix-catalog");
  auto catalog = OpenOk(dir);
  // A directory where the temporary file must go makes the write fail (even for root).
  ASSERT_TRUE(std::filesystem::create_directory(dir + "/catalog.json.tmp"));
  auto r = catalog->CreateStream(MakeStream("s"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_FALSE(catalog->GetStream("default", "default", "s"));
  std::filesystem::remove(dir + "/catalog.json.tmp");
  EXPECT_TRUE(catalog->CreateStream(MakeStream("s")));
}

TEST(VerifyClientToken, AgainstTheTenantKeys) {
  auto catalog = OpenOk(MakeTempDir("felix-catalog"));
  ASSERT_TRUE(catalog->CreateTenant({"acme", ""}));
  auto key = catalog->SigningKeyFor("acme");
  ASSERT_TRUE(key);
  auth::TokenClaims claims;
  claims.sub = "p:alice";
  claims.tid = "acme";
  claims.iat = auth::NowUnixSeconds();
  claims.exp = claims.iat + 900;
  claims.perms = {"stream.publish:stream:acme/*/*"};
  std::string token = auth::MintToken(*key, claims);
  auto ctx = VerifyClientToken(*catalog, "acme", token, claims.iat);
  ASSERT_TRUE(ctx) << ctx.error().ToString();
  EXPECT_TRUE(ctx->permissions.AllowsStream(auth::Action::kStreamPublish, "acme", "a", "b"));
  // Another tenant's key does not verify it, and unknown tenants fail without keys.
  EXPECT_EQ(VerifyClientToken(*catalog, "default", token, claims.iat).error().kind,
            auth::AuthErrorKind::kBadSignature);
  EXPECT_EQ(VerifyClientToken(*catalog, "nobody", token, claims.iat).error().kind,
            auth::AuthErrorKind::kNoVerificationKey);
  EXPECT_EQ(VerifyClientToken(*catalog, "..", token, claims.iat).error().kind,
            auth::AuthErrorKind::kInvalidTenantId);
}

TEST(AdminCredentials, WriteLoadAndPath) {
  std::string dir = MakeTempDir("felix-creds");
  AdminCredentials c;
  c.admin_url = "http://127.0.0.1:8080";
  c.admin_token = NewAdminToken();
  c.signing_kid = "k1";
  c.signing_seed = "seed";
  std::string path = dir + "/" + kCredentialsFile;
  ASSERT_TRUE(WriteAdminCredentials(path, c));
  EXPECT_EQ(FileMode(path), 0600u);
  auto loaded = LoadAdminCredentials(path);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->admin_token, c.admin_token);
  EXPECT_EQ(loaded->signing_kid, "k1");
  EXPECT_EQ(loaded->tenant_id, "default");
  EXPECT_EQ(LoadAdminCredentials(dir + "/nope").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(NewAdminToken().size(), 43u);
  EXPECT_NE(NewAdminToken(), NewAdminToken());
  EXPECT_EQ(CredentialsPath("/x/c.json", "/d"), "/x/c.json");
  EXPECT_EQ(CredentialsPath("", "/d"), "/d/admin-credentials.json");
  EXPECT_EQ(CredentialsPath("", std::nullopt), "./felix-data/admin-credentials.json");
}

// Find* compares the names with the stored keys in place (JoinedKey): every comparison must
// agree with comparing the key Key() builds, or a lookup would miss or find the wrong entry.
TEST(CatalogSnapshot, JoinedKeysCompareAsTheKeysTheyStandFor) {
  const std::vector<std::string> names = {"",     "a",     "ab",   "b",     std::string("\0", 1),
                                          "\x01", "a\x01", "\xff", "a\xff", "ab\x01b"};
  auto sign = [](int v) { return (v > 0) - (v < 0); };
  std::vector<std::string> keys;
  for (const auto& x : names) {
    for (const auto& y : names) keys.push_back(CatalogSnapshot::Key({x, y}));
  }
  for (const auto& key : keys) {
    for (const auto& x : names) {
      for (const auto& y : names) {
        for (const auto& z : names) {
          const std::string built = CatalogSnapshot::Key({x, y, z});
          ASSERT_EQ(sign(CatalogSnapshot::CompareToJoined(key, {{x, y, z}})),
                    sign(std::string_view(key).compare(built)))
              << ::testing::PrintToString(key) << " vs " << ::testing::PrintToString(built);
        }
        ASSERT_EQ(sign(CatalogSnapshot::CompareToJoined(key, {{x, y}})),
                  sign(std::string_view(key).compare(CatalogSnapshot::Key({x, y}))));
      }
    }
  }

  // Names that are prefixes of one another, found exactly.
  CatalogSnapshot snapshot;
  for (const char* name : {"orders", "orders-eu", "order", "orders\x01x"}) {
    Stream st;
    st.tenant_id = "acme";
    st.namespace_name = "shop";
    st.name = name;
    snapshot.streams_.emplace(CatalogSnapshot::Key({"acme", "shop", name}), st);
  }
  for (const char* name : {"orders", "orders-eu", "order", "orders\x01x"}) {
    const Stream* found = snapshot.FindStream("acme", "shop", name);
    ASSERT_NE(found, nullptr) << name;
    EXPECT_EQ(found->name, name);
  }
  EXPECT_EQ(snapshot.FindStream("acme", "shop", "orders-e"), nullptr);
  EXPECT_EQ(snapshot.FindStream("acme", "sho", "porders"), nullptr);
  EXPECT_EQ(snapshot.FindStream("acme", "shop\x01orders", "eu"), nullptr);
}

// VerifiedCredentials compares a cached entry's keys in place (HasVerifyingKeys): it must say
// exactly what comparing with a copy from VerifyingKeys would.
TEST(CatalogSnapshot, HasVerifyingKeysAgreesWithVerifyingKeys) {
  auto key = [](const std::string& kid, uint8_t fill) {
    auth::VerifyingKey k;
    k.kid = kid;
    k.public_key.fill(fill);
    return k;
  };
  CatalogSnapshot snapshot;
  snapshot.keys_ = {{"acme", key("acme-old-key-0001", 1), false},
                    {"other", key("other-key-0001", 9), true},
                    {"acme", key("acme-current-key-0002", 2), true}};
  const auto acme = snapshot.VerifyingKeys("acme");
  ASSERT_EQ(acme.size(), 2u);
  EXPECT_EQ(acme[0].kid, "acme-current-key-0002");  // current first
  EXPECT_TRUE(snapshot.HasVerifyingKeys("acme", acme));
  EXPECT_TRUE(snapshot.HasVerifyingKeys("other", snapshot.VerifyingKeys("other")));
  EXPECT_TRUE(snapshot.HasVerifyingKeys("gone", {}));

  const std::vector<auth::VerifyingKey> reordered = {acme[1], acme[0]};
  const std::vector<auth::VerifyingKey> missing = {acme[0]};
  const std::vector<auth::VerifyingKey> extra = {acme[0], acme[1], key("acme-new", 3)};
  std::vector<auth::VerifyingKey> changed = acme;
  changed[1].public_key[0] ^= 1;
  using Keys = std::vector<auth::VerifyingKey>;
  for (const Keys* keys :
       std::initializer_list<const Keys*>{&reordered, &missing, &extra, &changed}) {
    EXPECT_FALSE(snapshot.HasVerifyingKeys("acme", *keys));
    EXPECT_NE(snapshot.VerifyingKeys("acme"), *keys);
  }
  EXPECT_FALSE(snapshot.HasVerifyingKeys("gone", acme));
  EXPECT_FALSE(snapshot.HasVerifyingKeys("acme", {}));
  EXPECT_FALSE(snapshot.HasVerifyingKeys("other", acme));
}

}  // namespace
}  // namespace felix::catalog
