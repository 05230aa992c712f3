// Tests of src/tier/s3/aws_metadata_links.cpp against fakes on 127.0.0.1: the ECS container endpoint (full and
// relative URIs, its authorization token, plain http kept on the machine) and IMDSv2 (a session token for every
// read, no role, disabled, absent).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST_F(CredentialsTest, EcsFullUriWithAnAuthorizationToken) {
  FakeEcs ecs(clock_, 6h, "ecs-authorization-token");
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "ecs-authorization-token";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ECSKEY1");
  EXPECT_EQ(found->session_token, "ecs-token-1");
  EXPECT_EQ(*found->expiration, k_now + 6h);
  EXPECT_THAT(found->source, HasSubstr("ECS container endpoint"));

  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "wrong-token";  // the fake refuses it
  found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, Not(HasSubstr("wrong-token")));
}

TEST_F(CredentialsTest, EcsTokenFileWinsOverTheTokenVariable) {
  FakeEcs ecs(clock_, 6h, "token-from-file");
  write_text(dir_.sub("ecs-token"), "token-from-file\n");
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = ecs.url();
  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = dir_.sub("ecs-token");
  fake_.vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "token-from-variable";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ECSKEY1");
}

TEST_F(CredentialsTest, EcsRelativeUriGoesToTheContainerAgent) {
  FakeEcs ecs(clock_, 6h);
  fake_.container_host = ecs.url("");
  fake_.vars["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/v2/credentials/0a1b2c";
  fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "http://127.0.0.1:9/ignored";  // relative wins
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(ecs.paths_seen(), (std::vector<std::string>{"/v2/credentials/0a1b2c"}));
}

TEST_F(CredentialsTest, EcsFullUriOverPlainHttpMustStayOnTheMachine) {
  // Refused before any connection is tried (TEST-NET-3, and names that only look like loopback).
  for (const char* url : {"http://203.0.113.7/creds", "http://127.0.0.1.example.com/creds",
                          "http://localhost.example.com/creds", "ftp://127.0.0.1/creds"}) {
    fake_.vars["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = url;
    auto found = chain()->get();
    ASSERT_FALSE(found) << url;
    EXPECT_EQ(found.error().code, ErrorCode::config) << url;
    EXPECT_THAT(found.error().message, HasSubstr("https")) << url;
  }
}

TEST_F(CredentialsTest, ImdsV2UsesTheSessionTokenForEveryRead) {
  FakeImds imds(clock_);
  {
    // The fake refuses a read without the token, as IMDSv2-only instances do.
    net::HttpClient plain;
    net::HttpRequest request;
    request.url = imds.server().url("/latest/meta-data/iam/security-credentials/");
    auto refused = plain.perform(request);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::permission_denied);
    ASSERT_EQ(imds.refused.load(), 1);
  }
  enable_imds(imds.server());
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "ASIAIMDSKEY");
  EXPECT_EQ(found->secret_access_key, "imds-secret");
  EXPECT_EQ(found->session_token, "imds-token");
  EXPECT_EQ(*found->expiration, k_now + 6h);
  EXPECT_THAT(found->source, HasSubstr("datavo-role"));
  EXPECT_EQ(imds.token_requests.load(), 1);
  EXPECT_EQ(imds.gets.load(), 3);  // the probe above, the role list, the role's credentials
  EXPECT_EQ(imds.refused.load(), 1);
}

TEST_F(CredentialsTest, ImdsWithoutARoleIsNotFound) {
  FakeImds imds(clock_);
  imds.no_role = true;
  enable_imds(imds.server());
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("no IAM role"));
}

TEST_F(CredentialsTest, ImdsDisabledIsNotAsked) {
  FakeImds imds(clock_);
  enable_imds(imds.server());
  fake_.vars["AWS_EC2_METADATA_DISABLED"] = "TRUE";
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("disabled by AWS_EC2_METADATA_DISABLED"));
  EXPECT_EQ(imds.token_requests.load() + imds.gets.load(), 0);
}

TEST_F(CredentialsTest, AnAbsentImdsIsNotFoundQuickly) {
  LoopbackServer closed;  // bound, then stopped: its port refuses connections
  closed.start();
  closed.stop();
  enable_imds(closed);
  const auto started = std::chrono::steady_clock::now();
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::permission_denied);
  EXPECT_THAT(found.error().message, HasSubstr("no IMDSv2 session token"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

}  // namespace
}  // namespace datavo::s3
