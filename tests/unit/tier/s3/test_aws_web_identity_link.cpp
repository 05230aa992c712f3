// Tests of src/tier/s3/aws_web_identity_link.cpp against a fake STS on 127.0.0.1: a token file and a role from the
// environment or a profile, STS's refusal, a missing token file, and the choice of the STS endpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tier/s3/aws_links.hpp"
#include "unit/tier/s3/aws_chain_fixture.hpp"

namespace datavo::s3 {
namespace {

using namespace std::chrono_literals;
using namespace chain_test;
using s3test::FakeEcs;
using s3test::LoopbackServer;
using s3test::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(CredentialsTest, WebIdentityFromTheEnvironmentThroughSts) {
  const std::string role = "arn:aws:iam::123456789012:role/datavo-ci";
  FakeSts sts(clock_, "eyJ.web-identity.token", role);
  write_text(dir_.sub("token.jwt"), "eyJ.web-identity.token\n");  // as a projected token file may end
  fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("token.jwt");
  fake_.vars["AWS_ROLE_ARN"] = role;
  fake_.vars["AWS_ROLE_SESSION_NAME"] = "ci-run-7";
  fake_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
  fake_.vars["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9/";  // the STS-specific one wins
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ASIASTSKEY");
  EXPECT_EQ(found->secret_access_key, "sts-secret");
  EXPECT_EQ(found->session_token, "sts-session-token");
  ASSERT_TRUE(found->expiration);
  EXPECT_EQ(*found->expiration, k_now + 1h);
  EXPECT_THAT(found->source, HasSubstr("web identity"));
  EXPECT_THAT(found->source, HasSubstr(role));
  EXPECT_EQ(sts.session_name(), "ci-run-7");
  EXPECT_EQ(sts.requests.load(), 1);
}

TEST_F(CredentialsTest, WebIdentityFromAProfileUsesTheGenericEndpoint) {
  const std::string role = "arn:aws:iam::123456789012:role/from-profile";
  FakeSts sts(clock_, "profile.jwt", role);
  write_text(dir_.sub("p.jwt"), "profile.jwt");
  write_text(home_file(".aws/config"), "[profile ci]\nweb_identity_token_file = " + dir_.sub("p.jwt") +
                                           "\nrole_arn = " + role + "\nregion = eu-west-3\n");
  fake_.vars["AWS_PROFILE"] = "ci";
  fake_.vars["AWS_ENDPOINT_URL"] = sts.url();
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ASIASTSKEY");
  EXPECT_THAT(found->source, HasSubstr("profile ci"));
  EXPECT_THAT(sts.session_name(), HasSubstr("datavo-"));  // no role_session_name: one is made up
}

TEST_F(CredentialsTest, AStsRefusalIsAnErrorThatNamesNoToken) {
  FakeSts sts(clock_, "the.secret.jwt", "arn:aws:iam::1:role/r");
  sts.refuse = true;
  write_text(dir_.sub("token.jwt"), "the.secret.jwt");
  fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("token.jwt");
  fake_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  fake_.vars["AWS_ENDPOINT_URL_STS"] = sts.url();
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("AccessDenied"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("the.secret.jwt")));
}

TEST_F(CredentialsTest, AMissingWebIdentityTokenFileIsAnError) {
  fake_.vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.sub("absent.jwt");
  fake_.vars["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/r";
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::not_found);
  EXPECT_THAT(found.error().message, HasSubstr("absent.jwt"));
}

TEST(StsEndpoint, SpecificThenGenericThenRegionalThenGlobal) {
  s3test::FakeEnvironment fake;
  EXPECT_EQ(sts_endpoint(fake.env(), std::nullopt), "https://sts.amazonaws.com");
  EXPECT_EQ(sts_endpoint(fake.env(), "eu-central-1"), "https://sts.eu-central-1.amazonaws.com");
  fake.vars["AWS_ENDPOINT_URL"] = "http://localstack:4566";
  EXPECT_EQ(sts_endpoint(fake.env(), "eu-central-1"), "http://localstack:4566");
  fake.vars["AWS_ENDPOINT_URL_STS"] = "http://sts.local";
  EXPECT_EQ(sts_endpoint(fake.env(), "eu-central-1"), "http://sts.local");
}

}  // namespace
}  // namespace datavo::s3
