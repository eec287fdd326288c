// Parsers and pure helpers of the etcd library.
#include <gtest/gtest.h>

#include "etcd/etcd_version.h"
#include "etcd/fake_etcd.h"
#include "etcd/grpc_etcd_client.h"

namespace felix::etcd {
namespace {

TEST(PrefixEnd, IncrementsLastByte) {
  EXPECT_EQ(PrefixEnd("/felix/a/"), "/felix/a0");
  EXPECT_EQ(PrefixEnd("ab"), "ac");
}

TEST(PrefixEnd, DropsTrailingFfBytes) {
  EXPECT_EQ(PrefixEnd(std::string("a\xff\xff", 3)), "b");
  EXPECT_EQ(PrefixEnd(std::string("\xff", 1)), std::string(1, '\0'));
  EXPECT_EQ(PrefixEnd(""), std::string(1, '\0'));
}

TEST(EtcdVersion, ParsesAndOrders) {
  auto v = ParseEtcdVersion("3.4.23");
  ASSERT_TRUE(v) << v.error().ToString();
  EXPECT_EQ(*v, (EtcdVersion{3, 4, 23}));
  auto suffixed = ParseEtcdVersion("3.5.0-rc.1");
  ASSERT_TRUE(suffixed);
  EXPECT_EQ(*suffixed, (EtcdVersion{3, 5, 0}));
}

TEST(EtcdVersion, RefusesOlderThan3420) {
  for (const char* old : {"3.4.19", "3.4.0", "3.3.27", "2.3.8"}) {
    auto r = CheckEtcdVersion(old);
    ASSERT_FALSE(r) << old;
    EXPECT_EQ(r.error().code, EtcdErrc::kVersionTooOld) << old;
  }
  for (const char* ok : {"3.4.20", "3.4.23", "3.5.0", "3.10.1", "4.0.0"}) {
    EXPECT_TRUE(CheckEtcdVersion(ok)) << ok;
  }
}

TEST(EtcdVersion, GarbageIsInvalidArgument) {
  for (const char* bad : {"", "3", "3.4", "3.4.x", "v3.4.23", "3..4", "3.4.23x", "-3.4.1"}) {
    auto r = CheckEtcdVersion(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, EtcdErrc::kInvalidArgument) << bad;
  }
}

TEST(EtcdVersion, VerifyServerVersionAsksTheServer) {
  FakeEtcd fake;
  EXPECT_TRUE(VerifyServerVersion(fake));
  fake.SetVersion("3.4.19");
  auto r = VerifyServerVersion(fake);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EtcdErrc::kVersionTooOld);
  fake.SetAvailable(false);
  r = VerifyServerVersion(fake);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, EtcdErrc::kUnavailable);
}

TEST(EtcdEndpoints, ParsesCommaListOfUrls) {
  auto r = ParseEtcdEndpoints("http://127.0.0.1:2379, http://etcd-2:22379/,10.0.0.3:2379");
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{"127.0.0.1:2379", "etcd-2:22379", "10.0.0.3:2379"}));
}

TEST(EtcdEndpoints, RefusesBadEntriesNamingThem) {
  for (const char* bad : {"", "http://host", "http://:2379", "https://h:2379", "http://h:port",
                          "http://h:2379/v3", "http://a:1,,http://b:2", "http://h:123456"}) {
    auto r = ParseEtcdEndpoints(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, EtcdErrc::kInvalidArgument) << bad;
  }
  auto r = GrpcEtcdClient::Create("http://ok:1,https://tls:2");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("https://tls:2"), std::string::npos);
}

TEST(EtcdError, MapsToBroadErrorCodes) {
  EXPECT_EQ((EtcdError{EtcdErrc::kTimeout, "x"}.ToError().code), ErrorCode::kTimeout);
  EXPECT_EQ((EtcdError{EtcdErrc::kUnavailable, "x"}.ToError().code), ErrorCode::kUnavailable);
  EXPECT_EQ((EtcdError{EtcdErrc::kVersionTooOld, "x"}.ToError().code), ErrorCode::kInvalidArgument);
  EtcdError compacted{EtcdErrc::kCompacted, "x"};
  EXPECT_NE(compacted.ToString().find("etcd_compacted"), std::string::npos);
}

}  // namespace
}  // namespace felix::etcd
