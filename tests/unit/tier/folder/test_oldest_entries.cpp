// Tests of the LRU candidates of an eviction pass (src/tier/folder/oldest_entries.cpp): the entries held are the
// oldest that free the bytes asked, the same as a full sort would pick, and no more than those are held at any time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "support/shard_fixtures.hpp"
#include "tier/folder/oldest_entries.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using SysClock = std::chrono::system_clock;

struct OfferedEntry {
  std::string instance;
  std::string hex;
  std::uint64_t size = 0;
  std::int64_t second = 0;  // mtime, seconds after the epoch

  auto order() const { return std::tie(second, instance, hex); }
};

SysClock::time_point at_second(std::int64_t second) { return SysClock::time_point(std::chrono::seconds(second)); }

// The full-sort reference: every entry sorted by (mtime, instance, hash), the shortest prefix that reaches to_free.
std::vector<std::string> full_sort_reference(std::vector<OfferedEntry> all, std::uint64_t to_free) {
  std::sort(all.begin(), all.end(), [](const OfferedEntry& a, const OfferedEntry& b) { return a.order() < b.order(); });
  std::vector<std::string> out;
  std::uint64_t freed = 0;
  for (const auto& e : all) {
    if (freed >= to_free) break;
    out.push_back(e.instance + "/" + e.hex);
    freed += e.size;
  }
  return out;
}

std::vector<std::string> held_oldest_first(folder::OldestEntries& oldest) {
  std::vector<std::string> out;
  for (const auto& e : oldest.take_oldest_first()) {
    out.push_back(oldest.instance_name(e) + "/" + folder::OldestEntries::hash_hex(e));
  }
  return out;
}

TEST(OldestEntries, HoldsOnlyTheEntriesToEvictNotEveryEntryOffered) {
  // 20,000 entries of 1 KiB in random age order; 1% of their bytes to free: the 200 oldest.
  constexpr std::size_t k_entries = 20'000;
  constexpr std::size_t k_evicted = 200;
  std::vector<std::int64_t> ages(k_entries);
  std::iota(ages.begin(), ages.end(), 1'000'000);
  std::mt19937_64 rng(18);
  std::shuffle(ages.begin(), ages.end(), rng);
  std::vector<OfferedEntry> all;
  folder::OldestEntries oldest(Bytes{k_evicted * 1024});
  std::size_t most_held = 0;
  for (std::size_t i = 0; i < k_entries; ++i) {
    all.push_back(OfferedEntry{"local", make_key(i).hash.hex(), 1024, ages[i]});
    oldest.offer(all.back().instance, all.back().hex, Bytes{1024}, at_second(ages[i]));
    most_held = std::max(most_held, oldest.size());
  }
  // Between offers, never more than the entries to evict; during one, those and the one being offered. Whatever
  // the order of the listing, not the 20,000 offered.
  EXPECT_LE(most_held, k_evicted);
  EXPECT_LE(oldest.peak(), k_evicted + 1);
  EXPECT_EQ(oldest.bytes_held(), Bytes{k_evicted * 1024});
  const auto held = held_oldest_first(oldest);
  EXPECT_EQ(held, full_sort_reference(all, k_evicted * 1024));
  ASSERT_EQ(held.size(), k_evicted);
  EXPECT_EQ(oldest.size(), 0u);
}

TEST(OldestEntries, NothingIsHeldWhenNothingIsToBeFreed) {
  folder::OldestEntries oldest(Bytes{0});
  for (std::size_t i = 0; i < 100; ++i)
    oldest.offer("local", make_key(i).hash.hex(), Bytes{10}, at_second(std::int64_t(i)));
  EXPECT_EQ(oldest.peak(), 0u);
  EXPECT_TRUE(oldest.take_oldest_first().empty());
}

TEST(OldestEntries, TiesInMtimeAreBrokenByInstanceThenHashWhateverTheOrderOffered) {
  // Every entry has the same mtime: the order is the instance's name, then the hash, in any offering order.
  std::vector<OfferedEntry> all;
  for (std::size_t i = 0; i < 60; ++i)
    all.push_back(OfferedEntry{i % 3 == 0 ? "b" : "a", make_key(i).hash.hex(), 5, 7});
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    std::mt19937_64 rng(seed);
    std::shuffle(all.begin(), all.end(), rng);
    folder::OldestEntries oldest(Bytes{5 * 25});
    for (const auto& e : all) oldest.offer(e.instance, e.hex, Bytes{e.size}, at_second(e.second));
    EXPECT_EQ(held_oldest_first(oldest), full_sort_reference(all, 5 * 25)) << "seed " << seed;
  }
}

TEST(OldestEntries, RandomSizesAndAgesMatchTheFullSort) {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    std::mt19937_64 rng(seed);
    const std::size_t n = 1 + rng() % 400;
    std::vector<OfferedEntry> all;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      // Few distinct mtimes (ties), sizes from 0 (an empty entry) to 5000, a few instances.
      all.push_back(OfferedEntry{std::string(1, char('a' + rng() % 3)), make_key(seed * 1000 + i).hash.hex(),
                                 rng() % 5001, std::int64_t(rng() % 50)});
      total += all.back().size;
    }
    // From nothing to more than everything.
    const std::uint64_t to_free = rng() % (total + total / 4 + 2);
    folder::OldestEntries oldest(Bytes{to_free});
    for (const auto& e : all) oldest.offer(e.instance, e.hex, Bytes{e.size}, at_second(e.second));
    EXPECT_EQ(held_oldest_first(oldest), full_sort_reference(all, to_free)) << "seed " << seed;
  }
}

}  // namespace
}  // namespace datavo
