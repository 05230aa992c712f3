#include <gtest/gtest.h>

#include <string>

#include "datavo/chunk_digests.hpp"

namespace datavo {
namespace {

Sha256 sha_of(std::string_view bytes) {
  Sha256Hasher hasher;
  hasher.update(bytes.data(), bytes.size());
  return hasher.finish();
}

std::string chunk_test_bytes(std::size_t size) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 131 + 7) % 251);
  return out;
}

TEST(ChunkDigests, CountIsTheCeilingAndZeroForAnEmptyShard) {
  EXPECT_EQ(ChunkDigests::count_for(Bytes{0}, KiB(4)), 0u);
  EXPECT_EQ(ChunkDigests::count_for(Bytes{1}, KiB(4)), 1u);
  EXPECT_EQ(ChunkDigests::count_for(KiB(4), KiB(4)), 1u);
  EXPECT_EQ(ChunkDigests::count_for(KiB(4) + Bytes{1}, KiB(4)), 2u);
  EXPECT_EQ(ChunkDigests::count_for(GiB(1), k_default_chunk_size), 256u);
}

TEST(ChunkHasher, DigestsEveryChunkAndAShortLastOneWhateverTheWriteSizes) {
  const std::string data = chunk_test_bytes(3 * 4096 + 100);
  for (std::size_t step : {1u, 7u, 4096u, 5000u, 100000u}) {
    ChunkHasher hasher(KiB(4));
    for (std::size_t at = 0; at < data.size(); at += step)
      hasher.update(data.data() + at, std::min(step, data.size() - at));
    const ChunkDigests chunks = hasher.finish();
    ASSERT_EQ(chunks.digests.size(), 4u) << "step " << step;
    EXPECT_EQ(chunks.digests[0], sha_of(std::string_view(data).substr(0, 4096)));
    EXPECT_EQ(chunks.digests[2], sha_of(std::string_view(data).substr(8192, 4096)));
    EXPECT_EQ(chunks.digests[3], sha_of(std::string_view(data).substr(12288)));
  }
}

TEST(ChunkHasher, AnExactMultipleHasNoEmptyLastChunk) {
  ChunkHasher hasher(KiB(4));
  const std::string data = chunk_test_bytes(8192);
  hasher.update(data.data(), data.size());
  EXPECT_EQ(hasher.digests().size(), 2u);
  EXPECT_EQ(hasher.finish().digests.size(), 2u);
}

TEST(ChunkDigests, CanonicalTextRoundTripsAndBindsTheList) {
  ChunkHasher hasher(KiB(4));
  const std::string data = chunk_test_bytes(10000);
  hasher.update(data.data(), data.size());
  const ChunkDigests chunks = hasher.finish();
  const std::string text = chunks.canonical();
  ASSERT_EQ(text.size(), 3u * 65);
  EXPECT_EQ(text.substr(0, 65), chunks.digests[0].hex() + "\n");
  EXPECT_EQ(chunks.binding(), sha_of(text));
  auto back = ChunkDigests::parse_canonical(KiB(4), text, ErrorCode::remote, "list");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, chunks);

  ChunkDigests other = chunks;
  other.digests[1] = other.digests[0];
  EXPECT_NE(other.binding(), chunks.binding());
}

TEST(ChunkDigests, ParseCanonicalRefusesAnythingElse) {
  const std::string line = std::string(64, 'a') + "\n";
  for (const std::string& bad :
       {std::string(64, 'a'), std::string(64, 'A') + "\n", line + "x\n", std::string(63, 'a') + "\n", line + "\n"}) {
    auto parsed = ChunkDigests::parse_canonical(KiB(4), bad, ErrorCode::remote, "sidecar");
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::remote);
    EXPECT_NE(parsed.error().message.find("sidecar: line"), std::string::npos) << parsed.error().message;
  }
  EXPECT_TRUE(ChunkDigests::parse_canonical(KiB(4), "", ErrorCode::remote, "x"));
}

TEST(ChunkDigests, CheckCoversRefusesAWrongCountOrChunkSize) {
  ChunkDigests chunks{KiB(4), std::vector<Sha256>(3)};
  EXPECT_TRUE(chunks.check_covers(Bytes{8193}, ErrorCode::remote, "t"));
  EXPECT_TRUE(chunks.check_covers(Bytes{12288}, ErrorCode::remote, "t"));
  auto short_list = chunks.check_covers(Bytes{12289}, ErrorCode::remote, "ticket");
  ASSERT_FALSE(short_list);
  EXPECT_EQ(short_list.error().code, ErrorCode::remote);
  EXPECT_NE(short_list.error().message.find("3 chunk digests, but 12289 bytes in chunks of 4096 make 4"),
            std::string::npos)
      << short_list.error().message;
  EXPECT_FALSE(chunks.check_covers(Bytes{8192}, ErrorCode::remote, "t"));
  ChunkDigests tiny{Bytes{512}, std::vector<Sha256>(1)};
  auto refused = tiny.check_covers(Bytes{100}, ErrorCode::remote, "ticket");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("chunk_size 512 is outside"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace datavo
