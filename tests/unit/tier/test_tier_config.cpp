// parse_byte_size() and parse_duration() (src/config/values.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "datavo/config.hpp"

namespace datavo {
namespace {

using ::testing::HasSubstr;

TEST(ByteSize, PlainIntegerIsBytes) {
  EXPECT_EQ(parse_byte_size("0").value(), Bytes{0});
  EXPECT_EQ(parse_byte_size("1").value(), Bytes{1});
  EXPECT_EQ(parse_byte_size("1099511627776").value(), TiB(1));
}

TEST(ByteSize, EveryUnitIs1024Based) {
  EXPECT_EQ(parse_byte_size("7B").value(), Bytes{7});
  EXPECT_EQ(parse_byte_size("2KB").value(), KiB(2));
  EXPECT_EQ(parse_byte_size("2KiB").value(), KiB(2));
  EXPECT_EQ(parse_byte_size("3MB").value(), MiB(3));
  EXPECT_EQ(parse_byte_size("3MiB").value(), MiB(3));
  EXPECT_EQ(parse_byte_size("50GB").value(), GiB(50));
  EXPECT_EQ(parse_byte_size("50GiB").value(), GiB(50));
  EXPECT_EQ(parse_byte_size("5TB").value(), TiB(5));
  EXPECT_EQ(parse_byte_size("5TiB").value(), TiB(5));
}

TEST(ByteSize, UnitIsCaseInsensitiveAndMayFollowOneSpace) {
  EXPECT_EQ(parse_byte_size("200gb").value(), GiB(200));
  EXPECT_EQ(parse_byte_size("200 GB").value(), GiB(200));
  EXPECT_EQ(parse_byte_size("1 kib").value(), KiB(1));
  EXPECT_EQ(parse_byte_size("1Tb").value(), TiB(1));
}

TEST(ByteSize, UnknownUnitIsInvalidWithTheExpectedForms) {
  auto result = parse_byte_size("12XB");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(result.error().message,
            "invalid size \"12XB\" (expected an integer or <n><unit> with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

TEST(ByteSize, GarbledTextIsInvalid) {
  for (const char* text :
       {"", " ", "GB", "abc", "12 GB extra", "1e9", "0x10", "1,000", "+5GB", "5  GB", "5G", "5PB", "1_000", "12GBB"}) {
    auto result = parse_byte_size(text);
    EXPECT_FALSE(result) << text;
    if (!result) {
      EXPECT_EQ(result.error().code, ErrorCode::invalid_argument) << text;
    }
  }
}

TEST(ByteSize, NegativeIsInvalid) {
  auto result = parse_byte_size("-5GB");
  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, HasSubstr("must not be negative"));
  EXPECT_FALSE(parse_byte_size("-1"));
}

TEST(ByteSize, FractionIsInvalidWithAHint) {
  auto result = parse_byte_size("1.5TB");
  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, HasSubstr("fractions are not supported"));
}

TEST(ByteSize, OverflowIsInvalidNotWrapped) {
  EXPECT_EQ(parse_byte_size("18446744073709551615").value(), Bytes{std::numeric_limits<std::uint64_t>::max()});
  auto digits = parse_byte_size("18446744073709551616");
  ASSERT_FALSE(digits);
  EXPECT_THAT(digits.error().message, HasSubstr("too large"));
  EXPECT_EQ(parse_byte_size("16777215TB").value(), TiB(16777215));
  auto unit = parse_byte_size("16777216TB");
  ASSERT_FALSE(unit);
  EXPECT_THAT(unit.error().message, HasSubstr("too large"));
  EXPECT_FALSE(parse_byte_size("99999999999999999999999999GB"));
}

TEST(Duration, EveryUnit) {
  EXPECT_EQ(parse_duration("45s").value(), Seconds{45});
  EXPECT_EQ(parse_duration("90m").value(), Seconds{90 * 60});
  EXPECT_EQ(parse_duration("12h").value(), Seconds{12 * 3600});
  EXPECT_EQ(parse_duration("30d").value(), Seconds{30 * 86400});
  EXPECT_EQ(parse_duration("2w").value(), Seconds{14 * 86400});
  EXPECT_EQ(parse_duration("0s").value(), Seconds{0});
  EXPECT_EQ(parse_duration("7 d").value(), Seconds{7 * 86400});
}

TEST(Duration, MissingOrUnknownUnitIsInvalid) {
  for (const char* text : {"", "30", "d", "30x", "30D", "30M", "1h30m", "30 days", "1.5h", "-1d", "+1d"}) {
    auto result = parse_duration(text);
    EXPECT_FALSE(result) << text;
    if (!result) {
      EXPECT_EQ(result.error().code, ErrorCode::invalid_argument) << text;
    }
  }
  EXPECT_EQ(parse_duration("30x").error().message,
            "invalid duration \"30x\" (expected <n><unit> with s, m, h, d or w, e.g. 30d or 12h)");
}

TEST(Duration, OverflowIsInvalid) {
  auto result = parse_duration("99999999999999999w");
  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, HasSubstr("too large"));
  EXPECT_FALSE(parse_duration("999999999999999999999999s"));
}

}  // namespace
}  // namespace datavo
