// Tests of the folder tier's verify (src/tier/folder/verify.cpp): every entry re-hashed against what was recorded at
// install; Repair::yes quarantines the bad ones.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "util/cancel.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

TEST(FolderTier, VerifyFindsACorruptedEntryAndRepairQuarantinesIt) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey good = make_key(50);
  const ShardKey bad = make_key(51);
  ASSERT_TRUE(commit_bytes(*tier, good, random_bytes(4000, 50)));
  ASSERT_TRUE(commit_bytes(*tier, bad, random_bytes(4000, 51)));

  // Overwrite bytes in place: same size, same inode, different content.
  const std::string bad_path = tier->entry_path(bad);
  {
    int fd = ::open(bad_path.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string original = read_path(bad_path);
    char flipped[16];
    for (int i = 0; i < 16; ++i) flipped[i] = static_cast<char>(~original[100 + std::size_t(i)]);
    ASSERT_EQ(::pwrite(fd, flipped, sizeof flipped, 100), ssize_t(sizeof flipped));
    ::close(fd);
  }

  auto checked = tier->verify(Repair::no);
  ASSERT_TRUE(checked);
  EXPECT_EQ(checked->checked, 2u);
  EXPECT_EQ(checked->ok, 1u);
  EXPECT_EQ(checked->bad, 1u);
  EXPECT_EQ(checked->quarantined, 0u);
  EXPECT_EQ(checked->bad_paths, std::vector<std::string>{bad_path});
  EXPECT_TRUE(path_exists(bad_path));

  auto repaired = tier->verify(Repair::yes);
  ASSERT_TRUE(repaired);
  EXPECT_EQ(repaired->bad, 1u);
  EXPECT_EQ(repaired->quarantined, 1u);
  EXPECT_FALSE(path_exists(bad_path));
  EXPECT_EQ(list_dir(root + "/.quarantine").size(), 1u);
  auto reopened = tier->open(bad);
  ASSERT_TRUE(reopened);
  EXPECT_FALSE(*reopened);
  auto kept = tier->open(good);
  ASSERT_TRUE(kept);
  EXPECT_TRUE(*kept);

  auto clean = tier->verify(Repair::no);
  ASSERT_TRUE(clean);
  EXPECT_EQ(clean->checked, 1u);
  EXPECT_EQ(clean->bad, 0u);
}

}  // namespace
TEST(FolderTier, AStoppedVerifyEndsCancelledBeforeItsNextEntryAndMovesNothing) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey bad = make_key(52);
  ASSERT_TRUE(commit_bytes(*tier, bad, random_bytes(4000, 52)));
  {
    int fd = ::open(tier->entry_path(bad).c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "damage", 6, 0), 6);
    ::close(fd);
  }
  util::StopToken token;
  token.request_stop();
  util::StopScope scope(token);
  auto verified = tier->verify(Repair::yes);
  ASSERT_FALSE(verified);
  EXPECT_EQ(verified.error().code, ErrorCode::cancelled) << verified.error().message;
  EXPECT_TRUE(path_exists(tier->entry_path(bad))) << "nothing quarantined after the stop";
}

}  // namespace datavo
