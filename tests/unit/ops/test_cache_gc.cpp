// Tests of cache_gc() (src/ops/cache_gc.cpp): a dry run evicts nothing, a run evicts to the budget.
#include <gtest/gtest.h>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

TEST(CacheGcTest, EvictsTheWritableFolderTiersToTheirBudget) {
  TempDir dir;
  auto big = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  for (char digit : {'1', '2', '3', '4'}) opstest::install(*big, opstest::key_of(digit), std::string(1000, digit));
  // The same directory with a budget of two entries.
  auto bounded = opstest::hierarchy({opstest::folder(dir.sub("a"), "a", Bytes{2500})});

  const CacheGcReport dry = cache_gc(*bounded, DryRun::yes);
  EXPECT_FALSE(dry.error);
  EXPECT_EQ(dry.dry_run, DryRun::yes);
  ASSERT_EQ(dry.tiers.size(), 1u);
  EXPECT_GE(dry.tiers[0].eviction.entries_evicted, 2u);
  EXPECT_EQ(bounded->cache_info()[0].usage->entries, 4u) << "a dry run removes nothing";

  const CacheGcReport run = cache_gc(*bounded, DryRun::no);
  EXPECT_FALSE(run.error);
  ASSERT_EQ(run.tiers.size(), 1u);
  EXPECT_EQ(run.tiers[0].tier, "a");
  EXPECT_EQ(run.tiers[0].eviction.entries_evicted, dry.tiers[0].eviction.entries_evicted);
  EXPECT_LE(bounded->cache_info()[0].usage->entries, 2u);
}

TEST(CacheGcTest, OtherTiersAreLeftAlone) {
  TempDir dir;
  MemoryTierOptions memory;
  memory.name = "bucket";
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), make_memory_tier(memory)});
  const CacheGcReport report = cache_gc(*cache, DryRun::no);
  EXPECT_FALSE(report.error);
  ASSERT_EQ(report.tiers.size(), 1u);
  EXPECT_EQ(report.tiers[0].tier, "a");
}

}  // namespace
}  // namespace datavo
