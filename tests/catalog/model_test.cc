// Catalog model: validation and the JSON shapes of control-plane.md §2 and §4.2.
#include <gtest/gtest.h>

#include "catalog/model.h"

namespace felix::catalog {
namespace {

TEST(Names, ControlPlaneRules) {
  EXPECT_TRUE(IsValidName("a"));
  EXPECT_TRUE(IsValidName("Orders-2024_v1.0"));
  EXPECT_TRUE(IsValidName(std::string(128, 'x')));
  EXPECT_FALSE(IsValidName(std::string(129, 'x')));
  EXPECT_FALSE(IsValidName(""));
  EXPECT_FALSE(IsValidName("-a"));
  EXPECT_FALSE(IsValidName(".a"));
  EXPECT_FALSE(IsValidName("a/b"));
  EXPECT_FALSE(IsValidName("a*"));
  EXPECT_FALSE(IsValidName("a:b"));
  EXPECT_FALSE(IsValidName("a b"));
  EXPECT_FALSE(IsValidName("é"));
}

TEST(StreamJson, ParsesTheSpecExampleAndRendersItBack) {
  Json body = Json::parse(
      R"({"stream":"orders","kind":"Stream","shards":1,"replication_factor":1,)"
      R"("retention":{"max_age_seconds":null,"max_size_bytes":null},"consistency":"Leader",)"
      R"("delivery":"AtLeastOnce","durable":true})");
  auto s = StreamFromJson("acme", "payments", body);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "orders");
  EXPECT_TRUE(s->durable);
  EXPECT_EQ(s->routing, Routing::kModulo);
  EXPECT_EQ(ToJson(*s).dump(),
            R"({"tenant_id":"acme","namespace":"payments","stream":"orders","kind":"Stream",)"
            R"("shards":1,"replication_factor":1,"retention":{"max_age_seconds":null,)"
            R"("max_size_bytes":null},"consistency":"Leader","delivery":"AtLeastOnce",)"
            R"("durable":true})");
}

TEST(StreamJson, DefaultsOptionalFieldsAndExtensions) {
  auto s = StreamFromJson("t", "ns", Json::parse(R"({"stream":"s"})"));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->shards, 1u);
  EXPECT_EQ(s->kind, StreamKind::kStream);
  EXPECT_FALSE(s->durable);
  EXPECT_FALSE(s->fsync_mode);

  auto full = StreamFromJson("t", "ns", Json::parse(R"({"stream":"s","kind":"Queue","shards":8,
      "retention":{"max_age_seconds":3600,"max_size_bytes":1048576},"durable":true,
      "fsync_mode":"on_commit","routing":"jump"})"));
  ASSERT_TRUE(full) << full.error().message;
  EXPECT_EQ(full->shards, 8u);
  EXPECT_EQ(full->retention.max_age_seconds, 3600u);
  EXPECT_EQ(full->fsync_mode, FsyncMode::kOnCommit);
  EXPECT_EQ(full->routing, Routing::kJumpHash);
  Json rendered = ToJson(*full);
  EXPECT_EQ(rendered["routing"], "jump_hash");
  EXPECT_EQ(rendered["fsync_mode"], "on_commit");
  EXPECT_EQ(rendered["kind"], "Queue");
  auto again = StreamFromJson("t", "ns", rendered);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *full);
}

TEST(StreamJson, RefusesBadValuesNamingTheField) {
  struct Case {
    const char* body;
    const char* field;
  };
  const Case cases[] = {
      {R"({})", "stream"},
      {R"({"stream":"a/b"})", "stream"},
      {R"({"stream":7})", "stream"},
      {R"({"stream":"s","shards":0})", "shards"},
      {R"({"stream":"s","shards":-1})", "shards"},
      {R"({"stream":"s","shards":1.5})", "shards"},
      {R"({"stream":"s","shards":4294967296})", "shards"},
      {R"({"stream":"s","replication_factor":0})", "replication_factor"},
      {R"({"stream":"s","retention":{"max_age_seconds":0}})", "max_age_seconds"},
      {R"({"stream":"s","retention":{"max_size_bytes":9223372036854775808}})", "max_size_bytes"},
      {R"({"stream":"s","retention":5})", "retention"},
      {R"({"stream":"s","kind":"stream"})", "kind"},
      {R"({"stream":"s","consistency":"Strong"})", "consistency"},
      {R"({"stream":"s","delivery":"ExactlyOnce"})", "delivery"},
      {R"({"stream":"s","routing":"random"})", "routing"},
      {R"({"stream":"s","durable":"yes"})", "durable"},
      {R"({"stream":"s","fsync_mode":"always","durable":true})", "fsync_mode"},
      {R"({"stream":"s","fsync_mode":"none"})", "fsync_mode"},
      {R"([1])", "object"},
  };
  for (const auto& c : cases) {
    auto s = StreamFromJson("t", "ns", Json::parse(c.body));
    ASSERT_FALSE(s) << c.body;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(s.error().message.find(c.field), std::string::npos)
        << c.body << " → " << s.error().message;
  }
}

TEST(CacheJson, RoundTripAndValidation) {
  auto c = CacheFromJson("t", "ns", Json::parse(R"({"cache":"sessions","display_name":"S",
      "shards":4,"durable":true,"default_ttl_ms":60000})"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->shards, 4u);
  EXPECT_EQ(c->default_ttl_ms, 60000u);
  EXPECT_EQ(ToJson(*c).dump(),
            R"({"tenant_id":"t","namespace":"ns","cache":"sessions","display_name":"S",)"
            R"("shards":4,"replication_factor":1,"consistency":"Leader","durable":true,)"
            R"("default_ttl_ms":60000})");
  EXPECT_FALSE(CacheFromJson("t", "ns", Json::parse(R"({"cache":"c","default_ttl_ms":0})")));
  EXPECT_FALSE(CacheFromJson("t", "ns", Json::parse(R"({"cache":"c","shards":0})")));
  EXPECT_FALSE(CacheFromJson("t", "ns", Json::parse(R"({"name":"c"})")));
}

TEST(TenantJson, Shapes) {
  auto t = TenantFromJson(Json::parse(R"({"tenant_id":"acme","display_name":"Acme"})"));
  ASSERT_TRUE(t);
  EXPECT_EQ(ToJson(*t).dump(), R"({"tenant_id":"acme","display_name":"Acme"})");
  EXPECT_FALSE(TenantFromJson(Json::parse(R"({"tenant_id":"a b"})")));
  auto ns = NamespaceFromJson("acme", Json::parse(R"({"namespace":"payments"})"));
  ASSERT_TRUE(ns);
  EXPECT_EQ(ToJson(*ns).dump(), R"({"tenant_id":"acme","namespace":"payments","display_name":""})");
  EXPECT_FALSE(NamespaceFromJson("acme", Json::parse(R"({"namespace":""})")));
}

}  // namespace
}  // namespace felix::catalog
