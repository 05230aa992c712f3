// Tests of the folder tier's installs (src/tier/folder/install.cpp): what a commit leaves on disk and records,
// install_copy, and the refusals of a read-only tier.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

TEST(FolderTier, NothingIsUnderTheFinalNameBeforeCommit) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(11);
  const std::string bytes = random_bytes(4096, 11);

  auto staged = tier->begin(key);
  ASSERT_TRUE(staged);
  ASSERT_TRUE((*staged)->write(bytes.data(), 2048));
  EXPECT_FALSE(path_exists(tier->entry_path(key)));
  auto contains = tier->contains(key);
  ASSERT_TRUE(contains);
  EXPECT_FALSE(*contains);
  auto peeked = tier->peek(key);
  ASSERT_TRUE(peeked);
  EXPECT_FALSE(*peeked);
  auto listed = tier->list();
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());

  ASSERT_TRUE((*staged)->write(bytes.data() + 2048, bytes.size() - 2048));
  EXPECT_FALSE(path_exists(tier->entry_path(key)));
  ASSERT_EQ(staging_paths(*tier).size(), 1u);
  const std::string staged_path = staging_paths(*tier).front();
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), bytes);
  EXPECT_EQ(committed->size(), Bytes{bytes.size()});
  EXPECT_EQ(read_path(tier->entry_path(key)), bytes);
  EXPECT_FALSE(path_exists(staged_path));
}

TEST(FolderTier, CommitOverAnExistingEntryKeepsItAndDiscardsTheStagedCopy) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(12);
  const std::string bytes = random_bytes(2000, 12);
  ASSERT_TRUE(commit_bytes(*tier, key, bytes));
  struct stat first {};
  ASSERT_EQ(::stat(tier->entry_path(key).c_str(), &first), 0);

  auto second = commit_bytes(*tier, key, bytes);
  ASSERT_TRUE(second);
  EXPECT_EQ(read_handle(*second), bytes);
  struct stat after {};
  ASSERT_EQ(::stat(tier->entry_path(key).c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, first.st_ino);
  EXPECT_TRUE(list_dir(root + "/.staging").empty());

  const std::string source_path = dir.sub("source");
  ShardHandle source = handle_on_new_file(source_path, bytes);
  auto copied = tier->install_copy(key, source, sha256_of(bytes));
  ASSERT_TRUE(copied);
  EXPECT_EQ(*copied, InstallOutcome::already_present);
  EXPECT_TRUE(list_dir(root + "/.staging").empty());
}

TEST(FolderTier, InstallCopyStoresTheSourceBytes) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(13);
  const std::string bytes = random_bytes(100000, 13);
  ShardHandle source = handle_on_new_file(dir.sub("source"), bytes);
  auto installed = tier->install_copy(key, source, sha256_of(bytes));
  ASSERT_TRUE(installed);
  EXPECT_EQ(*installed, InstallOutcome::installed);
  EXPECT_EQ(read_path(tier->entry_path(key)), bytes);
  EXPECT_TRUE(list_dir(tier_root(dir) + "/.staging").empty());
}

TEST(FolderTier, ReadOnlyTierRefusesStagingInstallCommitAndRemove) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto writer = make_folder(root);
  const ShardKey key = make_key(25);
  ASSERT_TRUE(commit_bytes(*writer, key, "present"));

  auto options = folder_options(root);
  options.access = Access::read_only;
  auto ro = make_folder(options);
  EXPECT_TRUE(ro->read_only());
  EXPECT_FALSE(ro->can_hold(Bytes{1}));

  auto staged = ro->begin(staging_key());
  ASSERT_FALSE(staged);
  EXPECT_EQ(staged.error().code, ErrorCode::permission_denied);

  ShardHandle source = handle_on_new_file(dir.sub("source"), "other");
  auto installed = ro->install_copy(make_key(26), source, sha256_of("other"));
  ASSERT_FALSE(installed);
  EXPECT_EQ(installed.error().code, ErrorCode::permission_denied);
  EXPECT_FALSE(path_exists(ro->entry_path(make_key(26))));

  auto removed = ro->remove(key);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code, ErrorCode::permission_denied);
  EXPECT_TRUE(path_exists(writer->entry_path(key)));
}

TEST(FolderTier, EntriesAreGroupReadableEvenWithUmask077) {
  TempDir dir;
  const mode_t saved = ::umask(077);
  auto tier = make_folder(tier_root(dir));
  const ShardKey committed_key = make_key(40);
  const ShardKey copied_key = make_key(41);
  auto committed = commit_bytes(*tier, committed_key, "group readable");
  ShardHandle source = handle_on_new_file(dir.sub("source"), "copied too");
  auto copied = tier->install_copy(copied_key, source, sha256_of("copied too"));
  struct stat committed_st {
  }, copied_st{};
  const int committed_rc = ::stat(tier->entry_path(committed_key).c_str(), &committed_st);
  const int copied_rc = ::stat(tier->entry_path(copied_key).c_str(), &copied_st);
  ::umask(saved);

  ASSERT_TRUE(committed);
  ASSERT_TRUE(copied);
  ASSERT_EQ(committed_rc, 0);
  ASSERT_EQ(copied_rc, 0);
  EXPECT_NE(committed_st.st_mode & 0040, 0u) << std::oct << committed_st.st_mode;
  EXPECT_NE(copied_st.st_mode & 0040, 0u) << std::oct << copied_st.st_mode;
}

TEST(FolderTier, DigestIsRecordedAndRecordedDigestReturnsIt) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(42);
  const std::string bytes = random_bytes(5000, 42);
  ASSERT_TRUE(commit_bytes(*tier, key, bytes));
  auto recorded = recorded_digest(*tier, key);
  ASSERT_TRUE(recorded);
  ASSERT_TRUE(*recorded);
  EXPECT_EQ(**recorded, sha256_of(bytes));

  // install_copy records the digest it is given.
  const ShardKey copied = make_key(43);
  const std::string other = random_bytes(3000, 43);
  ShardHandle source = handle_on_new_file(dir.sub("source"), other);
  ASSERT_TRUE(tier->install_copy(copied, source, sha256_of(other)));
  auto recorded_copy = recorded_digest(*tier, copied);
  ASSERT_TRUE(recorded_copy);
  ASSERT_TRUE(*recorded_copy);
  EXPECT_EQ(**recorded_copy, sha256_of(other));

  auto none = recorded_digest(*tier, make_key(44));
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

}  // namespace
}  // namespace datavo
