// Tests of the shard assignment (src/client/shard_order.cpp): rank/world/worker sharding partitions the shards
// exactly, and the shuffle is deterministic per (seed, epoch) and differs across epochs.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "datavo/sample_stream.hpp"

namespace datavo {
namespace {

SampleStreamOptions consumer(std::size_t rank, std::size_t world, std::size_t worker, std::size_t workers,
                             ShardOrder order = ShardOrder::manifest, std::uint64_t seed = 0, std::uint64_t epoch = 0) {
  SampleStreamOptions options;
  options.rank = rank;
  options.world_size = world;
  options.worker = worker;
  options.num_workers = workers;
  options.order = order;
  options.shuffle_seed = seed;
  options.epoch = epoch;
  return options;
}

TEST(AssignShardsTest, RoundRobinOverRankTimesWorkersPlusWorker) {
  // 2 ranks x 2 workers: consumer id = rank * 2 + worker; position p goes to p % 4.
  auto mine = assign_shards(10, consumer(1, 2, 0, 2));
  ASSERT_TRUE(mine);
  EXPECT_EQ(*mine, (std::vector<std::size_t>{2, 6}));
  auto other = assign_shards(10, consumer(0, 2, 1, 2));
  ASSERT_TRUE(other);
  EXPECT_EQ(*other, (std::vector<std::size_t>{1, 5, 9}));
}

TEST(AssignShardsTest, ConsumersPartitionTheShardsExactly) {
  for (ShardOrder order : {ShardOrder::manifest, ShardOrder::shuffled}) {
    for (std::size_t count : {0u, 1u, 7u, 64u, 101u}) {
      for (auto [world, workers] : {std::pair{1u, 1u}, {2u, 1u}, {3u, 2u}, {4u, 4u}, {8u, 3u}}) {
        std::vector<int> seen(count, 0);
        std::size_t smallest = count, largest = 0;
        for (std::size_t rank = 0; rank < world; ++rank) {
          for (std::size_t worker = 0; worker < workers; ++worker) {
            auto mine = assign_shards(count, consumer(rank, world, worker, workers, order, 42, 3));
            ASSERT_TRUE(mine) << mine.error().message;
            for (std::size_t p : *mine) {
              ASSERT_LT(p, count);
              ++seen[p];
            }
            smallest = std::min(smallest, mine->size());
            largest = std::max(largest, mine->size());
          }
        }
        for (std::size_t p = 0; p < count; ++p)
          EXPECT_EQ(seen[p], 1) << "shard " << p << " of " << count << ", world " << world << " x " << workers;
        EXPECT_LE(largest - std::min(smallest, largest), 1u) << "balanced within one shard";
      }
    }
  }
}

TEST(AssignShardsTest, ShuffleIsDeterministicPerSeedAndEpoch) {
  auto a = assign_shards(100, consumer(0, 1, 0, 1, ShardOrder::shuffled, 7, 0));
  auto b = assign_shards(100, consumer(0, 1, 0, 1, ShardOrder::shuffled, 7, 0));
  auto next_epoch = assign_shards(100, consumer(0, 1, 0, 1, ShardOrder::shuffled, 7, 1));
  auto other_seed = assign_shards(100, consumer(0, 1, 0, 1, ShardOrder::shuffled, 8, 0));
  ASSERT_TRUE(a && b && next_epoch && other_seed);
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *next_epoch);
  EXPECT_NE(*a, *other_seed);
  std::vector<std::size_t> identity(100);
  std::iota(identity.begin(), identity.end(), std::size_t{0});
  EXPECT_NE(*a, identity) << "a shuffle that shuffles";
  auto sorted = *a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, identity) << "a permutation";
  // Every epoch of ten gives a distinct order.
  std::set<std::vector<std::size_t>> orders;
  for (std::uint64_t epoch = 0; epoch < 10; ++epoch)
    orders.insert(*assign_shards(100, consumer(0, 1, 0, 1, ShardOrder::shuffled, 7, epoch)));
  EXPECT_EQ(orders.size(), 10u);
}

TEST(AssignShardsTest, ShuffleOrderIsPinned) {
  // Every machine and standard library must compute the same order. These values come from an independent
  // Python transcription of the splitmix64 Fisher-Yates of shard_order.cpp.
  auto epoch0 = assign_shards(8, consumer(0, 1, 0, 1, ShardOrder::shuffled, 1, 0));
  auto epoch1 = assign_shards(8, consumer(0, 1, 0, 1, ShardOrder::shuffled, 1, 1));
  ASSERT_TRUE(epoch0 && epoch1);
  EXPECT_EQ(*epoch0, (std::vector<std::size_t>{3, 0, 7, 4, 2, 1, 6, 5}));
  EXPECT_EQ(*epoch1, (std::vector<std::size_t>{7, 5, 2, 3, 1, 6, 0, 4}));
}

TEST(AssignShardsTest, RefusesBadConsumers) {
  EXPECT_FALSE(assign_shards(4, consumer(2, 2, 0, 1)));
  EXPECT_FALSE(assign_shards(4, consumer(0, 1, 1, 1)));
  EXPECT_FALSE(assign_shards(4, consumer(0, 0, 0, 1)));
  EXPECT_FALSE(assign_shards(4, consumer(0, 1, 0, 0)));
  auto bad = assign_shards(4, consumer(5, 2, 0, 1));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace datavo
