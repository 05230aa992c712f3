// Tests of the hierarchy a configuration describes (src/core/from_config.cpp): build_hierarchy() builds each tier
// through the registry, in order, without I/O; a hierarchy the configuration cannot make names the file;
// get_default_shard_cache() reads the file it is given.
#include <gtest/gtest.h>

#include <string>

#include "datavo/config.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/gcs_tier.hpp"
#include "datavo/hierarchy.hpp"
#include "datavo/s3_tier.hpp"
#include "support/config_fixtures.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using datavo::shardtest::folder_config;
using datavo::shardtest::TempDir;

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

TEST(TierRegistry, BuildHierarchyFailsOnATierItCannotBuild) {
  CacheConfig config;
  config.path = "/etc/datavo/shards.yaml";
  config.tiers.push_back(folder_config("a", "/tmp/a"));
  TierConfig floppy = folder_config("f", "/tmp/f");
  floppy.type = "floppy";
  config.tiers.push_back(floppy);
  auto hierarchy = build_hierarchy(config);
  ASSERT_FALSE(hierarchy);
  EXPECT_EQ(hierarchy.error().code, ErrorCode::config);
}

TEST(DefaultShardCache, IsTheHierarchyOfTheFileItIsGiven) {
  TempDir dir;
  const std::string file = dir.sub("shards.yaml");
  shardtest::write_file(file, "tiers:\n  - name: fast\n    path: " + dir.sub("fast") + "\n    max_bytes: 1MiB\n");
  auto cache = get_default_shard_cache(file);
  ASSERT_TRUE(cache) << cache.error().message;
  ASSERT_EQ((*cache)->tiers().size(), 1u);
  EXPECT_EQ((*cache)->tiers()[0]->name(), "fast");
  EXPECT_EQ((*cache)->tiers()[0]->location(), dir.sub("fast"));
  EXPECT_EQ((*cache)->tiers()[0]->max_bytes(), MiB(1));

  auto missing = get_default_shard_cache(dir.sub("nowhere.yaml"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::config);
  EXPECT_NE(missing.error().message.find("nowhere.yaml"), std::string::npos) << missing.error().message;
}

}  // namespace
}  // namespace datavo
