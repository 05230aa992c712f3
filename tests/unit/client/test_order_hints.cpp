// Tests of the order hints (src/client/order_hints.cpp) and of how SampleStream gives them: the places follow the next
// use of each shard; after a pass, LRU order by mtime is the order of the next epoch's reads, reversed; a prefetched
// shard never makes the tier evict a shard read before it (and, as a control, plain LRU does).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <thread>

#include "client/order_hints.hpp"
#include "datavo/folder_tier.hpp"
#include "datavo/sample_stream.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"
#include "unit/client/fake_origin.hpp"

namespace datavo {
namespace {

using namespace std::chrono_literals;
using WallClock = std::chrono::system_clock;
using clienttest::cache_of;
using clienttest::fake_dataset;
using clienttest::FakeOrigin;
using shardtest::TempDir;

WallClock::time_point entry_mtime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("cannot stat " + path);
  return WallClock::time_point(std::chrono::duration_cast<WallClock::duration>(
      std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

TEST(OrderHints, TheFurtherTheNextUseTheOlderThePlace) {
  const std::vector<std::size_t> this_epoch = {2, 0, 3, 1};  // shard 2 is read first, then 0, 3, 1
  const std::vector<std::size_t> next_epoch = {1, 3, 2, 0};
  const auto anchor = WallClock::now();
  client::OrderHints hints(this_epoch, next_epoch, 100ms, anchor);
  EXPECT_EQ(hints.before_use(2), anchor);
  EXPECT_EQ(hints.before_use(0), anchor - 100ms);
  EXPECT_EQ(hints.before_use(1), anchor - 300ms);
  // After its read: N + its place in the next epoch.
  EXPECT_EQ(hints.after_use(1), anchor - 400ms);
  EXPECT_EQ(hints.after_use(0), anchor - 700ms);
  // Every shard still to be read is younger than every shard read already.
  for (std::size_t a = 0; a < 4; ++a)
    for (std::size_t b = 0; b < 4; ++b) EXPECT_GT(hints.before_use(a), hints.after_use(b));
}

class OrderHintsStreamTest : public ::testing::Test {
 protected:
  static constexpr std::size_t k_shards = 16;
  OrderHintsStreamTest() : origin(fake_dataset(k_shards, 5)) {}

  SampleStreamOptions options(std::shared_ptr<ShardCacheHierarchy> cache) {
    return clienttest::fake_stream_options(origin.base_url(), dir.sub("manifests"), std::move(cache));
  }
  SampleStream open(SampleStreamOptions o) { return clienttest::open_fake_stream(std::move(o)); }
  std::shared_ptr<FolderTier> folder(std::optional<Bytes> max_bytes) {
    return clienttest::fresh_folder(dir.sub("tier"), "local", max_bytes);
  }
  // The entry path of each shard, by manifest position.
  std::vector<std::string> entry_paths(SampleStream& stream, FolderTier& tier, OriginClient& client) {
    std::vector<std::string> paths;
    for (std::size_t p = 0; p < stream.manifest().shards.size(); ++p)
      paths.push_back(tier.entry_path(client.shard_key(stream.manifest(), p, stream.keys())));
    return paths;
  }

  TempDir dir;
  FakeOrigin origin;
};

// Two consumers (ranks 0 and 1 of 2) read one shuffled epoch into one tier, at once. Afterwards the LRU order by
// mtime (oldest first, what eviction takes first) is the next epoch's order reversed, across both ranks' shards;
// with hints off it is not. The step is long against the skew of the two streams' starts (their anchors), as it
// is in a job whose ranks start an epoch together.
TEST_F(OrderHintsStreamTest, AfterAnEpochLruOrderIsTheNextEpochsOrderReversedAcrossConsumers) {
  for (const OrderHints mode : {OrderHints::on, OrderHints::off}) {
    auto tier = folder(std::nullopt);
    auto cache = cache_of(tier);
    auto client = clienttest::make_client(clienttest::client_options(origin.base_url(), dir.sub("manifests")));
    std::vector<SampleStream> streams;
    for (std::size_t rank = 0; rank < 2; ++rank) {
      SampleStreamOptions o = options(cache);
      o.client = client;
      o.order = ShardOrder::shuffled;
      o.shuffle_seed = 11;
      o.epoch = 3;
      o.rank = rank;
      o.world_size = 2;
      o.order_hints = mode;
      o.hint_step = 10min;
      streams.push_back(open(o));
    }
    std::thread other([&] { EXPECT_TRUE(clienttest::read_ids(streams[1])); });
    EXPECT_TRUE(clienttest::read_ids(streams[0]));
    other.join();
    for (auto& stream : streams) {
      // Each shard placed twice: when it landed (a miss) and once read.
      EXPECT_EQ(stream.stats().hints_placed, mode == OrderHints::on ? 2 * stream.shard_indices().size() : 0u);
    }
    const std::vector<std::string> paths = entry_paths(streams[0], *tier, *client);
    const std::vector<std::size_t> next = epoch_order(k_shards, ShardOrder::shuffled, 11, 4);
    std::vector<std::size_t> by_age(k_shards);
    std::iota(by_age.begin(), by_age.end(), std::size_t{0});
    std::sort(by_age.begin(), by_age.end(),
              [&](std::size_t a, std::size_t b) { return entry_mtime(paths[a]) < entry_mtime(paths[b]); });
    const std::vector<std::size_t> furthest_first(next.rbegin(), next.rend());
    if (mode == OrderHints::on)
      EXPECT_EQ(by_age, furthest_first);
    else
      EXPECT_NE(by_age, furthest_first) << "without hints the order is the install order: the test shows nothing";
    std::filesystem::remove_all(dir.sub("tier"));
  }
}

// The tier holds 10 shards' worth, 8 of them at the start: the shards read first (0-3) and some read later (8-11),
// those installed first (LRU's oldest). The stream reads in manifest order with a prefetch window of about 2 shards.
// With hints, the evictions that the fetches of 4-7 and 12-15 cause take only shards read already: every resident
// shard is a hit, 8 fetches in all. Without hints (the control) LRU evicts 8-11 before they are read: more fetches.
TEST_F(OrderHintsStreamTest, APrefetchNeverEvictsAShardReadBeforeIt) {
  // The shard size, from a pass into a scratch tier.
  std::uint64_t shard_bytes = 0;
  {
    auto scratch = cache_of(folder(std::nullopt));
    SampleStream stream = open(options(scratch));
    ASSERT_TRUE(clienttest::read_ids(stream));
    shard_bytes = stream.stats().origin_bytes.count() / k_shards;
    std::filesystem::remove_all(dir.sub("tier"));
  }
  for (const OrderHints mode : {OrderHints::on, OrderHints::off}) {
    auto tier = folder(Bytes{shard_bytes * 21 / 2});  // ten and a half shards
    auto cache = cache_of(tier);
    auto client = clienttest::make_client(clienttest::client_options(origin.base_url(), dir.sub("manifests")));
    SampleStreamOptions probe_options = options(cache);
    probe_options.client = client;
    probe_options.prefetch_shards = 0;
    probe_options.order_hints = OrderHints::off;
    SampleStream probe = open(probe_options);
    for (std::size_t p : {11u, 10u, 9u, 8u, 3u, 2u, 1u, 0u}) {
      auto fetched = cache->get_or_fetch(client->shard_key(probe.manifest(), p, probe.keys()),
                                         client->shard_fetcher(probe.manifest(), p, probe.keys()));
      ASSERT_TRUE(fetched) << fetched.error().message;
    }
    SampleStreamOptions o = options(cache);
    o.client = client;
    o.order_hints = mode;
    o.prefetch_budget = 0.25;  // 2.6 shards: two ahead
    SampleStream stream = open(o);
    ASSERT_TRUE(clienttest::read_ids(stream));
    const SampleStreamStats stats = stream.stats();
    ASSERT_TRUE(stats.prefetch_window_bytes);
    EXPECT_LE(stats.max_prefetched, 2u);
    if (mode == OrderHints::on) {
      EXPECT_EQ(stats.origin_fetches, 8u) << "a shard read before a prefetched one was evicted";
      EXPECT_EQ(stats.tiers[0].hits, 8u);
    } else {
      EXPECT_GT(stats.origin_fetches, 8u) << "plain LRU kept every resident shard: the test shows nothing";
    }
    std::filesystem::remove_all(dir.sub("tier"));
  }
}

// The byte bound of the window is one budget of the landing tier shared by every consumer of the machine: its ranks
// (local_world_size, else world_size) times their workers.
TEST_F(OrderHintsStreamTest, ThePrefetchBudgetIsSharedByTheConsumersOfTheMachine) {
  auto cache = cache_of(folder(Bytes{1'600'000}));
  const auto window = [&](std::optional<std::size_t> local) {
    SampleStreamOptions o = options(cache);
    o.world_size = 4;
    o.num_workers = 2;
    o.local_world_size = local;
    o.prefetch_shards = 0;
    SampleStream stream = open(o);
    return stream.stats().prefetch_window_bytes;
  };
  EXPECT_EQ(window(std::nullopt), Bytes{20'000});  // 0.1 x 1.6 MB / (4 x 2)
  EXPECT_EQ(window(2), Bytes{40'000});
  EXPECT_EQ(window(1), Bytes{80'000});
}

TEST_F(OrderHintsStreamTest, BadWindowOptionsAreRefusedBeforeAnyRequest) {
  auto cache = cache_of(folder(std::nullopt));
  for (double budget : {0.0, 0.6, -1.0}) {
    SampleStreamOptions o = options(cache);
    o.prefetch_budget = budget;
    auto stream = SampleStream::from_dataset("fake/train", o);
    ASSERT_FALSE(stream);
    EXPECT_EQ(stream.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(stream.error().message.find("prefetch_budget"), std::string::npos);
  }
  SampleStreamOptions o = options(cache);
  o.hint_step = 0ms;
  EXPECT_FALSE(SampleStream::from_dataset("fake/train", o));
  for (std::size_t local : {0u, 3u}) {
    SampleStreamOptions bad = options(cache);
    bad.world_size = 2;
    bad.local_world_size = local;
    auto stream = SampleStream::from_dataset("fake/train", bad);
    ASSERT_FALSE(stream);
    EXPECT_NE(stream.error().message.find("local_world_size"), std::string::npos);
  }
  EXPECT_EQ(origin.manifest_requests.load(), 0);
}

}  // namespace
}  // namespace datavo
