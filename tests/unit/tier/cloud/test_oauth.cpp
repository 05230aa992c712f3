// Tests of src/tier/cloud/oauth.cpp: form encoding and the parsing of token responses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tier/cloud/oauth.hpp"
#include "util/percent.hpp"

namespace datavo::cloud {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const WallClock::time_point k_token_issued = WallClock::time_point(std::chrono::seconds(1'700'000'000));

TEST(OAuth, FormEncodingRoundTrips) {
  const std::string form =
      form_encode({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"}, {"a b", "x+y/z=~"}});
  EXPECT_EQ(form, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&a%20b=x%2By%2Fz%3D~");
  EXPECT_EQ(util::percent_decode("a%20b=x%2By%2Fz%3D~", util::Plus::space).value(), "a b=x+y/z=~");
}

TEST(OAuth, TokenResponsesWithExpiresInOrExpiresOn) {
  auto in =
      parse_token_response(R"({"access_token":"a","expires_in":3599,"token_type":"Bearer"})", k_token_issued, "t");
  ASSERT_TRUE(in);
  EXPECT_EQ(in->token, "a");
  EXPECT_EQ(in->expires_at, k_token_issued + 3599s);
  // IMDS gives numbers as strings.
  auto as_string = parse_token_response(R"({"access_token":"b","expires_in":"86399"})", k_token_issued, "t");
  ASSERT_TRUE(as_string);
  EXPECT_EQ(as_string->expires_at, k_token_issued + 86399s);
  auto on = parse_token_response(R"({"access_token":"c","expires_on":"1700003600"})", k_token_issued, "t");
  ASSERT_TRUE(on);
  EXPECT_EQ(on->expires_at, k_token_issued + 1h);
  auto cli = parse_token_response(R"({"accessToken":"d","expires_in":60})", k_token_issued, "t", "accessToken");
  ASSERT_TRUE(cli);
  EXPECT_EQ(cli->token, "d");

  auto no_token = parse_token_response(R"({"expires_in":60})", k_token_issued, "the endpoint");
  ASSERT_FALSE(no_token);
  EXPECT_THAT(no_token.error().message, HasSubstr("the endpoint: the token response has no \"access_token\""));
  EXPECT_FALSE(parse_token_response(R"({"access_token":"e"})", k_token_issued, "t"));
  EXPECT_FALSE(parse_token_response(R"({"access_token":"e","expires_in":"soon"})", k_token_issued, "t"));
  EXPECT_FALSE(parse_token_response(R"({"access_token":"e","expires_in":-5})", k_token_issued, "t"));
  EXPECT_FALSE(
      parse_token_response(R"({"access_token":"e","expires_in":"99999999999999999999"})", k_token_issued, "t"));
  EXPECT_FALSE(parse_token_response("<html>", k_token_issued, "t"));
}

}  // namespace
}  // namespace datavo::cloud
