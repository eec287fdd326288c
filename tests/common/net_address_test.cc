#include "common/net_address.h"

#include <gtest/gtest.h>

namespace felix {
namespace {

TEST(ParseHostPort, AcceptsIpv4Ipv6AndNames) {
  EXPECT_EQ(*ParseHostPort("0.0.0.0:5000"), (HostPort{"0.0.0.0", 5000}));
  EXPECT_EQ(*ParseHostPort("[::1]:5001"), (HostPort{"::1", 5001}));
  EXPECT_EQ(*ParseHostPort("localhost:0"), (HostPort{"localhost", 0}));
  EXPECT_EQ(ParseHostPort("[::1]:5001")->ToString(), "[::1]:5001");
}

TEST(ParseHostPort, RefusesMalformedInput) {
  for (const char* bad : {"", "5000", "host:", ":5000", "host:65536", "host:12x", "::1:5000",
                          "[::1]5000", "[::1", "[[x]:1", "a b:1", "[a]]:1"}) {
    auto r = ParseHostPort(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("expected host:port"), std::string::npos);
  }
}

TEST(IsValidDnsName, FollowsRfc1123) {
  EXPECT_TRUE(IsValidDnsName("broker-1"));
  EXPECT_TRUE(IsValidDnsName("broker-1.felix.internal"));
  EXPECT_FALSE(IsValidDnsName(""));
  EXPECT_FALSE(IsValidDnsName("-broker"));
  EXPECT_FALSE(IsValidDnsName("broker-"));
  EXPECT_FALSE(IsValidDnsName("broker_1"));
  EXPECT_FALSE(IsValidDnsName("a..b"));
  EXPECT_FALSE(IsValidDnsName(std::string(64, 'a')));
  EXPECT_TRUE(IsValidDnsName(std::string(63, 'a')));
}

}  // namespace
}  // namespace felix
