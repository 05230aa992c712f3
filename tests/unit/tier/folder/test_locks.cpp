// Tests of the folder tier's per-shard locks (src/tier/folder/locks.cpp): a lock excludes other threads, other tier
// objects on the same path and other processes until it is destroyed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

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
  Pipe locked;   // child -> parent: "I hold the lock"
  Pipe release;  // parent -> child: "let it go"

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    locked.close_read();
    release.close_write();
    int code = 0;
    {
      auto tier = FolderTier::create(folder_options(root));
      if (!tier) ::_exit(2);
      auto lock = (*tier)->lock_shard(key);
      if (!lock) ::_exit(3);
      if (!locked.write_byte()) ::_exit(4);
      if (!release.read_byte()) code = 5;
    }  // the guard is released here
    ::_exit(code);
  }
  ChildGuard guard(child);
  locked.close_write();
  release.close_read();
  ASSERT_TRUE(locked.read_byte()) << "the child could not take the lock";

  auto tier = make_folder(root);
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    auto lock = tier->lock_shard(key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(acquired.load()) << "lock_shard returned while another process held the lock";
  release.write_byte();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_EQ(guard.wait(), 0);
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

}  // namespace
}  // namespace datavo
