// parse_tier_arguments() (src/config/config.cpp): one tier's settings given by a program, parsed as shards.yaml is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "datavo/cloud_tier.hpp"
#include "datavo/config.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/s3_tier.hpp"
#include "support/config_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::env_with;
using ::testing::HasSubstr;

TEST(TierArguments, FolderTierLikeTheYamlMapping) {
  auto env = env_with({{"HOME", "/home/u"}});
  auto tier = parse_tier_arguments("folder",
                                   {{"path", "~/cache", true},
                                    {"max_bytes", "10GB", true},
                                    {"name", "fast", true},
                                    {"max_age", "30d", true},
                                    {"read_only", "true", false}},
                                   "ShardCacheTier", env);
  ASSERT_TRUE(tier) << tier.error().message;
  EXPECT_EQ(tier->type, "folder");
  EXPECT_EQ(tier->name, "fast");
  ASSERT_TRUE(tier->max_bytes);
  EXPECT_EQ(tier->max_bytes->count(), 10ull << 30);
  EXPECT_EQ(tier->access, Access::read_only);
  const auto& options = std::any_cast<const FolderTierOptions&>(tier->backend);
  EXPECT_EQ(options.path, "/home/u/cache");
  ASSERT_TRUE(options.max_age);
  EXPECT_EQ(options.max_age->count(), 30 * 86400);
  ASSERT_FALSE(tier->settings.empty());
  EXPECT_EQ(tier->settings.front().name, "name");
  EXPECT_EQ(tier->settings.front().origin, "ShardCacheTier");
}

TEST(TierArguments, NameDefaultsToTheLocationAndZeroIsUnbounded) {
  auto tier = parse_tier_arguments("folder", {{"path", "/tmp/x", true}, {"max_bytes", "0", false}}, "ShardCacheTier",
                                   env_with({}));
  ASSERT_TRUE(tier) << tier.error().message;
  EXPECT_EQ(tier->name, "/tmp/x");
  EXPECT_FALSE(tier->max_bytes);
}

TEST(TierArguments, ErrorsNameTheOriginAndTheKey) {
  auto bad_size = parse_tier_arguments("folder", {{"path", "/tmp/x", true}, {"max_bytes", "ten", true}},
                                       "ShardCacheTier", env_with({}));
  ASSERT_FALSE(bad_size);
  EXPECT_EQ(bad_size.error().code, ErrorCode::config);
  EXPECT_THAT(bad_size.error().message, ::testing::StartsWith("ShardCacheTier.max_bytes: "));

  auto missing = parse_tier_arguments("s3", {{"region", "us-east-1", true}}, "S3ShardCacheTier", env_with({}));
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("S3ShardCacheTier.bucket: missing"));

  auto unknown =
      parse_tier_arguments("gcs", {{"bucket", "b-1", true}, {"path", "/x", true}}, "GcsShardCacheTier", env_with({}));
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message, HasSubstr("GcsShardCacheTier.path: unknown key for a gcs tier"));

  auto twice = parse_tier_arguments("folder", {{"path", "/a", true}, {"path", "/b", true}}, "T", env_with({}));
  ASSERT_FALSE(twice);
  EXPECT_THAT(twice.error().message, HasSubstr("T.path: given twice"));

  auto type = parse_tier_arguments("ftp", {}, "T", env_with({}));
  ASSERT_FALSE(type);
  EXPECT_THAT(type.error().message, HasSubstr("unknown tier type \"ftp\""));

  // A quoted "true" is a string, as in YAML.
  auto quoted = parse_tier_arguments("folder", {{"path", "/a", true}, {"read_only", "true", true}}, "T", env_with({}));
  ASSERT_FALSE(quoted);
  EXPECT_THAT(quoted.error().message, HasSubstr("T.read_only: expected true or false"));
}

TEST(TierArguments, CloudTierAloneAndNormalised) {
  auto tier = parse_tier_arguments("s3",
                                   {{"bucket", "datavo-cache", true},
                                    {"prefix", "/team-a/", true},
                                    {"endpoint_url", "http://127.0.0.1:9000/", true}},
                                   "S3ShardCacheTier", env_with({}));
  ASSERT_TRUE(tier) << tier.error().message;
  EXPECT_EQ(tier->name, "datavo-cache");
  const auto& options = std::any_cast<const S3TierOptions&>(tier->backend);
  EXPECT_EQ(options.remote.prefix.value_or(""), "team-a");
  EXPECT_EQ(options.endpoint_url.value_or(""), "http://127.0.0.1:9000");
}

}  // namespace
}  // namespace datavo
