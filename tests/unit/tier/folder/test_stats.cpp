// Tests of the folder tier's persisted statistics (src/tier/folder/stats.cpp): .stats.json adds up every process's
// counters; reset_stats zeroes them.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

TEST(FolderTier, FlushStatsPersistsAndANewTierObjectSeesThem) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(170);
  {
    auto tier = make_folder(root);
    ASSERT_TRUE(commit_bytes(*tier, key, "abcd"));
    ASSERT_TRUE(tier->open(key));
    ASSERT_TRUE(tier->open(key));
    ASSERT_TRUE(tier->open(make_key(171)));
    ASSERT_TRUE(tier->flush_stats());
    EXPECT_TRUE(path_exists(root + "/.stats.json"));
    EXPECT_EQ(tier->counters().snapshot().hits, 0u);  // flushed counters are zeroed
  }
  auto second = make_folder(root);
  auto seen = second->cumulative_stats();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->hits, 2u);
  EXPECT_EQ(seen->misses, 1u);
  EXPECT_EQ(seen->bytes_served, Bytes{8});

  // Flushes of several tier objects add up; unflushed counters are included too.
  ASSERT_TRUE(second->open(key));
  ASSERT_TRUE(second->flush_stats());
  ASSERT_TRUE(second->open(key));
  auto third = make_folder(root);
  auto persisted = third->cumulative_stats();
  ASSERT_TRUE(persisted);
  EXPECT_EQ(persisted->hits, 3u);
  auto with_unflushed = second->cumulative_stats();
  ASSERT_TRUE(with_unflushed);
  EXPECT_EQ(with_unflushed->hits, 4u);
}

TEST(FolderTier, ResetStatsZeroes) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(180);
  ASSERT_TRUE(commit_bytes(*tier, key, "abcd"));
  ASSERT_TRUE(tier->open(key));
  ASSERT_TRUE(tier->flush_stats());
  ASSERT_TRUE(tier->open(key));
  ASSERT_TRUE(tier->open(make_key(181)));

  ASSERT_TRUE(tier->reset_stats());
  auto own = tier->cumulative_stats();
  ASSERT_TRUE(own);
  EXPECT_EQ(own->hits, 0u);
  EXPECT_EQ(own->misses, 0u);
  EXPECT_EQ(own->bytes_served, Bytes{0});
  auto other = make_folder(root)->cumulative_stats();
  ASSERT_TRUE(other);
  EXPECT_EQ(other->hits, 0u);
  EXPECT_EQ(other->misses, 0u);
}

}  // namespace
}  // namespace datavo
