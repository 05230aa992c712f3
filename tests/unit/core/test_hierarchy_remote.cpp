// Tests of the hierarchy's remote behaviour (src/core/hierarchy.cpp) against a scripted remote tier
// (remote_double.hpp): the per-tier circuit breaker as the hierarchy drives it, and the cross-VM lease wait (a VM
// that finds a live lease waits for the object instead of calling its fetcher; it takes over an expired lease or
// one released without the object; the holder releases its lease after the upload; a lease error degrades).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/breaker.hpp"
#include "datavo/hierarchy.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "unit/core/remote_double.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;
using SystemClock = std::chrono::system_clock;

std::shared_ptr<ShardCacheHierarchy> hierarchy(std::vector<std::shared_ptr<Tier>> tiers) {
  auto made = ShardCacheHierarchy::create(std::move(tiers));
  if (!made) throw std::runtime_error(made.error().message);
  return *made;
}

bool holds(Tier& tier, const ShardKey& key) {
  auto found = tier.contains(key);
  return found && *found;
}

template <typename F>
std::string warnings_of(F body) {
  const log::Level saved = log::level();
  log::set_level(log::Level::warning);
  testing::internal::CaptureStderr();
  body();
  std::string logged = testing::internal::GetCapturedStderr();
  log::set_level(saved);
  return logged;
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The hierarchy's breakers on a clock the test moves (core::breaker_clock), restored afterwards.
class MovableBreakerClock {
 public:
  MovableBreakerClock() : saved_(core::breaker_clock()) {
    core::breaker_clock() = [this] { return now_.load(); };
  }
  ~MovableBreakerClock() { core::breaker_clock() = saved_; }
  void advance(std::chrono::seconds by) { now_ = now_.load() + by; }

 private:
  std::function<core::Breaker::Clock::time_point()> saved_;
  std::atomic<core::Breaker::Clock::time_point> now_{core::Breaker::Clock::now()};
};

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
// Integrity of remote hits

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
// The cross-VM lease

struct LeaseSetup {
  TempDir dir;
  std::shared_ptr<FolderTier> local;
  std::shared_ptr<ScriptedRemote> remote;
  std::shared_ptr<ShardCacheHierarchy> h;
  LeaseSetup() {
    local = make_folder(dir.sub("local"), "local");
    remote = std::make_shared<ScriptedRemote>("bucket");
  }
  void build() { h = hierarchy({local, remote}); }
  // Stores `bytes` in the bucket as another VM's upload would.
  void upload_elsewhere(const ShardKey& key, const std::string& bytes) {
    ShardHandle source = handle_on_new_file(dir.sub("elsewhere-" + key.hash.hex().substr(0, 8)), bytes);
    auto installed = remote->inner().install_copy(key, source, sha256_of(bytes));
    if (!installed) throw std::runtime_error(installed.error().message);
  }
};

LeaseAttempt held_by_other(SystemClock::duration left) {
  LeaseAttempt attempt;
  attempt.holder = "vm-a 4242";
  attempt.expires = SystemClock::now() + left;
  return attempt;
}

TEST(HierarchyLease, AVmThatFindsALiveLeaseWaitsAndReadsTheObjectInsteadOfFetching) {
  LeaseSetup s;
  s.remote->lease = [](const ShardKey&) -> Result<LeaseAttempt> { return held_by_other(30s); };
  s.build();
  const ShardKey key = make_key(400);
  const std::string bytes = random_bytes(20'000, 400);
  std::thread other_vm([&] {
    std::this_thread::sleep_for(600ms);
    s.upload_elsewhere(key, bytes);
  });
  auto calls = std::make_shared<std::atomic<int>>(0);
  const auto started = std::chrono::steady_clock::now();
  auto got = s.h->get_or_fetch(key, failing_fetcher(calls));
  const auto took = std::chrono::steady_clock::now() - started;
  other_vm.join();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(calls->load(), 0) << "the origin was called although another VM held the lease";
  EXPECT_EQ(got->tier_name, "local");
  EXPECT_EQ(got->source, ServedFrom::promoted);
  EXPECT_TRUE(read_handle(got->handle) == bytes);
  EXPECT_GE(s.remote->lookups.load(), 2) << "it should have polled the bucket";
  EXPECT_LT(took, 10s);
  EXPECT_EQ(s.remote->uploads_started.load(), 0) << "the waiter must not upload what it read from the bucket";
}

TEST(HierarchyLease, ItTakesOverAnExpiredLease) {
  LeaseSetup s;
  auto released = std::make_shared<std::atomic<bool>>(false);
  std::atomic<int> answers{0};
  s.remote->lease = [&](const ShardKey&) -> Result<LeaseAttempt> {
    // First: a holder whose lease runs out in 400 ms and who never uploads. Then: ours.
    if (answers++ == 0) return held_by_other(400ms);
    LeaseAttempt mine;
    mine.held = std::make_unique<FlagLease>(released);
    return mine;
  };
  s.build();
  const ShardKey key = make_key(410);
  CountingFetcher fetch(random_bytes(20'000, 410));
  auto got = s.h->get_or_fetch(key, fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_EQ(s.remote->lease_attempts.load(), 2);
  const UploadSummary summary = s.h->flush_uploads(Milliseconds{10'000});
  EXPECT_EQ(summary.uploaded, 1u);
  EXPECT_TRUE(released->load()) << "the lease was not released after the upload";
  EXPECT_TRUE(holds(s.remote->inner(), key));
}

TEST(HierarchyLease, ItTakesOverALeaseReleasedWithoutTheObject) {
  LeaseSetup s;
  std::atomic<bool> holder_gave_up{false};
  s.remote->lease = [&](const ShardKey&) -> Result<LeaseAttempt> {
    if (!holder_gave_up) return held_by_other(60s);
    LeaseAttempt mine;
    mine.held = std::make_unique<FlagLease>(std::make_shared<std::atomic<bool>>(false));
    return mine;
  };
  s.build();
  std::thread holder([&] {
    std::this_thread::sleep_for(500ms);
    holder_gave_up = true;  // its origin fetch failed: it deleted its lease, uploading nothing
  });
  CountingFetcher fetch(random_bytes(20'000, 420));
  const auto started = std::chrono::steady_clock::now();
  auto got = s.h->get_or_fetch(make_key(420), fetch.fetcher());
  const auto took = std::chrono::steady_clock::now() - started;
  holder.join();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_LT(took, 15s) << "the waiter sat out the released lease's 60 s instead of taking over";
}

// The holder uploaded and released its lease between this VM's lookup and its lease request: the VM wins the
// lease, but reads the object rather than fetching the shard a second time.
TEST(HierarchyLease, AVmThatWinsTheLeaseAfterTheHoldersUploadReadsTheObjectInsteadOfFetching) {
  LeaseSetup s;
  const ShardKey key = make_key(425);
  const std::string bytes = random_bytes(20'000, 425);
  auto released = std::make_shared<std::atomic<bool>>(false);
  s.remote->lease = [&](const ShardKey&) -> Result<LeaseAttempt> {
    s.upload_elsewhere(key, bytes);  // the other VM's upload lands, then its lease goes
    LeaseAttempt mine;
    mine.held = std::make_unique<FlagLease>(released);
    return mine;
  };
  s.build();
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto got = s.h->get_or_fetch(key, failing_fetcher(calls));
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(calls->load(), 0) << "a second origin fetch of a shard that is in the bucket";
  EXPECT_EQ(got->source, ServedFrom::promoted);
  EXPECT_TRUE(read_handle(got->handle) == bytes);
  EXPECT_TRUE(released->load()) << "the lease it did not need is still held";
  EXPECT_EQ(s.remote->uploads_started.load(), 0);
}

TEST(HierarchyLease, TheHolderReleasesItsLeaseAfterItsUploadNotBefore) {
  LeaseSetup s;
  auto released = std::make_shared<std::atomic<bool>>(false);
  s.remote->lease = [&](const ShardKey&) -> Result<LeaseAttempt> {
    LeaseAttempt mine;
    mine.held = std::make_unique<FlagLease>(released);
    return mine;
  };
  s.build();
  s.remote->upload_gate.close();
  CountingFetcher fetch(random_bytes(20'000, 430));
  auto got = s.h->get_or_fetch(make_key(430), fetch.fetcher());
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(fetch.calls(), 1);
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(released->load()) << "the lease went before the upload: other VMs would fetch from the origin";
  s.remote->upload_gate.open();
  (void)s.h->flush_uploads(Milliseconds{10'000});
  EXPECT_TRUE(released->load());
}

TEST(HierarchyLease, ALeaseErrorDegradesAndTheVmFetchesWithoutOne) {
  LeaseSetup s;
  s.remote->lease = [](const ShardKey&) -> Result<LeaseAttempt> {
    return Error{ErrorCode::remote, "HTTP 503 on the lease object"};
  };
  s.build();
  CountingFetcher fetch(random_bytes(1000, 440));
  Result<FetchResult> got = Error{ErrorCode::internal, "not run"};
  const std::string logged = warnings_of([&] { got = s.h->get_or_fetch(make_key(440), fetch.fetcher()); });
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_GE(s.remote->counters().snapshot().errors, 1u);
  EXPECT_NE(logged.find("lease failed"), std::string::npos) << logged;
  (void)s.h->flush_uploads(Milliseconds{10'000});
  EXPECT_TRUE(holds(s.remote->inner(), make_key(440))) << "the shard should still go up";
}

TEST(HierarchyLease, ConcurrentReadersOfOneMachineAskForTheLeaseOnce) {
  LeaseSetup s;
  s.remote->lease = [&](const ShardKey&) -> Result<LeaseAttempt> {
    LeaseAttempt mine;
    mine.held = std::make_unique<FlagLease>(std::make_shared<std::atomic<bool>>(false));
    return mine;
  };
  s.build();
  const ShardKey key = make_key(450);
  CountingFetcher fetch(random_bytes(20'000, 450), Report::size_and_sha, 300ms);
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&] {
      if (s.h->get_or_fetch(key, fetch.fetcher())) ++ok;
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(fetch.calls(), 1);
  EXPECT_EQ(s.remote->lease_attempts.load(), 1) << "the machine's own single flight comes before the bucket's";
}

}  // namespace
}  // namespace datavo
