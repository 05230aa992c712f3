// Tests of cache_rm() (src/ops/cache_rm.cpp): named entries, the recorded entries of a dataset, and what counts as
// a failure.
#include <gtest/gtest.h>

#include "client/manifest_cache.hpp"
#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

class CacheRmTest : public ::testing::Test {
 protected:
  CacheRmTest() : cache(opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), opstest::folder(dir.sub("b"), "b")})) {
    opstest::install(*cache, opstest::key_of('1'), "one");
    opstest::install(*cache, opstest::key_of('2'), "two");
    const client::ManifestCache records(dir.sub("manifests"), Instance::local());
    record(records, '1', "voice", "train");
    record(records, '2', "voice", "test");
    record(records, '9', "voice", "train");  // recorded, never cached (or evicted since)
  }
  static void record(const client::ManifestCache& records, char digit, const std::string& dataset,
                     const std::string& split) {
    if (!records.store_shard(opstest::hash_of(digit), client::ShardRecord{dataset, split, 1, 0, {"audio.wav"}}))
      throw std::runtime_error("store_shard");
  }
  CacheRmRequest request(std::vector<char> digits, std::optional<std::string> dataset = std::nullopt) {
    CacheRmRequest r;
    for (char d : digits) r.hashes.push_back(opstest::hash_of(d));
    r.dataset = std::move(dataset);
    r.manifest_cache_dir = dir.sub("manifests");
    return r;
  }
  bool cached(char digit) {
    auto where = cache->locate(opstest::key_of(digit));
    return where && *where;
  }

  TempDir dir;
  std::shared_ptr<ShardCacheHierarchy> cache;
};

TEST_F(CacheRmTest, RemovesANamedEntryFromEveryWritableTier) {
  auto report = cache_rm(*cache, request({'1'}));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->error);
  ASSERT_EQ(report->entries.size(), 1u);
  EXPECT_EQ(report->entries[0].reason, RmReason::named);
  EXPECT_EQ(report->entries[0].removed_from, (std::vector<std::string>{"a", "b"})) << "a fetch installs in both";
  EXPECT_EQ(report->removed, 1u);
  EXPECT_FALSE(cached('1'));
  EXPECT_TRUE(cached('2'));
}

TEST_F(CacheRmTest, ANamedEntryThatIsNotCachedIsNotFound) {
  auto report = cache_rm(*cache, request({'1', '5'}));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->removed, 1u);
  EXPECT_EQ(report->not_cached, 1u);
  ASSERT_TRUE(report->error);
  EXPECT_EQ(report->error->code, ErrorCode::not_found);
  EXPECT_NE(report->error->message.find("1 of 2 entries are not cached"), std::string::npos);
}

TEST_F(CacheRmTest, ADatasetRemovesWhatWasRecordedOfItAndIsCached) {
  auto split = cache_rm(*cache, request({}, "voice/train"));
  ASSERT_TRUE(split) << split.error().message;
  EXPECT_FALSE(split->error);
  ASSERT_EQ(split->entries.size(), 1u) << "the recorded entry no tier holds is no entry";
  EXPECT_EQ(split->entries[0].hash, opstest::hash_of('1'));
  EXPECT_EQ(split->entries[0].reason, RmReason::of_dataset);
  EXPECT_TRUE(cached('2'));
  auto every_split = cache_rm(*cache, request({}, "voice"));
  ASSERT_TRUE(every_split);
  EXPECT_EQ(every_split->removed, 1u);
  EXPECT_FALSE(cached('2'));
  auto nothing_left = cache_rm(*cache, request({}, "voice"));
  ASSERT_TRUE(nothing_left);
  ASSERT_TRUE(nothing_left->error);
  EXPECT_EQ(nothing_left->error->code, ErrorCode::not_found);
}

TEST_F(CacheRmTest, BadRequestsRemoveNothing) {
  auto none = cache_rm(*cache, request({}));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::invalid_argument);
  auto bad_name = cache_rm(*cache, request({'1'}, "voice/../x"));
  ASSERT_FALSE(bad_name);
  EXPECT_EQ(bad_name.error().code, ErrorCode::invalid_argument);
  EXPECT_TRUE(cached('1'));
}

TEST_F(CacheRmTest, ATierThatFailsIsReportedPerEntry) {
  auto mixed = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), opstest::failing_memory_tier("down")});
  auto report = cache_rm(*mixed, request({'1'}));
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_EQ(report->entries.size(), 1u);
  EXPECT_EQ(report->entries[0].removed_from, std::vector<std::string>{"a"});
  ASSERT_EQ(report->entries[0].failures.size(), 1u);
  EXPECT_EQ(report->entries[0].failures[0].tier, "down");
  ASSERT_TRUE(report->error);
  EXPECT_NE(report->error->message.find("from every tier"), std::string::npos) << report->error->message;
}

}  // namespace
}  // namespace datavo
