// Tests of the folder tier's lookups (src/tier/folder/folder_tier.cpp) against its contract in
// include/datavo/folder_tier.hpp: creation and layout, the hit path (open: its checks, its counters, the LRU clock,
// expiry), digest_of, remove and list. Staging, commits, eviction, locks, stats and verify have their own files.
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

// lru_resolution (issue 18): a hit leaves an mtime younger than it alone (a hot hit is open, fstat and close), bumps
// an older one, and with 0 bumps every time. A future mtime (a writer's clock ahead) counts as fresh.
TEST(FolderTier, AHitBumpsOnlyAnMtimeOlderThanTheLruResolution) {
  TempDir dir;
  FolderTierOptions options = folder_options(tier_root(dir));
  options.lru_resolution = 60s;
  auto tier = make_folder(options);
  options.lru_resolution = 0s;
  auto every_hit = make_folder(options);  // the same directory, bumping on every hit
  const ShardKey key = make_key(21);
  ASSERT_TRUE(commit_bytes(*tier, key, "some bytes"));
  const std::string path = tier->entry_path(key);

  auto hit_and_mtime = [&](FolderTier& t) {
    auto opened = t.open(key);
    EXPECT_TRUE(opened && *opened);
    return mtime_of(path);
  };
  set_mtime_ago(path, 30s);
  const auto fresh = mtime_of(path);
  EXPECT_EQ(hit_and_mtime(*tier), fresh) << "an mtime 30 s old is fresh within 60 s";
  set_mtime(path, Clock::now() + 1h);
  const auto ahead = mtime_of(path);
  EXPECT_EQ(hit_and_mtime(*tier), ahead) << "a future mtime is fresh";
  set_mtime_ago(path, 90s);
  EXPECT_GE(hit_and_mtime(*tier), Clock::now() - 2s) << "an mtime 90 s old is bumped";
  set_mtime_ago(path, 30s);
  EXPECT_GE(hit_and_mtime(*every_hit), Clock::now() - 2s) << "lru_resolution 0 bumps every hit";
  EXPECT_EQ(tier->counters().snapshot().hits, 3u) << "a hit is counted whether or not it bumps";
}

// LRU order holds to within lru_resolution: after a sequence of hits, ordering the entries by mtime (what eviction
// does) puts an entry before another that was read later only when their reads were less than lru_resolution apart.
// The clock is simulated: each entry's mtime is set to when it was last "read" or installed, relative to now.
TEST(FolderTier, TheLruOrderOfHitsHoldsToWithinTheResolution) {
  TempDir dir;
  FolderTierOptions options = folder_options(tier_root(dir));
  options.lru_resolution = 20s;
  auto tier = make_folder(options);
  constexpr int k_entries = 40;
  std::vector<std::string> paths;
  std::vector<Clock::time_point> last_read;  // the true recency: install, or the last hit
  const auto now = Clock::now();
  std::uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL, state >> 33; };
  for (int i = 0; i < k_entries; ++i) {
    const ShardKey key = make_key(std::uint64_t(1000 + i));
    ASSERT_TRUE(commit_bytes(*tier, key, "entry " + std::to_string(i)));
    paths.push_back(tier->entry_path(key));
    // Installed between 100 s and 0 s ago: some mtimes fresh, some not.
    last_read.push_back(now - std::chrono::seconds(next() % 100));
    set_mtime(paths.back(), last_read.back());
  }
  // Hits on a random half, each one "now": the true recency of a hit entry becomes now.
  for (int i = 0; i < k_entries; ++i) {
    if (next() % 2 == 0) continue;
    auto opened = tier->open(make_key(std::uint64_t(1000 + i)));
    ASSERT_TRUE(opened && *opened);
    last_read[std::size_t(i)] = Clock::now();
  }
  int inversions = 0, hit_skips = 0;
  for (int a = 0; a < k_entries; ++a) {
    const auto mtime_a = mtime_of(paths[std::size_t(a)]);
    // Every entry's mtime is at most lru_resolution (and a second of slack) behind its true last read.
    EXPECT_GE(mtime_a, last_read[std::size_t(a)] - 21s) << "entry " << a;
    if (mtime_a < last_read[std::size_t(a)] - 1s) ++hit_skips;
    for (int b = 0; b < k_entries; ++b) {
      // Eviction would take a before b although a was read later.
      if (mtime_a < mtime_of(paths[std::size_t(b)]) && last_read[std::size_t(a)] > last_read[std::size_t(b)]) {
        ++inversions;
        EXPECT_LT(last_read[std::size_t(a)] - last_read[std::size_t(b)], 21s) << "entries " << a << ", " << b;
      }
    }
  }
  EXPECT_GT(hit_skips, 0) << "no hit skipped its bump: the test shows nothing";
  EXPECT_GT(inversions, 0) << "no inversion within the resolution: the test shows nothing";
}

// Order hints (place): the entry's mtime becomes the hinted time, marked, and a hit, however old that time is, leaves
// it where the hint put it; a plain (unmarked) mtime as old is bumped. A miss, a read-only tier: false, no change.
TEST(FolderTier, PlaceSetsAMarkedMtimeThatHitsLeaveAlone) {
  TempDir dir;
  FolderTierOptions options = folder_options(tier_root(dir));
  options.lru_resolution = 10s;
  auto tier = make_folder(options);
  const ShardKey key = make_key(31);
  ASSERT_TRUE(commit_bytes(*tier, key, "placed"));
  const std::string path = tier->entry_path(key);
  const auto hinted = Clock::now() - 1h;
  auto placed = tier->place(key, hinted);
  ASSERT_TRUE(placed) << placed.error().message;
  EXPECT_TRUE(*placed);
  EXPECT_LT(mtime_of(path), hinted + 1ms);
  EXPECT_GT(mtime_of(path), hinted - 1ms);
  const auto before_hit = mtime_of(path);
  auto opened = tier->open(key);
  ASSERT_TRUE(opened && *opened);
  EXPECT_EQ(mtime_of(path), before_hit) << "a hit leaves a hinted mtime alone, an hour old as it is";

  set_mtime_ago(path, 1h);  // the same age, unmarked
  opened = tier->open(key);
  ASSERT_TRUE(opened && *opened);
  EXPECT_GE(mtime_of(path), Clock::now() - 2s) << "an unmarked mtime an hour old is bumped";

  auto absent = tier->place(make_key(32), hinted);
  ASSERT_TRUE(absent);
  EXPECT_FALSE(*absent);
  FolderTierOptions read_only = options;
  read_only.access = Access::read_only;
  auto ro = make_folder(read_only);
  const auto now_mtime = mtime_of(path);
  auto refused = ro->place(key, hinted);
  ASSERT_TRUE(refused);
  EXPECT_FALSE(*refused);
  EXPECT_EQ(mtime_of(path), now_mtime);
}

// A hint never expires an entry: with max_age, a hinted time is kept within max_age / 2 of now.
TEST(FolderTier, PlaceNeverDatesAnEntryPastHalfItsMaxAge) {
  TempDir dir;
  FolderTierOptions options = folder_options(tier_root(dir));
  options.max_age = Seconds{3600};
  auto tier = make_folder(options);
  const ShardKey key = make_key(33);
  ASSERT_TRUE(commit_bytes(*tier, key, "kept"));
  auto placed = tier->place(key, Clock::now() - 24h);
  ASSERT_TRUE(placed && *placed);
  EXPECT_GE(mtime_of(tier->entry_path(key)), Clock::now() - 30min - 2s);
  auto opened = tier->open(key);
  ASSERT_TRUE(opened);
  EXPECT_TRUE(*opened) << "the hinted entry is not expired";
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

// ---------------------------------------------------------------------------------------------------------------
// Expiry on a hit, removal

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

// ---------------------------------------------------------------------------------------------------------------
// Counters of the hit path

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

// ---------------------------------------------------------------------------------------------------------------
// Digests

TEST(FolderTier, DigestOfAnEntryIsTheRecordedOneElseThatOfItsBytes) {
  TempDir dir;
  const std::string root = tier_root(dir);
  auto tier = make_folder(root);
  const ShardKey key = make_key(60);
  const std::string bytes = random_bytes(3000, 60);
  ASSERT_TRUE(commit_bytes(*tier, key, bytes));
  // The bytes are changed in place afterwards (same size): digest_of() answers what was recorded at install, without
  // hashing them.
  std::string changed = bytes;
  changed[10] = char(~changed[10]);
  write_file(tier->entry_path(key), changed);
  auto entry = tier->peek(key);
  ASSERT_TRUE(entry && *entry);
  auto recorded = tier->digest_of(key, **entry);
  ASSERT_TRUE(recorded) << recorded.error().message;
  EXPECT_EQ(*recorded, sha256_of(bytes));

  // An entry that nothing recorded (put there by hand): the digest of its bytes.
  const ShardKey by_hand = make_key(61);
  write_file(tier->entry_path(by_hand), changed);
  auto unrecorded = tier->peek(by_hand);
  ASSERT_TRUE(unrecorded && *unrecorded);
  auto computed = tier->digest_of(by_hand, **unrecorded);
  ASSERT_TRUE(computed) << computed.error().message;
  EXPECT_EQ(*computed, sha256_of(changed));
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
