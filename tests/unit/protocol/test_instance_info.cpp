// The body of GET /v1/instance (src/protocol/instance_info.cpp).
#include <gtest/gtest.h>

#include "datavo/protocol.hpp"

namespace datavo {
namespace {

TEST(ProtocolInstanceInfo, RoundTrips) {
  const InstanceInfo info{"0f3c9a", protocol::k_version, "datavo-serve/0.1.0"};
  auto parsed = InstanceInfo::parse(info.to_json());
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, info);
}

TEST(ProtocolInstanceInfo, OnlyTheIdIsRequired) {
  auto parsed = InstanceInfo::parse(R"({"instance_id":"abc","extra":true})");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->instance_id, "abc");
  EXPECT_EQ(parsed->protocol_version, 0u);
  EXPECT_EQ(parsed->server, "");
}

TEST(ProtocolInstanceInfo, MalformedBodiesAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not JSON"},
      {R"({"server":"x"})", "\"instance_id\""},
      {R"({"instance_id":""})", "\"instance_id\" is empty"},
      {R"({"instance_id":7})", "\"instance_id\""},
      {R"({"instance_id":"a","protocol_version":"1"})", "\"protocol_version\""},
      {R"({"instance_id":"a","server":1})", "\"server\""},
  };
  for (const auto& [text, needle] : cases) {
    auto parsed = InstanceInfo::parse(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error().code, ErrorCode::remote);
    EXPECT_NE(parsed.error().message.find(needle), std::string::npos) << parsed.error().message;
  }
}

}  // namespace
}  // namespace datavo
