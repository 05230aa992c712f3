// Tests of cache_verify() (src/ops/cache_verify.cpp): an entry that no longer matches its digest is an integrity
// failure until it is quarantined; cloud tiers get a row of their own (objects checked, or the error of a tier that
// cannot be checked, the other tiers checked all the same), and only the tiers without a verification are in
// not_verified. The cloud tiers' own checks are in tests/unit/tier/cloud/test_blob_tier.cpp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "datavo/operations.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "unit/ops/ops_fixtures.hpp"
#include "unit/tier/cloud/tiers_on_fake.hpp"

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

TEST(CacheVerifyTest, CloudTiersAreCheckedEachInARowAndOneThatCannotBeIsAnErrorRow) {
  TempDir dir;
  fakecloud::FakeBucket fake(fakecloud::Dialect::s3, "bucket", dir.sub("home"));
  fakecloud::FakeCloud& cloud = fake.cloud;
  auto bucket = fakecloud::make_tier_on(cloud, "bucket", {.name = "bucket"}, fake.env);
  auto gone = fakecloud::make_tier_on(cloud, "no-such-bucket", {.name = "gone"}, fake.env);
  MemoryTierOptions memory;
  memory.name = "memory";
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a"), bucket, gone, make_memory_tier(memory)});
  const std::string bytes = shardtest::random_bytes(1000, 1);
  cloud.put_object("bucket", "local/" + std::string(64, 'b') + ".tar", bytes.substr(0, 10),
                   {{"datavo-sha256", shardtest::sha256_of(bytes).hex()}, {"datavo-size", "1000"}});

  const CacheVerifyReport report = cache_verify(*cache, Repair::no);
  ASSERT_EQ(report.tiers.size(), 1u) << "the folder tier";
  ASSERT_EQ(report.objects.size(), 2u) << "both cloud tiers, in order";
  EXPECT_EQ(report.objects[0].verify.bad, 1u);
  EXPECT_FALSE(report.objects[0].error);
  ASSERT_TRUE(report.objects[1].error) << "a tier that cannot be listed is a row with its error, not a crash";
  EXPECT_EQ(report.objects[1].error->code, ErrorCode::not_found);
  ASSERT_EQ(report.not_verified.size(), 1u);
  EXPECT_EQ(report.not_verified[0].tier, "memory");
  EXPECT_EQ(report.unrepaired, 1u);
  ASSERT_TRUE(report.error);
  EXPECT_EQ(report.error->code, ErrorCode::not_found) << "the tier that could not be checked comes first";
  EXPECT_NE(report.error->message.find(gone->name()), std::string::npos) << report.error->message;

  const CacheVerifyReport repaired = cache_verify(*cache, Repair::yes, VerifyDepth::full);
  EXPECT_EQ(repaired.depth, VerifyDepth::full);
  EXPECT_EQ(repaired.objects[0].verify.removed, 1u);
  EXPECT_EQ(repaired.unrepaired, 0u);
  EXPECT_EQ(cloud.object_count("bucket"), 0u);
}

TEST(CacheVerifyTest, AStoppedVerifyEndsCancelledAndQuarantinesNothing) {
  TempDir dir;
  auto cache = opstest::hierarchy({opstest::folder(dir.sub("a"), "a")});
  const FetchResult bad = opstest::install(*cache, opstest::key_of('2'), "fine bytes");
  const int fd = ::open(bad.handle.path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "F", 1, 0), 1);
  ::close(fd);
  const std::atomic<bool> stop{true};
  const CacheVerifyReport report = cache_verify(*cache, Repair::yes, VerifyDepth::metadata, &stop);
  ASSERT_TRUE(report.error);
  EXPECT_EQ(report.error->code, ErrorCode::cancelled) << report.error->message;
  EXPECT_TRUE(shardtest::path_exists(bad.handle.path())) << "nothing quarantined";
}

}  // namespace
}  // namespace datavo
