// Tests of the folder tier's eviction (src/tier/folder/eviction.cpp): LRU by mtime down to the low watermark, max_age,
// never the entry just committed, readers that outlive their entry, gc, read-only tiers.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

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

// Order hints and plain LRU on one tier: eviction takes hinted entries by their places and the others by their mtimes,
// in one order; the entries no hint names keep their LRU order relative to each other.
TEST(FolderTier, EvictionFollowsPlacesAndKeepsTheLruOrderOfUnhintedEntries) {
  TempDir dir;
  constexpr std::size_t k_entry = 4096;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{10 * k_entry};
  auto tier = make_folder(options);
  const auto now = Clock::now();
  // Five entries of another job, read 10, 20, ... 50 minutes ago (the oldest: #204).
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(commit_bytes(*tier, make_key(200 + i), random_bytes(k_entry, 200 + i)));
    set_mtime(tier->entry_path(make_key(200 + i)), now - std::chrono::minutes(10 * (i + 1)));
  }
  // Five of a hinted job, installed just now; placed so that #300 is needed furthest away (as if read 45 min ago),
  // then #301 (25 min), ... #304 needed soonest.
  const std::array<int, 5> minutes = {45, 25, 15, 5, 1};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(commit_bytes(*tier, make_key(300 + i), random_bytes(k_entry, 300 + i)));
    auto placed = tier->place(make_key(300 + i), now - std::chrono::minutes(minutes[std::size_t(i)]));
    ASSERT_TRUE(placed && *placed);
  }
  // Hits on the hinted entries leave them where the hints put them.
  for (int key : {300, 301, 302, 303, 304}) ASSERT_TRUE(tier->open(make_key(std::uint64_t(key))));
  // New entries, one by one: every other commit goes over budget and frees two entries (down to 90%). The order is
  // #204 (50 min), #300 (45), #203 (40), #202 (30), #301 (25), #201 (20), #302 (15), #200 (10).
  const std::vector<int> order = {204, 300, 203, 202, 301, 201, 302, 200};
  for (int round = 0; round < 7; ++round) {
    ASSERT_TRUE(commit_bytes(*tier, make_key(400 + round), random_bytes(k_entry, 400 + round)));
    for (std::size_t i = 0; i < order.size(); ++i) {
      const bool gone = i < std::size_t(2 * (round / 2 + 1));
      EXPECT_EQ(path_exists(tier->entry_path(make_key(std::uint64_t(order[i])))), !gone)
          << "after commit " << round << ": entry " << order[i];
    }
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

// ---------------------------------------------------------------------------------------------------------------
// The pass against a full sort

struct Planted {
  std::string instance;
  std::string hex;
  std::uint64_t size = 0;
  int minutes = 0;  // mtime: this many minutes after the test's base time
  bool sidecar = false;

  std::string id() const { return instance + "/" + hex; }
  auto order() const { return std::tie(minutes, instance, hex); }
};

struct ExpectedPass {
  std::set<std::string> evicted;
  std::uint64_t expired = 0;
  std::uint64_t bytes_freed = 0;
  std::uint64_t used_after = 0;
};

// Today's policy over a full sort: entries older than the cutoff go (never `keep`), then, over max_bytes, the oldest
// by (mtime, instance, hash) down to the low watermark. `other_bytes`: files that count but are not entries.
ExpectedPass reference_pass(std::vector<Planted> all, std::uint64_t other_bytes, std::optional<int> expire_up_to,
                            std::optional<std::uint64_t> max_bytes, double low_watermark,
                            const std::string& keep = {}) {
  ExpectedPass out;
  std::uint64_t used = other_bytes;
  for (const auto& e : all) used += e.size;
  std::sort(all.begin(), all.end(), [](const Planted& a, const Planted& b) { return a.order() < b.order(); });
  auto drop = [&](const Planted& e) {
    out.evicted.insert(e.id());
    out.bytes_freed += e.size;
    used -= e.size;
  };
  for (const auto& e : all) {
    if (expire_up_to && e.minutes <= *expire_up_to && e.id() != keep) {
      drop(e);
      ++out.expired;
    }
  }
  if (max_bytes && used > *max_bytes) {
    const auto target = std::uint64_t(double(*max_bytes) * low_watermark);
    for (const auto& e : all) {
      if (used <= target) break;
      if (!out.evicted.count(e.id()) && e.id() != keep) drop(e);
    }
  }
  out.used_after = used;
  return out;
}

// Entries written straight into the tier's instance directories (a raw file is an entry to the scan), with mtimes
// set by utimensat; some with a (empty) sidecar.
std::vector<Planted> plant_entries(const std::string& root, std::mt19937_64& rng, std::size_t n,
                                   Clock::time_point base) {
  std::vector<Planted> all;
  for (std::size_t i = 0; i < n; ++i) {
    Planted e{std::string(1, char('a' + rng() % 3)), make_key(rng()).hash.hex(), 1 + rng() % 3000, int(rng() % 60),
              rng() % 4 == 0};
    std::filesystem::create_directories(root + "/" + e.instance);
    const std::string path = root + "/" + e.instance + "/" + e.hex + ".tar";
    write_file(path, std::string(e.size, 'x'));
    set_mtime(path, base + std::chrono::minutes(e.minutes));
    if (e.sidecar) write_file(root + "/" + e.instance + "/" + e.hex + ".sha256", "");
    all.push_back(std::move(e));
  }
  return all;
}

std::set<std::string> gone_entries(const std::string& root, const std::vector<Planted>& all) {
  std::set<std::string> out;
  for (const auto& e : all) {
    const std::string stem = root + "/" + e.instance + "/" + e.hex;
    if (!path_exists(stem + ".tar")) out.insert(e.id());
    // A sidecar goes with its entry, and only then.
    if (e.sidecar) {
      EXPECT_EQ(path_exists(stem + ".sha256"), path_exists(stem + ".tar")) << e.id();
    }
  }
  return out;
}

TEST(FolderTier, EvictionPassMatchesAFullSortOnRandomTiers) {
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempDir dir;
    const std::string root = tier_root(dir);
    std::mt19937_64 rng(seed);
    // Entries of the last 60 minutes of a base 10 h ago; max_age 9 h 30 expires those of the first 30 minutes (the
    // cutoff falls between whole minutes, on either side of which the entries are).
    const auto base = Clock::now() - 10h;
    const auto all = plant_entries(root, rng, 50 + rng() % 250, base);
    std::uint64_t total = 0;
    for (const auto& e : all) total += e.size;
    auto options = folder_options(root);
    std::optional<int> expire_up_to;
    if (seed % 3 != 0) {
      options.max_age = std::chrono::minutes(9 * 60 + 30) + 20s;
      expire_up_to = 29;
    }
    options.max_bytes = Bytes{total * (50 + rng() % 60) / 100};  // from half the tier to more than all of it
    options.low_watermark = 0.5 + double(rng() % 50) / 100;
    const ExpectedPass expected =
        reference_pass(all, 0, expire_up_to, options.max_bytes->count(), options.low_watermark);
    auto tier = make_folder(options);

    auto dry = tier->gc(DryRun::yes);
    ASSERT_TRUE(dry);
    EXPECT_TRUE(gone_entries(root, all).empty()) << "a dry run removed entries";
    EXPECT_EQ(dry->entries_evicted, expected.evicted.size());
    EXPECT_EQ(dry->expired, expected.expired);
    EXPECT_EQ(dry->bytes_freed, Bytes{expected.bytes_freed});
    EXPECT_EQ(dry->used_after, Bytes{expected.used_after});

    auto report = tier->gc(DryRun::no);
    ASSERT_TRUE(report);
    EXPECT_EQ(gone_entries(root, all), expected.evicted);
    EXPECT_EQ(report->entries_evicted, expected.evicted.size());
    EXPECT_EQ(report->expired, expected.expired);
    EXPECT_EQ(report->bytes_freed, Bytes{expected.bytes_freed});
    EXPECT_EQ(report->used_after, Bytes{expected.used_after});
    EXPECT_EQ(report->entries_bytes_after, Bytes{expected.used_after});
    EXPECT_EQ(tier->counters().snapshot().evictions, expected.evicted.size());
  }
}

TEST(FolderTier, EvictionPassAfterACommitMatchesAFullSortAndKeepsTheEntryJustCommitted) {
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    TempDir dir;
    const std::string root = tier_root(dir);
    std::mt19937_64 rng(100 + seed);
    const auto base = Clock::now() - 10h;
    auto all = plant_entries(root, rng, 50 + rng() % 150, base);
    std::uint64_t total = 0;
    for (const auto& e : all) total += e.size;
    auto options = folder_options(root);
    options.max_age = std::chrono::minutes(9 * 60 + 30) + 20s;
    options.max_bytes = Bytes{total * (50 + rng() % 60) / 100};
    auto tier = make_folder(options);

    // The entry committed was staged long ago: as old as the oldest planted ones, and tied with some. The commit
    // makes room first (the staging file counts, the entry is not one yet), then expires, never the entry itself.
    const ShardKey key = make_key(rng(), "b");
    const std::string bytes = random_bytes(1 + rng() % 3000, seed);
    auto staged = tier->begin(key);
    ASSERT_TRUE(staged);
    ASSERT_TRUE((*staged)->write(bytes.data(), bytes.size()));
    set_mtime(staging_paths(*tier).front(), base);
    const ExpectedPass before = reference_pass(all, bytes.size(), 29, options.max_bytes->count(), 0.9);
    std::vector<Planted> left;
    for (const auto& e : all) {
      if (!before.evicted.count(e.id())) left.push_back(e);
    }
    left.push_back(Planted{"b", key.hash.hex(), bytes.size(), 0, false});
    const ExpectedPass after = reference_pass(left, 0, 29, options.max_bytes->count(), 0.9, left.back().id());
    ASSERT_TRUE((*staged)->commit());

    std::set<std::string> expected = before.evicted;
    expected.insert(after.evicted.begin(), after.evicted.end());
    EXPECT_EQ(gone_entries(root, all), expected);
    EXPECT_TRUE(path_exists(tier->entry_path(key)));
  }
}

}  // namespace
}  // namespace datavo
