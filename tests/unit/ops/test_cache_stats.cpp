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

}  // namespace
}  // namespace datavo
