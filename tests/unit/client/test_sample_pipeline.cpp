// Tests of the sample pipeline (src/client/sample_pipeline.cpp) over a real SampleStream and the fake origin: the
// stream's order across batches, batches that grow from a first size, an error after the samples before it, stop() from
// another thread while the consumer waits and while the producer waits, stop_sample_pipelines(), and fork detection.
// Run under TSan too.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "datavo/sample_pipeline.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"
#include "unit/client/fake_origin.hpp"

namespace datavo {
namespace {

using namespace std::chrono_literals;
using clienttest::fake_dataset;
using clienttest::FakeOrigin;
using shardtest::TempDir;
using Clock = std::chrono::steady_clock;

class SamplePipelineTest : public ::testing::Test {
 protected:
  SamplePipelineTest() : origin(fake_dataset(6, 5)), cache(clienttest::fresh_cache(dir.sub("cache"))) {}

  SampleStream open(std::vector<std::string> keys = {"audio.wav", "transcript.txt"}) {
    SampleStreamOptions options;
    options.keys = std::move(keys);
    options.cache = cache;
    options.origin = clienttest::client_options(origin.base_url(), dir.sub("manifests"));
    auto stream = SampleStream::from_dataset("fake/train", std::move(options));
    if (!stream) throw std::runtime_error(stream.error().message);
    return std::move(*stream);
  }

  // Takes batches until the last one; the ids in order, and the error of the last batch.
  static std::pair<std::vector<std::string>, std::optional<Error>> drain(SamplePipeline& pipeline) {
    std::vector<std::string> ids;
    for (;;) {
      SampleBatch batch = pipeline.take();
      for (const auto& sample : batch.samples) ids.push_back(sample.id);
      pipeline.give_back(std::move(batch.samples));
      if (batch.error) return {ids, batch.error};
      if (batch.end) return {ids, std::nullopt};
    }
  }

  TempDir dir;
  FakeOrigin origin;
  std::shared_ptr<ShardCacheHierarchy> cache;
};

TEST_F(SamplePipelineTest, BatchesHoldTheStreamsSamplesInOrder) {
  SampleStream reference = open();
  auto expected = clienttest::read_ids(reference);
  ASSERT_TRUE(expected) << expected.error().message;
  ASSERT_EQ(expected->size(), 30u);
  for (std::size_t batch_size : {1u, 4u, 64u}) {
    SampleStream stream = open();
    SamplePipeline pipeline(stream, batch_size);
    auto [ids, error] = drain(pipeline);
    EXPECT_FALSE(error) << error->message;
    EXPECT_EQ(ids, *expected) << "batch size " << batch_size;
    SampleBatch after = pipeline.take();
    EXPECT_TRUE(after.end && after.samples.empty()) << "after the last batch, take() says the end again";
  }
}

// Takes batches until the last one; the size of each, its ids, and whether it ended in an error.
struct Drained {
  std::vector<std::size_t> sizes;
  std::vector<std::string> ids;
  std::optional<Error> error;
};
Drained drain_sizes(SamplePipeline& pipeline) {
  Drained out;
  for (;;) {
    SampleBatch batch = pipeline.take();
    out.sizes.push_back(batch.samples.size());
    for (const auto& sample : batch.samples) out.ids.push_back(sample.id);
    pipeline.give_back(std::move(batch.samples));
    if (batch.error || batch.end) {
      out.error = batch.error;
      return out;
    }
  }
}

TEST_F(SamplePipelineTest, BatchesGrowFromTheFirstSizeByDoublingToTheLargestMultipleOfIt) {
  SampleStream reference = open();
  auto expected = clienttest::read_ids(reference);
  ASSERT_TRUE(expected) << expected.error().message;
  ASSERT_EQ(expected->size(), 30u);
  struct Case {
    std::size_t batch_size, first;
    std::vector<std::size_t> sizes;  // of every batch, the last (with the end) included
  };
  for (const Case& c : {Case{14, 3, {3, 6, 12, 9}},         // 12: the largest multiple of 3 up to 14; 9 left at the end
                        Case{64, 4, {4, 8, 16, 2}},         // the stream ends first
                        Case{5, 0, {5, 5, 5, 5, 5, 5, 0}},  // no first size: every batch of 5, then the end alone
                        Case{4, 9, {4, 4, 4, 4, 4, 4, 4, 2}},  // a first size above batch_size: batch_size
                        Case{std::size_t(-1), 0, {30}}}) {     // a huge batch_size bounds the batch, reserves nothing
    SampleStream stream = open();
    SamplePipeline pipeline(stream, c.batch_size, c.first);
    Drained got = drain_sizes(pipeline);
    EXPECT_FALSE(got.error) << got.error->message;
    EXPECT_EQ(got.sizes, c.sizes) << "batch_size " << c.batch_size << ", first " << c.first;
    EXPECT_EQ(got.ids, *expected) << "batch_size " << c.batch_size << ", first " << c.first;
  }
}

TEST_F(SamplePipelineTest, AnErrorInAGrownBatchComesAfterItsSamples) {
  // As in AnErrorComesAfterTheSamplesBeforeIt, one member per sample; the fifth member's header is broken: three
  // samples, then the error. Batches of 2, then 4: the second holds the third sample and the error.
  origin.broken_tar = true;
  origin.broken_member = 4;
  SampleStream stream = open({"audio.wav"});
  SamplePipeline pipeline(stream, 8, 2);
  Drained got = drain_sizes(pipeline);
  EXPECT_EQ(got.ids, (std::vector<std::string>{"s0_0", "s0_1", "s0_2"}));
  EXPECT_EQ(got.sizes, (std::vector<std::size_t>{2, 1}));
  ASSERT_TRUE(got.error);
  EXPECT_EQ(got.error->code, ErrorCode::integrity) << got.error->message;
  EXPECT_TRUE(pipeline.take().end) << "nothing follows the error";
}

TEST_F(SamplePipelineTest, TryTakeNeverWaits) {
  origin.shard_delay_ms = 2000;
  SampleStream stream = open();
  SamplePipeline pipeline(stream);
  const auto started = Clock::now();
  EXPECT_FALSE(pipeline.try_take()) << "nothing is ready while the first shard downloads";
  EXPECT_LT(Clock::now() - started, 500ms);
  pipeline.stop();
}

TEST_F(SamplePipelineTest, AnErrorComesAfterTheSamplesBeforeIt) {
  // With one key each sample is one member, and a sample ends where the next member's header is read. The third
  // member's header is broken: the first sample, then the tar reader's error.
  origin.broken_tar = true;
  origin.broken_member = 2;
  SampleStream stream = open({"audio.wav"});
  SamplePipeline pipeline(stream);
  auto [ids, error] = drain(pipeline);
  EXPECT_EQ(ids, (std::vector<std::string>{"s0_0"}));
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, ErrorCode::integrity) << error->message;
  SampleBatch after = pipeline.take();
  EXPECT_TRUE(after.end && !after.error && after.samples.empty()) << "the error is handed over once";
}

TEST_F(SamplePipelineTest, StopFromAnotherThreadEndsAWaitingTake) {
  origin.shard_delay_ms = 3000;
  SampleStream stream = open();
  SamplePipeline pipeline(stream);
  auto taken = std::async(std::launch::async, [&] { return pipeline.take(); });
  EXPECT_EQ(taken.wait_for(200ms), std::future_status::timeout) << "the first shard is still downloading";
  const auto stopped = Clock::now();
  pipeline.stop();
  ASSERT_EQ(taken.wait_for(1s), std::future_status::ready) << "stop() wakes the consumer";
  SampleBatch batch = taken.get();
  EXPECT_TRUE(batch.samples.empty());
  EXPECT_TRUE(batch.end || (batch.error && batch.error->code == ErrorCode::cancelled));
  EXPECT_LT(Clock::now() - stopped, 1s);
}

TEST_F(SamplePipelineTest, DestroyingItWhileTheProducerWaitsForTheConsumerJoinsAtOnce) {
  SampleStream stream = open();
  auto pipeline = std::make_unique<SamplePipeline>(stream, 2);
  // Nothing is taken: the producer fills one batch, hands it over, fills the next and waits for room.
  for (auto deadline = Clock::now() + 5s; Clock::now() < deadline && stream.stats().samples < 4;)
    std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(stream.stats().samples, 4u) << "two batches ahead of a consumer that takes none, no more";
  const auto started = Clock::now();
  pipeline.reset();
  EXPECT_LT(Clock::now() - started, 1s);
}

TEST_F(SamplePipelineTest, GrowingBatchesStayTwoAheadOfAConsumerThatTakesNone) {
  SampleStream stream = open();
  SamplePipeline pipeline(stream, 16, 2);
  // The producer fills a batch of 2, hands it over, fills one of 4 and waits for room.
  for (auto deadline = Clock::now() + 5s; Clock::now() < deadline && stream.stats().samples < 6;)
    std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(stream.stats().samples, 6u);
  EXPECT_EQ(pipeline.take().samples.size(), 2u);
  EXPECT_EQ(pipeline.take().samples.size(), 4u);
}

TEST_F(SamplePipelineTest, StopSamplePipelinesStopsEveryLiveOne) {
  origin.shard_delay_ms = 3000;
  SampleStream first = open();
  SampleStream second = open();
  SamplePipeline a(first);
  SamplePipeline b(second);
  const auto started = Clock::now();
  stop_sample_pipelines();
  EXPECT_LT(Clock::now() - started, 2s) << "the producers' fetches are cancelled, not waited for";
  EXPECT_TRUE(a.take().samples.empty());
  EXPECT_TRUE(b.take().samples.empty());
}

// A child forked while a pipeline lives sees forked(), and a detector made in the child does not.
TEST_F(SamplePipelineTest, AForkedChildIsDetected) {
  SampleStream stream = open();
  SamplePipeline pipeline(stream);
  const ForkDetector before;
  EXPECT_FALSE(pipeline.forked());
  EXPECT_FALSE(before.forked());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The producer does not exist here: only look, and leave without destroying anything.
    const ForkDetector made_here;
    _exit(pipeline.forked() && before.forked() && !made_here.forked() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(pipeline.forked()) << "the parent is not a fork";
}

}  // namespace
}  // namespace datavo
