// Tests of the shard cache hierarchy (src/core/hierarchy.cpp) against include/datavo/hierarchy.hpp and the spec's
// Reads, Writes (populate on miss, promote on hit), Reads from remote tiers, Hits do not refetch and Concurrency.
// Folder tiers live in a fresh temp dir per test; the memory tier stands in for a remote tier.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "datavo/hierarchy.hpp"
#include "datavo/memory_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "util/log.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

std::shared_ptr<Tier> memory_tier(std::string name = "remote", std::optional<ErrorCode> fail_with = std::nullopt) {
  MemoryTierOptions options;
  options.name = std::move(name);
  options.fail_with = fail_with;
  return make_memory_tier(options);
}

std::shared_ptr<FolderTier> folder(const TempDir& dir, const std::string& name,
                                   std::optional<Bytes> max_bytes = std::nullopt, Access access = Access::read_write) {
  auto options = folder_options(dir.sub(name), name);
  options.max_bytes = max_bytes;
  options.access = access;
  return make_folder(options);
}

std::shared_ptr<ShardCacheHierarchy> hierarchy(std::vector<std::shared_ptr<Tier>> tiers) {
  auto made = ShardCacheHierarchy::create(std::move(tiers));
  if (!made) throw std::runtime_error("ShardCacheHierarchy::create failed: " + made.error().message);
  return *made;
}

bool holds(Tier& tier, const ShardKey& key) {
  auto found = tier.contains(key);
  return found && *found;
}

bool staging_is_empty(const FolderTier& tier) { return list_dir(tier.location() + "/.staging").empty(); }

// Puts `bytes` into `tier` under `key` as if an earlier run had cached them.
void seed_tier(Tier& tier, const TempDir& dir, const ShardKey& key, const std::string& bytes) {
  const std::string source_path = dir.sub("seed-" + key.hash.hex().substr(0, 12) + "-" + tier.name());
  ShardHandle source = handle_on_new_file(source_path, bytes);
  auto installed = tier.install_copy(key, source, sha256_of(bytes));
  if (!installed) throw std::runtime_error("seeding failed: " + installed.error().message);
  ::unlink(source_path.c_str());
}

// A remote tier double that counts lookups (read_into calls) and downloads (the ones that hit), and makes each
// lookup take `delay`.
class CountingRemote final : public Tier {
 public:
  CountingRemote(std::shared_ptr<Tier> inner, std::chrono::milliseconds delay)
      : inner_(std::move(inner)), delay_(delay) {}
  const std::string& name() const override { return inner_->name(); }
  std::string_view type() const override { return inner_->type(); }
  std::optional<Bytes> max_bytes() const override { return inner_->max_bytes(); }
  bool supports_direct_read() const override { return false; }
  bool read_only() const override { return false; }
  std::string location() const override { return inner_->location(); }
  Result<bool> contains(const ShardKey& key) override { return inner_->contains(key); }
  Result<std::optional<Expectation>> read_into(const ShardKey& key, ByteSink& sink) override {
    lookups_.fetch_add(1);
    std::this_thread::sleep_for(delay_);
    auto read = inner_->read_into(key, sink);
    if (read && *read) downloads_.fetch_add(1);
    return read;
  }
  CheckReport check() override { return inner_->check(); }
  Result<InstallOutcome> install_copy(const ShardKey& key, const ShardHandle& source, const Sha256& digest) override {
    return inner_->install_copy(key, source, digest);
  }
  Result<bool> remove(const ShardKey& key) override { return inner_->remove(key); }
  Result<TierUsage> usage() override { return inner_->usage(); }
  Result<std::vector<EntryInfo>> list() override { return inner_->list(); }
  int downloads() const { return downloads_.load(); }  // lookups that were hits, so that the object moved
  int lookups() const { return lookups_.load(); }      // every read_into: a remote lookup is one request

 private:
  std::shared_ptr<Tier> inner_;
  std::chrono::milliseconds delay_;
  std::atomic<int> downloads_{0};
  std::atomic<int> lookups_{0};
};

// Makes `tier`'s <instance> directory a regular file: lookups miss (ENOTDIR) and staging works, but every commit
// into that instance fails.
void break_instance_dir(const FolderTier& tier, const std::string& instance = "local") {
  std::filesystem::create_directories(tier.location());
  write_file(tier.location() + "/" + instance, "not a directory");
}

// ---------------------------------------------------------------------------------------------------------------
// Construction

TEST(Hierarchy, CreateRefusesAnEmptyList) {
  auto made = ShardCacheHierarchy::create({});
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, ErrorCode::config);
}

TEST(Hierarchy, CreateRefusesAListWithNoFolderTier) {
  auto made = ShardCacheHierarchy::create({memory_tier("a"), memory_tier("b")});
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, ErrorCode::config);
  EXPECT_FALSE(made.error().message.empty());
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

TEST(Hierarchy, ExpectedSizeThatNoTierCanHoldIsCapacityWithoutFetching) {
  TempDir dir;
  auto a = folder(dir, "a", Bytes{1000});
  auto h = hierarchy({a});
  CountingFetcher fetch(random_bytes(4000, 7));
  Expectation expected;
  expected.size = Bytes{4000};
  auto got = h->get_or_fetch(make_key(7), fetch.fetcher(), expected);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::capacity);
  EXPECT_EQ(fetch.calls(), 0);
}

TEST(Hierarchy, MissWithNoWritableFolderTierIsCapacity) {
  TempDir dir;
  auto ro = folder(dir, "ro", std::nullopt, Access::read_only);
  auto h = hierarchy({ro});
  CountingFetcher fetch(random_bytes(100, 8));
  auto got = h->get_or_fetch(make_key(8), fetch.fetcher());
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::capacity);
  EXPECT_FALSE(path_exists(ro->location()));
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
// Hits do not refetch

TEST(Hierarchy, FetcherIsNeverCalledOnAHit) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});
  const ShardKey in_fast = make_key(10);
  const ShardKey in_slow = make_key(11);
  const ShardKey in_remote = make_key(12);
  ASSERT_TRUE(commit_bytes(*fast, in_fast, "fast bytes"));
  ASSERT_TRUE(commit_bytes(*slow, in_slow, "slow bytes"));
  seed_tier(*remote, dir, in_remote, "remote bytes");
  auto calls = std::make_shared<std::atomic<int>>(0);

  for (int round = 0; round < 2; ++round) {
    auto a = h->get_or_fetch(in_fast, failing_fetcher(calls));
    auto b = h->get_or_fetch(in_slow, failing_fetcher(calls));
    auto c = h->get_or_fetch(in_remote, failing_fetcher(calls));
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(read_handle(a->handle), "fast bytes");
    EXPECT_EQ(read_handle(b->handle), "slow bytes");
    EXPECT_EQ(read_handle(c->handle), "remote bytes");
  }
  EXPECT_EQ(calls->load(), 0);
}

TEST(Hierarchy, GetOfAMissIsNulloptAndNeverFetches) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto h = hierarchy({fast});
  const ShardKey key = make_key(13);
  auto missed = h->get(key);
  ASSERT_TRUE(missed);
  EXPECT_FALSE(*missed);
  ASSERT_TRUE(commit_bytes(*fast, key, "now here"));
  auto found = h->get(key);
  ASSERT_TRUE(found);
  ASSERT_TRUE(*found);
  EXPECT_EQ(read_handle((*found)->handle), "now here");
}

// ---------------------------------------------------------------------------------------------------------------
// Reads from remote tiers

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

// ---------------------------------------------------------------------------------------------------------------
// Single flight

TEST(Hierarchy, SingleFlightAcrossThreadsFetchesOnce) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  auto h = hierarchy({fast, slow});
  const ShardKey key = make_key(50);
  CountingFetcher fetch(random_bytes(64 * 1024, 50), Report::size_and_sha, 200ms);

  constexpr int k_threads = 8;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::optional<std::string>> seen(k_threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      auto got = h->get_or_fetch(key, fetch.fetcher());
      if (got) seen[std::size_t(t)] = read_handle(got->handle);
    });
  }
  while (ready.load() < k_threads) std::this_thread::yield();
  go = true;
  for (auto& t : threads) t.join();

  EXPECT_EQ(fetch.calls(), 1);
  for (int t = 0; t < k_threads; ++t) {
    ASSERT_TRUE(seen[std::size_t(t)].has_value()) << "thread " << t << " failed";
    EXPECT_TRUE(*seen[std::size_t(t)] == fetch.bytes()) << "thread " << t;
  }
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

// Runs in a forked child: one get_or_fetch of `key` over fresh tier objects on the given paths, with a fetcher
// that appends one byte to `counter_path` and sleeps. Returns the child's exit code.
int child_get_or_fetch(const std::string& fast_path, const std::string& slow_path, const std::string& counter_path,
                       const ShardKey& key, const std::string& bytes) {
  auto fast = FolderTier::create(folder_options(fast_path, "fast"));
  auto slow = FolderTier::create(folder_options(slow_path, "slow"));
  if (!fast || !slow) return 10;
  auto h = ShardCacheHierarchy::create({*fast, *slow});
  if (!h) return 11;
  Fetcher fetcher = [&](ByteSink& sink) -> Result<Expectation> {
    int fd = ::open(counter_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, "x", 1);
      (void)ignored;
      ::close(fd);
    }
    std::this_thread::sleep_for(200ms);
    if (auto w = sink.write(bytes.data(), bytes.size()); !w) return std::move(w).error();
    Expectation e;
    e.size = Bytes{bytes.size()};
    return e;
  };
  auto got = (*h)->get_or_fetch(key, fetcher);
  if (!got) return 12;
  if (read_handle(got->handle) != bytes) return 13;
  return 0;
}

TEST(Hierarchy, SingleFlightAcrossProcessesFetchesOnce) {
  TempDir dir;
  const std::string fast_path = dir.sub("fast");
  const std::string slow_path = dir.sub("slow");
  const std::string counter = dir.sub("fetch-count");
  const ShardKey key = make_key(51);
  const std::string bytes = random_bytes(32 * 1024, 51);
  Pipe start;

  constexpr int k_children = 4;
  std::vector<pid_t> children;
  for (int i = 0; i < k_children; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      start.close_write();
      start.read_byte();  // end of file once the parent closes its end: everyone starts together
      ::_exit(child_get_or_fetch(fast_path, slow_path, counter, key, bytes));
    }
    children.push_back(pid);
  }
  start.close_write();
  for (pid_t pid : children) EXPECT_EQ(wait_child(pid), 0) << "child " << pid;

  EXPECT_EQ(read_path(counter), "x") << "the fetcher ran " << read_path(counter).size() << " times";
  auto fast = make_folder(folder_options(fast_path, "fast"));
  EXPECT_EQ(read_path(fast->entry_path(key)), bytes);
  EXPECT_TRUE(staging_is_empty(*fast));
}

TEST(Hierarchy, WhenTheLockHolderDiesAWaiterTakesOver) {
  TempDir dir;
  auto fast = folder(dir, "fast");
  auto slow = folder(dir, "slow");
  const ShardKey key = make_key(52);
  Pipe locked;

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    locked.close_read();
    auto tier = FolderTier::create(folder_options(dir.sub("fast"), "fast"));
    if (!tier) ::_exit(2);
    auto lock = (*tier)->lock_shard(key);
    if (!lock) ::_exit(3);
    locked.write_byte();
    for (;;) ::pause();  // holds the lock until SIGKILL
  }
  ChildGuard guard(child);
  locked.close_write();
  ASSERT_TRUE(locked.read_byte()) << "the child could not take the lock";

  auto h = hierarchy({fast, slow});
  CountingFetcher fetch(random_bytes(10000, 52));
  std::atomic<bool> done{false};
  std::optional<Result<FetchResult>> got;
  std::thread waiter([&] {
    got.emplace(h->get_or_fetch(key, fetch.fetcher()));
    done = true;
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(done.load()) << "get_or_fetch did not wait for the lock held by another process";
  EXPECT_EQ(fetch.calls(), 0);

  ::kill(child, SIGKILL);
  EXPECT_EQ(guard.wait(), 128 + SIGKILL);
  waiter.join();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(*got) << got->error().message;
  EXPECT_EQ(read_handle((*got)->handle), fetch.bytes());
  EXPECT_EQ(fetch.calls(), 1);
}

// ---------------------------------------------------------------------------------------------------------------
// Reuse, thread safety, cache_info

TEST(Hierarchy, IsReusableAndThreadSafeAcrossManyKeys) {
  TempDir dir;
  constexpr int k_keys = 16;
  constexpr int k_threads = 8;
  constexpr int k_rounds = 40;
  auto fast_options = folder_options(dir.sub("fast"), "fast");
  fast_options.max_bytes = Bytes{6 * 8192};  // small: entries are evicted and promoted back all the time
  fast_options.durability = Durability::no_sync;
  auto fast = make_folder(fast_options);
  auto slow_options = folder_options(dir.sub("slow"), "slow");
  slow_options.durability = Durability::no_sync;
  auto slow = make_folder(slow_options);
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});

  std::vector<CountingFetcher> fetchers;
  for (int k = 0; k < k_keys; ++k) fetchers.emplace_back(random_bytes(4096 + 256 * std::size_t(k), std::uint64_t(k)));

  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < k_threads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(std::uint32_t(t) + 1);
      for (int round = 0; round < k_rounds; ++round) {
        const int k = int(rng() % k_keys);
        const ShardKey key = make_key(std::uint64_t(1000 + k));
        auto got = h->get_or_fetch(key, fetchers[std::size_t(k)].fetcher());
        if (!got) {
          ++failures;
          ADD_FAILURE() << "key " << k << ": " << got.error().message;
          continue;
        }
        if (read_handle(got->handle) != fetchers[std::size_t(k)].bytes()) {
          ++failures;
          ADD_FAILURE() << "key " << k << ": wrong bytes";
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // The unbounded slow tier keeps every shard, so no shard is ever fetched twice.
  for (int k = 0; k < k_keys; ++k) EXPECT_LE(fetchers[std::size_t(k)].calls(), 1) << "key " << k;
  EXPECT_TRUE(staging_is_empty(*fast));
  EXPECT_TRUE(staging_is_empty(*slow));
}

TEST(Hierarchy, CacheInfoReturnsTiersInOrderWithUsageAndStats) {
  TempDir dir;
  auto fast = folder(dir, "fast", Bytes{1 << 20});
  auto slow = folder(dir, "slow", std::nullopt, Access::read_write);
  auto remote = memory_tier("remote");
  auto h = hierarchy({fast, slow, remote});
  const ShardKey key = make_key(60);
  CountingFetcher fetch(random_bytes(5000, 60));
  ASSERT_TRUE(h->get_or_fetch(key, fetch.fetcher()));  // a miss everywhere, then installs
  ASSERT_TRUE(h->get_or_fetch(key, fetch.fetcher()));  // a hit on the fast tier

  const auto info = h->cache_info();
  ASSERT_EQ(info.size(), 3u);
  EXPECT_EQ(info[0].name, "fast");
  EXPECT_EQ(info[1].name, "slow");
  EXPECT_EQ(info[2].name, "remote");
  EXPECT_EQ(info[0].type, "folder");
  EXPECT_EQ(info[1].type, "folder");
  EXPECT_EQ(info[2].type, "memory");
  EXPECT_EQ(info[0].location, dir.sub("fast"));
  EXPECT_EQ(info[0].max_bytes, Bytes{1 << 20});
  EXPECT_EQ(info[1].max_bytes, std::nullopt);
  EXPECT_FALSE(info[0].read_only);
  for (const auto& tier : {info[0], info[1]}) {
    ASSERT_TRUE(tier.usage.has_value()) << tier.name;
    EXPECT_EQ(tier.usage->entries, 1u) << tier.name;
    EXPECT_GE(tier.usage->used, Bytes{5000}) << tier.name;
  }
  // A remote tier's usage would cost a listing of the bucket: cache_info() does no network I/O.
  EXPECT_FALSE(info[2].usage.has_value());
  EXPECT_EQ(remote->usage()->entries, 1u);
  EXPECT_EQ(info[0].stats.hits, 1u);
  EXPECT_EQ(info[0].stats.misses, 1u);
  EXPECT_EQ(info[0].stats.installs, 1u);
  EXPECT_EQ(info[1].stats.hits, 0u);
  EXPECT_EQ(info[1].stats.misses, 1u);
  EXPECT_EQ(info[1].stats.installs, 1u);
  EXPECT_EQ(info[2].stats.misses, 1u);
  EXPECT_EQ(info[2].stats.installs, 1u);
  EXPECT_EQ(info[0].stats.bytes_installed, Bytes{5000});
}

TEST(Hierarchy, DestructionPersistsFolderTierStats) {
  TempDir dir;
  const ShardKey key = make_key(61);
  {
    auto fast = folder(dir, "fast");
    auto h = hierarchy({fast});
    CountingFetcher fetch(random_bytes(100, 61));
    ASSERT_TRUE(h->get_or_fetch(key, fetch.fetcher()));
    ASSERT_TRUE(h->get_or_fetch(key, fetch.fetcher()));
  }
  auto reopened = folder(dir, "fast");
  auto stats = reopened->cumulative_stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->installs, 1u);
  EXPECT_EQ(stats->hits, 1u);
  EXPECT_EQ(stats->misses, 1u);
}

}  // namespace
}  // namespace datavo
