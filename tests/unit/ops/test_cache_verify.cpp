// Tests of cache_verify() (src/ops/cache_verify.cpp): an entry that no longer matches its digest is an integrity
// failure until it is quarantined.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "datavo/operations.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"

namespace datavo {
namespace {

using shardtest::TempDir;

TEST(CacheVerifyTest, ACorruptEntryFailsUntilRepaired) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  opstest::install(*cache, opstest::key_of('1'), "good bytes");
  const FetchResult bad = opstest::install(*cache, opstest::key_of('2'), "fine bytes");
  const int fd = ::open(bad.handle.path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "F", 1, 0), 1);  // same size, other bytes
  ::close(fd);

  const CacheVerifyReport check = cache_verify(*cache, Repair::no);
  ASSERT_EQ(check.tiers.size(), 1u);
  EXPECT_EQ(check.tiers[0].verify.checked, 2u);
  EXPECT_EQ(check.tiers[0].verify.bad, 1u);
  EXPECT_EQ(check.unrepaired, 1u);
  ASSERT_TRUE(check.error);
  EXPECT_EQ(check.error->code, ErrorCode::integrity);

  const CacheVerifyReport repaired = cache_verify(*cache, Repair::yes);
  EXPECT_EQ(repaired.tiers[0].verify.quarantined, 1u);
  EXPECT_EQ(repaired.unrepaired, 0u);
  EXPECT_FALSE(repaired.error);
  const CacheVerifyReport after = cache_verify(*cache, Repair::no);
  EXPECT_FALSE(after.error);
  EXPECT_EQ(after.tiers[0].verify.checked, 1u);
}

}  // namespace
}  // namespace datavo
