// Tests of the numbers for people (src/util/human.cpp).
#include <gtest/gtest.h>

#include "util/human.hpp"

namespace datavo::util {
namespace {

TEST(HumanTest, BytesBelowAKibibyteAreExact) {
  EXPECT_EQ(human_bytes(Bytes{0}), "0 B");
  EXPECT_EQ(human_bytes(Bytes{1023}), "1023 B");
}

TEST(HumanTest, LargerCountsTakeTheLargestUnitWithOneDecimal) {
  EXPECT_EQ(human_bytes(Bytes{1024}), "1.0 KiB");
  EXPECT_EQ(human_bytes(Bytes{1536 * 1024}), "1.5 MiB");
  EXPECT_EQ(human_bytes(Bytes{std::uint64_t(3) << 30}), "3.0 GiB");
  EXPECT_EQ(human_bytes(Bytes{std::uint64_t(2) << 60}), "2048.0 PiB") << "PiB is the largest unit";
}

TEST(HumanTest, FixedPointHasExactlyTheDigitsAsked) {
  EXPECT_EQ(fixed_point(2.5, 2), "2.50");
  EXPECT_EQ(fixed_point(1999.6, 0), "2000");
  EXPECT_EQ(fixed_point(0.125, 1), "0.1");
}

}  // namespace
}  // namespace datavo::util
