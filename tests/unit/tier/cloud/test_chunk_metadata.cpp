// Tests of src/tier/cloud/chunk_metadata.cpp: the chunk size derived from an object's size, the metadata value
// datavo-chunks both ways, its refusals, and the digests of a local file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "support/shard_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tier/cloud/chunk_metadata.hpp"
#include "util/base64.hpp"

namespace datavo::cloud {
namespace {

using ::testing::HasSubstr;
using namespace shardtest;

ChunkDigests digests_of(const std::string& bytes, Bytes chunk_size) {
  ChunkHasher hasher(chunk_size);
  hasher.update(bytes.data(), bytes.size());
  return hasher.finish();
}

TEST(ObjectChunkSizeTest, IsThePowerOfTwoThatMakesAtMost32ChunksAndNoneAbove32GiB) {
  EXPECT_EQ(object_chunk_size(Bytes{0}), KiB(64));
  EXPECT_EQ(object_chunk_size(Bytes{1}), KiB(64));
  EXPECT_EQ(object_chunk_size(MiB(2)), KiB(64));
  EXPECT_EQ(object_chunk_size(MiB(2) + Bytes{1}), KiB(128));
  EXPECT_EQ(object_chunk_size(MiB(100)), MiB(4));
  EXPECT_EQ(object_chunk_size(MiB(128)), MiB(4));
  EXPECT_EQ(object_chunk_size(GiB(1)), MiB(32));
  EXPECT_EQ(object_chunk_size(GiB(32)), GiB(1));
  EXPECT_EQ(object_chunk_size(GiB(32) + Bytes{1}), std::nullopt);
  for (std::uint64_t size : {1ull, 65'536ull, 65'537ull, 3'000'000ull, 1ull << 33}) {
    const Bytes chunk = *object_chunk_size(Bytes{size});
    EXPECT_LE(ChunkDigests::count_for(Bytes{size}, chunk), k_max_object_chunks) << size;
  }
}

TEST(ChunkMetadataTest, RoundTripsAndFitsS3sMetadataLimit) {
  const std::string bytes = random_bytes(3'000'000, 1);
  const ChunkDigests chunks = digests_of(bytes, *object_chunk_size(Bytes{bytes.size()}));
  ASSERT_EQ(chunks.chunk_size, KiB(128));
  ASSERT_EQ(chunks.digests.size(), 23u);
  const std::string value = encode_chunk_metadata(chunks);
  EXPECT_THAT(value, ::testing::StartsWith("131072 "));
  auto back = decode_chunk_metadata(value, Bytes{bytes.size()});
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, chunks);

  // The longest value: 32 digests and the largest chunk size's digits, with room under S3's 2 KB of metadata for
  // the names and datavo-sha256 / datavo-size.
  const ChunkDigests longest{GiB(1), std::vector<Sha256>(32, sha256_of("x"))};
  EXPECT_LE(encode_chunk_metadata(longest).size(), 1380u);

  auto empty = decode_chunk_metadata(encode_chunk_metadata(digests_of("", KiB(64))), Bytes{0});
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_TRUE(empty->digests.empty());
}

TEST(ChunkMetadataTest, RefusesAValueThatDoesNotFitTheObjectNamingWhy) {
  const std::string bytes = random_bytes(200'000, 2);  // 4 chunks of 64 KiB
  const ChunkDigests chunks = digests_of(bytes, KiB(64));
  const std::string value = encode_chunk_metadata(chunks);
  auto refused = [&](std::string_view text, Bytes size) {
    auto decoded = decode_chunk_metadata(text, size);
    EXPECT_FALSE(decoded) << text;
    if (decoded) return std::string();
    EXPECT_EQ(decoded.error().code, ErrorCode::integrity);
    return decoded.error().message;
  };
  EXPECT_THAT(refused("65536", Bytes{bytes.size()}), HasSubstr("not \"<chunk size> <base64 digests>\""));
  EXPECT_THAT(refused("x " + value.substr(6), Bytes{bytes.size()}), HasSubstr("not \"<chunk size>"));
  EXPECT_THAT(refused(value, MiB(3)), HasSubstr("names chunks of 65536 bytes, but an object of 3145728 bytes has "
                                                "131072"));
  EXPECT_THAT(refused("65536 !!!!", Bytes{bytes.size()}), HasSubstr("not base64"));
  EXPECT_THAT(refused("65536 " + util::base64_encode(std::string(33, 'a')), Bytes{bytes.size()}),
              HasSubstr("33 bytes of digests, not a multiple of 32"));
  ChunkDigests fewer = chunks;
  fewer.digests.pop_back();
  EXPECT_THAT(refused(encode_chunk_metadata(fewer), Bytes{bytes.size()}), HasSubstr("3 chunk digests, but"));
  EXPECT_THAT(refused(value, GiB(33)), HasSubstr("has no chunk digests recorded"));
}

TEST(ObjectChunkDigestsTest, HashesTheFileAtItsSizesChunkSize) {
  TempDir dir;
  const std::string bytes = random_bytes(2'500'000, 3);
  ShardHandle handle = handle_on_new_file(dir.sub("shard"), bytes);
  auto digests = object_chunk_digests(handle);
  ASSERT_TRUE(digests) << digests.error().message;
  ASSERT_TRUE(digests->has_value());
  EXPECT_EQ(**digests, digests_of(bytes, KiB(128)));
}

TEST(ObjectChunkDigestsTest, AFileShorterThanItsHandleSaysIsAnErrorNamingIt) {
  TempDir dir;
  const std::string path = dir.sub("short");
  ShardHandle written = handle_on_new_file(path, random_bytes(100'000, 4));
  ShardHandle claims_more(::dup(written.fd()), path, KiB(640));  // 10 chunks of 64 KiB; the file has 2
  auto digests = object_chunk_digests(claims_more);
  ASSERT_FALSE(digests);
  EXPECT_EQ(digests.error().code, ErrorCode::io);
  EXPECT_THAT(digests.error().message, HasSubstr(path + " (for its chunk digests)"));
}

}  // namespace
}  // namespace datavo::cloud
