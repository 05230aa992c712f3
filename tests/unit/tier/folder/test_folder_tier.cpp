// Tests of the folder tier (src/tier/folder/folder_tier.cpp) against its contract in include/datavo/folder_tier.hpp.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"

namespace datavo {
namespace {

using namespace shardtest;
using namespace std::chrono_literals;

std::string tier_root(const TempDir& dir) { return dir.sub("tier"); }

// ---------------------------------------------------------------------------------------------------------------
// Creation and layout

TEST(FolderTier, CreateRefusesAnEmptyPath) {
  auto tier = FolderTier::create(folder_options(""));
  ASSERT_FALSE(tier);
  EXPECT_EQ(tier.error().code, ErrorCode::invalid_argument);
}

TEST(FolderTier, CreateDoesNoIoTheDirectoryAppearsOnFirstWrite) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  EXPECT_FALSE(path_exists(tier_root(dir)));
  auto opened = tier->open(make_key(1));
  ASSERT_TRUE(opened);
  EXPECT_FALSE(*opened);
  EXPECT_FALSE(path_exists(tier_root(dir)));
  ASSERT_TRUE(commit_bytes(*tier, make_key(1), "abc"));
  EXPECT_TRUE(is_directory(tier_root(dir)));
}

TEST(FolderTier, MaxBytesZeroMeansUnbounded) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{0};
  auto tier = make_folder(options);
  EXPECT_EQ(tier->max_bytes(), std::nullopt);
  EXPECT_TRUE(tier->can_hold(TiB(1)));
  ASSERT_TRUE(commit_bytes(*tier, make_key(2), random_bytes(5000, 2)));
  EXPECT_TRUE(path_exists(tier->entry_path(make_key(2))));
}

TEST(FolderTier, LayoutIsPathInstanceHashTarWithStagingAndLocksBeside) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(7, "dev.datavo.io");
  const std::string bytes = random_bytes(1000, 7);
  ASSERT_TRUE(commit_bytes(*tier, key, bytes));

  const std::string expected_entry = root + "/dev.datavo.io/" + key.hash.hex() + ".tar";
  EXPECT_EQ(tier->entry_path(key), expected_entry);
  EXPECT_EQ(read_path(expected_entry), bytes);
  EXPECT_TRUE(is_directory(root + "/.staging"));

  auto lock = tier->lock_shard(key);
  ASSERT_TRUE(lock);
  EXPECT_TRUE(is_directory(root + "/.locks"));
  EXPECT_TRUE(path_exists(root + "/.locks/dev.datavo.io." + key.hash.hex() + ".lock"));

  // Nothing else appears at the top: the instance directory and the dot-directories beside it.
  EXPECT_EQ(list_dir(root), (std::vector<std::string>{".locks", ".staging", "dev.datavo.io"}));
  EXPECT_EQ(list_dir(root + "/dev.datavo.io"), (std::vector<std::string>{key.hash.hex() + ".tar"}));
}

TEST(FolderTier, TwoInstancesNeverSeeEachOthersEntries) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey in_a = make_key(3, "a.example");
  const ShardKey in_b{make_instance("b.example"), in_a.hash};  // same content hash, other instance
  const std::string bytes_a = random_bytes(500, 1);
  const std::string bytes_b = random_bytes(700, 2);

  ASSERT_TRUE(commit_bytes(*tier, in_a, bytes_a));
  auto contains_b = tier->contains(in_b);
  ASSERT_TRUE(contains_b);
  EXPECT_FALSE(*contains_b);
  auto open_b = tier->open(in_b);
  ASSERT_TRUE(open_b);
  EXPECT_FALSE(*open_b);

  ASSERT_TRUE(commit_bytes(*tier, in_b, bytes_b));
  auto open_a = tier->open(in_a);
  open_b = tier->open(in_b);
  ASSERT_TRUE(open_a && *open_a);
  ASSERT_TRUE(open_b && *open_b);
  EXPECT_EQ(read_handle(**open_a), bytes_a);
  EXPECT_EQ(read_handle(**open_b), bytes_b);
  EXPECT_NE(tier->entry_path(in_a), tier->entry_path(in_b));

  auto removed = tier->remove(in_a);
  ASSERT_TRUE(removed);
  EXPECT_TRUE(*removed);
  auto still_b = tier->contains(in_b);
  ASSERT_TRUE(still_b);
  EXPECT_TRUE(*still_b);
}

// ---------------------------------------------------------------------------------------------------------------
// Commit

TEST(FolderTier, NothingIsUnderTheFinalNameBeforeCommit) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(11);
  const std::string bytes = random_bytes(4096, 11);

  auto staged = tier->begin_staging(staging_key());
  ASSERT_TRUE(staged);
  ASSERT_TRUE(staged->write(bytes.data(), 2048));
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

  ASSERT_TRUE(staged->write(bytes.data() + 2048, bytes.size() - 2048));
  EXPECT_FALSE(path_exists(tier->entry_path(key)));
  const std::string staged_path = staged->path();
  auto committed = tier->commit(std::move(*staged), key);
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), bytes);
  EXPECT_EQ(committed->size(), Bytes{bytes.size()});
  EXPECT_EQ(read_path(tier->entry_path(key)), bytes);
  EXPECT_FALSE(path_exists(staged_path));
}

TEST(FolderTier, StagingFileDestroyedWithoutCommitLeavesNothingBehind) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  std::string staged_path;
  {
    auto staged = tier->begin_staging(staging_key());
    ASSERT_TRUE(staged);
    staged_path = staged->path();
    const std::string bytes = random_bytes(3000, 5);
    ASSERT_TRUE(staged->write(bytes.data(), bytes.size()));
    EXPECT_TRUE(path_exists(staged_path));
  }
  EXPECT_FALSE(path_exists(staged_path));
  EXPECT_TRUE(list_dir(root + "/.staging").empty());
  auto usage = tier->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->used, Bytes{0});
  EXPECT_EQ(usage->entries, 0u);
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

// ---------------------------------------------------------------------------------------------------------------
// Reads and the LRU clock

TEST(FolderTier, OpenBumpsMtime) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(20);
  ASSERT_TRUE(commit_bytes(*tier, key, "some bytes"));
  const std::string path = tier->entry_path(key);
  set_mtime_ago(path, 24h);
  ASSERT_LT(mtime_of(path), Clock::now() - 23h);

  const auto before = Clock::now();
  auto opened = tier->open(key);
  ASSERT_TRUE(opened);
  ASSERT_TRUE(*opened);
  EXPECT_GE(mtime_of(path), before - 2s);
  EXPECT_LE(mtime_of(path), Clock::now() + 2s);
}

TEST(FolderTier, PeekNeitherBumpsMtimeNorCounts) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(21);
  ASSERT_TRUE(commit_bytes(*tier, key, "peeked"));
  const std::string path = tier->entry_path(key);
  set_mtime_ago(path, 24h);
  const auto old = mtime_of(path);
  const TierStats before = tier->counters().snapshot();

  auto peeked = tier->peek(key);
  ASSERT_TRUE(peeked);
  ASSERT_TRUE(*peeked);
  EXPECT_EQ(read_handle(**peeked), "peeked");
  auto missing = tier->peek(make_key(22));
  ASSERT_TRUE(missing);
  EXPECT_FALSE(*missing);

  EXPECT_EQ(mtime_of(path), old);
  const TierStats after = tier->counters().snapshot();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
}

TEST(FolderTier, OpenOnAReadOnlyTierDoesNotWrite) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto writer = make_folder(root);
  const ShardKey key = make_key(23);
  ASSERT_TRUE(commit_bytes(*writer, key, "read only please"));
  const std::string path = writer->entry_path(key);
  set_mtime_ago(path, 24h);
  const auto old = mtime_of(path);
  const auto top_before = list_dir(root);

  auto options = folder_options(root);
  options.access = Access::read_only;
  auto reader = make_folder(options);
  auto opened = reader->open(key);
  ASSERT_TRUE(opened);
  ASSERT_TRUE(*opened);
  EXPECT_EQ(read_handle(**opened), "read only please");
  auto missed = reader->open(make_key(24));
  ASSERT_TRUE(missed);
  EXPECT_FALSE(*missed);
  ASSERT_TRUE(reader->flush_stats());

  EXPECT_EQ(mtime_of(path), old);
  EXPECT_EQ(list_dir(root), top_before);
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

  auto staged = ro->begin_staging(staging_key());
  ASSERT_FALSE(staged);
  EXPECT_EQ(staged.error().code, ErrorCode::permission_denied);

  ShardHandle source = handle_on_new_file(dir.sub("source"), "other");
  auto installed = ro->install_copy(make_key(26), source, sha256_of("other"));
  ASSERT_FALSE(installed);
  EXPECT_EQ(installed.error().code, ErrorCode::permission_denied);
  EXPECT_FALSE(path_exists(ro->entry_path(make_key(26))));

  // A staging file from another (writable) tier cannot be committed into the read-only one either.
  auto elsewhere = make_folder(dir.sub("other-tier"));
  auto foreign = elsewhere->begin_staging(staging_key());
  ASSERT_TRUE(foreign);
  ASSERT_TRUE(foreign->write("xyz", 3));
  auto committed = ro->commit(std::move(*foreign), make_key(27));
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().code, ErrorCode::permission_denied);
  EXPECT_FALSE(path_exists(ro->entry_path(make_key(27))));

  auto removed = ro->remove(key);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code, ErrorCode::permission_denied);
  EXPECT_TRUE(path_exists(writer->entry_path(key)));
}

TEST(FolderTier, ReadOnlyTierIsNeverEvictedFrom) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto writer = make_folder(root);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(commit_bytes(*writer, make_key(30 + i), random_bytes(1000, i)));
  for (int i = 0; i < 3; ++i) set_mtime_ago(writer->entry_path(make_key(30 + i)), 48h);

  auto options = folder_options(root);
  options.access = Access::read_only;
  options.max_bytes = Bytes{1000};
  options.max_age = 1h;
  auto ro = make_folder(options);
  auto report = ro->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->entries_evicted, 0u);
  // An expired entry on a read-only tier is a miss, but it stays on disk.
  auto opened = ro->open(make_key(30));
  ASSERT_TRUE(opened);
  EXPECT_FALSE(*opened);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(path_exists(writer->entry_path(make_key(30 + i)))) << i;
}

// ---------------------------------------------------------------------------------------------------------------
// Permissions and digests

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

// ---------------------------------------------------------------------------------------------------------------
// Eviction

TEST(FolderTier, LruEvictionByMtimeDownToTheLowWatermark) {
  TempDir dir;
  constexpr std::size_t k_entry = 4096;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{10 * k_entry};  // ten entries' worth
  auto tier = make_folder(options);

  // Ten entries fill the budget exactly; their mtimes are deliberately not in install order.
  const std::array<int, 10> age_rank = {5, 2, 8, 0, 9, 3, 7, 1, 6, 4};  // 0 = oldest
  const auto base = Clock::now() - 1h;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(commit_bytes(*tier, make_key(100 + i), random_bytes(k_entry, 100 + i)));
    set_mtime(tier->entry_path(make_key(100 + i)), base + std::chrono::seconds(10 * age_rank[std::size_t(i)]));
  }
  auto full = tier->usage();
  ASSERT_TRUE(full);
  EXPECT_EQ(full->entries, 10u);

  // The eleventh goes over budget: eviction frees down to 90%, taking the two oldest by mtime (#3, then #7).
  ASSERT_TRUE(commit_bytes(*tier, make_key(110), random_bytes(k_entry, 110)));
  auto after_eviction = tier->usage();
  ASSERT_TRUE(after_eviction);
  EXPECT_LE(double(after_eviction->used.count()), 0.9 * double(10 * k_entry));
  EXPECT_FALSE(path_exists(tier->entry_path(make_key(103))));
  EXPECT_FALSE(path_exists(tier->entry_path(make_key(107))));
  EXPECT_EQ(tier->counters().snapshot().evictions, 2u);

  // The twelfth fits again.
  ASSERT_TRUE(commit_bytes(*tier, make_key(111), random_bytes(k_entry, 111)));
  auto final_usage = tier->usage();
  ASSERT_TRUE(final_usage);
  EXPECT_LE(final_usage->used, Bytes{10 * k_entry});
  for (int i = 0; i < 12; ++i) {
    const bool should_be_gone = (i == 3 || i == 7);
    EXPECT_EQ(path_exists(tier->entry_path(make_key(100 + i))), !should_be_gone) << "entry " << i;
  }
}

TEST(FolderTier, EvictionNeverRemovesTheEntryJustCommitted) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{1000};
  auto tier = make_folder(options);
  const ShardKey small = make_key(120);
  const ShardKey big = make_key(121);
  ASSERT_TRUE(commit_bytes(*tier, small, random_bytes(500, 120)));
  set_mtime_ago(tier->entry_path(small), 10s);

  // The new entry alone exceeds the low watermark (900), and its mtime is made the oldest of the tier, so that
  // only the "never the entry just committed" rule can save it.
  const std::string big_bytes = random_bytes(950, 121);
  auto staged = tier->begin_staging(staging_key());
  ASSERT_TRUE(staged);
  ASSERT_TRUE(staged->write(big_bytes.data(), big_bytes.size()));
  const struct timespec old_times[2] = {to_timespec(Clock::now() - 1h), to_timespec(Clock::now() - 1h)};
  ASSERT_EQ(::futimens(staged->fd(), old_times), 0);
  auto committed = tier->commit(std::move(*staged), big);
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), big_bytes);
  EXPECT_EQ(read_path(tier->entry_path(big)), big_bytes);
  EXPECT_FALSE(path_exists(tier->entry_path(small)));

  // Even an entry larger than max_bytes on its own survives its own commit.
  const ShardKey huge = make_key(122);
  const std::string huge_bytes = random_bytes(1500, 122);
  auto huge_committed = commit_bytes(*tier, huge, huge_bytes);
  ASSERT_TRUE(huge_committed);
  EXPECT_EQ(read_path(tier->entry_path(huge)), huge_bytes);
}

TEST(FolderTier, MaxAgeNeverExpiresTheEntryJustCommitted) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_age = 1h;
  auto tier = make_folder(options);
  const ShardKey key = make_key(123);
  const std::string bytes = random_bytes(800, 123);

  // The staged data was last written two hours ago (its mtime says so); committing it now must still leave an
  // entry behind: the eviction pass that follows a commit never removes the entry just committed.
  auto staged = tier->begin_staging(staging_key());
  ASSERT_TRUE(staged);
  ASSERT_TRUE(staged->write(bytes.data(), bytes.size()));
  const struct timespec old_times[2] = {to_timespec(Clock::now() - 2h), to_timespec(Clock::now() - 2h)};
  ASSERT_EQ(::futimens(staged->fd(), old_times), 0);
  auto committed = tier->commit(std::move(*staged), key);
  ASSERT_TRUE(committed);
  EXPECT_EQ(read_handle(*committed), bytes);
  EXPECT_TRUE(path_exists(tier->entry_path(key))) << "the entry just committed was expired by its own commit";
}

TEST(FolderTier, HandleKeepsReadingAllBytesAfterItsEntryIsEvicted) {
  TempDir dir;
  constexpr std::size_t k_entry = 8192;
  auto options = folder_options(tier_root(dir));
  options.max_bytes = Bytes{2 * k_entry};
  auto tier = make_folder(options);
  const ShardKey held = make_key(130);
  const std::string held_bytes = random_bytes(k_entry, 130);
  ASSERT_TRUE(commit_bytes(*tier, held, held_bytes));
  set_mtime_ago(tier->entry_path(held), 1h);
  auto handle = tier->peek(held);
  ASSERT_TRUE(handle && *handle);

  ASSERT_TRUE(commit_bytes(*tier, make_key(131), random_bytes(k_entry, 131)));
  ASSERT_TRUE(commit_bytes(*tier, make_key(132), random_bytes(k_entry, 132)));
  ASSERT_FALSE(path_exists(tier->entry_path(held)));  // evicted: it was the oldest
  EXPECT_EQ(read_handle(**handle), held_bytes);
  EXPECT_EQ((*handle)->size(), Bytes{k_entry});
}

TEST(FolderTier, HandleKeepsReadingAllBytesAfterItsEntryIsRemoved) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(133);
  const std::string bytes = random_bytes(50000, 133);
  ASSERT_TRUE(commit_bytes(*tier, key, bytes));
  auto handle = tier->open(key);
  ASSERT_TRUE(handle && *handle);
  auto removed = tier->remove(key);
  ASSERT_TRUE(removed);
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(path_exists(tier->entry_path(key)));
  EXPECT_EQ(read_handle(**handle), bytes);

  auto again = tier->remove(key);
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
}

TEST(FolderTier, EntryOlderThanMaxAgeIsAMissOnOpenAndIsRemoved) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_age = 1h;
  auto tier = make_folder(options);
  const ShardKey key = make_key(140);
  ASSERT_TRUE(commit_bytes(*tier, key, "old news"));
  set_mtime_ago(tier->entry_path(key), 2h);
  const TierStats before = tier->counters().snapshot();

  auto opened = tier->open(key);
  ASSERT_TRUE(opened);
  EXPECT_FALSE(*opened);
  EXPECT_FALSE(path_exists(tier->entry_path(key)));
  const TierStats after = tier->counters().snapshot();
  EXPECT_EQ(after.misses, before.misses + 1);
  EXPECT_EQ(after.hits, before.hits);

  // A young entry is a hit.
  const ShardKey fresh = make_key(141);
  ASSERT_TRUE(commit_bytes(*tier, fresh, "fresh"));
  auto hit = tier->open(fresh);
  ASSERT_TRUE(hit);
  EXPECT_TRUE(*hit);
}

TEST(FolderTier, GcRemovesExpiredEntries) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.max_age = 1h;
  auto tier = make_folder(options);
  const ShardKey old_key = make_key(150);
  const ShardKey fresh_key = make_key(151);
  ASSERT_TRUE(commit_bytes(*tier, old_key, random_bytes(300, 150)));
  ASSERT_TRUE(commit_bytes(*tier, fresh_key, random_bytes(300, 151)));
  set_mtime_ago(tier->entry_path(old_key), 3h);

  auto report = tier->gc(DryRun::no);
  ASSERT_TRUE(report);
  EXPECT_EQ(report->expired, 1u);
  EXPECT_EQ(report->entries_evicted, 1u);
  EXPECT_EQ(report->bytes_freed, Bytes{300});
  EXPECT_FALSE(path_exists(tier->entry_path(old_key)));
  EXPECT_TRUE(path_exists(tier->entry_path(fresh_key)));
}

// ---------------------------------------------------------------------------------------------------------------
// Statistics

TEST(FolderTier, CountersCountHitsAndMisses) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(160);
  ASSERT_TRUE(commit_bytes(*tier, key, "0123456789"));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(tier->open(key));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(tier->open(make_key(161 + i)));
  const TierStats s = tier->counters().snapshot();
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.bytes_served, Bytes{30});
  EXPECT_DOUBLE_EQ(s.hit_rate(), 0.6);
}

TEST(FolderTier, FlushStatsPersistsAndANewTierObjectSeesThem) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(170);
  {
    auto tier = make_folder(root);
    ASSERT_TRUE(commit_bytes(*tier, key, "abcd"));
    ASSERT_TRUE(tier->open(key));
    ASSERT_TRUE(tier->open(key));
    ASSERT_TRUE(tier->open(make_key(171)));
    ASSERT_TRUE(tier->flush_stats());
    EXPECT_TRUE(path_exists(root + "/.stats.json"));
    EXPECT_EQ(tier->counters().snapshot().hits, 0u);  // flushed counters are zeroed
  }
  auto second = make_folder(root);
  auto seen = second->cumulative_stats();
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->hits, 2u);
  EXPECT_EQ(seen->misses, 1u);
  EXPECT_EQ(seen->bytes_served, Bytes{8});

  // Flushes of several tier objects add up; unflushed counters are included too.
  ASSERT_TRUE(second->open(key));
  ASSERT_TRUE(second->flush_stats());
  ASSERT_TRUE(second->open(key));
  auto third = make_folder(root);
  auto persisted = third->cumulative_stats();
  ASSERT_TRUE(persisted);
  EXPECT_EQ(persisted->hits, 3u);
  auto with_unflushed = second->cumulative_stats();
  ASSERT_TRUE(with_unflushed);
  EXPECT_EQ(with_unflushed->hits, 4u);
}

TEST(FolderTier, ResetStatsZeroes) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(180);
  ASSERT_TRUE(commit_bytes(*tier, key, "abcd"));
  ASSERT_TRUE(tier->open(key));
  ASSERT_TRUE(tier->flush_stats());
  ASSERT_TRUE(tier->open(key));
  ASSERT_TRUE(tier->open(make_key(181)));

  ASSERT_TRUE(tier->reset_stats());
  auto own = tier->cumulative_stats();
  ASSERT_TRUE(own);
  EXPECT_EQ(own->hits, 0u);
  EXPECT_EQ(own->misses, 0u);
  EXPECT_EQ(own->bytes_served, Bytes{0});
  auto other = make_folder(root)->cumulative_stats();
  ASSERT_TRUE(other);
  EXPECT_EQ(other->hits, 0u);
  EXPECT_EQ(other->misses, 0u);
}

// ---------------------------------------------------------------------------------------------------------------
// Per-shard locks

TEST(FolderTier, LockShardExcludesASecondThread) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  const ShardKey key = make_key(190);
  auto first = tier->lock_shard(key);
  ASSERT_TRUE(first);
  std::optional<folder::ShardLock> held(std::move(*first));

  // Another shard is not blocked by this one.
  {
    auto other = tier->lock_shard(make_key(191));
    ASSERT_TRUE(other);
  }

  std::atomic<bool> acquired{false};
  std::thread second([&] {
    auto lock = tier->lock_shard(key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(acquired.load()) << "a second lock_shard of the same key returned while the first was held";
  held.reset();
  second.join();
  EXPECT_TRUE(acquired.load());
}

TEST(FolderTier, LockShardExcludesTwoTierObjectsOnOnePath) {
  TempDir dir;
  auto one = make_folder(tier_root(dir));
  auto two = make_folder(tier_root(dir));
  const ShardKey key = make_key(192);
  auto first = one->lock_shard(key);
  ASSERT_TRUE(first);
  std::optional<folder::ShardLock> held(std::move(*first));

  std::atomic<bool> acquired{false};
  std::thread second([&] {
    auto lock = two->lock_shard(key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(acquired.load());
  held.reset();
  second.join();
  EXPECT_TRUE(acquired.load());
}

TEST(FolderTier, LockShardExcludesAnotherProcess) {
  TempDir dir;
  const std::string root = tier_root(dir);
  const ShardKey key = make_key(193);
  Pipe locked;   // child -> parent: "I hold the lock"
  Pipe release;  // parent -> child: "let it go"

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    locked.close_read();
    release.close_write();
    int code = 0;
    {
      auto tier = FolderTier::create(folder_options(root));
      if (!tier) ::_exit(2);
      auto lock = (*tier)->lock_shard(key);
      if (!lock) ::_exit(3);
      if (!locked.write_byte()) ::_exit(4);
      if (!release.read_byte()) code = 5;
    }  // the guard is released here
    ::_exit(code);
  }
  ChildGuard guard(child);
  locked.close_write();
  release.close_read();
  ASSERT_TRUE(locked.read_byte()) << "the child could not take the lock";

  auto tier = make_folder(root);
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    auto lock = tier->lock_shard(key);
    acquired = lock.has_value();
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(acquired.load()) << "lock_shard returned while another process held the lock";
  release.write_byte();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_EQ(guard.wait(), 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Tier interface

// The contract every tier shares (contains, read_into, list, usage, ...) is the conformance suite's
// (tests/conformance/, instance Folder/...); what list() reports as last_access is the folder tier's own.
TEST(FolderTier, ListReportsTheEntryMtimeAsItsLastAccess) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  ASSERT_TRUE(commit_bytes(*tier, make_key(210, "one"), random_bytes(100, 1)));
  ASSERT_TRUE(commit_bytes(*tier, make_key(211, "two"), random_bytes(200, 2)));
  set_mtime_ago(tier->entry_path(make_key(211, "two")), 1h);
  auto listed = tier->list();
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2u);
  for (const auto& e : *listed) {
    if (e.instance == "two") {
      EXPECT_LT(e.last_access, Clock::now() - 59min);
    } else {
      EXPECT_GT(e.last_access, Clock::now() - 1min);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Verify on hit: the size recorded at install, and with `verify: full | sampled` the bytes

// Flips one byte of the entry at `path` in place (same size, same inode).
void flip_byte(const std::string& path, off_t at) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c = char(~c);
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
}

TEST(FolderTierVerifyOnHit, AShortOrLongEntryIsQuarantinedAndIsAMiss) {
  TempDir dir;
  auto tier = make_folder(tier_root(dir));
  for (const off_t new_size : {off_t(1000), off_t(9000)}) {
    const ShardKey key = make_key(900 + std::uint64_t(new_size));
    ASSERT_TRUE(commit_bytes(*tier, key, random_bytes(4096, 900)));
    ASSERT_EQ(::truncate(tier->entry_path(key).c_str(), new_size), 0);  // shorter, then longer than recorded
    const auto quarantined_before = tier->counters().snapshot().quarantined;
    auto opened = tier->open(key);
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_FALSE(*opened) << "a damaged entry must not be a hit (size " << new_size << ")";
    EXPECT_FALSE(path_exists(tier->entry_path(key)));
    EXPECT_EQ(tier->counters().snapshot().quarantined, quarantined_before + 1);
  }
  EXPECT_EQ(list_dir(tier_root(dir) + "/.quarantine").size(), 2u);
}

TEST(FolderTierVerifyOnHit, SizeModeServesASameSizeDamageAndFullModeRefusesIt) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  auto size_only = make_folder(options);
  const ShardKey key = make_key(910);
  ASSERT_TRUE(commit_bytes(*size_only, key, random_bytes(4096, 910)));
  flip_byte(size_only->entry_path(key), 100);
  // verify: size (the default) cannot see a flipped byte: the hit stands (cache verify finds it).
  auto served = size_only->open(key);
  ASSERT_TRUE(served && *served);

  options.verify = VerifyOnHit::full;
  auto full = make_folder(options);
  auto refused = full->open(key);
  ASSERT_TRUE(refused) << refused.error().message;
  EXPECT_FALSE(*refused);
  EXPECT_FALSE(path_exists(full->entry_path(key)));
  EXPECT_EQ(full->counters().snapshot().quarantined, 1u);
}

TEST(FolderTierVerifyOnHit, SampledModeHashesOneHitInN) {
  TempDir dir;
  auto options = folder_options(tier_root(dir));
  options.verify = VerifyOnHit::sampled;
  options.verify_sample_every = 4;
  auto tier = make_folder(options);
  const ShardKey key = make_key(920);
  ASSERT_TRUE(commit_bytes(*tier, key, random_bytes(4096, 920)));
  // The first hit of the process is hashed (hit 0 of every 4): the entry is good, so it is served.
  auto first = tier->open(key);
  ASSERT_TRUE(first && *first);
  flip_byte(tier->entry_path(key), 7);
  // Hits 1, 2 and 3 check the size only and serve the damaged entry; hit 4 hashes it and refuses it.
  for (int hit = 1; hit <= 3; ++hit) {
    auto opened = tier->open(key);
    ASSERT_TRUE(opened && *opened) << "hit " << hit;
  }
  auto fourth = tier->open(key);
  ASSERT_TRUE(fourth);
  EXPECT_FALSE(*fourth) << "the sampled hit did not hash the entry";
  EXPECT_EQ(tier->counters().snapshot().quarantined, 1u);
}

TEST(FolderTierVerifyOnHit, AReadOnlyTierReportsADamagedEntryAsAMissAndLeavesIt) {
  TempDir dir;
  auto writer = make_folder(tier_root(dir));
  const ShardKey key = make_key(930);
  ASSERT_TRUE(commit_bytes(*writer, key, random_bytes(4096, 930)));
  ASSERT_EQ(::truncate(writer->entry_path(key).c_str(), 100), 0);
  auto options = folder_options(tier_root(dir));
  options.access = Access::read_only;
  auto reader = make_folder(options);
  auto opened = reader->open(key);
  ASSERT_TRUE(opened);
  EXPECT_FALSE(*opened);
  EXPECT_TRUE(path_exists(reader->entry_path(key))) << "a read-only tier must not move anything";
}

}  // namespace
}  // namespace datavo
