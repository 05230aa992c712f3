// Tests of open_cache_session() and wait_for_uploads() (src/ops/cache_session.cpp).
#include <gtest/gtest.h>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

TEST(CacheSessionTest, OpensTheConfigGivenWithItsTiersAndTheInstanceGiven) {
  TempDir dir;
  const std::string config = dir.sub("shards.yaml");
  ASSERT_TRUE(util::write_file_atomic(config, "tiers:\n  - name: fast\n    path: " + dir.sub("fast") + "\n", 0644));
  auto session = open_cache_session(CacheSessionOptions{config, "team.example"});
  ASSERT_TRUE(session) << session.error().message;
  EXPECT_EQ(session->config.path, config);
  ASSERT_EQ(session->cache->tiers().size(), 1u);
  EXPECT_EQ(session->cache->tiers()[0]->name(), "fast");
  EXPECT_EQ(session->instance.name(), "team.example");
}

TEST(CacheSessionTest, ABadConfigOrInstanceIsRefused) {
  TempDir dir;
  const std::string config = dir.sub("shards.yaml");
  ASSERT_TRUE(util::write_file_atomic(config, "tiers:\n  - path: /tmp/x\n    type: ftp\n", 0644));
  auto bad_config = open_cache_session(CacheSessionOptions{config, "local"});
  ASSERT_FALSE(bad_config);
  EXPECT_EQ(bad_config.error().code, ErrorCode::config);
  EXPECT_NE(bad_config.error().message.find(config + ":3"), std::string::npos) << bad_config.error().message;

  ASSERT_TRUE(util::write_file_atomic(config, "tiers:\n  - path: " + dir.sub("a") + "\n", 0644));
  auto bad_instance = open_cache_session(CacheSessionOptions{config, "no/slashes"});
  ASSERT_FALSE(bad_instance);
  EXPECT_EQ(bad_instance.error().code, ErrorCode::invalid_argument);
}

TEST(CacheSessionTest, WaitForUploadsIsNulloptWithoutARemoteTier) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  opstest::install(*cache, opstest::key_of('1'), "bytes");
  EXPECT_FALSE(wait_for_uploads(*cache));
}

TEST(CacheSessionTest, WaitForUploadsReportsTheUploadsToARemoteTier) {
  TempDir dir;
  MemoryTierOptions memory;
  memory.name = "bucket";
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), make_memory_tier(memory)});
  opstest::install(*cache, opstest::key_of('1'), "one");
  opstest::install(*cache, opstest::key_of('2'), "two");
  const std::optional<UploadSummary> uploads = wait_for_uploads(*cache);
  ASSERT_TRUE(uploads);
  EXPECT_EQ(uploads->uploaded, 2u);
  EXPECT_EQ(uploads->failed + uploads->pending, 0u);
}

}  // namespace
}  // namespace datavo
