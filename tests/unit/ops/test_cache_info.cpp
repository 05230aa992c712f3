// Tests of cache_info() (src/ops/cache_info.cpp): the config's summary, each tier's settings and its lock mechanism
// only once the tier's directory exists.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

TEST(CacheInfoTest, DescribesTheConfigAndEveryTierWithoutCreatingOne) {
  TempDir dir;
  const std::string config = dir.sub("shards.yaml");
  ASSERT_TRUE(util::write_file_atomic(config,
                                      "tiers:\n  - name: fast\n    path: " + dir.sub("fast") +
                                          "\n    max_bytes: 1MiB\n  - name: big\n    path: " + dir.sub("big") + "\n",
                                      0644));
  auto session = open_cache_session(CacheSessionOptions{config, "local"});
  ASSERT_TRUE(session) << session.error().message;
  const CacheInfoReport report = cache_info(*session);
  EXPECT_EQ(report.config_path, config);
  EXPECT_EQ(report.config_source, ConfigSource::argument);
  EXPECT_EQ(report.instance, "local");
  ASSERT_EQ(report.tiers.size(), 2u);
  EXPECT_EQ(report.tiers[0].info.name, "fast");
  EXPECT_EQ(report.tiers[0].info.max_bytes, MiB(1));
  bool has_max_bytes = false;
  for (const auto& setting : report.tiers[0].settings)
    if (setting.name == "max_bytes") has_max_bytes = setting.origin == config + ":4";
  EXPECT_TRUE(has_max_bytes) << "the setting and the line it came from";
  EXPECT_FALSE(report.tiers[0].lock_mechanism) << "not probed before the tier exists";
  struct stat st {};
  EXPECT_NE(::stat(dir.sub("fast").c_str(), &st), 0) << "describing a tier does not create it";
}

TEST(CacheInfoTest, AnExistingFolderTierHasItsLockMechanism) {
  TempDir dir;
  CacheSession session;
  session.cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  opstest::install(*session.cache, opstest::key_of('1'), "bytes");
  const CacheInfoReport report = cache_info(session);
  ASSERT_EQ(report.tiers.size(), 1u);
  ASSERT_TRUE(report.tiers[0].lock_mechanism);
  EXPECT_TRUE(report.tiers[0].settings.empty()) << "a session without a config has no settings to show";
  ASSERT_TRUE(report.tiers[0].info.usage);
  EXPECT_EQ(report.tiers[0].info.usage->entries, 1u);
}

}  // namespace
}  // namespace datavo
