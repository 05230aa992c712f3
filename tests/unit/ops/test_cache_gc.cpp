// Tests of cache_gc() (src/ops/cache_gc.cpp): a dry run evicts nothing, a run evicts to the budget; a remote tier
// with max_age loses its old entries, one without is left to its lifecycle rules.
#include <gtest/gtest.h>

#include <chrono>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "unit/tier/cloud/tiers_on_fake.hpp"

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

TEST(CacheGcTest, SaysWhatItDoesWithEveryTier) {
  TempDir dir;
  MemoryTierOptions memory;
  memory.name = "bucket";
  FolderTierOptions shelf;
  shelf.name = "shelf";
  shelf.path = dir.sub("shelf");
  shelf.access = Access::read_only;
  auto shelf_tier = FolderTier::create(shelf);
  ASSERT_TRUE(shelf_tier) << shelf_tier.error().message;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), make_memory_tier(memory), *shelf_tier});
  opstest::install(*cache, opstest::key_of('1'), "one");
  const CacheGcReport report = cache_gc(*cache, DryRun::no);
  EXPECT_FALSE(report.error);
  ASSERT_EQ(report.tiers.size(), 3u);
  EXPECT_EQ(report.tiers[0].policy, GcPolicy::evict);
  EXPECT_EQ(report.tiers[1].tier, "bucket");
  EXPECT_EQ(report.tiers[1].type, "memory");
  EXPECT_EQ(report.tiers[1].policy, GcPolicy::lifecycle) << "no max_age: its bucket's lifecycle rules, not gc";
  EXPECT_EQ(report.tiers[1].eviction.expired, 0u);
  EXPECT_EQ(report.tiers[2].policy, GcPolicy::read_only);
  EXPECT_EQ(std::string(to_string(GcPolicy::lifecycle)), "lifecycle");
}

// A remote tier with max_age: gc deletes the entries last modified longer ago (a dry run only counts them), leaves
// the younger ones, and counts what is left.
TEST(CacheGcTest, ExpiresTheOldEntriesOfARemoteTierWithMaxAge) {
  TempDir dir;
  auto modified = std::chrono::system_clock::now() - std::chrono::hours(48);
  MemoryTierOptions memory;
  memory.name = "bucket";
  memory.max_age = Seconds{24 * 3600};
  memory.clock = [&modified] { return modified; };
  auto bucket = make_memory_tier(memory);
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), bucket});
  opstest::install(*cache, opstest::key_of('1'), std::string(1000, '1'));
  opstest::install(*cache, opstest::key_of('2'), std::string(2000, '2'));
  modified = std::chrono::system_clock::now() - std::chrono::hours(1);
  opstest::install(*cache, opstest::key_of('3'), std::string(400, '3'));
  ASSERT_EQ(bucket->list()->size(), 3u) << "every install reached the remote tier";

  const CacheGcReport dry = cache_gc(*cache, DryRun::yes);
  EXPECT_FALSE(dry.error);
  ASSERT_EQ(dry.tiers.size(), 2u);
  EXPECT_EQ(dry.tiers[1].policy, GcPolicy::expire);
  EXPECT_EQ(dry.tiers[1].max_age, std::optional<Seconds>(Seconds{24 * 3600}));
  EXPECT_EQ(dry.tiers[1].eviction.expired, 2u);
  EXPECT_EQ(dry.tiers[1].eviction.bytes_freed, Bytes{3000});
  EXPECT_EQ(bucket->list()->size(), 3u) << "a dry run deletes nothing";

  const CacheGcReport run = cache_gc(*cache, DryRun::no);
  EXPECT_FALSE(run.error);
  EXPECT_EQ(run.tiers[1].eviction.expired, 2u);
  EXPECT_EQ(run.tiers[1].eviction.entries_evicted, 2u);
  EXPECT_EQ(run.tiers[1].eviction.bytes_freed, Bytes{3000});
  EXPECT_EQ(run.tiers[1].eviction.used_after, Bytes{400});
  auto left = bucket->list();
  ASSERT_TRUE(left);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].hash, opstest::key_of('3').hash);
  EXPECT_EQ(run.tiers[0].eviction.entries_evicted, 0u) << "the folder tier's own max_age is none";
}

// A remote tier that cannot be listed is a failure of that tier; the others are still collected.
TEST(CacheGcTest, ARemoteTierThatCannotBeListedFailsAlone) {
  TempDir dir;
  MemoryTierOptions memory;
  memory.name = "down";
  memory.max_age = Seconds{60};
  memory.fail_with = ErrorCode::remote;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), make_memory_tier(memory)});
  const CacheGcReport report = cache_gc(*cache, DryRun::no);
  ASSERT_TRUE(report.error);
  EXPECT_EQ(report.error->code, ErrorCode::io);
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].tier, "down");
  ASSERT_EQ(report.tiers.size(), 2u);
  EXPECT_EQ(report.tiers[0].policy, GcPolicy::evict);
}

// A caller's stop (Python's KeyboardInterrupt): gc ends before its next object, deleting nothing more, and says
// cancelled once, as its error, not as a failure of each tier.
TEST(CacheGcTest, AStoppedGcDeletesNothingAndItsErrorIsCancelled) {
  TempDir dir;
  MemoryTierOptions memory;
  memory.name = "bucket";
  memory.max_age = Seconds{24 * 3600};
  memory.clock = [] { return std::chrono::system_clock::now() - std::chrono::hours(48); };
  auto bucket = make_memory_tier(memory);
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), bucket});
  opstest::install(*cache, opstest::key_of('1'), std::string(1000, '1'));
  const std::atomic<bool> stop{true};
  const CacheGcReport report = cache_gc(*cache, DryRun::no, &stop);
  ASSERT_TRUE(report.error);
  EXPECT_EQ(report.error->code, ErrorCode::cancelled) << report.error->message;
  EXPECT_TRUE(report.failures.empty());
  EXPECT_EQ(bucket->list()->size(), 1u) << "the expired entry is not deleted";
}

// A cloud tier with max_age and leftovers: one listing serves the sweep and the expiry (a bucket of many objects is
// many list pages), the old entry and the dead lease go, the young entry stays.
TEST(CacheGcTest, ACloudTierIsListedOnceForItsLeftoversAndItsExpiry) {
  TempDir dir;
  fakecloud::FakeBucket fake(fakecloud::Dialect::s3, "bucket", dir.sub("home"));
  fakecloud::FakeCloud& cloud = fake.cloud;
  auto bucket = fakecloud::make_tier_on(cloud, "bucket", {.name = "bucket", .max_age = Seconds{24 * 3600}}, fake.env);
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), bucket});
  const std::string old_entry = "local/" + std::string(64, 'a') + ".tar";
  const std::string young_entry = "local/" + std::string(64, 'b') + ".tar";
  const std::string dead_lease = "local/.leases/" + std::string(64, 'c');
  cloud.put_object("bucket", old_entry, "old");
  cloud.backdate("bucket", old_entry, std::chrono::hours(48));
  cloud.put_object("bucket", young_entry, "young");
  cloud.put_object("bucket", dead_lease, "dead-vm 4242 0\n");
  cloud.backdate("bucket", dead_lease, std::chrono::hours(1));
  cloud.clear_requests();

  const CacheGcReport report = cache_gc(*cache, DryRun::no);
  EXPECT_FALSE(report.error) << report.error->message;
  ASSERT_EQ(report.tiers.size(), 2u);
  EXPECT_EQ(report.tiers[1].policy, GcPolicy::expire);
  EXPECT_EQ(report.tiers[1].eviction.expired, 1u);
  EXPECT_EQ(report.tiers[1].eviction.used_after, Bytes{5});
  EXPECT_EQ(report.tiers[1].leftovers.expired_leases, 1u);
  EXPECT_EQ(report.tiers[1].leftovers.removed, 1u);
  EXPECT_TRUE(report.tiers[1].leftovers.entries.empty()) << "the listing's entries are not part of the report";
  std::size_t listings = 0;
  for (const auto& r : cloud.requests()) listings += r.op == "ListObjects" || r.op == "ListObjectsV2" ? 1 : 0;
  EXPECT_EQ(listings, 1u);
  EXPECT_FALSE(cloud.object("bucket", old_entry));
  EXPECT_FALSE(cloud.object("bucket", dead_lease));
  EXPECT_TRUE(cloud.object("bucket", young_entry));
}

}  // namespace
}  // namespace datavo
