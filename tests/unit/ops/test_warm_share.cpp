// Tests of a region's share in a warm (src/ops/warm_share.cpp, RegionShare in datavo/warm.hpp): parsing "I/N";
// two VMs (hierarchies with folder tiers of their own over one scripted bucket) warming while the bucket is down
// fetch each shard from the origin once, the owner's, and read the others' from the bucket once it is back; a
// member that never uploads its share is waited for at most the share's wait, then its shards are fetched here;
// with the bucket up, the leases decide and nothing is deferred.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "datavo/warm.hpp"
#include "unit/core/hierarchy_fixtures.hpp"
#include "unit/core/remote_double.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "unit/ops/warm_fixture.hpp"

namespace datavo {
namespace {

using namespace std::chrono_literals;

TEST(RegionShareTest, ParsesMemberOfCountAndRefusesTheRest) {
  auto share = RegionShare::parse("3/8");
  ASSERT_TRUE(share) << share.error().message;
  EXPECT_EQ(share->index, 3u);
  EXPECT_EQ(share->count, 8u);
  EXPECT_TRUE(share->owns(3));
  EXPECT_TRUE(share->owns(11));
  EXPECT_FALSE(share->owns(4));
  EXPECT_TRUE(RegionShare::parse("0/1"));
  for (const char* bad : {"8/8", "1/0", "3", "a/8", "3/b", "-1/8", "3/8/9", "", "/8", "3/"}) {
    auto refused = RegionShare::parse(bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(refused.error().message.find(std::string("'") + bad + "'"), std::string::npos) << refused.error().message;
  }
}

// Records what warm() says when it starts waiting for the region.
class WaitWatcher final : public WarmObserver {
 public:
  void waiting_for_region(std::size_t deferred, Seconds left) override {
    deferred_ = deferred;
    left_ = left;
    calls_.fetch_add(1);
  }
  int calls() const { return calls_.load(); }
  std::size_t deferred() const { return deferred_; }  // once calls() > 0
  Seconds left() const { return left_; }              // once calls() > 0

 private:
  std::atomic<int> calls_{0};
  std::size_t deferred_ = 0;
  Seconds left_{0};
};

// The bucket's switch: down fails lookups, uploads and the leases; up grants every lease at once.
class RegionTest : public opstest::WarmFixture {
 protected:
  RegionTest() {
    bucket->lease = [this](const ShardKey&) -> Result<LeaseAttempt> {
      if (down) return Error{ErrorCode::remote, "bucket is down"};
      LeaseAttempt granted;
      granted.held = std::make_unique<shardtest::FlagLease>(std::make_shared<std::atomic<bool>>(false));
      return granted;
    };
    // The lease granted above, as the tier shows it while the fetch runs under it.
    bucket->holder = [this](const ShardKey&) -> Result<std::optional<LeaseAttempt>> {
      if (down) return Error{ErrorCode::remote, "bucket is down"};
      LeaseAttempt live;
      live.holder = "this vm";
      live.expires = std::chrono::system_clock::now() + 60s;
      return std::optional<LeaseAttempt>{std::move(live)};
    };
  }
  void set_down(bool is_down) {
    down = is_down;
    bucket->fail_lookups = is_down;
    bucket->fail_uploads = is_down;
  }
  // VM `member` of `count`: its own folder tier and manifest cache, the shared bucket, jobs 1 (shards in order).
  WarmRequest vm(std::size_t member, std::size_t count, Seconds wait = 60s) {
    WarmRequest r = request();
    const std::string name = "vm" + std::to_string(member);
    r.cache = opstest::hierarchy({opstest::folder(dir.sub(name), name), bucket});
    r.origin = clienttest::client_options(origin.base_url(), dir.sub(name + "-manifests"));
    r.jobs = 1;
    RegionShare share;
    share.index = member;
    share.count = count;
    share.wait = wait;
    r.share = share;
    return r;
  }
  std::size_t in_bucket() {
    auto listed = bucket->inner().list();
    return listed ? listed->size() : 0;
  }

  shardtest::MovableBreakerClock breakers;  // before any hierarchy: theirs are made on it
  std::shared_ptr<shardtest::ScriptedRemote> bucket = std::make_shared<shardtest::ScriptedRemote>("bucket");
  std::atomic<bool> down{false};
};

TEST_F(RegionTest, DuringAnOutageEachShardIsFetchedOnceByItsOwnerAndTheOthersReadItFromTheBucket) {
  set_down(true);
  WarmRequest first = vm(0, 2), second = vm(1, 2);
  WaitWatcher first_watch, second_watch;
  first.observer = &first_watch;
  second.observer = &second_watch;
  Result<WarmReport> one = Error{ErrorCode::internal, "not run"}, two = Error{ErrorCode::internal, "not run"};
  {
    std::jthread a([&] { one = warm(first); });
    std::jthread b([&] { two = warm(second); });
    // Once both say that they wait for the region, their workers are done: each has fetched its own 3 and deferred
    // the other's 3, with the bucket down.
    for (int i = 0; i < 2000 && (first_watch.calls() == 0 || second_watch.calls() == 0); ++i)
      std::this_thread::sleep_for(5ms);
    ASSERT_EQ(first_watch.calls(), 1);
    ASSERT_EQ(second_watch.calls(), 1);
    EXPECT_EQ(origin.ticket_requests.load(), 6);
    for (const WaitWatcher* watch : {&first_watch, &second_watch}) {
      EXPECT_EQ(watch->deferred(), 3u);
      EXPECT_GT(watch->left(), 50s) << "the 60 s wait runs from the first deferral";
      EXPECT_LE(watch->left(), 60s);
    }
    EXPECT_EQ(in_bucket(), 0u) << "nothing could be uploaded yet";
    set_down(false);
    breakers.advance(11min);  // past any cooldown: the next call through each breaker is its trial
  }
  for (auto* report : {&one, &two}) {
    ASSERT_TRUE(*report) << report->error().message;
    EXPECT_FALSE((*report)->error) << (*report)->error->message;
    EXPECT_EQ((*report)->failed, 0u);
    EXPECT_EQ((*report)->origin_shards, 3u) << "its own share only";
    ASSERT_TRUE((*report)->share);
    EXPECT_EQ((*report)->share->deferred, 3u);
    EXPECT_EQ((*report)->share->from_region, 3u) << "the other's share came from the bucket";
    EXPECT_EQ((*report)->share->fetched_after_wait, 0u);
    EXPECT_EQ((*report)->tiers[0].held, 6u) << "every shard is local now";
    EXPECT_EQ((*report)->tiers[1].held, 6u);
  }
  EXPECT_EQ(origin.ticket_requests.load(), 6) << "one origin fetch per shard for the region";
  EXPECT_EQ(in_bucket(), 6u);
}

TEST_F(RegionTest, AMemberThatNeverUploadsIsWaitedForAtMostTheWaitThenItsShardsAreFetchedHere) {
  set_down(true);
  WarmRequest alone = vm(0, 2, 1s);
  WaitWatcher watch;
  alone.observer = &watch;
  auto report = warm(alone);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(watch.calls(), 1);
  EXPECT_EQ(watch.deferred(), 3u);
  EXPECT_LE(watch.left(), 1s);
  EXPECT_EQ(report->failed, 0u);
  EXPECT_EQ(report->origin_shards, 6u) << "its own 3, then the 3 nobody uploaded";
  ASSERT_TRUE(report->share);
  EXPECT_EQ(report->share->deferred, 3u);
  EXPECT_EQ(report->share->from_region, 0u);
  EXPECT_EQ(report->share->fetched_after_wait, 3u);
  EXPECT_GT(report->share->waited.count(), 0.0) << "it waited for the region before fetching";
  EXPECT_EQ(report->tiers[0].held, 6u);
  ASSERT_TRUE(report->error) << "the bucket is still down: the warm says it misses the shards";
  EXPECT_EQ(report->error->code, ErrorCode::remote);
}

TEST_F(RegionTest, AShardOfAnotherMemberIsNeverFetchedWithoutALiveLease) {
  // The bucket answers lookups (a miss) and says nobody holds the lease, but the lease cannot be taken: the
  // moment an outage ends, when the hierarchy went on without a lease that the tier would show now.
  bucket->lease = [](const ShardKey&) -> Result<LeaseAttempt> { return Error{ErrorCode::remote, "lease refused"}; };
  bucket->holder = [](const ShardKey&) -> Result<std::optional<LeaseAttempt>> { return std::optional<LeaseAttempt>{}; };
  auto report = warm(vm(0, 2, 1s));
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_TRUE(report->share);
  EXPECT_EQ(report->share->deferred, 3u) << "the other member's 3 shards were left to it";
  EXPECT_EQ(report->share->fetched_after_wait, 3u) << "and fetched here once the wait ran out, never uploaded";
  EXPECT_EQ(report->origin_shards, 6u);
}

TEST_F(RegionTest, WithTheBucketUpTheLeasesDecideAndNothingIsDeferred) {
  WarmRequest r = vm(1, 3);
  WaitWatcher watch;
  r.observer = &watch;
  auto report = warm(r);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(watch.calls(), 0) << "nothing to wait for";
  EXPECT_FALSE(report->error) << report->error->message;
  EXPECT_EQ(report->origin_shards, 6u) << "every lease was granted here";
  ASSERT_TRUE(report->share);
  EXPECT_EQ(report->share->deferred, 0u);
  EXPECT_EQ(report->share->fetched_after_wait, 0u);
  EXPECT_EQ(in_bucket(), 6u);
}

TEST_F(RegionTest, AShareWhoseIndexIsNotBelowItsCountIsRefusedBeforeAnyRequest) {
  WarmRequest r = vm(0, 2);
  r.share->index = 2;
  auto refused = warm(r);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(origin.manifest_requests.load(), 0);
}

}  // namespace
}  // namespace datavo
