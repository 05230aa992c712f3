// Tests of what a warm begins with (src/ops/warm_setup.cpp): bad input fails before any request, and a dataset is
// resolved as SampleStream::from_dataset resolves it, so that `datavo warm`, `datavo read` and the Python SDK accept
// and refuse the same input with the same errors and see the same shards.
#include <gtest/gtest.h>

#include "datavo/sample_stream.hpp"
#include "ops/warm_setup.hpp"
#include "unit/ops/warm_fixture.hpp"

namespace datavo {
namespace {

class WarmSetupTest : public opstest::WarmFixture {};

TEST_F(WarmSetupTest, BadInputFailsBeforeAnyRequest) {
  WarmRequest no_jobs = request();
  no_jobs.jobs = 0;
  for (const WarmRequest& bad : {request("fake"), request("fake/train", {}), no_jobs}) {
    auto setup = ops::set_up_warm(bad);
    ASSERT_FALSE(setup);
    EXPECT_EQ(setup.error().code, ErrorCode::invalid_argument) << setup.error().message;
  }
  EXPECT_EQ(origin.manifest_requests.load(), 0);
}

TEST_F(WarmSetupTest, ResolvesADatasetAsSampleStreamDoes) {
  auto open_stream = [&](const WarmRequest& r) {
    SampleStreamOptions options;
    options.keys = r.keys;
    options.revision = r.revision;
    options.cache = cache;
    options.origin = r.origin;
    options.prefetch_shards = 0;
    return SampleStream::from_dataset(r.dataset, std::move(options));
  };
  WarmRequest unknown_revision = request();
  unknown_revision.revision = 8;
  for (const WarmRequest& bad : {request("fake"), request("fake/train", {}), request("fake/train", {"video.mp4"}),
                                 request("other/train"), unknown_revision}) {
    auto setup = ops::set_up_warm(bad);
    auto stream = open_stream(bad);
    ASSERT_FALSE(setup) << bad.dataset;
    ASSERT_FALSE(stream) << bad.dataset;
    EXPECT_EQ(setup.error().code, stream.error().code) << bad.dataset;
    EXPECT_EQ(setup.error().sys_errno, stream.error().sys_errno) << bad.dataset;
    EXPECT_EQ(setup.error().message, stream.error().message) << bad.dataset;
  }
  auto setup = ops::set_up_warm(request());
  auto stream = open_stream(request());
  ASSERT_TRUE(setup) << setup.error().message;
  ASSERT_TRUE(stream) << stream.error().message;
  EXPECT_EQ(setup->dataset.keys, stream->keys());
  EXPECT_EQ(setup->dataset.manifest.revision, stream->manifest().revision);
  std::vector<std::uint64_t> shards;
  for (const auto& shard : setup->dataset.manifest.shards) shards.push_back(shard.index);
  EXPECT_EQ(shards, stream->shard_indices());
  EXPECT_EQ(setup->key(0).hash, setup->client->shard_key(stream->manifest(), 0, stream->keys()).hash);
}

}  // namespace
}  // namespace datavo
