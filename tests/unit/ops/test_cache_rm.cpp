// Tests of cache_rm() (src/ops/cache_rm.cpp): named entries, the recorded entries of a dataset, and what counts as
// a failure.
#include <gtest/gtest.h>

#include "client/manifest_cache.hpp"
#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/core/remote_double.hpp"
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

TEST_F(CacheRmTest, AStoppedRemovalRemovesNothingMoreAndItsErrorIsCancelled) {
  const std::atomic<bool> stop{true};
  CacheRmRequest stopped = request({'1', '2'});
  stopped.stop = &stop;
  auto report = cache_rm(*cache, stopped);
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_TRUE(report->error);
  EXPECT_EQ(report->error->code, ErrorCode::cancelled) << report->error->message;
  EXPECT_TRUE(report->entries.empty());
  EXPECT_TRUE(cached('1'));
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

// A local folder tier above a shared one (a bucket's stand-in), both holding '1' and '2'.
class CacheRmScopeTest : public ::testing::Test {
 protected:
  CacheRmScopeTest()
      : bucket(sync_remote()), cache(opstest::hierarchy({opstest::folder(dir.sub("local"), "local"), bucket})) {
    for (char d : {'1', '2'}) opstest::install(*cache, opstest::key_of(d), std::string(1, d));
  }
  static std::shared_ptr<shardtest::ScriptedRemote> sync_remote() {
    auto remote = std::make_shared<shardtest::ScriptedRemote>("bucket");
    remote->mode = UploadMode::sync;  // every install is in the bucket when get_or_fetch returns
    return remote;
  }
  CacheRmRequest request(char digit, RmScope scope = RmScope::this_machine, std::vector<std::string> tiers = {}) {
    CacheRmRequest r;
    r.hashes.push_back(opstest::hash_of(digit));
    r.manifest_cache_dir = dir.sub("manifests");
    r.scope = scope;
    r.tiers = std::move(tiers);
    return r;
  }
  bool in_bucket(char digit) { return *bucket->inner().contains(opstest::key_of(digit)); }

  TempDir dir;
  std::shared_ptr<shardtest::ScriptedRemote> bucket;
  std::shared_ptr<ShardCacheHierarchy> cache;
};

TEST_F(CacheRmScopeTest, ByDefaultOnlyTheLocalTiersAreTouchedAndTheSharedOneIsNamedAsLeftAlone) {
  ASSERT_TRUE(in_bucket('1')) << "the fixture uploads";
  auto report = cache_rm(*cache, request('1'));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->error);
  ASSERT_EQ(report->entries.size(), 1u);
  EXPECT_EQ(report->entries[0].removed_from, std::vector<std::string>{"local"});
  EXPECT_TRUE(in_bucket('1'));
  ASSERT_EQ(report->tiers.size(), 2u);
  EXPECT_EQ(report->tiers[0].choice, RmTierChoice::removes);
  EXPECT_EQ(report->tiers[0].reach, TierReach::this_machine);
  EXPECT_EQ(report->tiers[1].tier, "bucket");
  EXPECT_EQ(report->tiers[1].reach, TierReach::shared);
  EXPECT_EQ(report->tiers[1].choice, RmTierChoice::shared);
}

TEST_F(CacheRmScopeTest, AnEntryOnlyTheSharedTierHoldsIsNotCachedInScopeAndTheErrorSaysWhere) {
  ASSERT_TRUE(cache_rm(*cache, request('1')));
  auto again = cache_rm(*cache, request('1'));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->not_cached, 1u);
  ASSERT_TRUE(again->error);
  EXPECT_EQ(again->error->code, ErrorCode::not_found);
  EXPECT_NE(again->error->message.find("shared tiers left alone: bucket"), std::string::npos) << again->error->message;
  EXPECT_TRUE(in_bucket('1'));
}

TEST_F(CacheRmScopeTest, ADatasetIsRemovedFromTheLocalTiersOnlyByDefault) {
  const client::ManifestCache records(dir.sub("manifests"), Instance::local());
  ASSERT_TRUE(records.store_shard(opstest::hash_of('2'), client::ShardRecord{"voice", "train", 1, 0, {"a.wav"}}));
  CacheRmRequest r;
  r.dataset = "voice";
  r.manifest_cache_dir = dir.sub("manifests");
  auto report = cache_rm(*cache, r);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->error);
  ASSERT_EQ(report->entries.size(), 1u);
  EXPECT_EQ(report->entries[0].removed_from, std::vector<std::string>{"local"});
  EXPECT_TRUE(in_bucket('2'));
}

TEST_F(CacheRmScopeTest, NamedTiersAreExactlyTheOnesTouched) {
  auto report = cache_rm(*cache, request('1', RmScope::named, {"bucket"}));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->error);
  EXPECT_EQ(report->entries[0].removed_from, std::vector<std::string>{"bucket"});
  EXPECT_FALSE(in_bucket('1'));
  EXPECT_EQ(report->tiers[0].choice, RmTierChoice::not_named);
  auto local = cache->locate(opstest::key_of('1'));
  ASSERT_TRUE(local);
  EXPECT_TRUE(*local) << "the local copy stays";
}

TEST_F(CacheRmScopeTest, EveryTierReachesTheSharedOneToo) {
  auto report = cache_rm(*cache, request('2', RmScope::every_tier));
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->entries[0].removed_from, (std::vector<std::string>{"local", "bucket"}));
  EXPECT_FALSE(in_bucket('2'));
}

TEST_F(CacheRmScopeTest, AnUnknownOrMissingTierNameRemovesNothingAndNamesTheTiers) {
  auto unknown = cache_rm(*cache, request('1', RmScope::named, {"local", "bukcet"}));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(unknown.error().message.find("no tier named 'bukcet' (the tiers: local, bucket)"), std::string::npos)
      << unknown.error().message;
  auto none = cache_rm(*cache, request('1', RmScope::named, {}));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::invalid_argument);
  EXPECT_TRUE(in_bucket('1'));
  auto local = cache->locate(opstest::key_of('1'));
  ASSERT_TRUE(local);
  EXPECT_TRUE(*local);
}

TEST_F(CacheRmScopeTest, TheTiersOfARequestAreKnownBeforeAnythingIsRemoved) {
  auto scope = cache_rm_tiers(*cache, request('1', RmScope::every_tier));
  ASSERT_TRUE(scope) << scope.error().message;
  ASSERT_EQ(scope->size(), 2u);
  EXPECT_EQ((*scope)[1].choice, RmTierChoice::removes);
  EXPECT_EQ((*scope)[1].type, "scripted");
  EXPECT_EQ((*scope)[1].location, "scripted://bucket");
  EXPECT_TRUE(in_bucket('1'));
}

}  // namespace
}  // namespace datavo
