// Tests of cache_ls() (src/ops/cache_ls.cpp): the entries of one instance or of all, with their shard records, the
// total size, a tier that cannot be listed, and a caller's stop.
#include <gtest/gtest.h>

#include <atomic>

#include "client/manifest_cache.hpp"
#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

class CacheLsTest : public ::testing::Test {
 protected:
  CacheLsTest() : cache(opstest::hierarchy({opstest::folder(dir.sub("a"), "a")})) {
    opstest::install(*cache, opstest::key_of('1', "team"), "12345");
    opstest::install(*cache, opstest::key_of('2', "team"), "123");
    opstest::install(*cache, opstest::key_of('3', "other"), "1");
    const client::ManifestCache records(dir.sub("manifests"), *Instance::parse("team"));
    if (!records.store_shard(opstest::hash_of('1'), client::ShardRecord{"voice", "train", 2, 0, {"audio.wav"}}))
      throw std::runtime_error("store_shard");
  }
  CacheLsRequest request(std::optional<std::string> instance) {
    CacheLsRequest r;
    if (instance) r.instance = *Instance::parse(*instance);
    r.manifest_cache_dir = dir.sub("manifests");
    return r;
  }

  TempDir dir;
  std::shared_ptr<ShardCacheHierarchy> cache;
};

TEST_F(CacheLsTest, ListsTheEntriesOfOneInstanceWithTheirRecords) {
  const CacheLsReport report = cache_ls(*cache, request("team"));
  EXPECT_FALSE(report.error);
  EXPECT_EQ(report.instance, "team");
  ASSERT_EQ(report.entries.size(), 2u);
  EXPECT_EQ(report.size, Bytes{8});
  for (const auto& e : report.entries) {
    EXPECT_EQ(e.tier, "a");
    EXPECT_EQ(e.entry.instance, "team");
    if (e.entry.hash == opstest::hash_of('1')) {
      ASSERT_TRUE(e.shard);
      EXPECT_EQ(e.shard->dataset, "voice");
      EXPECT_EQ(e.shard->revision, 2u);
    } else {
      EXPECT_FALSE(e.shard) << "nothing recorded this one";
    }
  }
}

TEST_F(CacheLsTest, AStoppedListingListsNoMoreTiersAndSaysItWasStopped) {
  const std::atomic<bool> stop{true};  // the caller stopped it before its first tier (Python's Ctrl-C)
  CacheLsRequest stopped = request("team");
  stopped.stop = &stop;
  const CacheLsReport report = cache_ls(*cache, stopped);
  ASSERT_TRUE(report.error);
  EXPECT_EQ(report.error->code, ErrorCode::cancelled) << report.error->message;
  EXPECT_TRUE(report.tiers.empty()) << "no tier listed after the stop";
  EXPECT_TRUE(report.failures.empty()) << "a tier not listed because of a stop is no failure of the tier";
}

TEST_F(CacheLsTest, EveryInstanceWithoutOne) {
  const CacheLsReport report = cache_ls(*cache, request(std::nullopt));
  EXPECT_FALSE(report.instance);
  EXPECT_EQ(report.entries.size(), 3u);
  EXPECT_EQ(report.size, Bytes{9});
}

TEST_F(CacheLsTest, ATierThatCannotBeListedIsReportedAndTheOthersAreStillListed) {
  auto mixed = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), opstest::failing_memory_tier("down")});
  const CacheLsReport report = cache_ls(*mixed, request("team"));
  EXPECT_EQ(report.entries.size(), 2u);
  ASSERT_EQ(report.failures.size(), 1u);
  EXPECT_EQ(report.failures[0].tier, "down");
  ASSERT_TRUE(report.error);
  EXPECT_NE(report.error->message.find("cannot list tier 'down'"), std::string::npos) << report.error->message;
}

TEST_F(CacheLsTest, TotalsArePerTierSoThatALocalCopyAndARemoteOneAreNotOneSum) {
  auto two = opstest::hierarchy({opstest::folder(dir.sub("top"), "top"), opstest::folder(dir.sub("mid"), "mid")});
  opstest::install(*two, opstest::key_of('1', "team"), "12345");  // a fetch installs in both
  opstest::install(*two, opstest::key_of('2', "team"), "123");
  ASSERT_TRUE(two->tiers()[1]->remove(opstest::key_of('2', "team")));
  auto with_down = opstest::hierarchy({two->tiers()[0], two->tiers()[1], opstest::failing_memory_tier("down")});
  const CacheLsReport report = cache_ls(*with_down, request("team"));
  ASSERT_EQ(report.tiers.size(), 3u);
  EXPECT_EQ(report.tiers[0].tier, "top");
  EXPECT_EQ(report.tiers[0].entries, 2u);
  EXPECT_EQ(report.tiers[0].size, Bytes{8});
  EXPECT_TRUE(report.tiers[0].listed);
  EXPECT_EQ(report.tiers[1].tier, "mid");
  EXPECT_EQ(report.tiers[1].entries, 1u);
  EXPECT_EQ(report.tiers[1].size, Bytes{5});
  EXPECT_EQ(report.tiers[2].tier, "down");
  EXPECT_FALSE(report.tiers[2].listed);
  EXPECT_EQ(report.tiers[2].entries, 0u);
  EXPECT_EQ(report.size, Bytes{13}) << "every copy, labelled as such by the front ends";
}

}  // namespace
}  // namespace datavo
