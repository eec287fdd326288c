// VerifiedCredentials (catalog/verified_credentials.h) on a real embedded catalog: a token
// verified once is answered again without the crypto, but never past its `exp`, never once
// its tenant's keys changed (a recreated tenant signs with a new key), and refusals are never
// remembered.
#include "catalog/verified_credentials.h"

#include <gtest/gtest.h>

#include "auth/token.h"
#include "catalog/embedded_catalog.h"
#include "support/child_process.h"

namespace felix::catalog {
namespace {

class VerifiedCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c =
        catalog::EmbeddedCatalog::Open(felix::testing::MakeTempDir("verified") + "/catalog", {});
    ASSERT_TRUE(c) << c.error().ToString();
    catalog_ = std::move(*c);
    ASSERT_TRUE(catalog_->CreateTenant(catalog::Tenant{.tenant_id = "t1"}));
  }
  std::string Token(const std::string& tenant, const std::string& sub, int64_t ttl = 600) {
    auto key = catalog_->SigningKeyFor(tenant);
    EXPECT_TRUE(key);
    auth::TokenClaims claims;
    claims.sub = sub;
    claims.tid = tenant;
    claims.iat = auth::NowUnixSeconds();
    claims.exp = claims.iat + ttl;
    claims.perms = {"stream.publish:stream:" + tenant + "/*/*"};
    return auth::MintToken(*key, claims);
  }
  std::unique_ptr<catalog::EmbeddedCatalog> catalog_;
  VerifiedCredentials verified_;
};

TEST_F(VerifiedCredentialsTest, ATokenVerifiedOnceIsAnsweredAgainWithoutVerifying) {
  std::string token = Token("t1", "alice");
  const int64_t now = auth::NowUnixSeconds();
  auto first = verified_.Verify(*catalog_, "t1", token, now);
  ASSERT_TRUE(first);
  auto again = verified_.Verify(*catalog_, "t1", token, now);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->subject, "alice");
  EXPECT_EQ((*again)->tenant_id, "t1");
  EXPECT_EQ((*again)->expires_at, (*first)->expires_at);
  EXPECT_EQ(verified_.verified(), 1u);
  EXPECT_EQ(verified_.reused(), 1u);
  // The same token for another tenant is another question (and refused: tid is t1).
  EXPECT_FALSE(verified_.Verify(*catalog_, "default", token, now));
  EXPECT_EQ(verified_.verified(), 2u);
}

TEST_F(VerifiedCredentialsTest, NothingIsReusedAtOrPastTheTokensExpiry) {
  std::string token = Token("t1", "alice", 60);
  const int64_t now = auth::NowUnixSeconds();
  ASSERT_TRUE(verified_.Verify(*catalog_, "t1", token, now));
  auto late = verified_.Verify(*catalog_, "t1", token, now + 3600);
  EXPECT_FALSE(late);  // verified again, and expired
  EXPECT_EQ(verified_.verified(), 2u);
  EXPECT_EQ(verified_.reused(), 0u);
}

TEST_F(VerifiedCredentialsTest, ATenantRecreatedWithANewKeyRefusesTheOldToken) {
  std::string old_token = Token("t1", "alice");
  const int64_t now = auth::NowUnixSeconds();
  ASSERT_TRUE(verified_.Verify(*catalog_, "t1", old_token, now));
  ASSERT_TRUE(catalog_->DeleteTenant("t1"));
  EXPECT_FALSE(verified_.Verify(*catalog_, "t1", old_token, now));          // no tenant, no keys
  ASSERT_TRUE(catalog_->CreateTenant(catalog::Tenant{.tenant_id = "t1"}));  // a new signing key
  EXPECT_FALSE(verified_.Verify(*catalog_, "t1", old_token, now));
  EXPECT_EQ(verified_.reused(), 0u);
  EXPECT_TRUE(verified_.Verify(*catalog_, "t1", Token("t1", "alice"), now));
}

TEST_F(VerifiedCredentialsTest, RefusalsAreNeverRemembered) {
  std::string token = Token("t1", "alice");
  std::string forged = token;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';  // the signature no longer verifies
  const int64_t now = auth::NowUnixSeconds();
  EXPECT_FALSE(verified_.Verify(*catalog_, "t1", forged, now));
  EXPECT_FALSE(verified_.Verify(*catalog_, "t1", forged, now));
  EXPECT_EQ(verified_.verified(), 2u);
  EXPECT_EQ(verified_.reused(), 0u);
}

TEST_F(VerifiedCredentialsTest, AFullTableIsEmptiedAndAnswersStayRight) {
  VerifiedCredentials small(2);
  const int64_t now = auth::NowUnixSeconds();
  std::vector<std::string> tokens = {Token("t1", "a"), Token("t1", "b"), Token("t1", "c")};
  for (const auto& t : tokens) ASSERT_TRUE(small.Verify(*catalog_, "t1", t, now));
  auto c = small.Verify(*catalog_, "t1", tokens[2], now);  // kept after the table emptied
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)->subject, "c");
  EXPECT_EQ(small.reused(), 1u);
  auto a = small.Verify(*catalog_, "t1", tokens[0], now);  // dropped, verified again
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)->subject, "a");
  EXPECT_EQ(small.verified(), 4u);
}

}  // namespace
}  // namespace felix::catalog
