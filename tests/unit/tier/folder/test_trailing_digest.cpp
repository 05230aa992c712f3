// Tests of the staging file's background SHA-256 (src/tier/folder/trailing_digest.cpp), through a staging transaction
// and directly: the digest is of the bytes in the file whatever the write pattern, size, restarts or rewrites.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "datavo/folder_tier.hpp"
#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tier/folder/staging.hpp"
#include "tier/folder/trailing_digest.hpp"
#include "util/fs.hpp"

namespace datavo {
namespace {

using namespace shardtest;

constexpr std::size_t k_big = 3 * folder::TrailingDigest::k_background_threshold.count() + 12345;

// Writes `bytes` in pieces of `piece` bytes (the last one shorter).
void write_in_pieces(ShardTransaction& staged, std::string_view bytes, std::size_t piece) {
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    const std::size_t n = std::min(piece, bytes.size() - at);
    ASSERT_TRUE(staged.write(bytes.data() + at, n));
  }
}

class TrailingDigestThroughStaging : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TrailingDigestThroughStaging, DigestIsTheSha256OfEveryByteWrittenWhateverThePieceSize) {
  TempDir dir;
  auto tier = make_folder(dir.sub("tier"));
  const std::string bytes = random_bytes(k_big, 7);
  auto staged = tier->begin(staging_key());
  ASSERT_TRUE(staged);
  write_in_pieces(**staged, bytes, GetParam());
  auto digest = (*staged)->digest();
  ASSERT_TRUE(digest) << digest.error().message;
  EXPECT_EQ(*digest, sha256_of(bytes));
  EXPECT_EQ((*staged)->written().count(), bytes.size());
}

// 16 KiB is libcurl's default write size; 1 and 4097 bytes do not divide the 1 MiB hashing chunk.
INSTANTIATE_TEST_SUITE_P(Pieces, TrailingDigestThroughStaging,
                         ::testing::Values(std::size_t{4097}, std::size_t{16384}, std::size_t{1} << 20,
                                           std::size_t{3} << 20, k_big));

TEST(TrailingDigest, SmallFilesAndTheEmptyFileAreHashedInline) {
  TempDir dir;
  auto tier = make_folder(dir.sub("tier"));
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{65536}, std::size_t{(1u << 20) + 1}}) {
    auto staged = tier->begin(staging_key());
    ASSERT_TRUE(staged);
    const std::string bytes = random_bytes(size, size);
    write_in_pieces(**staged, bytes, 16384);
    auto digest = (*staged)->digest();
    ASSERT_TRUE(digest);
    EXPECT_EQ(*digest, sha256_of(bytes)) << size;
  }
}

TEST(TrailingDigest, RestartMidwayHashesOnlyTheBytesWrittenAfterIt) {
  TempDir dir;
  auto tier = make_folder(dir.sub("tier"));
  auto staged = tier->begin(staging_key());
  ASSERT_TRUE(staged);
  write_in_pieces(**staged, random_bytes(k_big, 1), 16384);  // the background thread is running by now
  ASSERT_TRUE((*staged)->restart());
  const std::string second = random_bytes(k_big / 2, 2);
  write_in_pieces(**staged, second, 65536);
  auto digest = (*staged)->digest();
  ASSERT_TRUE(digest);
  EXPECT_EQ(*digest, sha256_of(second));
}

TEST(TrailingDigest, BytesWrittenAfterADigestAreIncludedInTheNextOne) {
  TempDir dir;
  auto tier = make_folder(dir.sub("tier"));
  auto staged = tier->begin(staging_key());
  ASSERT_TRUE(staged);
  const std::string first = random_bytes(k_big, 3);
  write_in_pieces(**staged, first, 16384);
  ASSERT_TRUE((*staged)->digest());
  const std::string more = random_bytes(5000, 4);
  write_in_pieces(**staged, more, 1000);
  auto digest = (*staged)->digest();
  ASSERT_TRUE(digest);
  EXPECT_EQ(*digest, sha256_of(first + more));
}

TEST(TrailingDigest, AStagingFileDestroyedMidDownloadStopsItsThreadAndLeavesNothing) {
  TempDir dir;
  auto tier = make_folder(dir.sub("tier"));
  std::string path;
  {
    auto staged = tier->begin(staging_key());
    ASSERT_TRUE(staged);
    auto& file = static_cast<folder::StagingFile&>(**staged);
    path = file.path();
    write_in_pieces(file, random_bytes(k_big, 5), 16384);
    folder::StagingFile moved = std::move(file);  // the thread follows the bytes, not the object
    write_in_pieces(moved, random_bytes(1 << 20, 6), 16384);
  }
  EXPECT_FALSE(path_exists(path));
}

TEST(TrailingDigest, ACommittedEntryCarriesTheDigestOfItsBytes) {
  TempDir dir;
  auto tier = make_folder(dir.sub("tier"));
  const std::string bytes = random_bytes(k_big, 8);
  const ShardKey key = make_key(8);
  auto staged = tier->begin(key);
  ASSERT_TRUE(staged);
  write_in_pieces(**staged, bytes, 16384);
  auto committed = (*staged)->commit();
  ASSERT_TRUE(committed) << committed.error().message;
  auto recorded = recorded_digest(*tier, key);
  ASSERT_TRUE(recorded);
  ASSERT_TRUE(*recorded);
  EXPECT_EQ(**recorded, sha256_of(bytes));
}

// Directly: a file that is shorter than what the owner claims is an I/O error naming the offset, not a digest.
TEST(TrailingDigest, AFileShorterThanClaimedIsAnErrorNotADigest) {
  TempDir dir;
  const std::string path = dir.sub("short");
  write_file(path, random_bytes(1000, 9));
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  folder::TrailingDigest digest(fd.get(), Durability::no_sync);
  auto result = digest.finish(Bytes{2000});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::io);
  EXPECT_NE(result.error().message.find("byte offset 1000"), std::string::npos) << result.error().message;
}

// Directly, with the thread: the background reader sees the same truncation and reports it through finish().
TEST(TrailingDigest, ATruncationUnderTheBackgroundThreadIsReportedByFinish) {
  TempDir dir;
  const std::string path = dir.sub("shrinks");
  const std::string bytes = random_bytes(k_big, 10);
  write_file(path, bytes);
  util::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  folder::TrailingDigest digest(fd.get(), Durability::fsync_before_commit);
  ASSERT_EQ(::ftruncate(fd.get(), 1 << 20), 0);  // the owner broke the contract: bytes it announced are gone
  for (std::size_t at = 16384; at <= bytes.size(); at += 16384) digest.appended(Bytes{at});
  auto result = digest.finish(Bytes{bytes.size()});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::io);
}

}  // namespace
}  // namespace datavo
