// Tests of SampleStream (src/client/sample_stream.cpp, shard_mapping.cpp) against the fake origin: zero-copy
// views kept alive by the mapping, sharding through the stream, the prefetch bound, tar errors passed through,
// per-tier statistics and option errors.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "datavo/sample_stream.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"
#include "unit/client/fake_origin.hpp"

namespace datavo {
namespace {

using namespace std::chrono_literals;
using clienttest::fake_dataset;
using clienttest::FakeDataset;
using clienttest::FakeOrigin;
using shardtest::TempDir;

class SampleStreamTest : public ::testing::Test {
 protected:
  explicit SampleStreamTest(std::size_t shards = 6, std::size_t per_shard = 5)
      : origin(fake_dataset(shards, per_shard)), cache(clienttest::fresh_cache(dir.sub("cache"))) {}

  SampleStreamOptions options(std::vector<std::string> keys = {"audio.wav", "transcript.txt"}) {
    return clienttest::fake_stream_options(origin.base_url(), dir.sub("manifests"), cache, std::move(keys));
  }
  SampleStream open(SampleStreamOptions o) { return clienttest::open_fake_stream(std::move(o)); }

  TempDir dir;
  FakeOrigin origin;
  std::shared_ptr<ShardCacheHierarchy> cache;
};

TEST_F(SampleStreamTest, YieldsEverySampleWithTheRequestedKeys) {
  SampleStream stream = open(options());
  std::size_t count = 0;
  for (;;) {
    auto sample = stream.next();
    ASSERT_TRUE(sample) << sample.error().message;
    if (!*sample) break;
    const SampleView& s = **sample;
    ASSERT_EQ(s.fields.size(), 2u);
    EXPECT_EQ(s.fields[0].key, "audio.wav");
    EXPECT_EQ(s.fields[1].key, "transcript.txt");
    const std::string expected = clienttest::fake_payload(s.id, "transcript.txt");
    const auto text = s.field("transcript.txt");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(text.data()), text.size()), expected);
    EXPECT_TRUE(s.field("missing").empty());
    ++count;
  }
  EXPECT_EQ(count, 30u);
  auto after_end = stream.next();
  ASSERT_TRUE(after_end);
  EXPECT_FALSE(*after_end);
  const SampleStreamStats stats = stream.stats();
  EXPECT_EQ(stats.samples, 30u);
  EXPECT_EQ(stats.shards, 6u);
  EXPECT_EQ(stats.origin_fetches, 6u);
  ASSERT_EQ(stats.tiers.size(), 1u);
  EXPECT_EQ(stats.tiers[0].misses, 6u);
  EXPECT_EQ(stats.tiers[0].hits, 0u);
}

TEST_F(SampleStreamTest, FieldsAreZeroCopyViewsIntoTheMappingAndOutliveTheStream) {
  std::vector<SampleView> kept;
  {
    SampleStream stream = open(options({"audio.wav"}));
    for (;;) {
      auto sample = stream.next();
      ASSERT_TRUE(sample) << sample.error().message;
      if (!*sample) break;
      const SampleView& s = **sample;
      ASSERT_TRUE(s.mapping);
      const auto whole = s.mapping->bytes();
      const auto field = s.field("audio.wav");
      ASSERT_FALSE(field.empty());
      EXPECT_GE(field.data(), whole.data()) << "the field points into the shard mapping";
      EXPECT_LE(field.data() + field.size(), whole.data() + whole.size());
      kept.push_back(std::move(**sample));
    }
  }
  // Stream gone and the cache entries deleted: the views still read the right bytes.
  std::error_code ignored;
  std::filesystem::remove_all(dir.sub("cache"), ignored);
  ASSERT_EQ(kept.size(), 30u);
  for (const auto& s : kept) {
    const auto field = s.field("audio.wav");
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(field.data()), field.size()),
              clienttest::fake_payload(s.id, "audio.wav"));
  }
}

TEST_F(SampleStreamTest, SecondPassIsServedByTheCacheWithoutTickets) {
  {
    SampleStream cold = open(options());
    ASSERT_TRUE(clienttest::read_ids(cold));
  }
  const int tickets = origin.ticket_requests.load();
  const int shards = origin.shard_requests.load();
  EXPECT_EQ(tickets, 6);
  SampleStream warm = open(options());
  auto ids = clienttest::read_ids(warm);
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_EQ(ids->size(), 30u);
  EXPECT_EQ(origin.ticket_requests.load(), tickets);
  EXPECT_EQ(origin.shard_requests.load(), shards);
  const SampleStreamStats stats = warm.stats();
  EXPECT_EQ(stats.origin_fetches, 0u);
  EXPECT_EQ(stats.tiers[0].hits, 6u);
  EXPECT_EQ(stats.tiers[0].misses, 0u);
}

TEST_F(SampleStreamTest, TheTimeSpentWaitingForShardsIsCounted) {
  // Without prefetch every shard is fetched while next() waits: at least the origin's delay per shard.
  origin.shard_delay_ms = 100;
  auto cold_options = options();
  cold_options.prefetch_shards = 0;
  SampleStream cold = open(cold_options);
  ASSERT_TRUE(clienttest::read_ids(cold));
  const SampleStreamStats stats = cold.stats();
  EXPECT_EQ(stats.origin_fetches, 6u);
  EXPECT_GE(stats.shard_wait, std::chrono::milliseconds(6 * 100));
  EXPECT_GE(stats.shard_wait_after_first, std::chrono::milliseconds(5 * 100));
  EXPECT_LT(stats.shard_wait_after_first, stats.shard_wait) << "the first shard's wait is not in it";
  EXPECT_EQ(stats.tiers[0].served_bytes, Bytes{0}) << "nothing was held by the tier";
  EXPECT_GT(stats.origin_bytes, Bytes{0});
  SampleStream warm = open(cold_options);
  ASSERT_TRUE(clienttest::read_ids(warm));
  EXPECT_EQ(warm.stats().tiers[0].served_bytes, stats.origin_bytes) << "the same shards, now from the tier";
}

TEST_F(SampleStreamTest, KeyGroupsAreSeparateCacheEntries) {
  SampleStream audio = open(options({"audio.wav"}));
  ASSERT_TRUE(clienttest::read_ids(audio));
  SampleStream both = open(options());
  ASSERT_TRUE(clienttest::read_ids(both));
  EXPECT_EQ(both.stats().origin_fetches, 6u) << "a warm audio.wav group does not warm {audio.wav, transcript.txt}";
}

TEST_F(SampleStreamTest, ConsumersPartitionTheSamples) {
  std::multiset<std::string> all;
  std::size_t consumers = 0;
  for (std::size_t rank = 0; rank < 2; ++rank) {
    for (std::size_t worker = 0; worker < 2; ++worker) {
      auto o = options({"audio.wav"});
      o.rank = rank;
      o.world_size = 2;
      o.worker = worker;
      o.num_workers = 2;
      o.order = ShardOrder::shuffled;
      o.shuffle_seed = 11;
      o.epoch = 2;
      SampleStream stream = open(std::move(o));
      auto ids = clienttest::read_ids(stream);
      ASSERT_TRUE(ids) << ids.error().message;
      all.insert(ids->begin(), ids->end());
      ++consumers;
    }
  }
  EXPECT_EQ(consumers, 4u);
  EXPECT_EQ(all.size(), 30u);
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), 30u) << "no sample read twice";
}

TEST_F(SampleStreamTest, ShuffleOrderFollowsSeedAndEpoch) {
  auto indices = [&](std::uint64_t seed, std::uint64_t epoch) {
    auto o = options({"audio.wav"});
    o.order = ShardOrder::shuffled;
    o.shuffle_seed = seed;
    o.epoch = epoch;
    o.prefetch_shards = 0;
    return open(std::move(o)).shard_indices();
  };
  EXPECT_EQ(indices(3, 0), indices(3, 0));
  EXPECT_NE(indices(3, 0), indices(3, 1));
}

class SampleStreamPrefetchTest : public SampleStreamTest {
 protected:
  SampleStreamPrefetchTest() : SampleStreamTest(8, 2) {}
};

TEST_F(SampleStreamPrefetchTest, PrefetchIsBounded) {
  for (std::size_t depth : {0u, 1u, 3u}) {
    TempDir own;
    auto o = options({"audio.wav"});
    o.cache = clienttest::fresh_cache(own.sub("cache"));
    o.prefetch_shards = depth;
    const int before = origin.shard_requests.load();
    SampleStream stream = open(std::move(o));
    auto first = stream.next();
    ASSERT_TRUE(first && *first);
    // Give the prefetcher ample time to run ahead as far as it may.
    std::this_thread::sleep_for(400ms);
    EXPECT_EQ(origin.shard_requests.load() - before, int(1 + depth)) << "depth " << depth;
    EXPECT_LE(stream.stats().max_prefetched, depth);
    ASSERT_TRUE(clienttest::read_ids(stream));
    EXPECT_EQ(origin.shard_requests.load() - before, 8);
  }
}

TEST_F(SampleStreamTest, TarErrorsNameTheShardMemberAndOffset) {
  origin.broken_tar = true;
  auto o = options();
  o.prefetch_shards = 0;
  SampleStream stream = open(std::move(o));
  auto first = stream.next();
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().code, ErrorCode::integrity);
  const std::string& message = first.error().message;
  EXPECT_NE(message.find("shard 0 ("), std::string::npos) << message;
  EXPECT_NE(message.find(".tar"), std::string::npos) << message;
  EXPECT_NE(message.find("byte offset 1024"), std::string::npos) << message;
  auto again = stream.next();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, message) << "errors are sticky";
}

TEST_F(SampleStreamTest, FetchErrorsNameTheShard) {
  origin.wrong_content_hash = true;
  SampleStream stream = open(options());
  auto first = stream.next();
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().code, ErrorCode::integrity);
  EXPECT_NE(first.error().message.find("shard 0 of fake/train"), std::string::npos) << first.error().message;
}

TEST_F(SampleStreamTest, BadOptionsFailBeforeAnyRequest) {
  auto no_keys = SampleStream::from_dataset("fake/train", options({}));
  ASSERT_FALSE(no_keys);
  EXPECT_EQ(no_keys.error().code, ErrorCode::invalid_argument);
  auto bad_rank = options();
  bad_rank.rank = 3;
  bad_rank.world_size = 2;
  EXPECT_FALSE(SampleStream::from_dataset("fake/train", std::move(bad_rank)));
  EXPECT_FALSE(SampleStream::from_dataset("no-split", options()));
  EXPECT_EQ(origin.manifest_requests.load(), 0);
  auto unknown_key = SampleStream::from_dataset("fake/train", options({"video.mp4"}));
  ASSERT_FALSE(unknown_key);
  EXPECT_NE(unknown_key.error().message.find("video.mp4"), std::string::npos);
}

TEST_F(SampleStreamTest, DestroyingAStreamMidwayJoinsThePrefetcher) {
  auto o = options();
  o.prefetch_shards = 4;
  {
    SampleStream stream = open(std::move(o));
    auto first = stream.next();
    ASSERT_TRUE(first && *first);
  }
  SUCCEED();
}

TEST_F(SampleStreamTest, CancelMakesEveryLaterNextFail) {
  for (std::size_t depth : {0u, 2u}) {
    auto o = options();
    o.prefetch_shards = depth;
    SampleStream stream = open(std::move(o));
    auto first = stream.next();
    ASSERT_TRUE(first && *first);
    std::thread([&] { stream.cancel(); }).join();  // any thread
    for (int round = 0; round < 2; ++round) {
      auto next = stream.next();
      ASSERT_FALSE(next) << "depth " << depth;
      EXPECT_EQ(next.error().code, ErrorCode::cancelled);
      EXPECT_NE(next.error().message.find("fake/train"), std::string::npos) << next.error().message;
    }
    stream.cancel();  // idempotent
    EXPECT_EQ(stream.stats().samples, 1u);
  }
}

TEST_F(SampleStreamTest, MovedStreamKeepsReading) {
  SampleStream stream = open(options());
  auto first = stream.next();
  ASSERT_TRUE(first && *first);
  SampleStream moved = std::move(stream);
  auto rest = clienttest::read_ids(moved);
  ASSERT_TRUE(rest) << rest.error().message;
  EXPECT_EQ(rest->size(), 29u);
}

}  // namespace
}  // namespace datavo
