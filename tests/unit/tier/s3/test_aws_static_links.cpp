// Tests of src/tier/s3/aws_static_links.cpp: keys from the environment and from the profile in the shared
// credentials and config files, a named profile that exists nowhere, and AssumeRole profiles refused.
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

TEST_F(CredentialsTest, EnvironmentKeysComeFirst) {
  fake_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  fake_.vars["AWS_SECRET_ACCESS_KEY"] = "env-secret";
  fake_.vars["AWS_SESSION_TOKEN"] = "env-token";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDENV");
  EXPECT_EQ(found->secret_access_key, "env-secret");
  EXPECT_EQ(found->session_token, "env-token");
  EXPECT_FALSE(found->expiration);
  EXPECT_EQ(found->source, "environment");
}

TEST_F(CredentialsTest, HalfTheEnvironmentKeysIsAConfigError) {
  fake_.vars["AWS_ACCESS_KEY_ID"] = "AKIDENV";
  fake_.vars["AWS_SECRET_ACCESS_KEY"] = "";  // empty counts as unset
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::config);
  EXPECT_THAT(found.error().message, HasSubstr("AWS_SECRET_ACCESS_KEY"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("AKIDENV")));
}

TEST_F(CredentialsTest, StaticKeysFromTheCredentialsFile) {
  write_text(home_file(".aws/credentials"),
             "# comment\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = default-secret\n\n"
             "[dev]\r\nAWS_ACCESS_KEY_ID=AKIDDEV\r\naws_secret_access_key =  dev-secret  \r\n"
             "aws_session_token = dev-token\r\n");
  fake_.vars["AWS_PROFILE"] = "dev";
  auto found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDDEV");
  EXPECT_EQ(found->secret_access_key, "dev-secret");
  EXPECT_EQ(found->session_token, "dev-token");
  EXPECT_THAT(found->source, HasSubstr("profile dev"));

  // The explicit profile argument overrides AWS_PROFILE.
  found = chain("default")->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDDEFAULT");
}

TEST_F(CredentialsTest, ConfigFileSectionsAreProfileNameOrDefault) {
  write_text(dir_.sub("cfg"),
             "[dev]\naws_access_key_id = AKIDNOTAPROFILE\naws_secret_access_key = wrong\n"
             "[profile   dev]\naws_access_key_id = AKIDCONFIGDEV\naws_secret_access_key = config-secret\n"
             "s3 =\n  addressing_style = path\n"
             "[default]\naws_access_key_id = AKIDCONFIGDEFAULT\naws_secret_access_key = d\n"
             "[sso-session dev]\nsso_region = us-east-1\n");
  fake_.vars["AWS_CONFIG_FILE"] = dir_.sub("cfg");
  fake_.vars["AWS_SHARED_CREDENTIALS_FILE"] = dir_.sub("no-such-file");
  auto found = chain("dev")->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDCONFIGDEV");
  EXPECT_EQ(found->secret_access_key, "config-secret");
  found = chain()->get();
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->access_key_id, "AKIDCONFIGDEFAULT");
}

TEST_F(CredentialsTest, ANamedProfileThatDoesNotExistIsAConfigError) {
  write_text(home_file(".aws/credentials"), "[other]\naws_access_key_id = A\naws_secret_access_key = B\n");
  fake_.vars["AWS_PROFILE"] = "missing";
  auto found = chain()->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::config);
  EXPECT_THAT(found.error().message, HasSubstr("missing"));
}

TEST_F(CredentialsTest, AssumeRoleFromASourceProfileIsUnsupportedNotIgnored) {
  write_text(home_file(".aws/config"),
             "[profile r]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n"
             "aws_access_key_id = A\naws_secret_access_key = B\n");
  auto found = chain("r")->get();
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::unsupported);
}

}  // namespace
}  // namespace datavo::s3
