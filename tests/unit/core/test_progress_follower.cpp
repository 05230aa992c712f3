// Tests of ProgressFollower (src/core/progress_follower.cpp): while a call waits for the single-flight lock, the
// landing of the holder in another process reaches the call's LandingObserver as a landing of its own would: its
// staging file, each verified prefix, and a new staging file after the holder restarted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/progress_follower.hpp"
#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "unit/core/hierarchy_fixtures.hpp"

namespace datavo {
namespace {

using namespace shardtest;

// Records what it is told: "staging:<bytes of the file>" and "verified:<prefix>/<total>".
class Recorder final : public LandingObserver {
 public:
  void staging(ShardHandle staged) override { add("staging:" + read_handle(staged)); }
  void verified(Bytes prefix, Bytes total) override {
    add("verified:" + std::to_string(prefix.count()) + "/" + std::to_string(total.count()));
  }
  // Waits until `n` events came (a bound only against a hang, not a timing assertion); the events so far.
  std::vector<std::string> wait_for(std::size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  void add(std::string event) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(event));
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

TEST(ProgressFollower, FollowsAnotherProcessesStagingFileItsPrefixAndItsNextFile) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(301);
  Pipe step;  // child -> parent: a publication is made
  Pipe next;  // parent -> child: go on
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    step.close_read();
    next.close_write();
    int code = 0;
    {
      auto tier = FolderTier::create(folder_options(root));
      if (!tier) ::_exit(2);
      auto lock = (*tier)->lock_shard(key);
      if (!lock) ::_exit(3);
      auto staged = (*tier)->begin(key);
      if (!staged || !(*staged)->write("first", 5)) ::_exit(4);
      auto reading = (*staged)->open_staged();
      if (!reading) ::_exit(5);
      (*lock)->publish_staging(*reading);
      (*lock)->publish_verified(Bytes{4}, Bytes{5});
      if (!step.write_byte() || !next.read_byte()) ::_exit(6);
      // A restart: a new staging file, verified from its first byte again.
      if (!(*staged)->restart() || !(*staged)->write("again", 5)) ::_exit(7);
      auto again = (*staged)->open_staged();
      if (!again) ::_exit(8);
      (*lock)->publish_staging(*again);
      (*lock)->publish_verified(Bytes{5}, Bytes{5});
      if (!step.write_byte() || !next.read_byte()) code = 9;
    }
    ::_exit(code);
  }
  ChildGuard guard(child);
  step.close_write();
  next.close_read();
  ASSERT_TRUE(step.read_byte());

  auto tier = make_folder(root);
  Recorder recorder;
  {
    core::ProgressFollower follower(*tier, key, recorder);
    EXPECT_EQ(recorder.wait_for(2), (std::vector<std::string>{"staging:first", "verified:4/5"}));
    next.write_byte();
    ASSERT_TRUE(step.read_byte());
    EXPECT_EQ(recorder.wait_for(4),
              (std::vector<std::string>{"staging:first", "verified:4/5", "staging:again", "verified:5/5"}));
  }
  next.write_byte();
  EXPECT_EQ(guard.wait(), 0);
}

// The same through the whole call: get_or_fetch, waiting for the single-flight lock that another process holds while
// it lands the shard, hands the holder's staging file and verified prefix to its observer before it has the lock;
// once the holder lets the lock go without installing, the call fetches the shard itself.
TEST(ProgressFollower, GetOrFetchWaitingForAnotherProcessPassesTheHoldersLandingToItsObserver) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  const ShardKey key = make_key(302);
  LockHolderProcess holder(folder_options(dir.sub("fast"), "fast"), {key},
                           publish_partial_landing(key, "0123456789", Bytes{6}, Bytes{20}));
  ASSERT_TRUE(holder.started()) << "the child could not publish";

  auto h = hierarchy({fast, slow});
  CountingFetcher fetch(random_bytes(20, 302));
  Recorder recorder;
  std::atomic<bool> done{false};
  std::optional<Result<FetchResult>> got;
  std::thread reader([&] {
    got.emplace(h->get_or_fetch(key, fetch.fetcher(), {}, &recorder));
    done = true;
  });
  auto followed = recorder.wait_for(2);
  EXPECT_FALSE(done.load()) << "get_or_fetch did not wait for the lock held by another process";
  EXPECT_EQ(fetch.calls(), 0);
  followed.resize(std::min<std::size_t>(followed.size(), 2));
  EXPECT_EQ(followed, (std::vector<std::string>{"staging:0123456789", "verified:6/20"}))
      << "the holder's staging file as it stands, and its verified prefix";

  holder.release();
  reader.join();
  EXPECT_EQ(holder.wait(), 0);
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(*got) << got->error().message;
  EXPECT_EQ(read_handle((*got)->handle), fetch.bytes());
  EXPECT_EQ(fetch.calls(), 1) << "the holder installed nothing: the waiter fetches";
  EXPECT_GT(recorder.wait_for(3).size(), 2u) << "the waiter's own landing is observed after the holder's";
}

}  // namespace
}  // namespace datavo
