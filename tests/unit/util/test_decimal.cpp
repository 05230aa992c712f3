// Tests of src/util/decimal.hpp.
#include <gtest/gtest.h>

#include "util/decimal.hpp"

namespace datavo::util {
namespace {

TEST(ParseDecimal, DigitsAreTheirValue) {
  EXPECT_EQ(parse_decimal("0"), 0u);
  EXPECT_EQ(parse_decimal("007"), 7u);
  EXPECT_EQ(parse_decimal("268435456"), 268435456u);
  EXPECT_EQ(parse_decimal("18446744073709551615"), 18446744073709551615u);
}

TEST(ParseDecimal, AnythingButDigitsOrAnOverflowIsNoValue) {
  for (const char* text :
       {"", " 1", "1 ", "+1", "-1", "1.5", "0x10", "12a", "18446744073709551616", "99999999999999999999999"}) {
    EXPECT_EQ(parse_decimal(text), std::nullopt) << '"' << text << '"';
  }
}

}  // namespace
}  // namespace datavo::util
