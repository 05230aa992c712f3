// The revisions the server answers from (src/origin/revision_cache.cpp): refusals of unknown names, the manifest
// the server writes for a revision, and that the client's parser reads the same value back.
#include <gtest/gtest.h>

#include <tuple>

#include "datavo/protocol.hpp"
#include "origin/revision_cache.hpp"
#include "unit/origin/origin_test_support.hpp"

namespace datavo::origin {
namespace {

using origintest::make_sample_dir;
using origintest::pack_or_fail;
using origintest::sample_ids;
using shardtest::TempDir;

class OriginRevisionCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_sample_dir(dir_.sub("src"), sample_ids(0, 5));
    pack_or_fail(dir_.sub("src"), dir_.sub("store"), "voice/train", 2);
    auto store = Store::open(dir_.sub("store"), Store::Create::no);
    ASSERT_TRUE(store) << store.error().message;
    store_.emplace(std::move(store).value());
  }
  std::shared_ptr<const CachedRevision> found(RevisionCache& cache, std::optional<std::uint64_t> revision) {
    auto result = cache.find("voice", "train", revision);
    EXPECT_TRUE(std::holds_alternative<std::shared_ptr<const CachedRevision>>(result));
    return std::holds_alternative<Refusal>(result) ? nullptr : std::get<0>(result);
  }
  TempDir dir_;
  std::optional<Store> store_;
};

TEST_F(OriginRevisionCacheTest, TheServedManifestParsesBackToTheRevision) {
  RevisionCache cache(*store_);
  auto cached = found(cache, std::nullopt);
  ASSERT_TRUE(cached);
  const Manifest expected = manifest_of(cached->revision);
  EXPECT_EQ(expected.name, (DatasetName{"voice", "train"}));
  EXPECT_EQ(expected.revision, 1u);
  EXPECT_EQ(expected.keys, (std::vector<std::string>{"audio.wav", "transcript.txt"}));
  ASSERT_EQ(expected.shards.size(), 3u);
  EXPECT_EQ(expected.shards[2], (ManifestShard{2, {"utt_0004"}}));
  auto parsed = Manifest::parse(cached->manifest_json);
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, expected);
  EXPECT_EQ(cached->etag, "\"" + expected.manifest_ref + ".1\"");
  EXPECT_EQ(found(cache, 1), cached) << "one parse per revision";
}

TEST_F(OriginRevisionCacheTest, UnknownNamesAreRefusedWith404) {
  RevisionCache cache(*store_);
  const std::vector<std::tuple<std::string, std::string, std::optional<std::uint64_t>, std::string>> cases = {
      {"nope", "train", std::nullopt, "unknown dataset \"nope\""},
      {"voice", "test", std::nullopt, "unknown split \"test\" of dataset \"voice\""},
      {"voice", "train", 2, "unknown revision 2 of voice/train"},
  };
  for (const auto& [dataset, split, revision, message] : cases) {
    auto result = cache.find(dataset, split, revision);
    ASSERT_TRUE(std::holds_alternative<Refusal>(result)) << message;
    EXPECT_EQ(std::get<Refusal>(result).status, 404);
    EXPECT_EQ(std::get<Refusal>(result).message, message);
  }
}

TEST_F(OriginRevisionCacheTest, AMalformedLatestIsAStoreFailure) {
  origintest::write_text(dir_.sub("store/datasets/voice/train/LATEST"), "x\n");
  RevisionCache cache(*store_);
  auto result = cache.find("voice", "train", std::nullopt);
  ASSERT_TRUE(std::holds_alternative<Refusal>(result));
  EXPECT_EQ(std::get<Refusal>(result).status, 500);
}

}  // namespace
}  // namespace datavo::origin
