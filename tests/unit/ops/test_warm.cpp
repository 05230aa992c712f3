// Tests of datavo::warm (src/ops/warm.cpp) against the fake origin: a cold warm fetches every shard once and tells
// the observer, a second one hits, failed shards and a top tier too small are the report's error, a stop request
// cancels; with a remote tier (the scripted double), every shard is accounted for in it (uploaded, already there,
// failed, skipped), a bucket that missed shards fails the warm, and a warm once it works backfills it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "datavo/warm.hpp"
#include "unit/core/remote_double.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "unit/ops/warm_fixture.hpp"

namespace datavo {
namespace {

class WarmTest : public opstest::WarmFixture {};

class RecordingObserver final : public WarmObserver {
 public:
  void started(std::size_t shards) override { started_with = shards; }
  void origin_bytes(std::int64_t delta) override { bytes += delta; }
  void shard_done(const WarmShardOutcome& outcome) override {
    std::lock_guard lock(mu);
    done.insert(outcome.shard_index);
  }
  void finished() override { ++finished_calls; }

  std::size_t started_with = 0;
  std::atomic<std::int64_t> bytes{0};
  std::mutex mu;
  std::set<std::uint64_t> done;  // guarded by mu
  int finished_calls = 0;
};

TEST_F(WarmTest, AColdWarmFetchesEveryShardOnceAndASecondOneHits) {
  RecordingObserver observer;
  WarmRequest r = request();
  r.observer = &observer;
  auto cold = warm(r);
  ASSERT_TRUE(cold) << cold.error().message;
  EXPECT_FALSE(cold->error);
  EXPECT_EQ(cold->dataset, "fake/train");
  EXPECT_EQ(cold->revision, 7u);
  EXPECT_EQ(cold->keys, (std::vector<std::string>{"audio.wav", "transcript.txt"}));
  EXPECT_EQ(cold->shards, 6u);
  EXPECT_EQ(cold->failed, 0u);
  EXPECT_EQ(cold->origin_shards, 6u);
  EXPECT_EQ(cold->origin_size, cold->size);
  ASSERT_EQ(cold->tiers.size(), 1u);
  EXPECT_EQ(cold->tiers[0].cached, 6u);
  EXPECT_EQ(cold->not_cached, 0u);
  EXPECT_FALSE(cold->uploads) << "no remote tier";
  EXPECT_EQ(origin.ticket_requests.load(), 6);
  EXPECT_EQ(observer.started_with, 6u);
  EXPECT_EQ(observer.done.size(), 6u);
  EXPECT_EQ(observer.bytes.load(), std::int64_t(cold->size.count()));
  EXPECT_EQ(observer.finished_calls, 1);

  auto again = warm(request());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->origin_shards, 0u);
  EXPECT_EQ(again->tiers[0].hits, 6u);
  EXPECT_EQ(again->size, cold->size);
  EXPECT_EQ(origin.ticket_requests.load(), 6) << "a hit makes no request";
}

TEST_F(WarmTest, ShardsThatFailAreCountedAndMakeTheWarmFail) {
  origin.corrupt_bytes = true;
  WarmRequest r = request();
  r.jobs = 2;
  auto report = warm(r);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->failed, 6u);
  ASSERT_EQ(report->failures.size(), 6u);
  EXPECT_EQ(report->failures[0].shard_index, 0u) << "manifest order";
  EXPECT_EQ(report->failures[0].error.code, ErrorCode::integrity);
  EXPECT_EQ(report->not_cached, 6u);
  ASSERT_TRUE(report->error);
  EXPECT_EQ(report->error->code, ErrorCode::remote);
  EXPECT_EQ(report->error->message, "6 of 6 shards could not be warmed");
}

TEST_F(WarmTest, ATopTierThatCannotHoldEveryShardFailsUnlessAllowed) {
  auto probe = warm(request());  // the size of one shard
  ASSERT_TRUE(probe) << probe.error().message;
  const Bytes shard{probe->size.count() / 6};
  cache = opstest::hierarchy(
      {opstest::folder(dir.sub("small"), "small", Bytes{shard.count() * 2}), opstest::folder(dir.sub("big"), "big")});
  auto partial = warm(request());
  ASSERT_TRUE(partial) << partial.error().message;
  ASSERT_TRUE(partial->partial);
  EXPECT_EQ(partial->partial->rfind("only ", 0), 0u) << *partial->partial;
  EXPECT_NE(partial->partial->find("'small'"), std::string::npos) << *partial->partial;
  ASSERT_TRUE(partial->error);
  EXPECT_EQ(partial->error->code, ErrorCode::capacity);
  EXPECT_LT(partial->tiers[0].cached, 6u);

  WarmRequest allowed = request();
  allowed.allow_partial = AllowPartial::yes;
  auto accepted = warm(allowed);
  ASSERT_TRUE(accepted) << accepted.error().message;
  EXPECT_FALSE(accepted->error);
  EXPECT_TRUE(accepted->partial);
}

// A shard found in a slower tier is a hit of that tier and a promotion into the faster one (issue 16: VMs that got
// every shard from the bucket reported 0 hits on it).
TEST_F(WarmTest, AShardPromotedFromASlowerTierIsAHitThere) {
  auto slow = opstest::folder(dir.sub("slow"), "slow");
  cache = opstest::hierarchy({slow});
  auto first = warm(request());
  ASSERT_TRUE(first) << first.error().message;
  cache = opstest::hierarchy({opstest::folder(dir.sub("fast"), "fast"), slow});
  auto promoted = warm(request());
  ASSERT_TRUE(promoted) << promoted.error().message;
  EXPECT_EQ(promoted->origin_shards, 0u);
  ASSERT_EQ(promoted->tiers.size(), 2u);
  EXPECT_EQ(promoted->tiers[0].tier, "fast");
  EXPECT_EQ(promoted->tiers[0].hits, 0u);
  EXPECT_EQ(promoted->tiers[0].promoted_into, 6u);
  EXPECT_EQ(promoted->tiers[1].tier, "slow");
  EXPECT_EQ(promoted->tiers[1].hits, 6u) << "every shard was found in the slow tier";
  EXPECT_EQ(promoted->tiers[1].promoted_into, 0u);
}

// WarmRequest::stop, as the Python SDK sets it on Ctrl-C: no shard is started once it is set, and the warm is a
// cancellation (no report), with what was done before it still cached.
class StopAfterFirstShard final : public WarmObserver {
 public:
  explicit StopAfterFirstShard(std::atomic<bool>& stop) : stop_(stop) {}
  void shard_done(const WarmShardOutcome&) override { stop_.store(true); }

 private:
  std::atomic<bool>& stop_;
};

TEST_F(WarmTest, AStopRequestEndsTheWarmAsACancellation) {
  std::atomic<bool> stop{true};
  WarmRequest r = request();
  r.stop = &stop;
  auto stopped = warm(r);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().code, ErrorCode::cancelled);
  EXPECT_EQ(stopped.error().message, "warm: stopped by the caller");
  EXPECT_EQ(origin.ticket_requests.load(), 0) << "no shard started";

  stop.store(false);
  StopAfterFirstShard observer(stop);
  r.jobs = 1;
  r.observer = &observer;
  auto after_one = warm(r);
  ASSERT_FALSE(after_one);
  EXPECT_EQ(after_one.error().code, ErrorCode::cancelled);
  EXPECT_EQ(origin.ticket_requests.load(), 1) << "one shard, then the stop";
  auto rest = warm(request());
  ASSERT_TRUE(rest) << rest.error().message;
  EXPECT_EQ(rest->tiers[0].hits, 1u) << "the shard warmed before the stop stays cached";
  EXPECT_EQ(rest->origin_shards, 5u);
}

// The stop also ends a wait that does not look at the flag: warm B waits for the shard locks that another process
// holds (a single-threaded child takes them with lock_shard; the keys come from a warm of another folder); B's stop
// ends it, while the holder still holds them.
TEST_F(WarmTest, AStopRequestEndsAWaitForAnotherProcesssShardLocks) {
  std::vector<ShardKey> keys;
  {
    WarmRequest elsewhere = request();
    elsewhere.cache = clienttest::fresh_cache(dir.sub("elsewhere"));
    ASSERT_TRUE(warm(elsewhere));
    auto entries = elsewhere.cache->tiers()[0]->list();
    ASSERT_TRUE(entries) << entries.error().message;
    for (const auto& entry : *entries) keys.push_back(ShardKey{*Instance::parse(entry.instance), entry.hash});
    ASSERT_EQ(keys.size(), 6u);
  }
  shardtest::LockHolderProcess holder(shardtest::folder_options(dir.sub("cache"), "local"), keys);
  ASSERT_TRUE(holder.started()) << "the child could not take the locks";

  std::atomic<bool> stop{false};
  WarmRequest b = request();
  b.jobs = 6;
  b.stop = &stop;
  std::atomic<bool> returned{false};
  Result<WarmReport> got = Error{ErrorCode::internal, "not run"};
  std::thread waiter([&] {
    got = warm(b);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load()) << "warm B did not wait for the locks";
  stop = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!returned.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(returned.load()) << "warm B still waits for the locks 5 s after its stop";
  holder.release();  // lets B go, should it still wait
  waiter.join();
  EXPECT_EQ(holder.wait(), 0);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::cancelled) << got.error().message;
  EXPECT_EQ(origin.shard_requests.load(), 6) << "B downloaded nothing (the 6 downloads are the other folder's warm)";
}

// ---------------------------------------------------------------------------------------------------------------
// A writable remote tier: per-tier upload counts, the exit rule, backfill.

class WarmRemoteTest : public opstest::WarmFixture {
 protected:
  WarmRemoteTest() { use_hierarchy(); }
  // A hierarchy (fresh breakers, as a new process has) over the same folder tier and bucket.
  void use_hierarchy() { cache = opstest::hierarchy({opstest::folder(dir.sub("local"), "local"), bucket}); }
  std::shared_ptr<shardtest::ScriptedRemote> bucket = std::make_shared<shardtest::ScriptedRemote>("bucket");
};

TEST_F(WarmRemoteTest, EveryShardIsCountedInTheBucketAndHeldCountsEveryTierNotOnlyTheFastest) {
  auto cold = warm(request());
  ASSERT_TRUE(cold) << cold.error().message;
  EXPECT_FALSE(cold->error);
  ASSERT_EQ(cold->tiers.size(), 2u);
  EXPECT_FALSE(cold->tiers[0].uploads) << "a folder tier has no upload row";
  EXPECT_EQ(cold->tiers[0].held, 6u);
  EXPECT_EQ(cold->tiers[1].cached, 0u) << "the fastest copy is local";
  EXPECT_EQ(cold->tiers[1].held, 6u) << "but the bucket holds every shard too";
  ASSERT_TRUE(cold->tiers[1].uploads);
  const WarmTierUploads& up = *cold->tiers[1].uploads;
  EXPECT_EQ(up.uploaded, 6u);
  EXPECT_EQ(up.already_present + up.failed + up.skipped, 0u);
  EXPECT_FALSE(up.failed_reason);
  ASSERT_TRUE(cold->uploads);
  EXPECT_EQ(cold->uploads->uploaded, 6u);
  EXPECT_EQ(bucket->uploads_started.load(), 6) << "the backfill found them there: no second upload";

  auto again = warm(request());
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->tiers[1].uploads->uploaded, 0u);
  EXPECT_EQ(again->tiers[1].uploads->already_present, 6u);
  EXPECT_EQ(again->uploads->already_present, 0u) << "no upload was attempted";
}

TEST_F(WarmRemoteTest, ABucketDownForTheWholeWarmFailsItUnlessAllowedAndTheNextWarmBackfillsIt) {
  bucket->fail_lookups = true;
  bucket->fail_uploads = true;
  auto down = warm(request());
  ASSERT_TRUE(down) << down.error().message;
  EXPECT_EQ(down->failed, 0u) << "every shard is cached locally";
  EXPECT_EQ(down->tiers[1].held, 0u);
  ASSERT_TRUE(down->tiers[1].uploads);
  const WarmTierUploads& up = *down->tiers[1].uploads;
  EXPECT_EQ(up.uploaded + up.already_present, 0u);
  EXPECT_EQ(up.failed + up.skipped, 6u);
  EXPECT_GT(up.skipped, 0u);
  ASSERT_TRUE(up.skipped_reason);
  EXPECT_EQ(up.skipped_reason->rfind("tier down: ", 0), 0u) << *up.skipped_reason;
  EXPECT_EQ(down->uploads->failed + down->uploads->skipped, 6u) << "the sum is truthful too";
  ASSERT_TRUE(down->error);
  EXPECT_EQ(down->error->code, ErrorCode::remote);
  EXPECT_EQ(down->error->message.rfind("tier 'bucket' holds 0 of the 6 shards:", 0), 0u) << down->error->message;
  EXPECT_NE(down->error->message.find("--allow-partial"), std::string::npos) << down->error->message;

  WarmRequest allowed = request();
  allowed.allow_partial = AllowPartial::yes;
  auto accepted = warm(allowed);
  ASSERT_TRUE(accepted) << accepted.error().message;
  EXPECT_FALSE(accepted->error);
  ASSERT_TRUE(accepted->partial);
  EXPECT_NE(accepted->partial->find("tier 'bucket' holds 0 of the 6 shards"), std::string::npos);

  bucket->fail_lookups = false;
  bucket->fail_uploads = false;
  use_hierarchy();
  const int tickets = origin.ticket_requests.load();
  auto backfilled = warm(request());
  ASSERT_TRUE(backfilled) << backfilled.error().message;
  EXPECT_FALSE(backfilled->error);
  EXPECT_EQ(backfilled->origin_shards, 0u);
  EXPECT_EQ(origin.ticket_requests.load(), tickets) << "uploaded from the local copy, not fetched again";
  EXPECT_EQ(backfilled->tiers[0].hits, 6u);
  EXPECT_EQ(backfilled->tiers[1].uploads->uploaded, 6u);
  EXPECT_EQ(backfilled->tiers[1].held, 6u);
  auto listed = bucket->inner().list();
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(listed->size(), 6u);
}

}  // namespace
}  // namespace datavo
