// Tests of cache_stats() (src/ops/cache_stats.cpp): the counters every process persisted, and a reset.
#include <gtest/gtest.h>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

TEST(CacheStatsTest, CountsWhatEveryProcessDidUntilReset) {
  TempDir dir;
  {
    auto writer = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
    opstest::install(*writer, opstest::key_of('1'), "bytes");
    opstest::install(*writer, opstest::key_of('1'), "bytes");  // a hit
  }                                                            // its counters are persisted
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  auto stats = cache_stats(*cache, ResetStats::no);
  ASSERT_TRUE(stats) << stats.error().message;
  ASSERT_EQ(stats->tiers.size(), 1u);
  EXPECT_EQ(stats->tiers[0].name, "a");
  EXPECT_EQ(stats->tiers[0].stats.hits, 1u);
  EXPECT_EQ(stats->tiers[0].stats.installs, 1u);
  auto reset = cache_stats(*cache, ResetStats::yes);
  ASSERT_TRUE(reset) << reset.error().message;
  EXPECT_TRUE(reset->tiers[0].stats.empty());
}

std::shared_ptr<Tier> remote_tier(const std::string& name) {
  MemoryTierOptions options;
  options.name = name;
  return make_memory_tier(options);
}

// Issue 16: a bucket's row was all zeros in every new process. Its counters are now kept per machine, in the top
// folder tier's stats file, and the row says so and names the counters it cannot keep.
TEST(CacheStatsTest, KeepsARemoteTiersCountersPerMachineInTheTopFolderTier) {
  TempDir dir;
  {
    auto writer = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), remote_tier("bucket")});
    opstest::install(*writer, opstest::key_of('1'), "bytes");
    opstest::install(*writer, opstest::key_of('2'), "more bytes");
  }  // uploads waited for, counters persisted
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), remote_tier("bucket")});
  auto stats = cache_stats(*cache, ResetStats::no);
  ASSERT_TRUE(stats) << stats.error().message;
  ASSERT_EQ(stats->tiers.size(), 2u);
  const TierInfo& bucket = stats->tiers[1];
  EXPECT_EQ(bucket.scope, StatsScope::this_machine);
  EXPECT_EQ(bucket.kept_in, "a");
  EXPECT_EQ(bucket.stats.uploads, 2u);
  EXPECT_EQ(bucket.stats.misses, 2u);
  EXPECT_EQ(bucket.stats.bytes_installed, Bytes{15});
  EXPECT_FALSE(bucket.kept.contains(TierStat::evictions));
  EXPECT_TRUE(bucket.kept.contains(TierStat::lease_waits));
  EXPECT_EQ(stats->tiers[0].scope, StatsScope::every_process);
  EXPECT_FALSE(stats->tiers[0].kept.contains(TierStat::uploads));
  EXPECT_EQ(stats->tiers[0].stats.installs, 2u);  // the folder tier's own counters are where they were

  auto reset = cache_stats(*cache, ResetStats::yes);
  ASSERT_TRUE(reset) << reset.error().message;
  EXPECT_TRUE(reset->tiers[1].stats.empty());
}

TEST(CacheStatsTest, ARemoteTiersCountersAreThisProcessesWhenNoFolderTierCanKeepThem) {
  TempDir dir;
  FolderTierOptions options;
  options.path = dir.sub("ro");
  options.name = "ro";
  options.access = Access::read_only;
  auto folder = FolderTier::create(options);
  ASSERT_TRUE(folder) << folder.error().message;
  auto cache = opstest::hierarchy({*folder, remote_tier("bucket")});
  auto stats = cache_stats(*cache, ResetStats::no);
  ASSERT_TRUE(stats) << stats.error().message;
  EXPECT_EQ(stats->tiers[1].scope, StatsScope::this_process);
  EXPECT_TRUE(stats->tiers[1].kept_in.empty());
}

}  // namespace
}  // namespace datavo
