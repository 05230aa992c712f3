// Tests of src/tier/s3/aws_config.cpp: the resolution order of the region and of the endpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tier/s3/aws_config.hpp"
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

TEST_F(CredentialsTest, RegionIsTheFieldThenAwsRegionThenAwsDefaultRegionThenTheProfile) {
  write_text(home_file(".aws/config"), "[default]\nregion = ap-south-1\n[profile eu]\nregion = eu-north-1\n");
  auto region = [&](std::optional<std::string> field, std::optional<std::string> profile = {}) {
    auto resolved = resolve_region(field, fake_.env(), profile);
    EXPECT_TRUE(resolved) << resolved.error().message;
    return resolved ? resolved->value_or("<none>") : std::string();
  };
  EXPECT_EQ(region(std::nullopt), "ap-south-1");
  EXPECT_EQ(region(std::nullopt, "eu"), "eu-north-1");
  fake_.vars["AWS_PROFILE"] = "eu";
  EXPECT_EQ(region(std::nullopt), "eu-north-1");
  fake_.vars["AWS_DEFAULT_REGION"] = "us-west-1";
  EXPECT_EQ(region(std::nullopt), "us-west-1");
  fake_.vars["AWS_REGION"] = "us-west-2";
  EXPECT_EQ(region(std::nullopt), "us-west-2");
  EXPECT_EQ(region("sa-east-1"), "sa-east-1");
  std::filesystem::remove(home_file(".aws/config"));
  fake_.vars.erase("AWS_REGION");
  fake_.vars.erase("AWS_DEFAULT_REGION");
  EXPECT_EQ(region(std::nullopt), "<none>");
}

TEST_F(CredentialsTest, EndpointIsTheFieldThenTheS3VariableThenTheGenericOne) {
  EXPECT_EQ(resolve_endpoint(std::nullopt, fake_.env()), std::nullopt);
  fake_.vars["AWS_ENDPOINT_URL"] = "http://generic:4566";
  EXPECT_EQ(resolve_endpoint(std::nullopt, fake_.env()), "http://generic:4566");
  fake_.vars["AWS_ENDPOINT_URL_S3"] = "http://minio:9000";
  EXPECT_EQ(resolve_endpoint(std::nullopt, fake_.env()), "http://minio:9000");
  EXPECT_EQ(resolve_endpoint("https://s3.example", fake_.env()), "https://s3.example");
}

}  // namespace
}  // namespace datavo::s3
