// Tests of the background upload queue (src/core/upload_queue.cpp), directly and through the hierarchy: the
// reader gets its local path before the upload finishes, flush_uploads() waits (bounded) and reports uploaded /
// already present / failed, a failed upload is a WARNING and an upload_failures count rather than a failed read,
// `upload: sync` uploads before the read returns, the queue is bounded, and a lease is released after its upload.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/upload_queue.hpp"
#include "datavo/hierarchy.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "unit/core/hierarchy_fixtures.hpp"
#include "unit/core/remote_double.hpp"
#include "util/cancel.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

std::shared_ptr<ShardCacheHierarchy> hierarchy(std::vector<std::shared_ptr<Tier>> tiers) {
  auto made = ShardCacheHierarchy::create(std::move(tiers));
  if (!made) throw std::runtime_error(made.error().message);
  return *made;
}

template <typename F>
std::string stderr_of(F body) {
  const log::Level saved = log::level();
  log::set_level(log::Level::warning);
  testing::internal::CaptureStderr();
  body();
  std::string logged = testing::internal::GetCapturedStderr();
  log::set_level(saved);
  return logged;
}

// A cancellation starts no queued upload, and the leases of the queued jobs are released all the same (another VM
// would otherwise wait for their expiry). Both workers are held in their uploads when it comes, so that the other
// two jobs are queued. The request is process-wide and sticky: in a child process (a death test).
void cancel_with_queued_uploads() {
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>();
  std::vector<std::shared_ptr<std::atomic<bool>>> released;
  for (int i = 0; i < 4; ++i) released.push_back(std::make_shared<std::atomic<bool>>(false));
  std::atomic<std::size_t> leases{0};
  remote->lease = [&](const ShardKey&) -> Result<LeaseAttempt> {
    LeaseAttempt mine;
    mine.held = std::make_unique<FlagLease>(released.at(leases++));
    return mine;
  };
  auto h = hierarchy({local, remote});
  remote->upload_gate.close();
  for (std::uint64_t i = 0; i < 4; ++i) {
    CountingFetcher fetch(random_bytes(1000 + i, 500 + i));
    if (!h->get_or_fetch(make_key(500 + i), fetch.fetcher())) std::_Exit(2);
  }
  while (remote->uploads_started.load() < int(core::UploadQueue::k_workers)) std::this_thread::sleep_for(5ms);
  util::request_cancel(SIGINT);
  remote->upload_gate.open();
  const UploadSummary summary = h->flush_uploads(Milliseconds{10'000});
  bool all_released = true;
  for (const auto& flag : released) all_released = all_released && flag->load();
  const bool ok = all_released && remote->uploads_started.load() == 2 && summary.pending == 0 &&
                  summary.uploaded == 2 && summary.failed == 2;
  std::_Exit(ok ? 0 : 1);
}

TEST(UploadQueueDeathTest, ACancellationStartsNoQueuedUploadAndReleasesTheirLeases) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(cancel_with_queued_uploads(), testing::ExitedWithCode(0), "");
}

TEST(UploadQueue, TheReaderGetsItsLocalPathBeforeTheUploadFinishes) {
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>();
  auto h = hierarchy({local, remote});
  const ShardKey key = make_key(1);
  CountingFetcher fetch(random_bytes(50'000, 1));

  remote->upload_gate.close();
  auto got = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->tier_name, "local");
  EXPECT_TRUE(read_handle(got->handle) == fetch.bytes());
  EXPECT_EQ(remote->uploads_done.load(), 0) << "get_or_fetch waited for the upload";

  UploadSummary pending = h->flush_uploads(Milliseconds{100});
  EXPECT_EQ(pending.pending, 1u);
  EXPECT_EQ(pending.uploaded, 0u);
  EXPECT_FALSE(holds(remote->inner(), key));

  remote->upload_gate.open();
  UploadSummary done = h->flush_uploads(Milliseconds{10'000});
  EXPECT_EQ(done.pending, 0u);
  EXPECT_EQ(done.uploaded, 1u);
  EXPECT_EQ(done.failed, 0u);
  EXPECT_TRUE(holds(remote->inner(), key));
  const TierStats stats = remote->counters().snapshot();
  EXPECT_EQ(stats.uploads, 1u);
  EXPECT_EQ(stats.installs, 1u);
  EXPECT_EQ(stats.bytes_installed, Bytes{fetch.bytes().size()});
}

TEST(UploadQueue, FlushUploadsReportsUploadedAlreadyPresentAndFailed) {
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>();
  auto h = hierarchy({local, remote});
  const auto fetch_one = [&](std::uint64_t seed) {
    CountingFetcher fetch(random_bytes(1000 + seed, seed));
    auto got = h->get_or_fetch(make_key(seed), fetch.fetcher());
    ASSERT_TRUE(got) << got.error().message;
    (void)h->flush_uploads(Milliseconds{10'000});  // one at a time, so that each switch applies to one upload
  };
  fetch_one(10);
  remote->uploads_already_present = true;
  fetch_one(11);
  remote->uploads_already_present = false;
  remote->fail_uploads = true;
  (void)stderr_of([&] { fetch_one(12); });
  const UploadSummary summary = h->flush_uploads(Milliseconds{10'000});
  EXPECT_EQ(summary.uploaded, 1u);
  EXPECT_EQ(summary.already_present, 1u);
  EXPECT_EQ(summary.failed, 1u);
  EXPECT_EQ(summary.pending, 0u);
  // The tier's counters, which its metrics show (datavo_tier_uploads_total{outcome}).
  const TierStats stats = remote->counters().snapshot();
  EXPECT_EQ(stats.uploads, 1u);
  EXPECT_EQ(stats.uploads_present, 1u);
  EXPECT_EQ(stats.upload_failures, 1u);
}

TEST(UploadQueue, AFailedUploadIsAWarningAndACountNotAFailedRead) {
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>("bucket");
  auto h = hierarchy({local, remote});
  const ShardKey key = make_key(20);
  CountingFetcher fetch(random_bytes(5000, 20));
  remote->fail_uploads = true;

  Result<FetchResult> got = Error{ErrorCode::internal, "not run"};
  UploadSummary summary;
  const std::string logged = stderr_of([&] {
    got = h->get_or_fetch(key, fetch.fetcher());
    summary = h->flush_uploads(Milliseconds{10'000});
  });
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(read_handle(got->handle) == fetch.bytes());
  EXPECT_EQ(summary.failed, 1u);
  EXPECT_EQ(summary.uploaded, 0u);
  const TierStats stats = remote->counters().snapshot();
  EXPECT_EQ(stats.upload_failures, 1u);
  EXPECT_EQ(stats.errors, 1u);
  EXPECT_EQ(stats.uploads, 0u);
  EXPECT_NE(logged.find("WARNING"), std::string::npos) << logged;
  EXPECT_NE(logged.find("to tier 'bucket' failed: bucket refused the upload (the read it served succeeded)"),
            std::string::npos)
      << logged;

  // The shard stays cached locally; the next read is a local hit, and makes no upload.
  auto again = h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->source, ServedFrom::hit);
  EXPECT_EQ(fetch.calls(), 1);
}

TEST(UploadQueue, UploadSyncFinishesBeforeTheReadReturns) {
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>();
  remote->mode = UploadMode::sync;
  auto h = hierarchy({local, remote});
  const ShardKey key = make_key(30);
  CountingFetcher fetch(random_bytes(5000, 30));

  // The gate opens 300 ms from now: a sync read returns only after that.
  remote->upload_gate.close();
  std::thread opener([&] {
    std::this_thread::sleep_for(300ms);
    remote->upload_gate.open();
  });
  const auto started = std::chrono::steady_clock::now();
  auto got = h->get_or_fetch(key, fetch.fetcher());
  const auto took = std::chrono::steady_clock::now() - started;
  opener.join();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(remote->uploads_done.load(), 1);
  EXPECT_GE(took, 250ms);
  EXPECT_TRUE(holds(remote->inner(), key));
  const UploadSummary summary = h->flush_uploads(Milliseconds{0});
  EXPECT_EQ(summary.uploaded, 1u);
  EXPECT_EQ(summary.pending, 0u);
}

TEST(UploadQueue, TheHierarchysDestructorWaitsForPendingUploads) {
  TempDir dir;
  auto local = make_folder(dir.sub("local"), "local");
  auto remote = std::make_shared<ScriptedRemote>();
  const ShardKey key = make_key(40);
  {
    auto h = hierarchy({local, remote});
    CountingFetcher fetch(random_bytes(5000, 40));
    remote->upload_gate.close();
    ASSERT_TRUE(h->get_or_fetch(key, fetch.fetcher()));
    std::thread opener([&] {
      std::this_thread::sleep_for(200ms);
      remote->upload_gate.open();
    });
    h.reset();  // waits for the upload
    opener.join();
  }
  EXPECT_EQ(remote->uploads_done.load(), 1);
  EXPECT_TRUE(holds(remote->inner(), key));
}

TEST(UploadQueue, PushBlocksWhileTheQueueIsFull) {
  TempDir dir;
  auto remote = std::make_shared<ScriptedRemote>();
  remote->upload_gate.close();
  core::UploadQueue queue;
  const std::string bytes = "queued";
  auto job = [&](std::uint64_t seed) {
    const std::string path = dir.sub("src-" + std::to_string(seed));
    return core::UploadQueue::Job{remote, make_key(seed), handle_on_new_file(path, bytes), sha256_of(bytes), nullptr};
  };
  // k_workers uploads run (held at the gate), k_max_pending wait: the next push must block.
  const std::size_t fill = core::UploadQueue::k_workers + core::UploadQueue::k_max_pending;
  for (std::size_t i = 0; i < fill; ++i) {
    queue.push(job(100 + i));
    if (i < core::UploadQueue::k_workers) {
      // Let the workers take their job, so that the count of waiting ones is exact.
      for (int spin = 0; spin < 200 && remote->uploads_started.load() < int(i + 1); ++spin)
        std::this_thread::sleep_for(5ms);
    }
  }
  std::atomic<bool> pushed{false};
  std::thread late([&] {
    queue.push(job(999));
    pushed = true;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(pushed.load()) << "push did not block on a full queue";
  remote->upload_gate.open();
  late.join();
  EXPECT_TRUE(pushed.load());
  const UploadSummary summary = queue.flush(std::chrono::milliseconds{10'000});
  EXPECT_EQ(summary.uploaded, fill + 1);
  EXPECT_EQ(summary.pending, 0u);
}

TEST(UploadQueue, TheLeaseIsReleasedOnlyOnceItsUploadIsDone) {
  TempDir dir;
  auto remote = std::make_shared<ScriptedRemote>();
  remote->upload_gate.close();
  core::UploadQueue queue;
  auto released = std::make_shared<std::atomic<bool>>(false);
  const std::string bytes = "leased";
  queue.push(core::UploadQueue::Job{remote, make_key(50), handle_on_new_file(dir.sub("src"), bytes), sha256_of(bytes),
                                    std::make_unique<FlagLease>(released)});
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(released->load()) << "the lease went before the object was uploaded";
  remote->upload_gate.open();
  (void)queue.flush(std::chrono::milliseconds{10'000});
  EXPECT_TRUE(released->load());
  EXPECT_TRUE(holds(remote->inner(), make_key(50)));

  // A failed upload releases its lease too, so that a waiting VM takes over at once.
  auto released_too = std::make_shared<std::atomic<bool>>(false);
  remote->fail_uploads = true;
  (void)stderr_of([&] {
    queue.push(core::UploadQueue::Job{remote, make_key(51), handle_on_new_file(dir.sub("src2"), bytes),
                                      sha256_of(bytes), std::make_unique<FlagLease>(released_too)});
    (void)queue.flush(std::chrono::milliseconds{10'000});
  });
  EXPECT_TRUE(released_too->load());
}

}  // namespace
}  // namespace datavo
