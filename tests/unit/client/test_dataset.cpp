// Tests of dataset resolution (src/client/dataset.cpp) against the fake origin: the checks without I/O, the key
// group normalized against the manifest, the errors of dataset.hpp, and SampleStream::from_dataset refusing the
// same input with the same error.
#include <gtest/gtest.h>

#include <cerrno>

#include "datavo/dataset.hpp"
#include "datavo/sample_stream.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"
#include "unit/client/fake_origin.hpp"

namespace datavo {
namespace {

using clienttest::fake_dataset;
using clienttest::FakeOrigin;
using shardtest::TempDir;

class DatasetTest : public ::testing::Test {
 protected:
  DatasetTest()
      : origin(fake_dataset(3, 2)),
        client(clienttest::make_client(clienttest::client_options(origin.base_url(), dir.sub("manifests")))) {}

  Result<ResolvedDataset> resolve(const std::string& dataset, std::vector<std::string> keys,
                                  std::optional<std::uint64_t> revision = std::nullopt) {
    auto name = parse_dataset_request(dataset, keys);
    if (!name) return std::move(name).error();
    return resolve_dataset(*client, *name, std::move(keys), revision);
  }

  TempDir dir;
  FakeOrigin origin;
  std::shared_ptr<OriginClient> client;
};

TEST_F(DatasetTest, ParseNeedsAValidNameAndAKeyAndMakesNoRequest) {
  auto bad_name = parse_dataset_request("fake", {"audio.wav"});
  ASSERT_FALSE(bad_name);
  EXPECT_EQ(bad_name.error().code, ErrorCode::invalid_argument);
  auto no_key = parse_dataset_request("fake/train", {});
  ASSERT_FALSE(no_key);
  EXPECT_EQ(no_key.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(no_key.error().message.find("no key"), std::string::npos) << no_key.error().message;
  auto good = parse_dataset_request("fake/train", {"audio.wav"});
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->full(), "fake/train");
  EXPECT_EQ(origin.manifest_requests.load(), 0);
}

TEST_F(DatasetTest, KeysAreSortedAndDeduplicated) {
  auto resolved = resolve("fake/train", {"transcript.txt", "audio.wav", "transcript.txt"});
  ASSERT_TRUE(resolved) << resolved.error().message;
  EXPECT_EQ(resolved->keys, (std::vector<std::string>{"audio.wav", "transcript.txt"}));
  EXPECT_EQ(resolved->manifest.revision, 7u);
  EXPECT_EQ(resolved->manifest.shards.size(), 3u);
  EXPECT_EQ(resolved->source, ManifestSource::fetched);
}

TEST_F(DatasetTest, SomethingAbsentIsABadArgumentWithEnoent) {
  auto missing_key = resolve("fake/train", {"audio.wav", "video.mp4"});
  ASSERT_FALSE(missing_key);
  EXPECT_EQ(missing_key.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(missing_key.error().sys_errno, ENOENT);
  EXPECT_NE(missing_key.error().message.find("video.mp4"), std::string::npos);
  EXPECT_NE(missing_key.error().message.find("audio.wav, transcript.txt"), std::string::npos)
      << "the message lists the keys there are: " << missing_key.error().message;
  for (auto [dataset, revision] :
       {std::pair<std::string, std::optional<std::uint64_t>>{"other/train", std::nullopt}, {"fake/train", 8}}) {
    auto absent = resolve(dataset, {"audio.wav"}, revision);
    ASSERT_FALSE(absent) << dataset;
    EXPECT_EQ(absent.error().code, ErrorCode::invalid_argument) << dataset;
    EXPECT_EQ(absent.error().sys_errno, ENOENT) << dataset;
  }
}

TEST_F(DatasetTest, APinnedCachedRevisionMakesNoRequest) {
  ASSERT_TRUE(resolve("fake/train", {"audio.wav"}));
  const int before = origin.manifest_requests.load();
  auto pinned = resolve("fake/train", {"audio.wav"}, 7);
  ASSERT_TRUE(pinned) << pinned.error().message;
  EXPECT_EQ(pinned->source, ManifestSource::cache);
  EXPECT_EQ(origin.manifest_requests.load(), before);
}

// SampleStream::from_dataset resolves through the same code: every refusal is the same error, and an accepted
// dataset gives the same key group and revision.
TEST_F(DatasetTest, SampleStreamResolvesAlike) {
  auto cache = clienttest::fresh_cache(dir.sub("cache"));
  auto open = [&](const std::string& dataset, std::vector<std::string> keys, std::optional<std::uint64_t> revision) {
    SampleStreamOptions options;
    options.keys = std::move(keys);
    options.revision = revision;
    options.cache = cache;
    options.client = client;
    options.prefetch_shards = 0;
    return SampleStream::from_dataset(dataset, std::move(options));
  };
  struct Input {
    std::string dataset;
    std::vector<std::string> keys;
    std::optional<std::uint64_t> revision;
  };
  for (const Input& input :
       {Input{"fake", {"audio.wav"}, {}}, Input{"fake/train", {}, {}}, Input{"fake/train", {"video.mp4"}, {}},
        Input{"other/train", {"audio.wav"}, {}}, Input{"fake/train", {"audio.wav"}, 8}}) {
    auto direct = resolve(input.dataset, input.keys, input.revision);
    auto stream = open(input.dataset, input.keys, input.revision);
    ASSERT_FALSE(direct) << input.dataset;
    ASSERT_FALSE(stream) << input.dataset;
    EXPECT_EQ(stream.error().code, direct.error().code) << input.dataset;
    EXPECT_EQ(stream.error().sys_errno, direct.error().sys_errno) << input.dataset;
    EXPECT_EQ(stream.error().message, direct.error().message) << input.dataset;
  }
  auto direct = resolve("fake/train", {"transcript.txt", "audio.wav"});
  auto stream = open("fake/train", {"transcript.txt", "audio.wav"}, std::nullopt);
  ASSERT_TRUE(direct && stream);
  EXPECT_EQ(stream->keys(), direct->keys);
  EXPECT_EQ(stream->manifest().revision, direct->manifest.revision);
  EXPECT_EQ(stream->shard_indices(), (std::vector<std::uint64_t>{0, 1, 2}));
}

}  // namespace
}  // namespace datavo
