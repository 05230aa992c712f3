// Tests of the folder tier's per-shard locks (src/tier/folder/locks.cpp): a lock excludes other threads, other tier
// objects on the same path and other processes until it is destroyed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/stop_wait.hpp"
#include "support/temp_dir.hpp"
#include "tier/folder/locks.hpp"
#include "util/cancel.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

TEST(FolderTier, LockShardExcludesASecondThread) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(190);
  auto first = tier->lock_shard(key);
  ASSERT_TRUE(first);
  std::unique_ptr<ShardLock> held = std::move(*first);

  // Another shard is not blocked by this one.
  {
    auto other = tier->lock_shard(make_key(191));
    ASSERT_TRUE(other);
  }

  std::atomic<bool> acquired{false};
  std::thread second([&] {
    auto lock = tier->lock_shard(key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(acquired.load()) << "a second lock_shard of the same key returned while the first was held";
  held.reset();
  second.join();
  EXPECT_TRUE(acquired.load());
}

TEST(FolderTier, LockShardExcludesTwoTierObjectsOnOnePath) {
  TempDir dir;
  auto one = make_folder(tier_root(dir));
  auto two = make_folder(tier_root(dir));
  const ShardKey key = make_key(192);
  auto first = one->lock_shard(key);
  ASSERT_TRUE(first);
  std::unique_ptr<ShardLock> held = std::move(*first);

  std::atomic<bool> acquired{false};
  std::thread second([&] {
    auto lock = two->lock_shard(key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(acquired.load());
  held.reset();
  second.join();
  EXPECT_TRUE(acquired.load());
}

TEST(FolderTier, LockShardExcludesAnotherProcess) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(193);
  LockHolderProcess holder(folder_options(root), {key});
  ASSERT_TRUE(holder.started()) << "the child could not take the lock";

  auto tier = make_folder(root);
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    auto lock = tier->lock_shard(key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(acquired.load()) << "lock_shard returned while another process held the lock";
  holder.release();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_EQ(holder.wait(), 0);
}

// The holder's progress (ShardLock::publish_*) as another process reads it (landing_progress, open_landing), and
// gone once the lock is released.
TEST(FolderTierLock, AnotherProcessReadsTheHoldersPublishedProgressUntilTheLockIsReleased) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(195);
  LockHolderProcess holder(folder_options(root), {key},
                           publish_partial_landing(key, "0123456789", Bytes{6}, Bytes{20}));
  ASSERT_TRUE(holder.started()) << "the child could not publish";
  const pid_t child = holder.pid();

  auto tier = make_folder(root);
  auto progress = tier->landing_progress(key);
  ASSERT_TRUE(progress);
  EXPECT_EQ(progress->holder, std::uint64_t(child));
  EXPECT_EQ(progress->verified, Bytes{6});
  EXPECT_EQ(progress->total, Bytes{20});
  auto opened = tier->open_landing(*progress);
  ASSERT_TRUE(opened);
  EXPECT_EQ(read_handle(*opened), "0123456789");
  // Another file at that path is not the one published.
  LandingProgress other = *progress;
  ++other.inode;
  EXPECT_FALSE(tier->open_landing(other));
  EXPECT_FALSE(tier->landing_progress(make_key(196)));

  holder.release();
  EXPECT_EQ(holder.wait(), 0);
  EXPECT_FALSE(tier->landing_progress(key));
  EXPECT_FALSE(path_exists(root + "/.locks/local." + key.hash.hex() + ".lock.progress"));
}

// This process's own holder is not followed through the record (its streams share in memory).
TEST(FolderTierLock, ThisProcessesOwnProgressIsNotOffered) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(197);
  auto lock = tier->lock_shard(key);
  ASSERT_TRUE(lock);
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged);
  auto reading = (*staged)->open_staged();
  ASSERT_TRUE(reading);
  (*lock)->publish_staging(*reading);
  (*lock)->publish_verified(Bytes{1}, Bytes{2});
  EXPECT_TRUE(path_exists(tier_root(dir) + "/.locks/local." + key.hash.hex() + ".lock.progress"));
  EXPECT_FALSE(tier->landing_progress(key));
}

TEST(FolderTierLock, AProgressRecordRoundTripsAndATornOneIsNone) {
  const LandingProgress progress{"/x/.staging/a b.tmp", 7, 42, 1234, Bytes{4096}, Bytes{1 << 20}};
  const std::string record = folder::encode_progress(progress);
  EXPECT_EQ(record.size(), folder::k_progress_record_size);
  auto decoded = folder::decode_progress(record);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->path, progress.path);
  EXPECT_EQ(decoded->device, 7u);
  EXPECT_EQ(decoded->inode, 42u);
  EXPECT_EQ(decoded->holder, 1234u);
  EXPECT_EQ(decoded->verified, Bytes{4096});
  EXPECT_EQ(decoded->total, Bytes{1 << 20});
  // Half of a rewrite: another prefix with the old checksum.
  std::string torn = record;
  torn.replace(torn.find(" 4096 "), 6, " 8192 ");
  EXPECT_FALSE(folder::decode_progress(torn));
  EXPECT_FALSE(folder::decode_progress(record.substr(0, 30)));
  EXPECT_FALSE(folder::decode_progress(std::string(64, '\0')));
}

TEST(FolderTierLock, ALockHoldsItsFileAcrossProcessesAndRemovesItOnRelease) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(194);
  const std::string file = root + "/.locks/local." + key.hash.hex() + ".lock";
  std::unique_ptr<ShardLock> lock;
  {
    auto tier = make_folder(root);
    auto locked = tier->lock_shard(key);
    ASSERT_TRUE(locked) << locked.error().message;
    lock = std::move(*locked);
    ASSERT_NE(tier->lock_mechanism(), LockMechanism::process_only);
  }
  // The tier object is gone; the lock it issued still holds.
  EXPECT_TRUE(lock->across_processes());
  EXPECT_TRUE(path_exists(file));
  lock.reset();
  EXPECT_FALSE(path_exists(file));
}

TEST(FolderTierLock, AReadOnlyTiersLockExcludesThisProcessOnlyAndWritesNothing) {
  TempDir dir;
  const std::string root = tier_root(dir);
  ASSERT_TRUE(commit_bytes(*make_folder(root), make_key(195), "present"));
  auto options = folder_options(root);
  options.access = Access::read_only;
  auto ro = make_folder(options);
  const auto before = list_dir(root);
  auto lock = ro->lock_shard(make_key(196));
  ASSERT_TRUE(lock);
  EXPECT_FALSE((*lock)->across_processes());
  EXPECT_EQ(ro->lock_mechanism(), LockMechanism::process_only);
  EXPECT_EQ(list_dir(root), before);
}

// A waiter whose work is stopped (its thread's util::StopScope token: a SampleStream cancelled or destroyed) leaves
// the wait with `cancelled` at once instead of waiting for the holder, holding nothing; the holder keeps its lock.
using stoptest::expect_stopped;
using stoptest::wait_and_stop;

Result<void> lock_once(FolderTier& tier, const ShardKey& key) {
  auto locked = tier.lock_shard(key);
  if (!locked) return std::move(locked).error();
  return {};
}

TEST(FolderTierLock, AWaitForALockOfThisProcessEndsWhenTheWaitersWorkIsStopped) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(198);
  auto held = tier->lock_shard(key);
  ASSERT_TRUE(held);
  expect_stopped(wait_and_stop([&] { return lock_once(*tier, key); }));
  held->reset();
  EXPECT_TRUE(lock_once(*tier, key)) << "the stopped waiter left the in-process slot taken";
}

TEST(FolderTierLock, AWaitForAnotherProcesssLockEndsWhenTheWaitersWorkIsStopped) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(199);
  const std::string file = root + "/.locks/local." + key.hash.hex() + ".lock";
  LockHolderProcess holder(folder_options(root), {key});
  ASSERT_TRUE(holder.started()) << "the child could not take the lock";

  auto tier = make_folder(root);
  ASSERT_EQ(tier->lock_mechanism(), LockMechanism::flock);
  expect_stopped(wait_and_stop([&] { return lock_once(*tier, key); }));
  EXPECT_TRUE(path_exists(file)) << "the stopped waiter removed the holder's lock file";
  holder.release();
  EXPECT_EQ(holder.wait(), 0);
  EXPECT_TRUE(lock_once(*tier, key)) << "the lock could not be taken after the holder let it go";
}

TEST(FolderTierLock, AWaitForAnExclusiveLockFileEndsWhenTheWaitersWorkIsStopped) {
  TempDir dir;
  const std::string path = dir.path() + "/shard.lock";
  auto held = folder::acquire_exclusive_lock_file(path, {});
  ASSERT_TRUE(held) << held.error().message;
  expect_stopped(wait_and_stop([&]() -> Result<void> {
    auto fd = folder::acquire_exclusive_lock_file(path, {});
    if (!fd) return std::move(fd).error();
    return {};
  }));
  EXPECT_TRUE(path_exists(path)) << "the stopped waiter removed the holder's lock file";
}

}  // namespace
// A commit into a bounded tier waits for the tier's eviction lock (its budget across processes) as for a shard lock:
// a committer whose work is stopped leaves with cancelled, installs nothing, and its staged bytes stay staged.
TEST(FolderTierLock, ACommitWaitingForTheTiersBudgetLockEndsWhenTheCommittersWorkIsStopped) {
  TempDir dir;
  const std::string root = tier_root(dir);
  FolderTierOptions options = folder_options(root);
  options.max_bytes = MiB(1);
  auto tier = make_folder(options);
  const ShardKey key = make_key(200);
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged) << staged.error().message;
  ASSERT_TRUE((*staged)->write("0123456789", 10));
  // Another holder of the budget: a second open file description, as another process has.
  std::filesystem::create_directories(root + "/.locks");
  util::UniqueFd budget(::open((root + "/.locks/evict.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(budget.valid());
  ASSERT_EQ(::flock(budget.get(), LOCK_EX | LOCK_NB), 0);

  expect_stopped(wait_and_stop([&]() -> Result<void> {
    auto committed = (*staged)->commit();
    if (!committed) return std::move(committed).error();
    return {};
  }));
  EXPECT_FALSE(path_exists(tier->entry_path(key))) << "the stopped commit installed the shard";
  ASSERT_EQ(staging_paths(*tier).size(), 1u) << "the staged bytes stay staged until the transaction ends";

  ::flock(budget.get(), LOCK_UN);
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed) << committed.error().message;
  EXPECT_EQ(read_handle(*committed), "0123456789");
}

}  // namespace datavo
