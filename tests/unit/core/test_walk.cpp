// Tests of the walk (src/core/walk.cpp) through ShardCacheHierarchy: promotion of a local hit, materialization of a
// remote hit, the one landing path that a remote hit and an origin fetch share (a landing tier that fails is
// degraded and the next one tried, the same way for both), the one way a tier is degraded (counters, breaker,
// WARNING or the call's Error), and the integrity checks. Folder tiers live in a fresh temp dir per test; the memory
// tier and the scripted remote (remote_double.hpp) stand in for remote tiers; FullDiskTier for a full disk.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "datavo/hierarchy.hpp"
#include "datavo/memory_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "unit/core/hierarchy_fixtures.hpp"
#include "unit/core/remote_double.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------------------------
// One landing path for a remote hit and an origin fetch

// The room of the full disk: less than any shard below.
constexpr Bytes k_room{1000};

TEST(Walk, ARemoteHitAndAnOriginFetchSkipAFullLandingTierAlikeAndLandInTheNext) {
  TempDir dir;
  auto full = std::make_shared<FullDiskTier>(folder(dir, "full"), k_room);
  auto next = folder(dir, "next");
  auto remote = memory_tier("remote");
  const ShardKey in_bucket = make_key(70);
  const std::string bucket_bytes = random_bytes(5000, 70);
  seed_tier(*remote, dir, in_bucket, bucket_bytes);
  const ShardKey at_origin = make_key(71);
  CountingFetcher origin(random_bytes(5000, 71));

  // One hierarchy per call, so that the two calls meet the same closed breakers.
  Result<FetchResult> hit = Error{ErrorCode::internal, "not run"};
  const std::string hit_log = warnings_of([&] {
    hit = hierarchy({full, next, remote})->get_or_fetch(in_bucket, CountingFetcher("never used").fetcher());
  });
  Result<FetchResult> fetched = Error{ErrorCode::internal, "not run"};
  const std::string fetch_log = warnings_of([&] {
    fetched = hierarchy({full, next, remote})->get_or_fetch(at_origin, origin.fetcher());
  });

  ASSERT_TRUE(hit) << hit.error().message;
  ASSERT_TRUE(fetched) << fetched.error().message;
  EXPECT_EQ(hit->tier_name, "next");
  EXPECT_EQ(hit->source, ServedFrom::promoted);
  EXPECT_EQ(read_handle(hit->handle), bucket_bytes);
  EXPECT_EQ(fetched->tier_name, "next");
  EXPECT_EQ(fetched->source, ServedFrom::fetched);
  EXPECT_EQ(read_handle(fetched->handle), origin.bytes());
  EXPECT_EQ(origin.calls(), 2);  // once into the full tier, once more into the next one

  // The full tier failed its landing (and then its copy) the same way in both calls, with the same WARNINGs.
  const auto hit_warnings = lines_with(hit_log, "tier 'full' (folder)");
  const auto fetch_warnings = lines_with(fetch_log, "tier 'full' (folder)");
  ASSERT_EQ(hit_warnings.size(), 2u) << hit_log;
  EXPECT_EQ(hit_warnings, fetch_warnings) << "a remote hit and an origin fetch report a full landing tier differently";
  EXPECT_NE(hit_warnings[0].find("WARNING: tier 'full' (folder): staging failed, skipping it: cannot write the staging "
                                 "file: No space left on device"),
            std::string::npos)
      << hit_warnings[0];
  EXPECT_NE(hit_warnings[1].find("install failed, skipping it"), std::string::npos) << hit_warnings[1];
  EXPECT_EQ(full->counters().snapshot().errors, 4u);
  EXPECT_FALSE(holds(*full, in_bucket));
  EXPECT_FALSE(holds(*full, at_origin));
  EXPECT_TRUE(staging_is_empty(*full));
  EXPECT_TRUE(staging_is_empty(*next));
}

TEST(Walk, WhenNoLandingTierCanStageTheErrorNamesEachCauseAndNoWarningRepeatsIt) {
  TempDir dir;
  auto full = std::make_shared<FullDiskTier>(folder(dir, "full"), k_room);
  auto read_only = folder(dir, "ro", std::nullopt, Access::read_only);
  auto remote = memory_tier("remote");
  const ShardKey in_bucket = make_key(72);
  seed_tier(*remote, dir, in_bucket, random_bytes(5000, 72));
  const ShardKey at_origin = make_key(73);
  auto h = hierarchy({read_only, full, remote});

  Result<FetchResult> hit = Error{ErrorCode::internal, "not run"};
  const std::string hit_log =
      warnings_of([&] { hit = h->get_or_fetch(in_bucket, CountingFetcher("never used").fetcher()); });
  Result<FetchResult> fetched = Error{ErrorCode::internal, "not run"};
  const std::string fetch_log = warnings_of([&] {
    fetched = hierarchy({read_only, full, remote})
                  ->get_or_fetch(at_origin, CountingFetcher(random_bytes(5000, 73)).fetcher());
  });

  const std::string cause =
      "tier 'full' (folder): staging failed, skipping it: cannot write the staging file: No space "
      "left on device";
  ASSERT_FALSE(hit);
  EXPECT_EQ(hit.error().code, ErrorCode::capacity);
  EXPECT_EQ(hit.error().message, "remote hit for " + in_bucket.hash.hex() +
                                     " on tier 'remote' (memory) has no local landing zone: no folder tier could stage "
                                     "shard " +
                                     in_bucket.hash.hex() + ": " + cause);
  ASSERT_FALSE(fetched);
  EXPECT_EQ(fetched.error().code, ErrorCode::no_space);
  EXPECT_EQ(fetched.error().sys_errno, ENOSPC);
  EXPECT_EQ(fetched.error().message, "no folder tier could stage shard " + at_origin.hash.hex() + ": " + cause);
  EXPECT_TRUE(lines_with(hit_log, "staging failed").empty()) << hit_log;
  EXPECT_TRUE(lines_with(fetch_log, "staging failed").empty()) << fetch_log;
  EXPECT_EQ(full->counters().snapshot().errors, 2u);
  EXPECT_TRUE(staging_is_empty(*full));
}

TEST(Walk, AnExpectedSizeSkipsALandingTierWithoutRoomBeforeAnyByteMoves) {
  TempDir dir;
  auto full = std::make_shared<FullDiskTier>(folder(dir, "full"), k_room);
  auto next = folder(dir, "next");
  auto inner = memory_tier("bucket");
  auto remote = std::make_shared<CountingRemote>(inner, 0ms);
  const std::string bucket_bytes = random_bytes(5000, 74);
  const ShardKey in_bucket = make_key(74);
  seed_tier(*inner, dir, in_bucket, bucket_bytes);
  const ShardKey at_origin = make_key(75);
  CountingFetcher origin(random_bytes(5000, 75));
  const Expectation five_thousand{Bytes{5000}, std::nullopt};

  Result<FetchResult> hit = Error{ErrorCode::internal, "not run"};
  const std::string hit_log = warnings_of([&] {
    hit = hierarchy({full, next, remote})
              ->get_or_fetch(in_bucket, CountingFetcher("never used").fetcher(), five_thousand);
  });
  Result<FetchResult> fetched = Error{ErrorCode::internal, "not run"};
  const std::string fetch_log = warnings_of([&] {
    fetched = hierarchy({full, next, remote})->get_or_fetch(at_origin, origin.fetcher(), five_thousand);
  });
  ASSERT_TRUE(hit) << hit.error().message;
  ASSERT_TRUE(fetched) << fetched.error().message;
  EXPECT_EQ(hit->tier_name, "next");
  EXPECT_EQ(fetched->tier_name, "next");
  const std::string no_room =
      "WARNING: tier 'full' (folder): staging failed, skipping it: its filesystem has no room for 5000 bytes";
  EXPECT_EQ(count_of(hit_log, no_room), 1) << hit_log;
  EXPECT_EQ(count_of(fetch_log, no_room), 1) << fetch_log;
  EXPECT_EQ(remote->downloads(), 1) << "the bucket's bytes should have moved once, into the tier with room";
  EXPECT_EQ(origin.calls(), 1);
}

// ---------------------------------------------------------------------------------------------------------------
// Populate on miss, promote on hit

TEST(Hierarchy, PopulateOnMissInstallsIntoEveryTierAndReturnsTheTopmost) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});
  const ShardKey key = make_key(1);
  CountingFetcher fetch(random_bytes(20000, 1));

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 0u);
  EXPECT_EQ(got->tier_name, "fast");
  EXPECT_EQ(got->source, ServedFrom::fetched);
  EXPECT_EQ(got->handle.path(), fast->entry_path(key));
  EXPECT_EQ(read_handle(got->handle), fetch.bytes());
  EXPECT_EQ(fetch.calls(), 1);

  EXPECT_EQ(read_path(fast->entry_path(key)), fetch.bytes());
  EXPECT_EQ(read_path(slow->entry_path(key)), fetch.bytes());
  EXPECT_TRUE(holds(*remote, key));
  for (auto* tier : {fast.get(), slow.get()}) {
    auto digest = recorded_digest(*tier, key);
    ASSERT_TRUE(digest && *digest) << tier->name();
    EXPECT_EQ(**digest, sha256_of(fetch.bytes())) << tier->name();
    EXPECT_TRUE(staging_is_empty(*tier)) << tier->name();
    EXPECT_EQ(tier->counters().snapshot().installs, 1u) << tier->name();
  }
  EXPECT_EQ(remote->counters().snapshot().installs, 1u);
}

TEST(Hierarchy, PromoteOnHitFromTheSecondTierIntoTheFirst) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto h = hierarchy({fast, slow});
  const ShardKey key = make_key(2);
  const std::string bytes = random_bytes(30000, 2);
  ASSERT_TRUE(commit_bytes(*slow, key, bytes));
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 0u);
  EXPECT_EQ(got->tier_name, "fast");
  EXPECT_EQ(got->source, ServedFrom::promoted);
  EXPECT_EQ(read_handle(got->handle), bytes);
  EXPECT_EQ(fetch.calls(), 0);
  EXPECT_EQ(read_path(fast->entry_path(key)), bytes);
  EXPECT_EQ(fast->counters().snapshot().promotions, 1u);
  EXPECT_EQ(slow->counters().snapshot().hits, 1u);
  auto digest = recorded_digest(*fast, key);
  ASSERT_TRUE(digest && *digest);
  EXPECT_EQ(**digest, sha256_of(bytes));

  // Promotion happens once: the next call finds it in the fast tier directly.
  auto again = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->tier_index, 0u);
  EXPECT_EQ(again->source, ServedFrom::hit);
  EXPECT_EQ(fast->counters().snapshot().promotions, 1u);
  EXPECT_EQ(fetch.calls(), 0);
}

TEST(Hierarchy, PromoteOnHitFromTheThirdTierIntoBothFasterTiers) {
  TempDir dir;
  auto t0 = folder(dir, "t0");
  auto t1 = folder(dir, "t1");
  auto t2 = folder(dir, "t2");
  auto h = hierarchy({t0, t1, t2});
  const ShardKey key = make_key(3);
  const std::string bytes = random_bytes(10000, 3);
  ASSERT_TRUE(commit_bytes(*t2, key, bytes));
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 0u);
  EXPECT_EQ(got->source, ServedFrom::promoted);
  EXPECT_EQ(read_path(t0->entry_path(key)), bytes);
  EXPECT_EQ(read_path(t1->entry_path(key)), bytes);
  EXPECT_EQ(fetch.calls(), 0);
}

TEST(Hierarchy, PromotionThatEveryFasterTierRejectsServesTheSlowerHit) {
  TempDir dir;
  auto tiny = folder(dir, "tiny", Bytes{100});
  auto slow = folder(dir, "slow");
  auto h = hierarchy({tiny, slow});
  const ShardKey key = make_key(4);
  const std::string bytes = random_bytes(5000, 4);
  ASSERT_TRUE(commit_bytes(*slow, key, bytes));
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(got->tier_name, "slow");
  EXPECT_EQ(read_handle(got->handle), bytes);
  EXPECT_FALSE(holds(*tiny, key));
  EXPECT_EQ(tiny->counters().snapshot().capacity_skips, 1u);
  EXPECT_EQ(fetch.calls(), 0);
}

TEST(Hierarchy, TierTooSmallIsSkippedAndTheCallSucceeds) {
  TempDir dir;
  auto tiny = folder(dir, "tiny", Bytes{1000});
  auto big = folder(dir, "big");
  auto h = hierarchy({tiny, big});
  const ShardKey key = make_key(5);
  CountingFetcher fetch(random_bytes(4000, 5));

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(got->tier_name, "big");
  EXPECT_EQ(got->source, ServedFrom::fetched);
  EXPECT_EQ(read_handle(got->handle), fetch.bytes());
  EXPECT_FALSE(holds(*tiny, key));
  EXPECT_TRUE(holds(*big, key));
  EXPECT_EQ(tiny->counters().snapshot().capacity_skips, 1u);
  EXPECT_EQ(big->counters().snapshot().capacity_skips, 0u);
  EXPECT_TRUE(staging_is_empty(*tiny));
  EXPECT_TRUE(staging_is_empty(*big));
}

TEST(Hierarchy, NoTierAcceptsIsCapacityAndLeavesNothingInStaging) {
  TempDir dir;
  auto a = folder(dir, "a", Bytes{1000});
  auto b = folder(dir, "b", Bytes{2000});
  auto h = hierarchy({a, b});
  const ShardKey key = make_key(6);
  CountingFetcher fetch(random_bytes(4000, 6));

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::capacity);
  EXPECT_FALSE(holds(*a, key));
  EXPECT_FALSE(holds(*b, key));
  EXPECT_TRUE(staging_is_empty(*a));
  EXPECT_TRUE(staging_is_empty(*b));
}

TEST(Hierarchy, ReturnedHandleReadsFromTheStartWhateverServedIt) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});
  const std::string bytes = random_bytes(200000, 9);
  ASSERT_TRUE(commit_bytes(*slow, make_key(90), bytes));
  seed_tier(*remote, dir, make_key(91), bytes);
  CountingFetcher fetch(bytes);

  auto sequential_read = [](const ShardHandle& handle) {
    std::string out;
    char buffer[8192];
    for (;;) {
      ssize_t n = ::read(handle.fd(), buffer, sizeof buffer);
      if (n <= 0) break;
      out.append(buffer, std::size_t(n));
    }
    return out;
  };
  auto promoted = h->get_or_fetch(make_key(90), fetch.fetcher());
  auto hit = h->get_or_fetch(make_key(90), fetch.fetcher());
  auto materialized = h->get_or_fetch(make_key(91), fetch.fetcher());
  auto fetched = h->get_or_fetch(make_key(92), fetch.fetcher());
  ASSERT_TRUE(promoted && hit && materialized && fetched);
  EXPECT_EQ(promoted->source, ServedFrom::promoted);
  EXPECT_EQ(hit->source, ServedFrom::hit);
  EXPECT_EQ(materialized->source, ServedFrom::promoted);
  EXPECT_EQ(fetched->source, ServedFrom::fetched);
  for (const FetchResult* r : {&*promoted, &*hit, &*materialized, &*fetched}) {
    EXPECT_EQ(r->handle.size(), Bytes{bytes.size()}) << to_string(r->source);
    EXPECT_TRUE(sequential_read(r->handle) == bytes) << to_string(r->source);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Reads from remote tiers: materialized, then promoted

TEST(Hierarchy, RemoteHitIsMaterializedIntoTheFolderTiersAboveAndReturnsALocalFile) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});
  const ShardKey key = make_key(20);
  const std::string bytes = random_bytes(100000, 20);
  seed_tier(*remote, dir, key, bytes);
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 0u);
  EXPECT_TRUE(h->tiers()[got->tier_index]->supports_direct_read());
  EXPECT_EQ(got->source, ServedFrom::promoted);
  EXPECT_EQ(got->handle.path(), fast->entry_path(key));
  EXPECT_EQ(read_handle(got->handle), bytes);
  EXPECT_EQ(read_path(fast->entry_path(key)), bytes);
  EXPECT_EQ(read_path(slow->entry_path(key)), bytes);
  EXPECT_EQ(fetch.calls(), 0);
  EXPECT_EQ(remote->counters().snapshot().hits, 1u);
  EXPECT_TRUE(staging_is_empty(*fast));
  EXPECT_TRUE(staging_is_empty(*slow));
  auto digest = recorded_digest(*fast, key);
  ASSERT_TRUE(digest && *digest);
  EXPECT_EQ(**digest, sha256_of(bytes));
}

TEST(Hierarchy, RemoteHitLandsInTheTopmostWritableFolderTier) {
  TempDir dir;
  auto ro = folder(dir, "ro", std::nullopt, Access::read_only);
  auto local = folder(dir, "local");
  auto remote = memory_tier("remote");
  auto h = hierarchy({ro, local, remote});
  const ShardKey key = make_key(21);
  seed_tier(*remote, dir, key, "from the bucket");
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(got->tier_name, "local");
  EXPECT_EQ(read_handle(got->handle), "from the bucket");
  EXPECT_FALSE(path_exists(ro->location()));
  EXPECT_EQ(fetch.calls(), 0);
}

TEST(Hierarchy, RemoteHitSkipsAFolderTierTooSmallAndLandsInTheNextOne) {
  TempDir dir;
  auto tiny = folder(dir, "tiny", Bytes{100});
  auto local = folder(dir, "local");
  auto remote = memory_tier("remote");
  auto h = hierarchy({tiny, local, remote});
  const ShardKey key = make_key(22);
  const std::string bytes = random_bytes(5000, 22);
  seed_tier(*remote, dir, key, bytes);

  auto got = h->get_or_fetch(key, CountingFetcher("never used").fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(read_handle(got->handle), bytes);
  EXPECT_FALSE(holds(*tiny, key));
  EXPECT_EQ(tiny->counters().snapshot().capacity_skips, 1u);
  EXPECT_TRUE(staging_is_empty(*tiny));
  EXPECT_TRUE(staging_is_empty(*local));
}

TEST(Hierarchy, RemoteHitWithNoFolderTierAboveIsCapacity) {
  TempDir dir;
  auto remote = memory_tier("remote");
  auto local = folder(dir, "local");
  auto h = hierarchy({remote, local});
  const ShardKey key = make_key(23);
  seed_tier(*remote, dir, key, "stuck in the bucket");
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::capacity);
  EXPECT_EQ(fetch.calls(), 0);
  EXPECT_FALSE(holds(*local, key));
}

TEST(Hierarchy, RemoteHitWithOnlyAReadOnlyFolderTierAboveIsCapacity) {
  TempDir dir;
  auto ro = folder(dir, "ro", std::nullopt, Access::read_only);
  auto remote = memory_tier("remote");
  auto below = folder(dir, "below");
  auto h = hierarchy({ro, remote, below});
  const ShardKey key = make_key(24);
  seed_tier(*remote, dir, key, "no landing zone");
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::capacity);
  EXPECT_EQ(fetch.calls(), 0);
}

TEST(Hierarchy, RemoteHitWithOnlyATooSmallFolderTierAboveIsCapacity) {
  TempDir dir;
  auto tiny = folder(dir, "tiny", Bytes{100});
  auto remote = memory_tier("remote");
  auto h = hierarchy({tiny, remote});
  const ShardKey key = make_key(25);
  seed_tier(*remote, dir, key, random_bytes(5000, 25));
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::capacity);
  EXPECT_EQ(fetch.calls(), 0);
  EXPECT_FALSE(holds(*tiny, key));
  EXPECT_TRUE(staging_is_empty(*tiny));
}

TEST(Hierarchy, RemoteHitIsDownloadedOnceByConcurrentReaders) {
  TempDir dir;
  auto local = folder(dir, "local");
  auto inner = memory_tier("bucket");
  auto remote = std::make_shared<CountingRemote>(inner, 200ms);
  auto h = hierarchy({local, remote});
  const ShardKey key = make_key(53);
  const std::string bytes = random_bytes(64 * 1024, 53);
  seed_tier(*inner, dir, key, bytes);
  CountingFetcher fetch("never used");

  constexpr int k_threads = 8;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      auto got = h->get_or_fetch(key, fetch.fetcher());
      if (got && read_handle(got->handle) == bytes) ++good;
    });
  }
  while (ready.load() < k_threads) std::this_thread::yield();
  go = true;
  for (auto& t : threads) t.join();

  EXPECT_EQ(good.load(), k_threads);
  EXPECT_EQ(fetch.calls(), 0);
  // Spec, "Reads from remote tiers": the blob's network cost is paid once per shard per VM.
  EXPECT_EQ(remote->downloads(), 1) << "concurrent readers each downloaded the shard from the remote tier";
}

// ---------------------------------------------------------------------------------------------------------------
// Degrading

TEST(Hierarchy, FailingRemoteTierDegradesToAMissCountsAndLogs) {
  TempDir dir;
  auto local = folder(dir, "local");
  auto broken = memory_tier("broken-remote", ErrorCode::io);
  auto h = hierarchy({local, broken});
  const ShardKey key = make_key(30);
  CountingFetcher fetch(random_bytes(3000, 30));

  const log::Level saved = log::level();
  log::set_level(log::Level::warning);
  testing::internal::CaptureStderr();
  auto got = h->get_or_fetch(key, fetch.fetcher());
  const std::string logged = testing::internal::GetCapturedStderr();
  log::set_level(saved);

  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 0u);
  EXPECT_EQ(read_handle(got->handle), fetch.bytes());
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_GE(broken->counters().snapshot().errors, 1u);
  EXPECT_NE(logged.find("WARNING"), std::string::npos) << logged;
  EXPECT_NE(logged.find("broken-remote"), std::string::npos) << logged;

  auto again = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->source, ServedFrom::hit);
  EXPECT_EQ(fetch.calls(), 1);
}

TEST(Hierarchy, FailingRemoteTierAboveAFolderHitDoesNotFailTheRead) {
  TempDir dir;
  auto broken = memory_tier("broken-remote", ErrorCode::remote);
  auto local = folder(dir, "local");
  auto h = hierarchy({broken, local});
  const ShardKey key = make_key(31);
  ASSERT_TRUE(commit_bytes(*local, key, "served locally"));
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(read_handle(got->handle), "served locally");
  EXPECT_EQ(fetch.calls(), 0);
  EXPECT_GE(broken->counters().snapshot().errors, 1u);
}

TEST(Hierarchy, FolderTierWhosePathIsAFileIsSkippedAndTheFetcherServes) {
  TempDir dir;
  write_file(dir.sub("not-a-dir"), "I am a regular file");
  auto broken = make_folder(folder_options(dir.sub("not-a-dir"), "broken"));
  auto good = folder(dir, "good");
  auto h = hierarchy({broken, good});
  const ShardKey key = make_key(32);
  CountingFetcher fetch(random_bytes(2000, 32));

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(got->tier_name, "good");
  EXPECT_EQ(got->source, ServedFrom::fetched);
  EXPECT_EQ(read_handle(got->handle), fetch.bytes());
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_GE(broken->counters().snapshot().errors, 1u);
  EXPECT_EQ(read_path(dir.sub("not-a-dir")), "I am a regular file");
  EXPECT_TRUE(staging_is_empty(*good));
}

TEST(Hierarchy, FolderTierWhosePathIsAFileIsSkippedAndTheNextTierServes) {
  TempDir dir;
  write_file(dir.sub("not-a-dir"), "I am a regular file");
  auto broken = make_folder(folder_options(dir.sub("not-a-dir"), "broken"));
  auto good = folder(dir, "good");
  auto h = hierarchy({broken, good});
  const ShardKey key = make_key(33);
  ASSERT_TRUE(commit_bytes(*good, key, "cached below"));
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(read_handle(got->handle), "cached below");
  EXPECT_EQ(fetch.calls(), 0);
}

TEST(Hierarchy, CommitFailureInTheStagingTierDegradesAndTheNextTierTakesTheShard) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  break_instance_dir(*fast);
  auto h = hierarchy({fast, slow});
  const ShardKey key = make_key(34);
  CountingFetcher fetch(random_bytes(6000, 34));

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << "a failing install into one tier failed the whole read: " << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(got->tier_name, "slow");
  EXPECT_EQ(got->source, ServedFrom::fetched);
  EXPECT_EQ(read_handle(got->handle), fetch.bytes());
  EXPECT_EQ(read_path(slow->entry_path(key)), fetch.bytes());
  EXPECT_GE(fast->counters().snapshot().errors, 1u);
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_TRUE(staging_is_empty(*fast));
}

TEST(Hierarchy, CommitFailureInTheLandingTierDegradesAndARemoteHitLandsInTheNextTier) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto remote = memory_tier("remote");
  break_instance_dir(*fast);
  auto h = hierarchy({fast, slow, remote});
  const ShardKey key = make_key(35);
  const std::string bytes = random_bytes(6000, 35);
  seed_tier(*remote, dir, key, bytes);
  CountingFetcher fetch("never used");

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << "a failing install into one tier failed the whole read: " << got.error().message;
  EXPECT_EQ(got->tier_index, 1u);
  EXPECT_EQ(read_handle(got->handle), bytes);
  EXPECT_EQ(read_path(slow->entry_path(key)), bytes);
  EXPECT_GE(fast->counters().snapshot().errors, 1u);
  EXPECT_EQ(fetch.calls(), 0);
  EXPECT_TRUE(staging_is_empty(*fast));
}

// ---------------------------------------------------------------------------------------------------------------
// Integrity

void expect_nothing_installed(const std::vector<std::shared_ptr<FolderTier>>& folders, Tier& remote,
                              const ShardKey& key) {
  for (const auto& f : folders) {
    EXPECT_FALSE(holds(*f, key)) << f->name();
    EXPECT_TRUE(staging_is_empty(*f)) << f->name();
  }
  EXPECT_FALSE(holds(remote, key));
}

TEST(Hierarchy, FetcherReportingTheWrongSizeIsIntegrityAndInstallsNothing) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});
  const ShardKey key = make_key(40);
  CountingFetcher fetch(random_bytes(2000, 40), Report::wrong_size);

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::integrity);
  expect_nothing_installed({fast, slow}, *remote, key);
}

TEST(Hierarchy, FetcherReportingTheWrongSha256IsIntegrityAndInstallsNothing) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});
  const ShardKey key = make_key(41);
  CountingFetcher fetch(random_bytes(2000, 41), Report::wrong_sha);

  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::integrity);
  expect_nothing_installed({fast, slow}, *remote, key);
}

TEST(Hierarchy, CallerExpectationThatMismatchesIsIntegrity) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, remote});
  const std::string bytes = random_bytes(2000, 42);

  Expectation wrong_size;
  wrong_size.size = Bytes{bytes.size() + 10};
  auto by_size = h->get_or_fetch(make_key(42), CountingFetcher(bytes, Report::nothing).fetcher(), wrong_size);
  ASSERT_FALSE(by_size);
  EXPECT_EQ(by_size.error().code, ErrorCode::integrity);
  expect_nothing_installed({fast}, *remote, make_key(42));

  Expectation wrong_sha;
  wrong_sha.sha256 = sha256_of("something else");
  auto by_sha = h->get_or_fetch(make_key(43), CountingFetcher(bytes, Report::nothing).fetcher(), wrong_sha);
  ASSERT_FALSE(by_sha);
  EXPECT_EQ(by_sha.error().code, ErrorCode::integrity);
  expect_nothing_installed({fast}, *remote, make_key(43));

  // The caller and the fetcher disagree: integrity, even though the bytes match what the fetcher says.
  auto disagree = h->get_or_fetch(make_key(44), CountingFetcher(bytes, Report::size_and_sha).fetcher(), wrong_sha);
  ASSERT_FALSE(disagree);
  EXPECT_EQ(disagree.error().code, ErrorCode::integrity);
  expect_nothing_installed({fast}, *remote, make_key(44));

  // A correct expectation passes.
  Expectation right;
  right.size = Bytes{bytes.size()};
  right.sha256 = sha256_of(bytes);
  auto ok = h->get_or_fetch(make_key(45), CountingFetcher(bytes, Report::nothing).fetcher(), right);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(read_handle(ok->handle), bytes);
}

TEST(Hierarchy, FetcherErrorFailsTheCallAndInstallsNothing) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, remote});
  const ShardKey key = make_key(46);
  Fetcher fails_midway = [](ByteSink& sink) -> Result<Expectation> {
    const std::string half = random_bytes(1000, 46);
    if (auto w = sink.write(half.data(), half.size()); !w) return std::move(w).error();
    return Error{ErrorCode::remote, "origin reset the connection"};
  };
  auto got = h->get_or_fetch(key, fails_midway);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::remote);
  expect_nothing_installed({fast}, *remote, key);
}

// An object another tool wrote (no datavo metadata, or metadata that matches its own wrong bytes): the caller's
// expectation is what catches it.
TEST(HierarchyRemoteHit, IsCheckedAgainstTheCallersExpectationNotOnlyTheObjectsMetadata) {
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>("bucket");
  auto h = hierarchy({local, remote});
  const ShardKey key = make_key(500);
  const std::string good = random_bytes(10'000, 500);
  const std::string other = random_bytes(10'000, 501);
  ShardHandle source = handle_on_new_file(dir.sub("other"), other);
  ASSERT_TRUE(remote->inner().install_copy(key, source, sha256_of(other)));  // consistent, but not the shard

  CountingFetcher fetch(good);
  Result<FetchResult> got = Error{ErrorCode::internal, "not run"};
  const std::string logged = warnings_of([&] {
    got = h->get_or_fetch(key, fetch.fetcher(), Expectation{Bytes{good.size()}, sha256_of(good)});
  });
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(fetch.calls(), 1) << "the wrong object was taken for the shard";
  EXPECT_EQ(got->source, ServedFrom::fetched);
  EXPECT_TRUE(read_handle(got->handle) == good);
  EXPECT_NE(logged.find("deleted the object"), std::string::npos) << logged;
  (void)h->flush_uploads(Milliseconds{10'000});
  StringSink sink;
  auto now = remote->inner().read_into(key, sink);
  ASSERT_TRUE(now && *now);
  EXPECT_TRUE(sink.bytes() == good) << "the good bytes should have replaced the wrong object";
}

// ---------------------------------------------------------------------------------------------------------------
// The circuit breaker, as the hierarchy drives it

TEST(HierarchyBreaker, ARemoteTierThatKeepsFailingIsSkippedAfterThreeFailuresWithOneWarningForTheOpening) {
  MovableBreakerClock clock;
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>("bucket");
  remote->fail_lookups = true;
  remote->fail_uploads = true;
  remote->mode = UploadMode::sync;
  auto h = hierarchy({local, remote});

  const std::string logged = warnings_of([&] {
    for (std::uint64_t i = 0; i < 10; ++i) {
      CountingFetcher fetch(random_bytes(1000, i));
      auto got = h->get_or_fetch(make_key(100 + i), fetch.fetcher());
      ASSERT_TRUE(got) << "a failing remote tier failed a read: " << got.error().message;
      EXPECT_EQ(fetch.calls(), 1);
    }
  });
  // Three lookups failed (each a miss with a WARNING); then the tier is skipped: no lookup, no upload.
  EXPECT_EQ(remote->lookups.load(), 3);
  EXPECT_LE(remote->uploads_started.load(), 3);
  EXPECT_EQ(count_of(logged, "failed 3 times in a row"), 1) << logged;
  EXPECT_EQ(count_of(logged, "download failed, skipping it"), 3) << logged;
  EXPECT_GE(remote->counters().snapshot().errors, 3u);
  // Every upload not tried while the breaker was open is counted as skipped (datavo_tier_uploads_total{skipped}).
  EXPECT_EQ(remote->counters().snapshot().upload_skips, 10u - std::uint64_t(remote->uploads_started.load()));

  // During the cooldown it stays skipped; after it, one trial; the tier works again, so the breaker closes.
  clock.advance(29s);
  CountingFetcher during(random_bytes(1000, 200));
  ASSERT_TRUE(h->get_or_fetch(make_key(200), during.fetcher()));
  EXPECT_EQ(remote->lookups.load(), 3);
  remote->fail_lookups = false;
  remote->fail_uploads = false;
  clock.advance(1s);
  std::string closing = warnings_of([&] {
    CountingFetcher after(random_bytes(1000, 201));
    ASSERT_TRUE(h->get_or_fetch(make_key(201), after.fetcher()));
  });
  EXPECT_EQ(remote->lookups.load(), 4) << "no trial after the cooldown";
  EXPECT_NE(closing.find("works again"), std::string::npos) << closing;
  CountingFetcher later(random_bytes(1000, 202));
  ASSERT_TRUE(h->get_or_fetch(make_key(202), later.fetcher()));
  EXPECT_EQ(remote->lookups.load(), 5) << "the tier is still skipped after a successful trial";
  EXPECT_TRUE(holds(remote->inner(), make_key(202)));
}

// A lookup stopped by a cancellation (SIGINT stops every request at once) is no failure of the tier: no WARNING,
// no error counted, and the breaker stays closed however many lookups it stopped.
TEST(HierarchyBreaker, CancelledLookupsNeitherWarnNorCountNorOpenTheBreaker) {
  MovableBreakerClock clock;
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>("bucket");
  remote->fail_lookups = true;
  remote->lookup_failure = ErrorCode::cancelled;
  remote->mode = UploadMode::sync;
  auto h = hierarchy({local, remote});

  const std::string logged = warnings_of([&] {
    for (std::uint64_t i = 0; i < 5; ++i) {
      CountingFetcher fetch(random_bytes(1000, 300 + i));
      ASSERT_TRUE(h->get_or_fetch(make_key(300 + i), fetch.fetcher()));
    }
  });
  EXPECT_EQ(remote->lookups.load(), 5) << "the breaker opened on cancelled lookups";
  EXPECT_EQ(logged, "");
  EXPECT_EQ(remote->counters().snapshot().errors, 0u);

  // The same five failures of the tier itself do warn, count and open it: the switch above is what differs.
  remote->lookup_failure = ErrorCode::remote;
  const std::string failing = warnings_of([&] {
    for (std::uint64_t i = 0; i < 5; ++i) {
      CountingFetcher fetch(random_bytes(1000, 310 + i));
      ASSERT_TRUE(h->get_or_fetch(make_key(310 + i), fetch.fetcher()));
    }
  });
  EXPECT_EQ(remote->lookups.load(), 8);
  EXPECT_EQ(count_of(failing, "download failed, skipping it"), 3) << failing;
  EXPECT_EQ(remote->counters().snapshot().errors, 3u);
}

// The first use after the cooldown may be an upload (the lookup came before the cooldown ended, the fetch took
// long): the upload gives the breaker no verdict, and the tier must not stay skipped for good.
TEST(HierarchyBreaker, ATrialSpentOnAnUploadDoesNotKeepTheTierSkippedForGood) {
  MovableBreakerClock clock;
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>("bucket");
  remote->mode = UploadMode::sync;
  auto h = hierarchy({local, remote});
  remote->fail_lookups = true;
  (void)warnings_of([&] {
    for (std::uint64_t i = 0; i < 3; ++i) {
      CountingFetcher fetch(random_bytes(100, i));
      ASSERT_TRUE(h->get_or_fetch(make_key(300 + i), fetch.fetcher()));
    }
  });
  remote->fail_lookups = false;
  // The cooldown ends while the origin fetch runs: the trial goes to the upload that follows it.
  clock.advance(20s);
  Fetcher slow = [&](ByteSink& sink) -> Result<Expectation> {
    clock.advance(15s);
    const std::string bytes = "slow origin";
    DATAVO_TRY(sink.write(bytes.data(), bytes.size()));
    return Expectation{};
  };
  ASSERT_TRUE(h->get_or_fetch(make_key(310), slow));
  const int lookups = remote->lookups.load();
  (void)warnings_of([&] {
    for (std::uint64_t i = 0; i < 3; ++i) {
      clock.advance(600s);
      CountingFetcher fetch(random_bytes(100, 320 + i));
      ASSERT_TRUE(h->get_or_fetch(make_key(320 + i), fetch.fetcher()));
    }
  });
  EXPECT_GT(remote->lookups.load(), lookups) << "the working tier is skipped forever after a trial without a verdict";
}

// ---------------------------------------------------------------------------------------------------------------
// Reading while fetching: the observer of an origin fetch

// Records what the walk tells it, and what the staging file holds when a prefix is reported.
class RecordingObserver final : public LandingObserver {
 public:
  void staging(ShardHandle staged) override { files.push_back(std::move(staged)); }
  void verified(Bytes prefix, Bytes total) override {
    prefixes.push_back(prefix.count());
    totals.push_back(total.count());
    std::string held(prefix.count(), '\0');
    const ssize_t got = ::pread(files.back().fd(), held.data(), held.size(), 0);
    readable.push_back(got == ssize_t(held.size()) ? held : std::string("short read"));
  }
  std::vector<ShardHandle> files;
  std::vector<std::uint64_t> prefixes;
  std::vector<std::uint64_t> totals;
  std::vector<std::string> readable;
};

TEST(Walk, AnObservedFetchReportsItsStagingFileAndEachVerifiedPrefixReadableThere) {
  TempDir dir;
  auto top = folder(dir, "top");
  const ShardKey key = make_key(90);
  const std::string bytes = random_bytes(10000, 90);
  // A fetcher whose sink reports its prefix as a verifying decorator would: 4000, 8000, then all of it.
  Fetcher fetcher = [&](ByteSink& sink) -> Result<Expectation> {
    for (std::size_t at = 0; at < bytes.size(); at += 4000) {
      const std::size_t end = std::min<std::size_t>(at + 4000, bytes.size());
      DATAVO_TRY(sink.write(bytes.data() + at, end - at));
      sink.verified_prefix(Bytes{end}, Bytes{bytes.size()});
    }
    return Expectation{Bytes{bytes.size()}, sha256_of(bytes)};
  };
  RecordingObserver observer;
  auto fetched = hierarchy({top})->get_or_fetch(key, fetcher, {}, &observer);
  ASSERT_TRUE(fetched) << fetched.error().message;
  ASSERT_EQ(observer.files.size(), 1u);
  EXPECT_EQ(observer.prefixes, (std::vector<std::uint64_t>{4000, 8000, 10000}));
  EXPECT_EQ(observer.totals, (std::vector<std::uint64_t>{10000, 10000, 10000}));
  for (std::size_t i = 0; i < observer.readable.size(); ++i)
    EXPECT_EQ(observer.readable[i], bytes.substr(0, observer.prefixes[i])) << "report " << i;
  EXPECT_TRUE(holds(*top, key));
}

TEST(Walk, AStagingFileWhosePrefixWasReportedIsNeverTruncatedTheFetchFailsInstead) {
  TempDir dir;
  auto top = folder(dir, "top");
  const ShardKey key = make_key(91);
  const std::string bytes = random_bytes(8000, 91);
  Fetcher fetcher = [&](ByteSink& sink) -> Result<Expectation> {
    DATAVO_TRY(sink.write(bytes.data(), 4000));
    sink.verified_prefix(Bytes{4000}, Bytes{bytes.size()});
    DATAVO_TRY(sink.restart());  // a transport starting over: would cut the reported bytes
    DATAVO_TRY(sink.write(bytes.data(), bytes.size()));
    return Expectation{Bytes{bytes.size()}, sha256_of(bytes)};
  };
  RecordingObserver observer;
  auto fetched = hierarchy({top})->get_or_fetch(key, fetcher, {}, &observer);
  ASSERT_FALSE(fetched);
  EXPECT_EQ(fetched.error().code, ErrorCode::integrity) << fetched.error().message;
  ASSERT_EQ(observer.files.size(), 1u);
  struct stat st {};
  ASSERT_EQ(::fstat(observer.files[0].fd(), &st), 0);
  EXPECT_EQ(st.st_size, 4000) << "the reported bytes were cut";
  EXPECT_FALSE(holds(*top, key));
  // Without an observer the same fetcher restarts as before and the shard is installed.
  auto unobserved = hierarchy({top})->get_or_fetch(key, fetcher);
  ASSERT_TRUE(unobserved) << unobserved.error().message;
}

// A transfer that starts over before any prefix was reported: the staging file is abandoned, not truncated (another
// process may have mapped what the lock published of it), and the observer is told of the new one.
TEST(Walk, ARestartBeforeAnyReportedPrefixAnnouncesANewStagingFileAndLeavesTheOldBytes) {
  TempDir dir;
  auto top = folder(dir, "top");
  const ShardKey key = make_key(92);
  const std::string bytes = random_bytes(8000, 92);
  Fetcher fetcher = [&](ByteSink& sink) -> Result<Expectation> {
    DATAVO_TRY(sink.write(bytes.data(), 4000));
    DATAVO_TRY(sink.restart());
    DATAVO_TRY(sink.write(bytes.data(), bytes.size()));
    sink.verified_prefix(Bytes{bytes.size()}, Bytes{bytes.size()});
    return Expectation{Bytes{bytes.size()}, sha256_of(bytes)};
  };
  RecordingObserver observer;
  auto fetched = hierarchy({top})->get_or_fetch(key, fetcher, {}, &observer);
  ASSERT_TRUE(fetched) << fetched.error().message;
  ASSERT_EQ(observer.files.size(), 2u);
  struct stat first {
  }, second{};
  ASSERT_EQ(::fstat(observer.files[0].fd(), &first), 0);
  ASSERT_EQ(::fstat(observer.files[1].fd(), &second), 0);
  EXPECT_NE(first.st_ino, second.st_ino);
  EXPECT_EQ(first.st_size, 4000) << "the first file's bytes were cut";
  EXPECT_EQ(observer.readable, (std::vector<std::string>{bytes}));
  EXPECT_TRUE(holds(*top, key));
}

}  // namespace
}  // namespace datavo
