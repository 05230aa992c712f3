#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "datavo/config.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/s3_tier.hpp"
#include "datavo/tier_registry.hpp"
#include "support/config_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using datavo::shardtest::folder_config;
using datavo::shardtest::TempDir;

TEST(TierRegistry, EveryKeyOfATypeIsOneThatItsShardsYamlTierAccepts) {
  for (const std::string& type : tier_type_names()) {
    const std::vector<std::string> fields = tier_fields(type);
    ASSERT_GE(fields.size(), 4u) << type;
    EXPECT_EQ(std::vector<std::string>(fields.begin(), fields.begin() + 3),
              (std::vector<std::string>{"name", "max_bytes", "read_only"}));
    // Each key given with a wrong value fails on its value, never as an unknown key.
    for (const std::string& field : fields) {
      auto parsed = parse_tier_arguments(type, {TierArgument{field, "\x01", true}}, "T");
      if (!parsed) {
        EXPECT_EQ(parsed.error().message.find("unknown key"), std::string::npos) << parsed.error().message;
      }
    }
  }
  EXPECT_TRUE(tier_fields("floppy").empty());
  const auto s3 = tier_fields("s3");
  EXPECT_NE(std::find(s3.begin(), s3.end(), "lease_duration"), s3.end());
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

}  // namespace
}  // namespace datavo
