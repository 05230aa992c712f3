#include <gtest/gtest.h>

#include "datavo/gcs_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/s3_tier.hpp"
#include "datavo/tier_registry.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using datavo::shardtest::TempDir;

TierConfig folder_config(const std::string& name, const std::string& path) {
  TierConfig c;
  c.name = name;
  c.type = "folder";
  FolderTierOptions options;
  options.path = path;
  c.backend = options;
  return c;
}

TEST(TierRegistry, BuildsAFolderTierWithEveryOption) {
  TempDir dir;
  auto config = folder_config("fast", dir.sub("t"));
  config.max_bytes = MiB(5);
  config.access = Access::read_only;
  std::any_cast<FolderTierOptions&>(config.backend).max_age = std::chrono::hours(24);
  std::any_cast<FolderTierOptions&>(config.backend).durability = Durability::no_sync;
  auto tier = make_tier(config);
  ASSERT_TRUE(tier) << tier.error().message;
  EXPECT_EQ((*tier)->name(), "fast");
  EXPECT_EQ((*tier)->type(), "folder");
  EXPECT_TRUE((*tier)->supports_direct_read());
  EXPECT_TRUE((*tier)->read_only());
  EXPECT_EQ((*tier)->max_bytes(), MiB(5));
  EXPECT_EQ((*tier)->as_folder()->options().max_age, std::chrono::seconds(std::chrono::hours(24)));
  EXPECT_EQ((*tier)->as_folder()->options().durability, Durability::no_sync);
}

TEST(TierRegistry, BuildsAnS3TierWithoutIoOrCredentials) {
  TierConfig s3;
  s3.name = "region";
  s3.type = "s3";
  s3.max_bytes = GiB(1);
  S3TierOptions s3_options;
  s3_options.bucket = "bucket";
  s3_options.endpoint_url = "http://127.0.0.1:9";  // nothing listens there: construction must not ask
  s3.backend = s3_options;
  auto tier = make_tier(s3);
  ASSERT_TRUE(tier) << tier.error().message;
  EXPECT_EQ((*tier)->name(), "region");
  EXPECT_EQ((*tier)->type(), "s3");
  EXPECT_EQ((*tier)->location(), "s3://bucket");
  EXPECT_EQ((*tier)->max_bytes(), GiB(1));
  EXPECT_FALSE((*tier)->supports_direct_read());
  EXPECT_NE((*tier)->coordination(), nullptr);  // single_flight: true by default
}

TEST(TierRegistry, UnknownTypeIsAConfigError) {
  auto config = folder_config("x", "/tmp/x");
  config.type = "floppy";
  auto tier = make_tier(config);
  ASSERT_FALSE(tier);
  EXPECT_EQ(tier.error().code, ErrorCode::config);
}

TEST(TierRegistry, BuildHierarchyBuildsCloudTiersLazilyAndKeepsOrder) {
  TempDir dir;
  CacheConfig config;
  config.tiers.push_back(folder_config("a", dir.sub("a")));
  TierConfig gcs;
  gcs.name = "g";
  gcs.type = "gcs";
  GcsTierOptions gcs_options;
  gcs_options.bucket = "bucket";
  gcs_options.endpoint_url = "http://127.0.0.1:9";  // nothing listens there: building must not ask
  gcs.backend = gcs_options;
  config.tiers.push_back(gcs);
  config.tiers.push_back(folder_config("b", dir.sub("b")));
  auto hierarchy = build_hierarchy(config);
  ASSERT_TRUE(hierarchy) << hierarchy.error().message;
  ASSERT_EQ((*hierarchy)->tiers().size(), 3u);
  EXPECT_EQ((*hierarchy)->tiers()[0]->name(), "a");
  EXPECT_EQ((*hierarchy)->tiers()[1]->name(), "g");
  EXPECT_EQ((*hierarchy)->tiers()[1]->type(), "gcs");
  EXPECT_EQ((*hierarchy)->tiers()[2]->name(), "b");
}

TEST(TierRegistry, BuildHierarchyWithOnlyCloudTiersFailsNamingTheFile) {
  CacheConfig config;
  config.path = "/etc/datavo/shards.yaml";
  TierConfig s3;
  s3.name = "r";
  s3.type = "s3";
  S3TierOptions s3_options;
  s3_options.bucket = "bucket";
  s3.backend = s3_options;
  config.tiers.push_back(s3);
  auto hierarchy = build_hierarchy(config);
  ASSERT_FALSE(hierarchy);
  EXPECT_EQ(hierarchy.error().code, ErrorCode::config);
  EXPECT_NE(hierarchy.error().message.find("/etc/datavo/shards.yaml"), std::string::npos);
}

}  // namespace
}  // namespace datavo
