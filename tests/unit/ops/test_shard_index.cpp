// Tests of the shard index of the ops (src/ops/shard_index.cpp) over the manifest cache's shard records.
#include <gtest/gtest.h>

#include "client/manifest_cache.hpp"
#include "ops/shard_index.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"

namespace datavo::ops {
namespace {

using shardtest::TempDir;

TEST(ShardIndexTest, FindsWhatWasRecordedPerInstance) {
  TempDir dir;
  const client::ManifestCache team(dir.path(), *Instance::parse("team"));
  ASSERT_TRUE(team.store_shard(opstest::hash_of('a'), client::ShardRecord{"voice", "train", 3, 7, {"audio.wav"}}));
  ShardIndex index(dir.path());
  auto found = index.find("team", opstest::hash_of('a'));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->dataset, "voice");
  EXPECT_EQ(found->split, "train");
  EXPECT_EQ(found->revision, 3u);
  EXPECT_EQ(found->shard_index, 7u);
  EXPECT_EQ(found->keys, std::vector<std::string>{"audio.wav"});
  EXPECT_FALSE(index.find("other", opstest::hash_of('a'))) << "records are per instance";
  EXPECT_FALSE(index.find("team", opstest::hash_of('b')));
  EXPECT_FALSE(index.find(".hidden", opstest::hash_of('a'))) << "no instance is named so";
  const auto all = index.all(*Instance::parse("team"));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].first, opstest::hash_of('a'));
}

TEST(ShardIndexTest, AMissingManifestCacheHasNoRecords) {
  TempDir dir;
  ShardIndex index(dir.sub("never-made"));
  EXPECT_FALSE(index.find("team", opstest::hash_of('a')));
  EXPECT_TRUE(index.all(*Instance::parse("team")).empty());
}

}  // namespace
}  // namespace datavo::ops
