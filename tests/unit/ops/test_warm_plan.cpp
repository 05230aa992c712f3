// Tests of plan_warm() (src/ops/warm_plan.cpp): what a warm would fetch, with the manifest request only, before and
// after a warm.
#include <gtest/gtest.h>

#include "datavo/warm.hpp"
#include "unit/ops/warm_fixture.hpp"

namespace datavo {
namespace {

class WarmPlanTest : public opstest::WarmFixture {};

TEST_F(WarmPlanTest, BeforeAWarmEveryShardIsToFetchAndNothingIsFetched) {
  auto plan = plan_warm(request());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->dataset, "fake/train");
  ASSERT_EQ(plan->shards.size(), 6u);
  EXPECT_EQ(plan->shards_to_fetch, 6u);
  EXPECT_EQ(plan->cached_shards, 0u);
  for (std::size_t i = 0; i < plan->shards.size(); ++i) {
    EXPECT_EQ(plan->shards[i].shard_index, i);
    EXPECT_EQ(plan->shards[i].samples, 5u);
    EXPECT_FALSE(plan->shards[i].tier);
    EXPECT_FALSE(plan->shards[i].size);
  }
  EXPECT_EQ(origin.ticket_requests.load(), 0);
  EXPECT_EQ(origin.shard_requests.load(), 0);
}

TEST_F(WarmPlanTest, AfterAWarmEveryShardIsInTheFolderTierWithItsSize) {
  auto warmed = warm(request());
  ASSERT_TRUE(warmed) << warmed.error().message;
  auto plan = plan_warm(request());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->cached_shards, 6u);
  EXPECT_EQ(plan->shards_to_fetch, 0u);
  EXPECT_EQ(plan->cached_size, warmed->size);
  for (const auto& shard : plan->shards) {
    EXPECT_EQ(shard.tier, "local");
    EXPECT_TRUE(shard.size);
  }
}

}  // namespace
}  // namespace datavo
