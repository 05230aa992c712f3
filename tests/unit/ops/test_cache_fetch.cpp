// Tests of cache_fetch() (src/ops/cache_fetch.cpp) with file:// URLs: a miss installs, a hit does not read the URL,
// a wrong SHA-256 installs nothing.
#include <gtest/gtest.h>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/client/client_fixtures.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

class CacheFetchTest : public ::testing::Test {
 protected:
  CacheFetchTest() : cache(opstest::hierarchy({opstest::folder(dir.sub("a"), "a")})) {
    if (!util::write_file_atomic(dir.sub("shard.tar"), "the shard's bytes", 0644)) throw std::runtime_error("write");
  }
  CacheFetchRequest request(char digit) {
    return CacheFetchRequest{opstest::key_of(digit), "file://" + dir.sub("shard.tar"), {}, "", {}};
  }

  TempDir dir;
  clienttest::ScopedEnv stall{"DATAVO_STALL_TIMEOUT", std::nullopt};
  std::shared_ptr<ShardCacheHierarchy> cache;
};

TEST_F(CacheFetchTest, AMissDownloadsAndAHitDoesNot) {
  auto first = cache_fetch(*cache, request('1'));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->result.source, ServedFrom::fetched);
  EXPECT_EQ(first->hash, opstest::hash_of('1'));
  EXPECT_EQ(first->result.handle.size(), Bytes{17});
  EXPECT_FALSE(first->uploads) << "no remote tier";
  ::unlink(dir.sub("shard.tar").c_str());
  auto second = cache_fetch(*cache, request('1'));
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->result.source, ServedFrom::hit);
}

TEST_F(CacheFetchTest, BytesThatDoNotMatchTheExpectedSha256AreNotInstalled) {
  CacheFetchRequest r = request('2');
  r.expected.sha256 = *Sha256::parse(std::string(64, '0'));
  auto fetched = cache_fetch(*cache, r);
  ASSERT_FALSE(fetched);
  EXPECT_EQ(fetched.error().code, ErrorCode::integrity) << fetched.error().message;
  auto where = cache->locate(r.key);
  ASSERT_TRUE(where);
  EXPECT_FALSE(*where);
}

TEST_F(CacheFetchTest, ABadStallTimeoutInTheEnvironmentIsRefused) {
  clienttest::ScopedEnv bad{"DATAVO_STALL_TIMEOUT", "soon"};
  auto fetched = cache_fetch(*cache, request('3'));
  ASSERT_FALSE(fetched);
  EXPECT_EQ(fetched.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(fetched.error().message.find("DATAVO_STALL_TIMEOUT"), std::string::npos);
}

}  // namespace
}  // namespace datavo
