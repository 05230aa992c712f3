// Tests of util::flock_exclusive (src/util/flock.cpp): the one cancellable wait for an exclusive flock. Another holder
// is a second open file description of the same file, which flock(2) treats as another process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "support/stop_wait.hpp"
#include "support/temp_dir.hpp"
#include "util/flock.hpp"
#include "util/fs.hpp"

namespace datavo::util {
namespace {

using shardtest::TempDir;

UniqueFd open_lock(const std::string& path) {
  return UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
}

// A lock file that `held` holds and `waiting` (another open file description of it) will wait for.
struct HeldLock {
  TempDir dir;
  std::string path = dir.path() + "/x.lock";
  UniqueFd held = open_lock(path);
  UniqueFd waiting = open_lock(path);
  bool taken = held.valid() && waiting.valid() && ::flock(held.get(), LOCK_EX | LOCK_NB) == 0;
};

TEST(FlockExclusive, TakesAFreeLockAndExcludesAnotherHolder) {
  TempDir dir;
  const std::string path = dir.path() + "/x.lock";
  UniqueFd first = open_lock(path);
  UniqueFd second = open_lock(path);
  ASSERT_TRUE(first.valid() && second.valid());
  ASSERT_TRUE(flock_exclusive(first.get(), path));
  EXPECT_NE(::flock(second.get(), LOCK_EX | LOCK_NB), 0) << "the lock taken excludes nobody";
}

TEST(FlockExclusive, WaitsForTheHolderAndTakesTheLockOnceItLetsGo) {
  HeldLock lock;
  ASSERT_TRUE(lock.taken);
  std::atomic<bool> done{false};
  Result<void> got = Error{ErrorCode::internal, "not run"};
  std::thread waiter([&] {
    got = flock_exclusive(lock.waiting.get(), lock.path);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_FALSE(done.load()) << "flock_exclusive returned while another holder held the lock";
  ::flock(lock.held.get(), LOCK_UN);
  waiter.join();
  EXPECT_TRUE(got) << got.error().message;
  EXPECT_NE(::flock(lock.held.get(), LOCK_EX | LOCK_NB), 0) << "the waiter does not hold the lock";
}

TEST(FlockExclusive, AWaiterWhoseWorkIsStoppedLeavesWithCancelledAndTakesNothing) {
  HeldLock lock;
  ASSERT_TRUE(lock.taken);
  stoptest::expect_stopped(stoptest::wait_and_stop([&] { return flock_exclusive(lock.waiting.get(), lock.path); }));
  ::flock(lock.held.get(), LOCK_UN);
  EXPECT_EQ(::flock(lock.held.get(), LOCK_EX | LOCK_NB), 0) << "the stopped waiter took the lock";
}

TEST(FlockExclusive, AnyOtherFailureIsAnErrorNamingTheFileWithItsErrno) {
  auto got = flock_exclusive(-1, "/some/x.lock");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().sys_errno, EBADF);
  EXPECT_NE(got.error().message.find("cannot lock /some/x.lock"), std::string::npos) << got.error().message;
}

}  // namespace
}  // namespace datavo::util
