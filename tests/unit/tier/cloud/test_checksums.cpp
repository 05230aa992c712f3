// Tests of src/tier/cloud/checksums.cpp. CRC-32C against the examples of RFC 3720 (iSCSI), appendix B.4, and the
// standard check value (the CRC of "123456789"), through both the SSE 4.2 path (where this CPU has it) and the
// table; GCS's base64 form; the MD5 and SHA-256 of file ranges.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "tier/cloud/checksums.hpp"
#include "util/fs.hpp"

namespace datavo::cloud {
namespace {

struct Vector {
  const char* what;
  std::string bytes;
  std::uint32_t crc;
};

std::vector<Vector> published_vectors() {
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += char(i);
    descending += char(31 - i);
  }
  // RFC 3720 B.4's iSCSI Read (10) command PDU.
  const unsigned char pdu[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
                                 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  return {{"32 bytes of zeroes", std::string(32, '\0'), 0x8A9136AA},
          {"32 bytes of 0xff", std::string(32, '\xff'), 0x62A8AB43},
          {"32 incrementing bytes", ascending, 0x46DD794E},
          {"32 decrementing bytes", descending, 0x113FDB5C},
          {"an iSCSI read command PDU", std::string(reinterpret_cast<const char*>(pdu), sizeof pdu), 0xD9963A56},
          {"the check value", "123456789", 0xE3069283},
          {"no bytes", "", 0}};
}

TEST(Crc32c, MatchesRfc3720sExamplesOnBothPaths) {
  for (const auto& v : published_vectors()) {
    EXPECT_EQ(crc32c_extend(0, v.bytes.data(), v.bytes.size()), v.crc) << v.what;
    EXPECT_EQ(crc32c_extend_portable(0, v.bytes.data(), v.bytes.size()), v.crc) << v.what << " (table)";
  }
}

TEST(Crc32c, ExtendingInPiecesAtAnyOffsetGivesTheCrcOfTheWhole) {
  std::mt19937 random(7);
  std::string bytes(100'003, '\0');
  for (auto& c : bytes) c = char(random());
  const std::uint32_t whole = crc32c_extend_portable(0, bytes.data(), bytes.size());
  EXPECT_EQ(crc32c_extend(0, bytes.data(), bytes.size()), whole);
  for (std::size_t cut : {1u, 7u, 8u, 9u, 4095u, 65536u, 100'002u}) {
    const std::uint32_t first = crc32c_extend(0, bytes.data(), cut);
    EXPECT_EQ(crc32c_extend(first, bytes.data() + cut, bytes.size() - cut), whole) << "cut at " << cut;
  }
  // Unaligned starts, for the 8-byte loop.
  for (std::size_t start = 1; start < 8; ++start) {
    EXPECT_EQ(crc32c_extend(0, bytes.data() + start, 1000), crc32c_extend_portable(0, bytes.data() + start, 1000));
  }
}

TEST(Crc32c, GcsFormIsTheBigEndianBytesInBase64) {
  // The CRC of "123456789" as GCS writes it: 0xE3069283 -> bytes e3 06 92 83.
  EXPECT_EQ(crc32c_base64(0xE3069283), "4waSgw==");
  EXPECT_EQ(crc32c_base64(0), "AAAAAA==");
}

TEST(Crc32c, OfAFileRangeIsTheCrcOfThoseBytes) {
  shardtest::TempDir dir;
  const std::string path = dir.path() + "/f";
  std::string bytes(3u << 20, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 31 + (i >> 9));
  ASSERT_TRUE(util::write_file_atomic(path, bytes, 0644, util::Sync::no));
  util::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(fd.get(), 0);
  auto crc = crc32c_of_range(fd.get(), 1000, bytes.size() - 2000);
  ASSERT_TRUE(crc) << crc.error().message;
  EXPECT_EQ(*crc, crc32c_extend_portable(0, bytes.data() + 1000, bytes.size() - 2000));
  auto md5 = md5_of_range(fd.get(), 1000, bytes.size() - 2000);
  ASSERT_TRUE(md5) << md5.error().message;
  EXPECT_EQ(*md5, md5_of(std::string_view(bytes).substr(1000, bytes.size() - 2000)));
  auto both = md5_and_crc32c_of_range(fd.get(), 1000, bytes.size() - 2000);
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->md5, *md5);
  EXPECT_EQ(both->crc32c, *crc);
}

}  // namespace
}  // namespace datavo::cloud
