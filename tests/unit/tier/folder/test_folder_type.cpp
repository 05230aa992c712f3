// Tests of the folder tier's entry in the tier registry (src/tier/folder/folder_type.cpp): its shards.yaml fields,
// their checks and effective settings, and its factory, through parse_tier_arguments() and make_tier().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "datavo/config.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/tier_registry.hpp"
#include "support/config_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::env_with;
using ::testing::HasSubstr;

Result<TierConfig> folder_tier(const std::vector<TierArgument>& arguments,
                               const ConfigEnvironment& env = env_with({})) {
  return parse_tier_arguments("folder", arguments, "FolderTier", env);
}

std::optional<std::string> setting(const TierConfig& config, const std::string& name) {
  for (const auto& s : config.settings) {
    if (s.name == name) return s.value;
  }
  return std::nullopt;
}

TEST(FolderType, ThePathIsExpandedAndMustBeAbsolute) {
  auto expanded = folder_tier({{"path", "$SCRATCH/shards", true}}, env_with({{"SCRATCH", "/scratch/me"}}));
  ASSERT_TRUE(expanded) << expanded.error().message;
  EXPECT_EQ(std::any_cast<const FolderTierOptions&>(expanded->backend).path, "/scratch/me/shards");
  EXPECT_EQ(expanded->name, "/scratch/me/shards");  // the name defaults to the path
  EXPECT_EQ(setting(*expanded, "path"), "/scratch/me/shards");

  auto relative = folder_tier({{"path", "shards", true}});
  ASSERT_FALSE(relative);
  EXPECT_THAT(relative.error().message, HasSubstr("path: \"shards\" is not an absolute path"));
  auto unset = folder_tier({{"path", "$NOWHERE/shards", true}});
  ASSERT_FALSE(unset);
  EXPECT_THAT(unset.error().message, HasSubstr("NOWHERE"));
  auto missing = folder_tier({{"name", "fast", true}});
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message, HasSubstr("path"));
}

TEST(FolderType, TheLruResolutionDefaultsToTenSecondsOrATenthOfMaxAgeAndMustBeLessThanMaxAge) {
  auto plain = folder_tier({{"path", "/a", true}});
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(std::any_cast<const FolderTierOptions&>(plain->backend).lru_resolution, Seconds{10});
  EXPECT_EQ(default_lru_resolution(std::nullopt), Seconds{10});
  EXPECT_EQ(default_lru_resolution(Seconds{30}), Seconds{3});
  EXPECT_EQ(setting(*plain, "lru_resolution"), "10s");

  auto set = folder_tier({{"path", "/a", true}, {"lru_resolution", "5m", true}, {"max_age", "1d", true}});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(std::any_cast<const FolderTierOptions&>(set->backend).lru_resolution, Seconds{300});
  auto zero = folder_tier({{"path", "/a", true}, {"lru_resolution", "0s", true}});
  ASSERT_TRUE(zero) << zero.error().message;
  EXPECT_EQ(std::any_cast<const FolderTierOptions&>(zero->backend).lru_resolution, Seconds{0});

  auto too_long = folder_tier({{"path", "/a", true}, {"lru_resolution", "1h", true}, {"max_age", "1h", true}});
  ASSERT_FALSE(too_long);
  EXPECT_THAT(too_long.error().message, HasSubstr("lru_resolution: must be less than max_age (1h)"));
  // The default follows a short max_age: a tenth of it.
  auto short_age = folder_tier({{"path", "/a", true}, {"max_age", "50s", true}});
  ASSERT_TRUE(short_age) << short_age.error().message;
  EXPECT_EQ(setting(*short_age, "lru_resolution"), "5s");
  auto garbage = folder_tier({{"path", "/a", true}, {"lru_resolution", "soon", true}});
  ASSERT_FALSE(garbage);
  EXPECT_THAT(garbage.error().message, HasSubstr("lru_resolution"));
}

TEST(FolderType, DefaultsAreRecordedAsEffectiveSettings) {
  auto config = folder_tier({{"path", "/a", true}});
  ASSERT_TRUE(config) << config.error().message;
  const auto& options = std::any_cast<const FolderTierOptions&>(config->backend);
  EXPECT_EQ(options.durability, Durability::fsync_before_commit);
  EXPECT_EQ(options.verify, VerifyOnHit::size);
  EXPECT_FALSE(options.max_age.has_value());
  EXPECT_EQ(setting(*config, "durability"), "fsync");
  EXPECT_EQ(setting(*config, "verify"), "size");
  EXPECT_EQ(setting(*config, "max_age"), "none");
  EXPECT_EQ(setting(*config, "verify_sample_every"), std::nullopt);  // only shown for verify: sampled
}

TEST(FolderType, DurabilityMaxAgeAndSampledVerifyAreParsed) {
  auto config = folder_tier({{"path", "/a", true},
                             {"durability", "none", true},
                             {"max_age", "2h", true},
                             {"verify", "sampled", true},
                             {"verify_sample_every", "7", false}});
  ASSERT_TRUE(config) << config.error().message;
  const auto& options = std::any_cast<const FolderTierOptions&>(config->backend);
  EXPECT_EQ(options.durability, Durability::no_sync);
  EXPECT_EQ(options.max_age, Seconds{7200});
  EXPECT_EQ(options.verify, VerifyOnHit::sampled);
  EXPECT_EQ(options.verify_sample_every, 7u);
  EXPECT_EQ(setting(*config, "durability"), "none");
  EXPECT_EQ(setting(*config, "max_age"), "2h");
  EXPECT_EQ(setting(*config, "verify_sample_every"), "7");
}

TEST(FolderType, RefusesAZeroMaxAgeAndASampleRateWithoutSampledVerify) {
  auto zero = folder_tier({{"path", "/a", true}, {"max_age", "0s", true}});
  ASSERT_FALSE(zero);
  EXPECT_THAT(zero.error().message, HasSubstr("max_age: must be positive"));
  auto rate = folder_tier({{"path", "/a", true}, {"verify_sample_every", "10", false}});
  ASSERT_FALSE(rate);
  EXPECT_THAT(rate.error().message, HasSubstr("verify_sample_every: applies to verify: sampled only"));
  auto durability = folder_tier({{"path", "/a", true}, {"durability", "fast", true}});
  ASSERT_FALSE(durability);
  EXPECT_THAT(durability.error().message, HasSubstr("durability"));
}

TEST(FolderType, TheFactoryMergesTheFieldsEveryTierShares) {
  auto config = folder_tier({{"path", "/scratch/t", true},
                             {"name", "fast", true},
                             {"max_bytes", "1MiB", true},
                             {"read_only", "true", false},
                             {"durability", "none", true}});
  ASSERT_TRUE(config) << config.error().message;
  auto tier = make_tier(*config);
  ASSERT_TRUE(tier) << tier.error().message;
  EXPECT_EQ((*tier)->name(), "fast");
  EXPECT_EQ((*tier)->type(), "folder");
  EXPECT_EQ((*tier)->max_bytes(), MiB(1));
  EXPECT_TRUE((*tier)->read_only());
  ASSERT_NE((*tier)->as_local(), nullptr);
  ASSERT_NE((*tier)->as_folder(), nullptr);
  EXPECT_EQ((*tier)->as_folder()->options().path, "/scratch/t");
  EXPECT_EQ((*tier)->as_folder()->options().durability, Durability::no_sync);
}

}  // namespace
}  // namespace datavo
