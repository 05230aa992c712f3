// Tests of the folder tier's eviction (src/tier/folder/eviction.cpp): LRU by mtime down to the low watermark, max_age,
// never the entry just committed, readers that outlive their entry, gc, read-only tiers.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

TEST(FolderTier, ReadOnlyTierIsNeverEvictedFrom) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto writer = make_folder(root);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(commit_bytes(*writer, make_key(30 + i), random_bytes(1000, i)));
  for (int i = 0; i < 3; ++i) set_mtime_ago(writer->entry_path(make_key(30 + i)), 48h);

  auto options = folder_options(root);
  options.access = Access::read_only;
  options.max_bytes = Bytes{1000};
  options.max_age = 1h;
  auto ro = make_folder(options);
  auto report = ro->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->entries_evicted, 0u);
  // An expired entry on a read-only tier is a miss, but it stays on disk.
  auto opened = ro->open(make_key(30));
  ASSERT_TRUE(opened);
  EXPECT_FALSE(*opened);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(path_exists(writer->entry_path(make_key(30 + i)))) << i;
}

TEST(FolderTier, LruEvictionByMtimeDownToTheLowWatermark) {
  TempDir dir;
  constexpr std::size_t k_entry = 4096;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{10 * k_entry};  // ten entries' worth
  auto tier = make_folder(options);

  // Ten entries fill the budget exactly; their mtimes are deliberately not in install order.
  const std::array<int, 10> age_rank = {5, 2, 8, 0, 9, 3, 7, 1, 6, 4};  // 0 = oldest
  const auto base = Clock::now() - 1h;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(commit_bytes(*tier, make_key(100 + i), random_bytes(k_entry, 100 + i)));
    set_mtime(tier->entry_path(make_key(100 + i)), base + std::chrono::seconds(10 * age_rank[std::size_t(i)]));
  }
  auto full = tier->usage();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->entries, 10u);

  // The eleventh goes over budget: eviction frees down to 90%, taking the two oldest by mtime (#3, then #7).
  ASSERT_TRUE(commit_bytes(*tier, make_key(110), random_bytes(k_entry, 110)));
  auto after_eviction = tier->usage();
  ASSERT_TRUE(after_eviction);
  EXPECT_LE(double(after_eviction->used.count()), 0.9 * double(10 * k_entry));
  EXPECT_FALSE(path_exists(tier->entry_path(make_key(103))));
  EXPECT_FALSE(path_exists(tier->entry_path(make_key(107))));
  EXPECT_EQ(tier->counters().snapshot().evictions, 2u);

  // The twelfth fits again.
  ASSERT_TRUE(commit_bytes(*tier, make_key(111), random_bytes(k_entry, 111)));
  auto final_usage = tier->usage();
  ASSERT_TRUE(final_usage);
  EXPECT_LE(final_usage->used, Bytes{10 * k_entry});
  for (int i = 0; i < 12; ++i) {
    const bool should_be_gone = (i == 3 || i == 7);
    EXPECT_EQ(path_exists(tier->entry_path(make_key(100 + i))), !should_be_gone) << "entry " << i;
  }
}

TEST(FolderTier, EvictionNeverRemovesTheEntryJustCommitted) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{1000};
  auto tier = make_folder(options);
  const ShardKey small = make_key(120);
  const ShardKey big = make_key(121);
  ASSERT_TRUE(commit_bytes(*tier, small, random_bytes(500, 120)));
  set_mtime_ago(tier->entry_path(small), 10s);

  // The new entry alone exceeds the low watermark (900), and its mtime is made the oldest of the tier, so that
  // only the "never the entry just committed" rule can save it.
  const std::string big_bytes = random_bytes(950, 121);
  auto staged = tier->begin(big);
  ASSERT_TRUE(staged);
  ASSERT_TRUE((*staged)->write(big_bytes.data(), big_bytes.size()));
  ASSERT_EQ(staging_paths(*tier).size(), 1u);
  set_mtime_ago(staging_paths(*tier).front(), 1h);
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), big_bytes);
  EXPECT_EQ(read_path(tier->entry_path(big)), big_bytes);
  EXPECT_FALSE(path_exists(tier->entry_path(small)));

  // Even an entry larger than max_bytes on its own survives its own commit.
  const ShardKey huge = make_key(122);
  const std::string huge_bytes = random_bytes(1500, 122);
  auto huge_committed = commit_bytes(*tier, huge, huge_bytes);
  ASSERT_TRUE(huge_committed);
  EXPECT_EQ(read_path(tier->entry_path(huge)), huge_bytes);
}

TEST(FolderTier, MaxAgeNeverExpiresTheEntryJustCommitted) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_age = 1h;
  auto tier = make_folder(options);
  const ShardKey key = make_key(123);
  const std::string bytes = random_bytes(800, 123);

  // The staged data was last written two hours ago (its mtime says so); committing it now must still leave an
  // entry behind: the eviction pass that follows a commit never removes the entry just committed.
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged);
  ASSERT_TRUE((*staged)->write(bytes.data(), bytes.size()));
  ASSERT_EQ(staging_paths(*tier).size(), 1u);
  set_mtime_ago(staging_paths(*tier).front(), 2h);
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), bytes);
  EXPECT_TRUE(path_exists(tier->entry_path(key))) << "the entry just committed was expired by its own commit";
}

TEST(FolderTier, HandleKeepsReadingAllBytesAfterItsEntryIsEvicted) {
  TempDir dir;
  constexpr std::size_t k_entry = 8192;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{2 * k_entry};
  auto tier = make_folder(options);
  const ShardKey held = make_key(130);
  const std::string held_bytes = random_bytes(k_entry, 130);
  ASSERT_TRUE(commit_bytes(*tier, held, held_bytes));
  set_mtime_ago(tier->entry_path(held), 1h);
  auto handle = tier->peek(held);
  ASSERT_TRUE(handle && *handle);

  ASSERT_TRUE(commit_bytes(*tier, make_key(131), random_bytes(k_entry, 131)));
  ASSERT_TRUE(commit_bytes(*tier, make_key(132), random_bytes(k_entry, 132)));
  ASSERT_FALSE(path_exists(tier->entry_path(held)));  // evicted: it was the oldest
  EXPECT_EQ(read_handle(**handle), held_bytes);
  EXPECT_EQ((*handle)->size(), Bytes{k_entry});
}

TEST(FolderTier, GcRemovesExpiredEntries) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_age = 1h;
  auto tier = make_folder(options);
  const ShardKey old_key = make_key(150);
  const ShardKey fresh_key = make_key(151);
  ASSERT_TRUE(commit_bytes(*tier, old_key, random_bytes(300, 150)));
  ASSERT_TRUE(commit_bytes(*tier, fresh_key, random_bytes(300, 151)));
  set_mtime_ago(tier->entry_path(old_key), 3h);

  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->expired, 1u);
  EXPECT_EQ(report->entries_evicted, 1u);
  EXPECT_EQ(report->bytes_freed, Bytes{300});
  EXPECT_FALSE(path_exists(tier->entry_path(old_key)));
  EXPECT_TRUE(path_exists(tier->entry_path(fresh_key)));
}

}  // namespace
}  // namespace datavo
