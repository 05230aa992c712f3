// Tests of the folder tier's staging transactions (src/tier/folder/staging.cpp, begun by FolderTier::begin in
// install.cpp) against ShardTransaction's contract in include/datavo/tier.hpp: a commit renames the staged bytes into
// the entry, destruction without a commit aborts and leaves nothing, a commit that fails keeps the staged bytes for
// the caller, and a download that a writer that died left behind is continued.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using namespace shardtest;

// The name a writer of this host with pid `pid` gives its staging file of `key` (docs/layout.md).
std::string staging_name_of(pid_t pid, const ShardKey& key) {
  return util::host_name() + "." + std::to_string(pid) + ".0123456789abcdef." + key.instance.name() + "." +
         key.hash.hex() + ".tmp";
}

// ---------------------------------------------------------------------------------------------------------------
// Commit and abort

TEST(FolderTransaction, CommitRenamesTheStagedBytesIntoTheEntryAndRecordsTheirDigest) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(1);
  const std::string bytes = random_bytes(70000, 1);
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged) << staged.error().message;
  EXPECT_EQ((*staged)->resumed_from(), Bytes{0});
  ASSERT_TRUE((*staged)->write(bytes.data(), bytes.size()));
  EXPECT_EQ((*staged)->written(), Bytes{bytes.size()});
  auto digest = (*staged)->digest();
  ASSERT_TRUE(digest);
  EXPECT_EQ(*digest, sha256_of(bytes));

  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed) << committed.error().message;
  EXPECT_EQ(committed->path(), tier->entry_path(key));
  EXPECT_EQ(committed->size(), Bytes{bytes.size()});
  EXPECT_EQ(read_handle(*committed), bytes);
  EXPECT_TRUE(staging_paths(*tier).empty());
  staged->reset();  // destroying a committed transaction removes nothing
  EXPECT_EQ(read_path(tier->entry_path(key)), bytes);
  auto recorded = recorded_digest(*tier, key);
  ASSERT_TRUE(recorded && *recorded);
  EXPECT_EQ(**recorded, sha256_of(bytes));
}

TEST(FolderTier, StagingFileDestroyedWithoutCommitLeavesNothingBehind) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  std::string staged_path;
  {
    auto staged = tier->begin(staging_key());
    ASSERT_TRUE(staged);
    ASSERT_EQ(staging_paths(*tier).size(), 1u);
    staged_path = staging_paths(*tier).front();
    const std::string bytes = random_bytes(3000, 5);
    ASSERT_TRUE((*staged)->write(bytes.data(), bytes.size()));
    EXPECT_TRUE(path_exists(staged_path));
  }
  EXPECT_FALSE(path_exists(staged_path));
  EXPECT_TRUE(list_dir(root + "/.staging").empty());
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{0});
  EXPECT_EQ(usage->entries, 0u);
}

TEST(FolderTransaction, ACommitThatFailsKeepsTheStagedBytesAndDestructionRemovesThem) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(2);
  const std::string bytes = random_bytes(5000, 2);
  {
    auto staged = tier->begin(key);
    ASSERT_TRUE(staged);
    ASSERT_TRUE((*staged)->write(bytes.data(), bytes.size()));
    // The instance directory is a regular file: the rename into it cannot succeed.
    write_file(root + "/local", "not a directory");
    auto committed = (*staged)->commit();
    ASSERT_FALSE(committed);
    ASSERT_EQ(staging_paths(*tier).size(), 1u) << "a failed commit lost the staged bytes";
    EXPECT_EQ(read_path(staging_paths(*tier).front()), bytes);
    auto reader = (*staged)->open_staged();
    ASSERT_TRUE(reader) << reader.error().message;
    EXPECT_EQ(reader->size(), Bytes{bytes.size()});
    EXPECT_EQ(read_handle(*reader), bytes);
    auto digest = (*staged)->digest();
    ASSERT_TRUE(digest);
    EXPECT_EQ(*digest, sha256_of(bytes));
  }
  EXPECT_TRUE(staging_paths(*tier).empty());
  EXPECT_EQ(read_path(root + "/local"), "not a directory");
}

TEST(FolderTransaction, PositionalWritesFromSeveralThreadsMakeOneFile) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(3);
  const std::string bytes = random_bytes(4 * 65536, 3);
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged);
  PositionalSink* positional = (*staged)->positional();
  ASSERT_NE(positional, nullptr);
  std::vector<std::thread> threads;
  for (std::size_t part = 0; part < 4; ++part) {
    threads.emplace_back(
        [&, part] { EXPECT_TRUE(positional->write_at(part * 65536, bytes.data() + part * 65536, 65536)); });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(positional->prefix_complete(Bytes{bytes.size()}));
  EXPECT_EQ((*staged)->written(), Bytes{bytes.size()});
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), bytes);
  auto recorded = recorded_digest(*tier, key);
  ASSERT_TRUE(recorded && *recorded);
  EXPECT_EQ(**recorded, sha256_of(bytes));
}

TEST(FolderTransaction, BeginWithASizeTheFilesystemHasNoRoomForIsNoSpaceAndStagesNothing) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(4);
  ASSERT_TRUE(commit_bytes(*tier, make_key(5), "the tier exists"));
  auto refused = tier->begin(key, Bytes{std::uint64_t{1} << 62});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::no_space);
  EXPECT_NE(refused.error().message.find("no room"), std::string::npos) << refused.error().message;
  EXPECT_TRUE(staging_paths(*tier).empty());
  auto fits = tier->begin(key, Bytes{1000});
  EXPECT_TRUE(fits) << fits.error().message;
}

// ---------------------------------------------------------------------------------------------------------------
// Resume

TEST(FolderTransaction, ResumeContinuesTheDownloadOfAWriterThatDied) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(6);
  const std::string bytes = random_bytes(9000, 6);
  std::filesystem::create_directories(root + "/.staging");
  const std::string left = root + "/.staging/" + staging_name_of(dead_pid(), key);
  write_file(left, bytes.substr(0, 4000));

  // Without Resume::partial the file of the dead writer is left alone.
  {
    auto fresh = tier->begin(key);
    ASSERT_TRUE(fresh);
    EXPECT_EQ((*fresh)->resumed_from(), Bytes{0});
    EXPECT_EQ((*fresh)->written(), Bytes{0});
  }
  EXPECT_TRUE(path_exists(left));

  auto resumed = tier->begin(key, std::nullopt, Resume::partial);
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ((*resumed)->resumed_from(), Bytes{4000});
  EXPECT_EQ((*resumed)->written(), Bytes{4000});
  EXPECT_FALSE(path_exists(left)) << "the partial file was not claimed (renamed to a name of this process)";
  ASSERT_TRUE((*resumed)->write(bytes.data() + 4000, bytes.size() - 4000));
  auto digest = (*resumed)->digest();
  ASSERT_TRUE(digest);
  EXPECT_EQ(*digest, sha256_of(bytes));
  auto committed = (*resumed)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_path(tier->entry_path(key)), bytes);
  EXPECT_TRUE(staging_paths(*tier).empty());
}

TEST(FolderTransaction, ResumeTakesNeitherALiveWritersFileNorAnotherKeys) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(7);
  std::filesystem::create_directories(root + "/.staging");
  const std::string live = root + "/.staging/" + staging_name_of(::getpid(), key);
  const std::string other_key = root + "/.staging/" + staging_name_of(dead_pid(), make_key(8));
  write_file(live, "a live writer's bytes");
  write_file(other_key, "another shard's bytes");

  auto staged = tier->begin(key, std::nullopt, Resume::partial);
  ASSERT_TRUE(staged);
  EXPECT_EQ((*staged)->resumed_from(), Bytes{0});
  EXPECT_EQ(read_path(live), "a live writer's bytes");
  EXPECT_EQ(read_path(other_key), "another shard's bytes");
}

TEST(FolderTransaction, RestartForgetsTheResumedBytes) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(9);
  std::filesystem::create_directories(root + "/.staging");
  write_file(root + "/.staging/" + staging_name_of(dead_pid(), key), "stale prefix");
  auto staged = tier->begin(key, std::nullopt, Resume::partial);
  ASSERT_TRUE(staged);
  ASSERT_EQ((*staged)->resumed_from(), Bytes{12});
  ASSERT_TRUE((*staged)->restart());
  EXPECT_EQ((*staged)->resumed_from(), Bytes{0});
  EXPECT_EQ((*staged)->written(), Bytes{0});
  ASSERT_TRUE((*staged)->write("fresh", 5));
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), "fresh");
}

// A reader (in this or another process) may have mapped the verified bytes of a staging file: restart() must leave
// them as they were. Truncating the file in place would cut pages from under such a mapping (SIGBUS).
TEST(FolderTransaction, RestartAbandonsTheStagingFileInsteadOfTruncatingIt) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(10);
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged);
  ASSERT_TRUE((*staged)->write("verified bytes", 14));
  auto reader = (*staged)->open_staged();
  ASSERT_TRUE(reader) << reader.error().message;
  const std::string old_path = reader->path();
  ASSERT_TRUE((*staged)->restart());
  EXPECT_EQ((*staged)->written(), Bytes{0});
  EXPECT_EQ(read_handle(*reader), "verified bytes");  // the old inode keeps its bytes
  EXPECT_FALSE(std::filesystem::exists(old_path));    // abandoned: unlinked, not reused
  ASSERT_EQ(staging_paths(*tier).size(), 1u);
  EXPECT_NE(staging_paths(*tier).front(), old_path);
  ASSERT_TRUE((*staged)->write("fresh", 5));
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), "fresh");
  EXPECT_EQ(read_handle(*reader), "verified bytes");
  EXPECT_TRUE(staging_paths(*tier).empty());
}

// The same for a file adopted from a writer that died: a third process may have mapped it while it was the dead
// writer's (what that writer had published as verified).
TEST(FolderTransaction, RestartOfAnAdoptedFileLeavesItsBytesToTheirReaders) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(11);
  std::filesystem::create_directories(root + "/.staging");
  const std::string dead = root + "/.staging/" + staging_name_of(dead_pid(), key);
  write_file(dead, "dead writer's prefix");
  const int fd = ::open(dead.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const ShardHandle third_process(fd, dead, Bytes{20});
  auto staged = tier->begin(key, std::nullopt, Resume::partial);
  ASSERT_TRUE(staged);
  ASSERT_EQ((*staged)->resumed_from(), Bytes{20});
  ASSERT_TRUE((*staged)->restart());
  ASSERT_TRUE((*staged)->write("fresh", 5));
  EXPECT_EQ(read_handle(third_process), "dead writer's prefix");
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), "fresh");
  EXPECT_TRUE(staging_paths(*tier).empty());
}

// ---------------------------------------------------------------------------------------------------------------
// Names

TEST(Scan, StagingFilesAreNamedHostPidRandomTmp) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = staging_key();
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged);
  ASSERT_EQ(staging_paths(*tier).size(), 1u);
  const std::filesystem::path path(staging_paths(*tier).front());
  EXPECT_EQ(path.parent_path().string(), tier_root(dir) + "/.staging");
  const std::string name = path.filename().string();
  const std::string pid_part = "." + std::to_string(::getpid()) + ".";
  const auto first_dot = name.find('.');
  ASSERT_NE(first_dot, std::string::npos);
  EXPECT_GT(first_dot, 0u);
  EXPECT_EQ(name.compare(first_dot, pid_part.size(), pid_part), 0) << name;
  ASSERT_GE(name.size(), 4u);
  EXPECT_EQ(name.substr(name.size() - 4), ".tmp") << name;
  // ... and ends with the key it stages, so that a waiter can continue a dead writer's download of that key.
  EXPECT_TRUE(name.ends_with(".local." + key.hash.hex() + ".tmp")) << name;
}

}  // namespace
}  // namespace datavo
