// Tests of run_demo() (src/ops/demo.cpp): a small demo end to end on loopback, its temporary directory removed or
// kept, and its bad requests.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "datavo/demo.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

class DemoTest : public ::testing::Test {
 protected:
  TempDir dir;
  clienttest::ScopedEnv tmpdir{"TMPDIR", dir.path()};
  clienttest::ScopedEnv token{"DATAVO_TOKEN", std::nullopt};
  clienttest::ScopedEnv stall{"DATAVO_STALL_TIMEOUT", std::nullopt};
};

TEST_F(DemoTest, TheColdPassFetchesEveryShardAndTheWarmPassNone) {
  DemoRequest request;
  request.samples = 30;
  request.samples_per_shard = 10;
  std::optional<DemoSetup> ready;
  request.on_ready = [&](const DemoSetup& setup) {
    ready = setup;
    struct stat st {};
    EXPECT_EQ(::stat(setup.store.c_str(), &st), 0) << "the store is made before the passes";
  };
  auto report = run_demo(request);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->error) << report->error->message;
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->shards, 3u);
  EXPECT_EQ(report->setup.samples, 30u);
  EXPECT_GT(report->setup.generated.count(), 30u * 16'000u) << "at least half a second of 16-bit audio each";
  EXPECT_EQ(report->setup.origin_url.rfind("http://127.0.0.1:", 0), 0u);
  EXPECT_EQ(report->cold.samples, 30u);
  EXPECT_EQ(report->cold.valid_wavs, 30u);
  EXPECT_EQ(report->cold.origin_shards, 3u);
  EXPECT_EQ(report->cold.requests.ticket, 3u);
  EXPECT_EQ(report->cold.requests.shard, 3u);
  EXPECT_EQ(report->warm.samples, 30u);
  EXPECT_EQ(report->warm.valid_wavs, 30u);
  EXPECT_EQ(report->warm.origin_shards, 0u);
  EXPECT_EQ(report->warm.requests.ticket + report->warm.requests.shard, 0u);
  EXPECT_EQ(report->warm.requests.not_modified, 1u) << "the warm pass only revalidates the manifest";
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "the temporary directory is removed";
}

TEST_F(DemoTest, AKeptDirectoryIsHandedOverAndLeftInPlace) {
  DemoRequest request;
  request.samples = 4;
  request.samples_per_shard = 2;
  request.keep = KeepDirectory::yes;
  std::string kept;
  request.on_kept = [&](const std::string& directory) { kept = directory; };
  auto report = run_demo(request);
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.rfind(dir.path() + "/datavo-demo-", 0), 0u) << kept;
  EXPECT_TRUE(std::filesystem::exists(kept + "/store"));
}

TEST_F(DemoTest, ZeroSamplesIsABadArgument) {
  for (auto [samples, per_shard] : {std::pair<std::size_t, std::size_t>{0, 10}, {10, 0}}) {
    DemoRequest request;
    request.samples = samples;
    request.samples_per_shard = per_shard;
    auto report = run_demo(request);
    ASSERT_FALSE(report);
    EXPECT_EQ(report.error().code, ErrorCode::invalid_argument);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "nothing is made for a bad request";
}

}  // namespace
}  // namespace datavo
