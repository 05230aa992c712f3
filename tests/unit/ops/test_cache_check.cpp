// Tests of cache_check() (src/ops/cache_check.cpp): a usable folder tier, and one that cannot be written.
#include <gtest/gtest.h>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

TEST(CacheCheckTest, AUsableTierIsOk) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  const CacheCheckReport report = cache_check(*cache);
  EXPECT_TRUE(report.ok);
  EXPECT_FALSE(report.error);
  ASSERT_EQ(report.tiers.size(), 1u);
  EXPECT_EQ(report.tiers[0].tier, "a");
  EXPECT_EQ(report.tiers[0].type, "folder");
  EXPECT_TRUE(report.tiers[0].usable);
  EXPECT_FALSE(report.tiers[0].check.steps.empty());
}

TEST(CacheCheckTest, ATierThatCannotBeUsedFailsTheCheckNamingHowMany) {
  TempDir dir;
  ASSERT_TRUE(util::write_file_atomic(dir.sub("not-a-dir"), "a file where the tier should be", 0644));
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), opstest::folder(dir.sub("not-a-dir"), "b")});
  const CacheCheckReport report = cache_check(*cache);
  EXPECT_FALSE(report.ok);
  ASSERT_EQ(report.tiers.size(), 2u);
  EXPECT_TRUE(report.tiers[0].usable);
  EXPECT_FALSE(report.tiers[1].usable);
  ASSERT_TRUE(report.error);
  EXPECT_EQ(report.error->code, ErrorCode::remote);
  EXPECT_NE(report.error->message.find("1 of 2 tiers"), std::string::npos) << report.error->message;
}

TEST(CacheCheckTest, AStoppedCheckProbesNoTierAndItsErrorIsCancelled) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  const std::atomic<bool> stop{true};
  const CacheCheckReport report = cache_check(*cache, &stop);
  EXPECT_FALSE(report.ok);
  EXPECT_TRUE(report.tiers.empty());
  ASSERT_TRUE(report.error);
  EXPECT_EQ(report.error->code, ErrorCode::cancelled) << report.error->message;
}

}  // namespace
}  // namespace datavo
