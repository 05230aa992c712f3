// Tests of the folder tier's directory scans (src/tier/folder/scan.cpp): usage accounting over the whole tier path
// and the sweep of leftovers (staging files of dead writers, orphaned lock files), through FolderTier.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tier/folder/scan.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

// The <host> part of this process's staging file names, as begin() writes them: <host>.<pid>.<rand>...tmp.
std::string staging_host(FolderTier& tier) {
  auto staged = tier.begin(staging_key());
  if (!staged) return {};
  const std::string name = std::filesystem::path(staging_paths(tier).front()).filename().string();
  return name.substr(0, name.find('.'));
}

void make_dir(const std::string& path) { std::filesystem::create_directories(path); }

// ---------------------------------------------------------------------------------------------------------------
// Usage

TEST(Scan, UsageOfATierNotCreatedYetIsZero) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{0});
  EXPECT_EQ(usage->entries, 0u);
  auto listed = tier->list();
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
}

TEST(Scan, UsageCountsEntriesOfEveryInstance) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  ASSERT_TRUE(commit_bytes(*tier, make_key(1, "one"), random_bytes(1000, 1)));
  ASSERT_TRUE(commit_bytes(*tier, make_key(2, "two"), random_bytes(2000, 2)));
  ASSERT_TRUE(commit_bytes(*tier, make_key(3, "two"), random_bytes(3000, 3)));
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{6000});
  EXPECT_EQ(usage->entries, 3u);
}

TEST(Scan, OnlyHashTarNamesInInstanceDirectoriesAreEntriesButEveryFileCounts) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const std::string hex = make_key(5).hash.hex();
  make_dir(root + "/local");
  make_dir(root + "/.staging");
  make_dir(root + "/.quarantine");
  write_random_file(root + "/local/" + hex + ".tar", 100, 1);                  // an entry
  write_random_file(root + "/local/" + hex + ".sha256", 65, 2);                // a sidecar
  write_random_file(root + "/local/" + std::string(64, 'A') + ".tar", 10, 3);  // not lowercase hex
  write_random_file(root + "/.quarantine/" + hex + ".tar", 20, 4);             // quarantined, not an entry
  write_random_file(root + "/.staging/h.1.r.tmp", 30, 5);
  write_random_file(root + "/.stats.json", 40, 6);

  auto totals = folder::scan_tier(root, folder::ScanDetail::totals);
  ASSERT_TRUE(totals);
  EXPECT_EQ(totals->used, Bytes{100 + 65 + 10 + 20 + 30 + 40});
  EXPECT_EQ(totals->entry_count, 1u);
  auto detailed = folder::scan_tier(root, folder::ScanDetail::entries);
  ASSERT_TRUE(detailed);
  ASSERT_EQ(detailed->entries.size(), 1u);
  EXPECT_EQ(detailed->entries[0].instance, "local");
  EXPECT_EQ(detailed->entries[0].hash_hex, hex);
  EXPECT_EQ(detailed->entries[0].size, Bytes{100});
  EXPECT_EQ(detailed->entries[0].path, root + "/local/" + hex + ".tar");

  auto missing = folder::scan_tier(dir.sub("nowhere"), folder::ScanDetail::entries);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->used, Bytes{0});
  EXPECT_TRUE(missing->entries.empty());
}

TEST(Scan, UsageCountsStagingFilesToo) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  ASSERT_TRUE(commit_bytes(*tier, make_key(10), random_bytes(1000, 10)));
  auto staged = tier->begin(staging_key());
  ASSERT_TRUE(staged);
  const std::string in_flight = random_bytes(3000, 11);
  ASSERT_TRUE((*staged)->write(in_flight.data(), in_flight.size()));

  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{4000});
  EXPECT_EQ(usage->entries, 1u);  // a staging file is not an entry
}

TEST(Scan, BudgetCoversStagingFilesAndEvictionNeverTouchesThem) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{10000};
  auto tier = make_folder(options);
  auto staged = tier->begin(staging_key());
  ASSERT_TRUE(staged);
  const std::string in_flight = random_bytes(6000, 20);
  ASSERT_TRUE((*staged)->write(in_flight.data(), in_flight.size()));

  const ShardKey older = make_key(21);
  const ShardKey newer = make_key(22);
  ASSERT_TRUE(commit_bytes(*tier, older, random_bytes(3000, 21)));
  set_mtime_ago(tier->entry_path(older), 1h);
  // Entries alone (6000 bytes) are within budget; with the staging file (12000) the tier is not.
  ASSERT_TRUE(commit_bytes(*tier, newer, random_bytes(3000, 22)));

  EXPECT_FALSE(path_exists(tier->entry_path(older)));
  EXPECT_TRUE(path_exists(tier->entry_path(newer)));
  EXPECT_EQ(staging_paths(*tier).size(), 1u);
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{9000});
}

// ---------------------------------------------------------------------------------------------------------------
// Sweeping staging files

TEST(Scan, GcSweepsTheStagingFileOfADeadWriterAndKeepsALiveOne) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const std::string host = staging_host(*tier);
  ASSERT_FALSE(host.empty());
  const pid_t dead = dead_pid();
  ASSERT_NE(dead, ::getpid());

  const std::string dead_file = root + "/.staging/" + host + "." + std::to_string(dead) + ".0123abcd.tmp";
  const std::string live_file = root + "/.staging/" + host + "." + std::to_string(::getpid()) + ".4567cdef.tmp";
  write_random_file(dead_file, 1000, 1);
  write_random_file(live_file, 1000, 2);

  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->staging_swept, 1u);
  EXPECT_FALSE(path_exists(dead_file));
  EXPECT_TRUE(path_exists(live_file));
}

TEST(Scan, GcSweepsAStaleStagingFileEvenWhenItsWriterLives) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto options = folder_options(root);
  options.stale_staging_age = 1h;
  auto tier = make_folder(options);
  const std::string host = staging_host(*tier);
  const std::string stale = root + "/.staging/" + host + "." + std::to_string(::getpid()) + ".00000001.tmp";
  const std::string foreign = root + "/.staging/otherhost.1.00000002.tmp";
  const std::string fresh_foreign = root + "/.staging/otherhost.1.00000003.tmp";
  write_random_file(stale, 10, 1);
  write_random_file(foreign, 10, 2);
  write_random_file(fresh_foreign, 10, 3);
  set_mtime_ago(stale, 2h);
  set_mtime_ago(foreign, 2h);

  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->staging_swept, 2u);
  EXPECT_FALSE(path_exists(stale));
  EXPECT_FALSE(path_exists(foreign));
  // A fresh staging file of another host cannot be judged by its pid: it stays.
  EXPECT_TRUE(path_exists(fresh_foreign));
}

TEST(Scan, GcKeepsAStagingFileInUseByThisProcess) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  auto staged = tier->begin(make_key(30));
  ASSERT_TRUE(staged);
  ASSERT_TRUE((*staged)->write("partial", 7));
  const auto in_flight = staging_paths(*tier);
  ASSERT_EQ(in_flight.size(), 1u);
  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->staging_swept, 0u);
  EXPECT_TRUE(path_exists(in_flight.front()));
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), "partial");
}

// ---------------------------------------------------------------------------------------------------------------
// Sweeping lock files

TEST(Scan, GcSweepsAnOldUnlockedLockFileAndKeepsAHeldOne) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey orphan_key = make_key(40);
  const ShardKey held_key = make_key(41);

  auto held = tier->lock_shard(held_key);
  ASSERT_TRUE(held);
  const std::string held_file = root + "/.locks/local." + held_key.hash.hex() + ".lock";
  ASSERT_TRUE(path_exists(held_file));
  const std::string orphan_file = root + "/.locks/local." + orphan_key.hash.hex() + ".lock";
  write_file(orphan_file, "somehost 1\n");
  set_mtime_ago(orphan_file, 2min);
  set_mtime_ago(held_file, 2min);

  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->locks_swept, 1u);
  EXPECT_FALSE(path_exists(orphan_file));
  EXPECT_TRUE(path_exists(held_file));

  // The sweep did not break the held lock: another locker still waits for it.
  std::unique_ptr<ShardLock> guard = std::move(*held);
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    auto lock = make_folder(root)->lock_shard(held_key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(acquired.load());
  guard.reset();
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

// A holder killed with -9 leaves its progress record (locks.hpp) when no process takes the lock after it.
TEST(Scan, GcSweepsAnOldProgressRecordWhoseLockNobodyHoldsAndKeepsAHoldersOne) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey held_key = make_key(43);
  auto held = tier->lock_shard(held_key);
  ASSERT_TRUE(held);
  const std::string held_record = root + "/.locks/local." + held_key.hash.hex() + ".lock.progress";
  write_file(held_record, "a live holder's record");
  const std::string orphan_record = root + "/.locks/local." + make_key(44).hash.hex() + ".lock.progress";
  write_file(orphan_record, "a dead holder's record");
  const std::string fresh_record = root + "/.locks/local." + make_key(45).hash.hex() + ".lock.progress";
  write_file(fresh_record, "a record written just now");
  set_mtime_ago(held_record, 2min);
  set_mtime_ago(orphan_record, 2min);
  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->locks_swept, 1u);
  EXPECT_FALSE(path_exists(orphan_record));
  EXPECT_TRUE(path_exists(held_record));
  EXPECT_TRUE(path_exists(fresh_record));
}

TEST(Scan, GcKeepsAFreshUnlockedLockFile) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  make_dir(root + "/.locks");
  const std::string fresh = root + "/.locks/local." + make_key(42).hash.hex() + ".lock";
  write_file(fresh, "");
  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->locks_swept, 0u);
  EXPECT_TRUE(path_exists(fresh));
}

// ---------------------------------------------------------------------------------------------------------------
// Dry runs

TEST(Scan, DryRunDeletesNothingButReports) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto options = folder_options(root);
  options.max_age = 1h;
  auto tier = make_folder(options);
  const std::string host = staging_host(*tier);

  const ShardKey expired = make_key(50);
  const ShardKey fresh = make_key(51);
  ASSERT_TRUE(commit_bytes(*tier, expired, random_bytes(700, 50)));
  ASSERT_TRUE(commit_bytes(*tier, fresh, random_bytes(700, 51)));
  set_mtime_ago(tier->entry_path(expired), 2h);
  const std::string dead_staging = root + "/.staging/" + host + "." + std::to_string(dead_pid()) + ".89abcdef.tmp";
  write_random_file(dead_staging, 100, 52);
  make_dir(root + "/.locks");
  const std::string orphan_lock = root + "/.locks/local." + make_key(53).hash.hex() + ".lock";
  write_file(orphan_lock, "");
  set_mtime_ago(orphan_lock, 2min);

  auto dry = tier->gc(DryRun::yes);
  ASSERT_TRUE(dry);
  EXPECT_EQ(dry->entries_evicted, 1u);
  EXPECT_EQ(dry->expired, 1u);
  EXPECT_EQ(dry->bytes_freed, Bytes{700});
  EXPECT_EQ(dry->staging_swept, 1u);
  EXPECT_EQ(dry->locks_swept, 1u);
  EXPECT_TRUE(path_exists(tier->entry_path(expired)));
  EXPECT_TRUE(path_exists(dead_staging));
  EXPECT_TRUE(path_exists(orphan_lock));
  EXPECT_EQ(tier->counters().snapshot().evictions, 0u);

  // The real run does what the dry run reported.
  auto real = tier->gc(DryRun::no);
  ASSERT_TRUE(real);
  EXPECT_EQ(real->entries_evicted, 1u);
  EXPECT_EQ(real->staging_swept, 1u);
  EXPECT_EQ(real->locks_swept, 1u);
  EXPECT_FALSE(path_exists(tier->entry_path(expired)));
  EXPECT_TRUE(path_exists(tier->entry_path(fresh)));
  EXPECT_FALSE(path_exists(dead_staging));
  EXPECT_FALSE(path_exists(orphan_lock));
}

TEST(Scan, DryRunOfAnOverBudgetTierEvictsNothing) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto writer = make_folder(root);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(commit_bytes(*writer, make_key(60 + i), random_bytes(1000, 60 + i)));

  auto options = folder_options(root);
  options.max_bytes = Bytes{3000};  // over budget by 2000; the low watermark is 2700
  auto tier = make_folder(options);
  auto dry = tier->gc(DryRun::yes);
  ASSERT_TRUE(dry);
  EXPECT_EQ(dry->entries_evicted, 3u);
  EXPECT_EQ(dry->used_after, Bytes{2000});
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->entries, 5u);

  auto real = tier->gc(DryRun::no);
  ASSERT_TRUE(real);
  EXPECT_EQ(real->entries_evicted, 3u);
  usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->entries, 2u);
  EXPECT_LE(usage->used, Bytes{2700});
}

}  // namespace
}  // namespace datavo
