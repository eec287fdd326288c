// EtcdCatalog on FakeEtcd: create/get/list/delete of every entity, conflicts and missing
// parents answered like EmbeddedCatalog, cascading deletes, two catalogs (two brokers) on one
// etcd seeing each other's writes and both announcing them, racing EnsureDefaults, a signing
// key stored by one broker minting tokens the other verifies, undecodable values skipped.
#include "cluster/etcd_catalog.h"

#include <gtest/gtest.h>

#include <thread>

#include "auth/token.h"
#include "catalog/verify.h"
#include "cluster/etcd_catalog_recorder.h"
#include "etcd/fake_etcd.h"

namespace felix::cluster {
namespace {

using namespace std::chrono_literals;
using catalog::Cache;
using catalog::Namespace;
using catalog::Stream;
using catalog::Tenant;
using testing::ChangeRecorder;

ClusterKeys Keys() {
  auto k = ClusterKeys::Create("t");
  if (!k) throw std::runtime_error(k.error().ToString());
  return *k;
}

Stream MakeStream(const std::string& t, const std::string& ns, const std::string& name) {
  Stream s;
  s.tenant_id = t;
  s.namespace_name = ns;
  s.name = name;
  s.shards = 6;
  s.replication_factor = 3;
  s.retention.max_age_seconds = 3600;
  s.consistency = catalog::Consistency::kQuorum;
  s.durable = true;
  return s;
}

Cache MakeCache(const std::string& t, const std::string& ns, const std::string& name) {
  Cache c;
  c.tenant_id = t;
  c.namespace_name = ns;
  c.name = name;
  c.display_name = "c";
  c.shards = 2;
  c.default_ttl_ms = 5000;
  return c;
}

class EtcdCatalogTest : public ::testing::Test {
 protected:
  // A started, synced catalog on the shared fake, with `recorder` (if any) listening from the
  // start.
  std::unique_ptr<EtcdCatalog> Open(ChangeRecorder* recorder = nullptr) {
    auto c = EtcdCatalog::Create(fake_, keys_);
    EXPECT_TRUE(c);
    if (!c) return nullptr;
    if (recorder) (*c)->AddListener(recorder->Listener());
    (*c)->Start();
    EXPECT_TRUE((*c)->WaitUntilSynced(10s));
    return std::move(*c);
  }
  size_t CountUnder(const std::string& prefix) {
    auto r = fake_.GetPrefix(keys_.CatalogPrefix() + prefix);
    EXPECT_TRUE(r);
    return r ? r->kvs.size() : 0;
  }

  etcd::FakeEtcd fake_;
  ClusterKeys keys_ = Keys();
};

TEST_F(EtcdCatalogTest, CreateGetListDeleteEveryEntity) {
  auto cat = Open();
  ASSERT_TRUE(cat);
  EXPECT_FALSE(cat->GetTenant("acme"));
  ASSERT_TRUE(cat->CreateTenant({"acme", "Acme"}));
  // Read-your-writes: visible right after the create returns, on the same catalog.
  EXPECT_EQ(*cat->GetTenant("acme"), (Tenant{"acme", "Acme"}));
  ASSERT_TRUE(cat->CreateNamespace({"acme", "prod", "Production"}));
  EXPECT_EQ(*cat->GetNamespace("acme", "prod"), (Namespace{"acme", "prod", "Production"}));
  Stream s = MakeStream("acme", "prod", "orders");
  Cache c = MakeCache("acme", "prod", "sessions");
  ASSERT_TRUE(cat->CreateStream(s));
  ASSERT_TRUE(cat->CreateCache(c));
  EXPECT_EQ(*cat->GetStream("acme", "prod", "orders"), s);
  EXPECT_EQ(*cat->GetCache("acme", "prod", "sessions"), c);
  EXPECT_EQ(cat->ListTenants(), std::vector<Tenant>{(Tenant{"acme", "Acme"})});
  EXPECT_EQ(cat->ListNamespaces("acme")->size(), 1u);
  EXPECT_EQ(*cat->ListStreams("acme", "prod"), std::vector<Stream>{s});
  EXPECT_EQ(*cat->ListCaches("acme", "prod"), std::vector<Cache>{c});
  EXPECT_GE(cat->revision(), fake_.revision());

  // The stored values are the contract other components decode.
  auto stored = fake_.Get(keys_.CatalogStream("acme", "prod", "orders"));
  ASSERT_TRUE(stored && stored->first);
  EXPECT_EQ(stored->first->value, catalog::ToJson(s).dump());
  auto decoded =
      catalog::StreamFromJson("acme", "prod", catalog::Json::parse(stored->first->value));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, s);
  stored = fake_.Get(keys_.CatalogCache("acme", "prod", "sessions"));
  ASSERT_TRUE(stored && stored->first);
  EXPECT_EQ(stored->first->value, catalog::ToJson(c).dump());

  ASSERT_TRUE(cat->DeleteStream("acme", "prod", "orders"));
  EXPECT_FALSE(cat->GetStream("acme", "prod", "orders"));
  ASSERT_TRUE(cat->DeleteCache("acme", "prod", "sessions"));
  EXPECT_FALSE(cat->GetCache("acme", "prod", "sessions"));
  ASSERT_TRUE(cat->DeleteNamespace("acme", "prod"));
  EXPECT_FALSE(cat->GetNamespace("acme", "prod"));
  ASSERT_TRUE(cat->DeleteTenant("acme"));
  EXPECT_FALSE(cat->GetTenant("acme"));
  EXPECT_EQ(CountUnder(""), 0u);
}

TEST_F(EtcdCatalogTest, ConflictsMissingParentsAndValidationAnswerLikeTheEmbeddedCatalog) {
  auto cat = Open();
  ASSERT_TRUE(cat);
  ASSERT_TRUE(cat->CreateTenant({"acme", ""}));
  EXPECT_EQ(cat->CreateTenant({"acme", "again"}).error().code, ErrorCode::kAlreadyExists);
  // The loser of a create left nothing behind: still exactly one key for the tenant.
  EXPECT_EQ(CountUnder("keys/acme/"), 1u);
  EXPECT_EQ(cat->CreateNamespace({"nobody", "ns", ""}).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(cat->CreateNamespace({"acme", "ns", ""}));
  EXPECT_EQ(cat->CreateNamespace({"acme", "ns", ""}).error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(cat->CreateStream(MakeStream("acme", "nope", "s")).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(cat->CreateCache(MakeCache("acme", "nope", "c")).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(cat->CreateStream(MakeStream("acme", "ns", "s")));
  auto dup = cat->CreateStream(MakeStream("acme", "ns", "s"));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(dup.error().message.find("acme/ns/s"), std::string::npos) << dup.error().message;
  ASSERT_TRUE(cat->CreateCache(MakeCache("acme", "ns", "c")));
  EXPECT_EQ(cat->CreateCache(MakeCache("acme", "ns", "c")).error().code, ErrorCode::kAlreadyExists);
  // A stream and a cache may share a name (separate key spaces, as in the embedded catalog).
  EXPECT_TRUE(cat->CreateCache(MakeCache("acme", "ns", "s")));

  // Validation is the model's.
  EXPECT_EQ(cat->CreateTenant({"-bad", ""}).error().code, ErrorCode::kInvalidArgument);
  Stream zero = MakeStream("acme", "ns", "z");
  zero.shards = 0;
  EXPECT_EQ(cat->CreateStream(zero).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(cat->CreateStream(MakeStream("acme", "ns", "a/b")).error().code,
            ErrorCode::kInvalidArgument);

  // Deletes of what is absent (or cannot exist) are kNotFound and change nothing.
  int64_t before = fake_.revision();
  EXPECT_EQ(cat->DeleteStream("acme", "ns", "gone").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(cat->DeleteCache("acme", "ns", "gone").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(cat->DeleteNamespace("acme", "gone").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(cat->DeleteTenant("gone").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(cat->DeleteTenant("acme/x").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(fake_.revision(), before);
}

TEST_F(EtcdCatalogTest, TenantDeleteCascadesInOneRevisionChildrenAnnouncedFirst) {
  ChangeRecorder rec;
  auto cat = Open(&rec);
  ASSERT_TRUE(cat);
  ASSERT_TRUE(cat->CreateTenant({"acme", ""}));
  ASSERT_TRUE(cat->CreateTenant({"acme2", ""}));  // a tenant whose name extends "acme"
  ASSERT_TRUE(cat->CreateNamespace({"acme", "ns", ""}));
  ASSERT_TRUE(cat->CreateNamespace({"acme2", "ns", ""}));
  ASSERT_TRUE(cat->CreateStream(MakeStream("acme", "ns", "s")));
  ASSERT_TRUE(cat->CreateCache(MakeCache("acme", "ns", "c")));
  ASSERT_TRUE(cat->CreateStream(MakeStream("acme2", "ns", "s")));
  rec.Clear();
  int64_t before = fake_.revision();
  ASSERT_TRUE(cat->DeleteTenant("acme"));
  EXPECT_EQ(fake_.revision(), before + 1) << "one transaction";
  EXPECT_EQ(rec.Lines(), (std::vector<std::string>{"-stream acme/ns/s", "-cache acme/ns/c",
                                                   "-namespace acme/ns", "-tenant acme"}));
  EXPECT_EQ(CountUnder("keys/acme/"), 0u);
  EXPECT_EQ(cat->SigningKeyFor("acme").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(cat->Snapshot()->VerifyingKeys("acme").empty());
  // The neighbour is untouched.
  EXPECT_TRUE(cat->GetStream("acme2", "ns", "s"));
  EXPECT_TRUE(cat->SigningKeyFor("acme2"));
  EXPECT_EQ(CountUnder("keys/acme2/"), 1u);
  // The name is free again; the new tenant gets a new key.
  ASSERT_TRUE(cat->CreateTenant({"acme", ""}));
  EXPECT_FALSE(cat->GetNamespace("acme", "ns"));
  EXPECT_EQ(cat->Snapshot()->VerifyingKeys("acme").size(), 1u);
}

TEST_F(EtcdCatalogTest, NamespaceDeleteCascadesToItsStreamsAndCachesOnly) {
  ChangeRecorder rec;
  auto cat = Open(&rec);
  ASSERT_TRUE(cat);
  ASSERT_TRUE(cat->CreateTenant({"acme", ""}));
  ASSERT_TRUE(cat->CreateNamespace({"acme", "a", ""}));
  ASSERT_TRUE(cat->CreateNamespace({"acme", "ab", ""}));
  ASSERT_TRUE(cat->CreateStream(MakeStream("acme", "a", "s")));
  ASSERT_TRUE(cat->CreateCache(MakeCache("acme", "a", "c")));
  ASSERT_TRUE(cat->CreateStream(MakeStream("acme", "ab", "s")));
  rec.Clear();
  ASSERT_TRUE(cat->DeleteNamespace("acme", "a"));
  EXPECT_EQ(rec.Lines(),
            (std::vector<std::string>{"-stream acme/a/s", "-cache acme/a/c", "-namespace acme/a"}));
  EXPECT_TRUE(cat->GetStream("acme", "ab", "s"));
  EXPECT_TRUE(cat->GetTenant("acme"));
  EXPECT_TRUE(cat->SigningKeyFor("acme"));
}

TEST_F(EtcdCatalogTest, TwoBrokersSeeEachOthersWritesAndBothAnnounceThem) {
  ChangeRecorder rec_a, rec_b;
  auto a = Open(&rec_a);
  auto b = Open(&rec_b);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->CreateTenant({"acme", ""}));
  ASSERT_TRUE(b->CreateNamespace({"acme", "ns", ""}));  // b already sees a's tenant
  ASSERT_TRUE(a->CreateStream(MakeStream("acme", "ns", "s")));
  ASSERT_TRUE(b->WaitForRevision(a->revision(), 10s));
  EXPECT_EQ(*b->GetStream("acme", "ns", "s"), MakeStream("acme", "ns", "s"));
  EXPECT_EQ(b->CreateStream(MakeStream("acme", "ns", "s")).error().code, ErrorCode::kAlreadyExists);
  ASSERT_TRUE(b->CreateCache(MakeCache("acme", "ns", "c")));
  ASSERT_TRUE(b->DeleteStream("acme", "ns", "s"));
  ASSERT_TRUE(a->WaitForRevision(b->revision(), 10s));
  EXPECT_FALSE(a->GetStream("acme", "ns", "s"));
  const std::vector<std::string> want = {"+tenant acme", "+namespace acme/ns", "+stream acme/ns/s",
                                         "+cache acme/ns/c", "-stream acme/ns/s"};
  EXPECT_EQ(rec_a.Lines(), want);
  EXPECT_EQ(rec_b.Lines(), want);
  EXPECT_EQ(a->Snapshot()->VerifyingKeys("acme"), b->Snapshot()->VerifyingKeys("acme"));
}

// Shutdown: after Stop() no listener runs (the broker stops its core after it), reads answer
// from the last snapshot, and a write still reaches etcd without waiting to see itself.
TEST_F(EtcdCatalogTest, StopEndsTheListenersAndKeepsTheLastSnapshot) {
  ChangeRecorder rec_a, rec_b;
  auto a = Open(&rec_a);
  auto b = Open(&rec_b);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->CreateTenant({"acme", ""}));
  ASSERT_TRUE(b->WaitForRevision(a->revision(), 10s));
  a->Stop();
  rec_a.Clear();
  ASSERT_TRUE(b->CreateNamespace({"acme", "ns", ""}));
  ASSERT_TRUE(a->CreateNamespace({"acme", "other", ""}));  // written, not awaited
  ASSERT_TRUE(rec_b.WaitFor("+namespace acme/other"));
  EXPECT_TRUE(rec_a.Lines().empty());
  EXPECT_TRUE(a->GetTenant("acme"));
  EXPECT_FALSE(a->GetNamespace("acme", "ns"));
  a->Stop();  // idempotent
}

TEST_F(EtcdCatalogTest, ALateBrokerIsToldTheWholeCatalogByItsFirstSnapshot) {
  auto a = Open();
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->CreateTenant({"acme", ""}));
  ASSERT_TRUE(a->CreateNamespace({"acme", "ns", ""}));
  ASSERT_TRUE(a->CreateCache(MakeCache("acme", "ns", "c")));
  ASSERT_TRUE(a->CreateStream(MakeStream("acme", "ns", "s")));
  ChangeRecorder rec;
  auto late = Open(&rec);
  ASSERT_TRUE(late);
  EXPECT_EQ(rec.Lines(), (std::vector<std::string>{"+tenant acme", "+namespace acme/ns",
                                                   "+stream acme/ns/s", "+cache acme/ns/c"}));
  EXPECT_EQ(late->revision(), a->revision());
}

TEST_F(EtcdCatalogTest, EnsureDefaultsFromManyBrokersAtOnceCreatesOneTenantAndKey) {
  std::vector<std::unique_ptr<EtcdCatalog>> brokers;
  for (int i = 0; i < 4; ++i) brokers.push_back(Open());
  std::vector<Result<void>> results(brokers.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < brokers.size(); ++i) {
    ASSERT_TRUE(brokers[i]);
    threads.emplace_back([&, i] { results[i] = brokers[i]->EnsureDefaults(); });
  }
  for (auto& t : threads) t.join();
  for (auto& r : results) EXPECT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(CountUnder("tenants/"), 1u);
  EXPECT_EQ(CountUnder("namespaces/"), 1u);
  EXPECT_EQ(CountUnder("keys/default/"), 1u);
  for (auto& b : brokers) {
    EXPECT_TRUE(b->GetNamespace("default", "default"));
    EXPECT_TRUE(b->SigningKeyFor("default"));
  }
  // Again (a restart): nothing changes.
  int64_t before = fake_.revision();
  EXPECT_TRUE(brokers[0]->EnsureDefaults());
  EXPECT_EQ(fake_.revision(), before);
}

TEST_F(EtcdCatalogTest, AKeyStoredByOneBrokerMintsTokensTheOtherVerifies) {
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->CreateTenant({"acme", ""}));
  ASSERT_TRUE(b->WaitForRevision(a->revision(), 10s));
  auto key_a = a->SigningKeyFor("acme");
  auto key_b = b->SigningKeyFor("acme");
  ASSERT_TRUE(key_a && key_b);
  EXPECT_EQ(key_b->kid(), key_a->kid());
  EXPECT_EQ(key_b->seed(), key_a->seed());
  auth::TokenClaims claims;
  claims.sub = "p:alice";
  claims.tid = "acme";
  claims.iat = auth::NowUnixSeconds();
  claims.exp = claims.iat + 900;
  claims.perms = {"stream.publish:stream:acme/*/*"};
  std::string token = auth::MintToken(*key_b, claims);
  auto ctx = catalog::VerifyClientToken(*a, "acme", token, claims.iat);
  ASSERT_TRUE(ctx) << ctx.error().ToString();
  EXPECT_EQ(ctx->tenant_id, "acme");
  // The stored key is the current one, and the verifying key is derived from the same seed.
  const auto& keys = a->Snapshot()->Keys();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_TRUE(keys[0].current);
  EXPECT_EQ(keys[0].key, key_a->verifying_key());
  // A token of another tenant's key does not verify.
  ASSERT_TRUE(a->CreateTenant({"other", ""}));
  EXPECT_FALSE(catalog::VerifyClientToken(*a, "other", token, claims.iat));
}

TEST_F(EtcdCatalogTest, ValuesThatDoNotDecodeAreSkipped) {
  ChangeRecorder rec;
  auto cat = Open(&rec);
  ASSERT_TRUE(cat);
  ASSERT_TRUE(cat->CreateTenant({"acme", ""}));
  ASSERT_TRUE(cat->CreateNamespace({"acme", "ns", ""}));
  // Written behind the catalog's back: not JSON, a stream whose value names another stream,
  // a key whose seed does not match its public key, a key under no known kind.
  ASSERT_TRUE(fake_.Put(keys_.CatalogStream("acme", "ns", "junk"), "{not json"));
  Stream other = MakeStream("acme", "ns", "elsewhere");
  ASSERT_TRUE(
      fake_.Put(keys_.CatalogStream("acme", "ns", "renamed"), catalog::ToJson(other).dump()));
  Stream bad_shards = MakeStream("acme", "ns", "zero");
  auto bad_json = catalog::ToJson(bad_shards);
  bad_json["shards"] = 0;
  ASSERT_TRUE(fake_.Put(keys_.CatalogStream("acme", "ns", "zero"), bad_json.dump()));
  auto real_key = fake_.GetPrefix(keys_.CatalogPrefix() + "keys/acme/");
  ASSERT_TRUE(real_key && real_key->kvs.size() == 1);
  auto forged = catalog::Json::parse(real_key->kvs[0].value);
  forged["kid"] = "k-forged";
  forged["seed"] = auth::SigningKey::Generate("k-forged").SeedBase64();
  ASSERT_TRUE(fake_.Put(keys_.CatalogKey("acme", "k-forged"), forged.dump()));
  ASSERT_TRUE(fake_.Put(keys_.CatalogPrefix() + "widgets/acme", "{}"));
  ASSERT_TRUE(cat->CreateStream(MakeStream("acme", "ns", "good")));

  auto check = [&](const EtcdCatalog& c) {
    auto streams = c.ListStreams("acme", "ns");
    ASSERT_TRUE(streams);
    ASSERT_EQ(streams->size(), 1u);
    EXPECT_EQ((*streams)[0].name, "good");
    EXPECT_EQ(c.Snapshot()->VerifyingKeys("acme").size(), 1u);
  };
  check(*cat);
  EXPECT_EQ(rec.Lines().back(), "+stream acme/ns/good");
  // The same from a full read (the snapshot path).
  auto fresh = Open();
  ASSERT_TRUE(fresh);
  check(*fresh);

  // A valid entity overwritten with garbage is gone (and announced so).
  ASSERT_TRUE(fake_.Put(keys_.CatalogStream("acme", "ns", "good"), "[]"));
  ASSERT_TRUE(cat->CreateCache(MakeCache("acme", "ns", "c")));
  EXPECT_FALSE(cat->GetStream("acme", "ns", "good"));
  EXPECT_TRUE(rec.WaitFor("-stream acme/ns/good"));
}

TEST_F(EtcdCatalogTest, EtcdFailuresAreUnavailableAndIndeterminate) {
  auto cat = Open();
  ASSERT_TRUE(cat);
  fake_.SetAvailable(false);
  auto r = cat->CreateTenant({"acme", ""});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("indeterminate"), std::string::npos) << r.error().message;
  EXPECT_EQ(cat->DeleteTenant("default").error().code, ErrorCode::kUnavailable);
  fake_.SetAvailable(true);
  EXPECT_TRUE(cat->CreateTenant({"acme", ""}));
}

}  // namespace
}  // namespace felix::cluster
